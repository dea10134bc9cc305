"""SimUSER §4.4 as an asset: an LLM judge scores sampled sessions of every arm and brain on
a 1-5 scale of how human they read, beside Table 4 (`ops.studies.believability`).  The
judge is the `llm` resource's endpoint; its bill is estimated and recorded before the first
call, and a judge estimated above what the run has left of max_cost_usd is refused.  With
no endpoint configured the table says "not measured" and carries no score."""

import polars as pl
from dagster import AssetExecutionContext, AssetIn, Config, Failure, MaterializeResult, asset
from pydantic import Field

from assets.experiments import GROUP
from assets.experiments.publish import publish
from assets.experiments.simulation_events import by_arm_and_condition
from assets.partitions import DEFAULT_ARMS, condition_name
from ops.figures import save_figure
from ops.simulation.cost import CostLimitExceeded
from ops.simulation.kinds import DEFAULT_BRAIN
from ops.studies.believability import believability_figure, judge_estimate, run_judge, sample_trajectories, unjudged
from ops.studies.experiments.papers import DIFFERENCES
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root


class BelievabilityConfig(Config):
    arms: list[str] = Field(default=list(DEFAULT_ARMS), description="the arms whose sessions are judged ($SIMAB_ARMS)")
    brains: list[str] = Field(
        default=[DEFAULT_BRAIN],
        description='the brains whose sessions are judged (registry names), e.g. ["embedded", "llm"]',
    )
    vision: bool = Field(default=True, description="the simulations with (True) or without vision")
    per_arm_and_brain: int = Field(default=10, ge=1, description="sessions judged per (arm, brain), a seeded sample")
    n_bootstrap: int = Field(default=2000, ge=10)
    seed: int = Field(default=0, description="seed of the sample, the bootstrap and every request")


@asset(
    group_name=GROUP,
    code_version="1",
    compute_kind="openai",
    ins={"experiment_simulation_events": AssetIn("experiment_simulation_events")},
)
def simuser_believability(
    context: AssetExecutionContext,
    config: BelievabilityConfig,
    experiment_simulation_events: dict,
    catalogue: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """SimUSER Table 4: per brain, the LLM judge's mean 1-5 score of how human its agents'
    sessions read, with a 95 % interval, and every failed judgement counted."""
    runs = by_arm_and_condition(experiment_simulation_events)
    wanted = {(a, b): (a, condition_name(b, config.vision)) for a in config.arms for b in config.brains}
    missing = ["|".join(key) for key in wanted.values() if key not in runs]
    if missing:
        raise Failure(
            description=f"believability: no experiment_simulation_events for {missing} — run experiment_simulation for "
            "them (python -m pipelines.experiments believability does)",
            allow_retries=False,
        )
    events = {(a, b): runs[key] for (a, b), key in wanted.items()}
    trajectories = sample_trajectories(events, catalogue, config.per_arm_and_brain, config.seed)
    model = None
    if not llm.has_credentials():
        why = f"no LLM endpoint configured for the judge ({llm.endpoint()} needs ${llm.api_key_env}; set SIMAB_LLM_BASE_URL for a local server)"
        context.log.warning(f"believability: {why}; nothing is scored")
        judged = unjudged(trajectories, config.brains, why)
    else:
        bill = llm.sources(context).bill
        judge_config = llm.brain_config(budget_path=bill.path, budget_cap_usd=bill.cap_usd, budget_label=bill.label)
        model, estimate = judge_config.model, judge_estimate(judge_config, trajectories)
        llm.check_estimate(context, estimate)  # in the run's bill before the first call; refused above what is left
        try:
            judged = run_judge(judge_config, trajectories, config.brains, estimate, config.n_bootstrap, config.seed)
        except CostLimitExceeded as exc:
            raise Failure(description=str(exc), allow_retries=False) from None
        if judged.failures():
            context.log.warning(f"believability: {judged.failures()}")
    figure = save_figure(
        believability_figure(judged.table),
        data_root() / "experiments" / "believability" / "plots" / "believability.png",
    )
    return publish(
        context,
        mlflow_tracking,
        "believability",
        "SimUSER §4.4: how human the agents' sessions read to an LLM judge (Table 4)",
        judged.markdown(model),
        DIFFERENCES["believability"],
        judged.table,
        {"verdicts": judged.verdicts},
        [figure],
        {**config.model_dump(), **llm.describe()},
    )

"""The sensitivity ladder as an asset: the control's lists degraded step by step, simulated
with the run's agents, and the smallest degradation the simulation detects
(`ops.studies.alignment.sensitivity`)."""

import polars as pl
from dagster import AssetExecutionContext, AssetIn, Config, MetadataValue, Output, asset
from pydantic import Field

from assets.alignment import GROUP
from assets.alignment.protocol import degrades, log_protocol, not_measured
from ops.figures import table_markdown
from ops.simulation.catalogue import Catalogue
from ops.simulation.kinds import DEFAULT_BRAIN, brain_kind
from ops.studies.alignment.protocol_figures import sensitivity_figure
from ops.studies.alignment.protocols import NotMeasurable
from ops.studies.alignment.sensitivity import run_agents, sensitivity_study, skip_reason
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking


class SensitivityConfig(Config):
    brain: str = Field(
        default=DEFAULT_BRAIN,
        description="the brain of the run ($SIMAB_BRAIN); a brain that pays per decision (llm) is skipped unless metered_brain",
    )
    vision: bool = Field(default=True, description="False: the brain without posters")
    slots: list[int] = Field(
        default=[0, 5, 10, 15, 20],
        description="the ladder's rungs: slots of the control's top-20 lists replaced by random unseen items (0 included: the control)",
    )
    metered_brain: bool = Field(
        default=False,
        description="run the ladder with a brain that pays per decision too (five simulations of the run's agents)",
    )
    seed: int = Field(default=0, description="seed of the replaced slots and items and of every decision")
    n_bootstrap: int = Field(default=1000, description="bootstrap replicates of the 95 % intervals")


@asset(
    group_name=GROUP,
    code_version="1",
    kinds={"python"},
    ins={"ab_readout": AssetIn("ab_readout"), "top20_lists": AssetIn("top20_lists")},
)
@degrades
def list_sensitivity(
    context: AssetExecutionContext,
    config: SensitivityConfig,
    ab_readout,
    top20_lists: dict,
    agents,
    embedded_brain,
    train_ratings: pl.DataFrame,
    catalogue: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
):
    """The control's lists degraded step by step (0, 5, 10, 15, 20 of 20 slots replaced by
    random unseen items), simulated with the run's agents: CTR per rung and the smallest
    degradation the simulation detects (`ops.studies.alignment.sensitivity`)."""
    control = ab_readout.control
    if control not in top20_lists:
        return not_measured(context, NotMeasurable(f"the control arm {control!r} has no top-20 lists"))
    kind = brain_kind(config.brain, vision=config.vision)
    if "sensitivity" not in kind.answers:
        return not_measured(context, NotMeasurable(f"sensitivity ladder: the {kind.name} brain does not answer it"))
    run = run_agents(ab_readout, control)
    sources = llm.sources(context, Catalogue.from_frame(catalogue), embedded_brain)
    with llm.open_brain(context, kind, sources) as brain:
        skipped = skip_reason(brain, len(run), config.metered_brain)
        if skipped:
            return not_measured(context, NotMeasurable(skipped))
        result = sensitivity_study(
            brain,
            agents.sessions(sorted(run)),
            run,
            control,
            top20_lists[control],
            train_ratings.select("user_id", "item_id"),
            sources.catalogue,
            catalogue.get_column("item_id").to_numpy(),
            config.slots,
            config.seed,
            config.n_bootstrap,
            concurrency=kind.concurrency(sources),
        )
    smallest = result.smallest_detected()
    with mlflow_tracking.asset_run(
        context, params={**config.model_dump(), "brain_name": brain.name, "control": control, "agents": result.agents}
    ):
        log_protocol(mlflow_tracking, result, brain, sensitivity_figure(result), "plots/sensitivity_ladder.png")
    return Output(
        result,
        metadata={
            "brain": brain.name,
            "control": control,
            "agents": result.agents,
            "smallest detected (slots)": smallest if smallest is not None else "none",
            "table": MetadataValue.md(table_markdown(result.table())),
        },
    )

"""The brain comparison as an asset: the same arms simulated by the embedded and the LLM
brain, their paired differences and arm orderings (`ops.studies.experiments.arm_tables`)."""

from dagster import AssetExecutionContext, AssetIn, Config, Failure, MaterializeResult, asset
from pydantic import Field

from assets.experiments import GROUP
from assets.experiments.publish import publish
from assets.experiments.simulation_events import by_arm_and_condition
from assets.partitions import DEFAULT_ARMS, condition_name
from ops.figures import save_figure
from ops.readout.readout_config import ReadoutConfig
from ops.simulation.kinds import DEFAULT_BRAIN
from ops.simulation.kinds.llm import LLM
from ops.studies.experiments.arm_tables import brain_comparison as compare
from ops.studies.experiments.arm_tables import brain_figure, brain_markdown
from ops.studies.experiments.papers import DIFFERENCES
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root


class BrainComparisonConfig(Config):
    arms: list[str] = Field(default=list(DEFAULT_ARMS), description="the arms simulated by every brain ($SIMAB_ARMS)")
    brains: list[str] = Field(
        default=[DEFAULT_BRAIN, LLM.name],
        description="the brains compared (registry names); the first is the reference",
    )
    vision: bool = Field(default=True, description="compare the brains with (True) or without vision")
    n_bootstrap: int = Field(default=2000)
    seed: int = Field(default=0, description="bootstrap seed")


@asset(
    group_name=GROUP,
    code_version="1",
    kinds={"markdown"},
    ins={"experiment_simulation_events": AssetIn("experiment_simulation_events")},
)
def brain_comparison(
    context: AssetExecutionContext,
    config: BrainComparisonConfig,
    experiment_simulation_events: dict,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """The same arms simulated by the embedded brain and by the LLM brain, in one table:
    CTR, CVR, AR with intervals per brain, their paired differences, and the arm orderings."""
    runs = by_arm_and_condition(experiment_simulation_events)
    events = {
        (a, b): runs[(a, condition_name(b, config.vision))]
        for a in config.arms
        for b in config.brains
        if (a, condition_name(b, config.vision)) in runs
    }
    try:
        table, differences = compare(
            events, config.arms, config.brains, ReadoutConfig(n_bootstrap=config.n_bootstrap, seed=config.seed)
        )
    except ValueError as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
    folder = data_root() / "experiments" / "brains"
    figure = save_figure(brain_figure(table), folder / "plots" / "brains.png")
    body = brain_markdown(table, differences, config.brains)
    return publish(
        context,
        mlflow_tracking,
        "brains",
        "Brain comparison: the same arms, embedded and LLM agents",
        body,
        DIFFERENCES["brains"],
        table,
        {"differences": differences},
        [figure],
        config.model_dump(),
    )

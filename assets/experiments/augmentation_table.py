"""A/B Agent Table 5 as an asset, with the §3.5 ablation: every DeepCTR model refit on the
clicks / views of the vision and the no-vision simulation (`ops.studies.experiments.augmentation_table`)."""

import polars as pl
from dagster import AssetExecutionContext, AssetIn, Config, Failure, MaterializeResult, asset
from pydantic import Field

from assets.experiments import GROUP
from assets.experiments.publish import publish
from assets.experiments.simulation_events import by_arm_and_condition
from assets.partitions import condition_name
from ops.simulation.kinds import DEFAULT_BRAIN
from ops.studies.experiments.augmentation_table import WITH_VISION, WITHOUT_VISION, table5, table5_events
from ops.studies.experiments.papers import DIFFERENCES, TABLE5_MODELS
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root


class Table5Config(Config):
    simulated_arm: str = Field(default="deepfm", description="the arm the agents browsed (the paper: DeepFM)")
    brain: str = Field(
        default=DEFAULT_BRAIN,
        description="a brain of the registry (embedded, llm, …): whose vision and no-vision runs are compared",
    )
    models: list[str] = Field(
        default=list(TABLE5_MODELS), description="the downstream DeepCTR models refit (the paper's eight)"
    )
    seeds: int = Field(
        default=3, ge=1, description="training seeds per model (seed, seed+1, …): the AUC gains get intervals over them"
    )
    seed: int = Field(default=1024, description="first training seed (deepctr's default)")
    max_epochs: int = Field(default=0, description="≤ 20 in Appendix B; 0 = default ($SIMAB_MAX_EPOCHS)")
    device: str = Field(default="auto", description="auto (GPU when torch sees one) | cpu | cuda")
    vision_ablation: bool = Field(
        default=True,
        description="also refit on the no-vision simulation (§3.5); False: the with-vision rows only, "
        "one simulation and 2 refits per (model, seed) fewer",
    )


@asset(
    group_name=GROUP,
    code_version="1",
    kinds={"pytorch"},
    ins={"experiment_simulation_events": AssetIn("experiment_simulation_events")},
)
def ab_agent_table5(
    context: AssetExecutionContext,
    config: Table5Config,
    experiment_simulation_events: dict,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """A/B Agent Table 5 with the §3.5 ablation: every DeepCTR model on the original train
    split and with the clicks / views of the vision and the no-vision simulation added,
    several training seeds, all rows side by side."""
    conditions = {WITH_VISION: condition_name(config.brain, True)}
    if config.vision_ablation:
        conditions[WITHOUT_VISION] = condition_name(config.brain, False)
    try:
        events = table5_events(by_arm_and_condition(experiment_simulation_events), config.simulated_arm, conditions)
    except ValueError as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
    long, body, figure = table5(
        config.models,
        events,
        train_ratings,
        valid_ratings,
        test_ratings,
        users,
        catalogue,
        data_root() / "experiments" / "table5",
        **config.model_dump(include={"seed", "seeds", "device", "max_epochs"}),
    )
    return publish(
        context,
        mlflow_tracking,
        "table5",
        "A/B Agent Table 5: data augmentation, with and without vision",
        body,
        DIFFERENCES["table5"],
        long,
        {},
        [figure],
        config.model_dump(),
    )

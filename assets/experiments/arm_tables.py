"""A/B Agent Tables 2, 3 and 4 as assets, assembled from the lifecycle's arm partitions
(`offline_metrics`, `top20_lists`, `simulation_events`) of each table's arms: offline metrics
beside simulated CTR, CVR, AR and the fidelity verdicts (`ops.studies.experiments.arm_tables`)."""

import polars as pl
from dagster import AssetExecutionContext, AssetIn, Config, Failure, MaterializeResult, asset
from pydantic import Field

from assets.experiments import GROUP
from assets.experiments.publish import publish
from assets.partitions import DEFAULT_ARMS
from ops.figures import save_figure
from ops.readout.readout_config import ReadoutConfig
from ops.settings import DEFAULT_CONTROL
from ops.studies.experiments.arm_tables import arm_experiment, arm_figure, arm_markdown
from ops.studies.experiments.papers import DIFFERENCES, TABLE2, TABLE3, TABLE4
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root

# The papers' line-ups, as their tables list them (ops.studies.experiments.papers).
TABLE3_ARMS = tuple(TABLE3)
TABLE4_ARMS = tuple(TABLE4)


class ArmTableConfig(Config):
    arms: list[str] = Field(
        default=[], description="the table's arms in row order; empty = the table's own (Table 2: $SIMAB_ARMS)"
    )
    control: str = Field(
        default="", description="the read-out's control arm; empty = Pop for Table 2, full DeepFM for Tables 3 and 4"
    )
    n_bootstrap: int = Field(default=2000, description="bootstrap replicates of every interval")
    seed: int = Field(default=0, description="bootstrap seed")


_ARM_TABLE_INS = {
    "offline_metrics": AssetIn("offline_metrics"),
    "top20_lists": AssetIn("top20_lists"),
    "simulation_events": AssetIn("simulation_events"),
}


@asset(group_name=GROUP, code_version="1", kinds={"markdown"}, ins=_ARM_TABLE_INS)
def ab_agent_table2(
    context: AssetExecutionContext,
    config: ArmTableConfig,
    offline_metrics: dict,
    top20_lists: dict,
    simulation_events: dict,
    test_ratings: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """A/B Agent Table 2: every configured arm — offline AUC, Recall@20, NDCG@20, simulated
    CTR, CVR, AR with intervals — and the fidelity verdicts, beside the paper."""
    return _arm_table(
        context,
        config,
        "table2",
        "A/B Agent Table 2: model comparison (MovieLens)",
        TABLE2,
        "the paper's Table 2 (ML, A/B Agent with GPT-4o-mini; Real-World Recall / NDCG)",
        list(DEFAULT_ARMS),
        DEFAULT_CONTROL,
        offline_metrics,
        top20_lists,
        simulation_events,
        test_ratings,
        mlflow_tracking,
    )


@asset(group_name=GROUP, code_version="1", kinds={"markdown"}, ins=_ARM_TABLE_INS)
def ab_agent_table3(
    context: AssetExecutionContext,
    config: ArmTableConfig,
    offline_metrics: dict,
    top20_lists: dict,
    simulation_events: dict,
    test_ratings: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """A/B Agent Table 3: DeepFM on 50 %, 75 % and 100 % of the training data, offline and simulated."""
    return _arm_table(
        context,
        config,
        "table3",
        "A/B Agent Table 3: training data scale (DeepFM)",
        TABLE3,
        "the paper's Table 3 (GPT-4o-mini)",
        list(TABLE3_ARMS),
        "deepfm",
        offline_metrics,
        top20_lists,
        simulation_events,
        test_ratings,
        mlflow_tracking,
    )


@asset(group_name=GROUP, code_version="1", kinds={"markdown"}, ins=_ARM_TABLE_INS)
def ab_agent_table4(
    context: AssetExecutionContext,
    config: ArmTableConfig,
    offline_metrics: dict,
    top20_lists: dict,
    simulation_events: dict,
    test_ratings: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """A/B Agent Table 4: DeepFM with user id only, movie id only, all features, offline and simulated."""
    return _arm_table(
        context,
        config,
        "table4",
        "A/B Agent Table 4: feature ablation (DeepFM)",
        TABLE4,
        "the paper's Table 4 (GPT-4o-mini)",
        list(TABLE4_ARMS),
        "deepfm",
        offline_metrics,
        top20_lists,
        simulation_events,
        test_ratings,
        mlflow_tracking,
    )


def _arm_table(
    context,
    config: ArmTableConfig,
    name: str,
    title: str,
    paper: dict,
    paper_label: str,
    default_arms: list[str],
    default_control: str,
    offline_metrics: dict,
    top20_lists: dict,
    simulation_events: dict,
    test_ratings: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
):
    arms = list(config.arms) or default_arms
    try:
        experiment = arm_experiment(
            arms,
            simulation_events,
            offline_metrics,
            top20_lists,
            test_ratings,
            control=config.control or default_control,
            readout_config=ReadoutConfig(n_bootstrap=config.n_bootstrap, seed=config.seed),
        )
    except ValueError as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
    folder = data_root() / "experiments" / name
    figure = save_figure(arm_figure(experiment.table, title), folder / "plots" / f"{name}.png")
    body = arm_markdown(experiment, paper, paper_label)
    extra = {"fidelity": experiment.fidelity, "fidelity_pairs": experiment.pairs}
    return publish(
        context,
        mlflow_tracking,
        name,
        title,
        body,
        DIFFERENCES[name],
        experiment.table,
        extra,
        [figure],
        {"arms": ",".join(arms)},
    )

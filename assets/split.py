"""Lifecycle step 4: the chronological 7:2:1 split (A/B Agent §3.1)."""

import polars as pl
from dagster import AssetExecutionContext, AssetOut, Config, DataVersion, MaterializeResult, MetadataValue, multi_asset
from pydantic import Field

from ops.data.data_figures import split_timeline
from ops.data.split import chronological_split as split
from ops.data.split import split_statistics
from ops.figures import table_markdown
from resources.mlflow_tracking import MlflowTracking

GROUP = "split"


class SplitConfig(Config):
    train: float = Field(
        default=0.7, description="share of the earliest interactions used for training (A/B Agent §3.1)"
    )
    valid: float = Field(default=0.2, description="share used for validation / early stopping")
    test: float = Field(default=0.1, description="share of the latest interactions held out for offline metrics")


@multi_asset(
    outs={
        "train_ratings": AssetOut(
            group_name=GROUP, kinds={"polars"}, code_version="1", description="earliest 70 % of ratings"
        ),
        "valid_ratings": AssetOut(group_name=GROUP, kinds={"polars"}, code_version="1", description="next 20 %"),
        "test_ratings": AssetOut(group_name=GROUP, kinds={"polars"}, code_version="1", description="latest 10 %"),
    },
)
def chronological_split(
    context: AssetExecutionContext, config: SplitConfig, ratings: pl.DataFrame, mlflow_tracking: MlflowTracking
):
    """Sort all interactions by time and cut at 70 % and 90 %."""
    parts = split(ratings, (config.train, config.valid, config.test))
    stats = split_statistics(parts)
    with mlflow_tracking.asset_run(context, params=config.model_dump()):
        for row in stats.iter_rows(named=True):
            mlflow_tracking.log_metrics(
                {f"{row['split']}_{k}": row[k] for k in ("rows", "users", "items", "cold_users", "cold_items")}
            )
        digests = {name: mlflow_tracking.log_frame(frame, f"{name}_ratings") for name, frame in parts.frames().items()}
        mlflow_tracking.log_table(stats, "split_statistics")
        mlflow_tracking.log_figure(split_timeline(parts.frames()), "plots/split_timeline.png")
    table = MetadataValue.md(table_markdown(stats))
    for name, frame in parts.frames().items():
        yield MaterializeResult(
            asset_key=f"{name}_ratings",
            value=frame,
            data_version=DataVersion(digests[name]),
            metadata={"rows": frame.height, "split statistics": table},
        )

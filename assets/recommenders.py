"""Lifecycle steps 5–6: the recommender arms, one partition per arm, and their offline metrics.

Arms are partitions (`assets.partitions`); which of them a full run uses is run
configuration.  Every arm reads the one catalogue, `mm_ml_1m`.
"""

import numpy as np
import polars as pl
from dagster import AssetExecutionContext, Config, DataVersion, MaterializeResult, Output, asset
from pydantic import Field

from assets.partitions import arm_partitions
from resources.mlflow_tracking import MlflowTracking
from resources.storage import frame_digest

GROUP = "recommenders"


class ArmTrainingConfig(Config):
    """Overrides of A/B Agent Appendix B defaults (0 / empty keeps the default)."""

    max_epochs: int = Field(default=0, description="≤ 20 in Appendix B; 0 = default ($SIMAB_MAX_EPOCHS)")
    seed: int = Field(default=1024, description="torch / sampling seed (deepctr's default 1024)")
    device: str = Field(default="auto", description="auto (GPU when torch sees one) | cpu | cuda")
    use_metadata: bool = Field(
        default=True, description="add MM-ML-1M vote average, log vote count, release year when present"
    )
    registered_model_prefix: str = Field(default="simab", description="MLflow Model Registry name: <prefix>-<arm>")
    divergence_guard: bool = Field(
        default=True,
        description="stop an arm whose loss is NaN, whose log loss explodes or whose validation AUC stays near 0.5 (ops.arms.recommenders.DivergenceGuard) instead of registering it",
    )


@asset(group_name=GROUP, partitions_def=arm_partitions, code_version="2", compute_kind="pytorch")
def recommender_arm(
    context: AssetExecutionContext,
    config: ArmTrainingConfig,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    users: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
):
    """One arm trained on the train split (early stop on validation AUC) and registered in MLflow."""
    from ops.arms.recommenders import arm_config, train_arm

    arm = context.partition_key
    overrides = {"seed": config.seed, "device": config.device, "use_metadata": config.use_metadata}
    if not config.divergence_guard:
        overrides["divergence"] = {"enabled": False}
    if config.max_epochs:
        overrides["max_epochs"] = config.max_epochs
    arm_cfg = arm_config(arm, **overrides)
    with mlflow_tracking.asset_run(context, tags={"arm": arm}):
        mlflow_tracking.log_frame(train_ratings, "train_ratings", role="training")
        mlflow_tracking.log_frame(valid_ratings, "valid_ratings", role="validation")

        def on_epoch(epoch: int, metrics: dict[str, float]) -> None:
            mlflow_tracking.log_metrics(metrics, step=epoch)
            context.log.info(f"{arm} epoch {epoch}: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))

        trained = train_arm(arm_cfg, train_ratings, valid_ratings, users, mm_ml_1m, on_epoch=on_epoch)
        best = trained.history[trained.best_epoch - 1] if trained.best_epoch else {}
        version = mlflow_tracking.log_and_register_arm(
            trained, f"{config.registered_model_prefix}-{arm}", metrics={f"best_{k}": v for k, v in best.items()}
        )
    context.log.info(f"{arm}: registered as {config.registered_model_prefix}-{arm} version {version}")
    return Output(
        trained,
        metadata={
            "arm": arm,
            "registered_model": f"{config.registered_model_prefix}-{arm}",
            "registered_version": version,
            "best_epoch": trained.best_epoch or 0,
            "train_rows": trained.train_rows,
            "device": str(getattr(trained, "device", arm_cfg.device)),
        },
    )


@asset(group_name=GROUP, partitions_def=arm_partitions, code_version="1", compute_kind="numpy")
def top20_lists(
    context: AssetExecutionContext,
    recommender_arm,
    train_ratings: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """Each train user's 20 best-scored movies, excluding their train items: the sandbox's input."""
    from ops.arms.recommenders import top_k

    user_ids = train_ratings.get_column("user_id").unique().to_numpy()
    lists = top_k(
        recommender_arm,
        user_ids,
        mm_ml_1m.get_column("movie_id").to_numpy(),
        exclude=train_ratings.select("user_id", "movie_id"),
        k=20,
    )
    with mlflow_tracking.asset_run(context, tags={"arm": context.partition_key}):
        coverage = lists.get_column("movie_id").n_unique() / max(mm_ml_1m.height, 1)
        mlflow_tracking.log_metrics({"users": user_ids.size, "catalogue_coverage": coverage})
        digest = mlflow_tracking.log_frame(lists, "top20_lists", role="output")
    return MaterializeResult(
        value=lists,
        data_version=DataVersion(digest),
        metadata={"users": int(user_ids.size), "catalogue coverage": coverage},
    )


@asset(group_name=GROUP, partitions_def=arm_partitions, code_version="1", compute_kind="numpy")
def offline_metrics(
    context: AssetExecutionContext,
    recommender_arm,
    train_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """Test AUC and log-loss; Recall@20 and NDCG@20 by full ranking (docs/definitions.md#lifecycle, step 6)."""
    from ops.arms.recommenders import evaluate_arm

    metrics = evaluate_arm(
        recommender_arm, train_ratings, test_ratings, mm_ml_1m.get_column("movie_id").to_numpy(), k=20
    )
    row = pl.DataFrame([metrics.model_dump()])
    with mlflow_tracking.asset_run(context, tags={"arm": context.partition_key}):
        mlflow_tracking.log_metrics({k: v for k, v in metrics.model_dump().items() if isinstance(v, (int, float))})
        mlflow_tracking.log_frame(test_ratings, "test_ratings", role="evaluation")
    return MaterializeResult(
        value=row,
        data_version=DataVersion(frame_digest(row)),
        metadata={
            k: (float(v) if isinstance(v, (float, np.floating)) else v)
            for k, v in metrics.model_dump().items()
            if v is not None
        },
    )

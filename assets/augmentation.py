"""Lifecycle step 10: models refit on the simulated data (A/B Agent §3.4, §3.5, Table 5).

One partition per arm: the clicks and views simulated under that arm are added to the train
split and the downstream CTR models are retrained, each beside its model on the original
train split (same configuration, same seed).  The paper simulates under DeepFM and refits
eight models; here `models` lists the downstream models, and by default the partition's own
arm is refit.  Random, Pop, a lists file and an MLflow model have no model to refit: with the default
`models` their partitions hold an empty table and say "not applicable"; naming models refits those on the
data simulated under Random or Pop (what data from an exploring policy is worth).  The
"w/o vision" rows of Table 5 come from a simulation whose brain had no posters: the table
carries the brain's name.
"""

import os
import tempfile
from typing import Literal

import polars as pl
from dagster import AssetExecutionContext, Config, DataVersion, MaterializeResult, MetadataValue, asset
from pydantic import Field

from assets.partitions import ARM_POOL, arm_partitions
from ops.readout.augmentation_summary import seed_summary
from ops.readout.readout_figures import augmentation_figure
from ops.settings import config_default
from ops.studies.augmentation import (
    AugmentationConfig,
    mean_differences,
    metrics_by_seed,
    refit_models,
    refit_plan,
    table_5_markdown,
)
from resources.mlflow_tracking import MlflowTracking
from resources.storage import frame_digest

GROUP = "augmentation"
# The fields of AugmentationAssetConfig that `refit_models` takes as they are.
REFIT_SETTINGS = {"seed", "seeds", "device", "use_metadata", "max_epochs", "validation_negatives"}


class AugmentationAssetConfig(Config):
    signals: list[str] = Field(
        default=["click", "view"], description="A/B Agent §3.4: home-page clicks and detail-page views"
    )
    models: list[str] = Field(
        default=[],
        description="downstream DeepCTR models to refit (Table 5: nfm, xdeepfm, wdl, dcn, deepfm, afn, autoint, pnn); empty = the partition's own arm",
    )
    click_label: str = Field(
        default="positive",
        description="positive: a click is a positive example | watched: the rating of the watch that followed, else a negative",
    )
    max_epochs: int = Field(default=0, description="≤ 20 in Appendix B; 0 = default ($SIMAB_MAX_EPOCHS)")
    validation_negatives: float = Field(
        default=0.0, ge=0, description="as recommender_arm's ($SIMAB_VALIDATION_NEGATIVES; 0: the domain's default)"
    )
    seed: int = Field(default=1024, description="torch / sampling seed, the same for original and augmented models")
    seeds: int = Field(
        default=1,
        ge=1,
        description="training seeds per model (seed, seed+1, …): > 1 gives each AUC difference an interval over seeds",
    )
    device: str = Field(default="auto", description="auto (GPU when torch sees one) | cpu | cuda")
    use_metadata: bool = Field(
        default=True, description="add MM-ML-1M vote average, log vote count, release year when present"
    )
    refit: Literal["warm", "scratch"] = Field(
        default="warm",
        description="warm: each augmented model fine-tuned from the arm on the simulated rows and as many replayed train rows "
        "(its cost follows the simulated events); scratch: retrained on train + simulated rows, as the papers' Table 5 "
        "(job experiment_table5 always does)",
    )
    warm_epochs: int = Field(default=2, ge=1, description="refit warm: passes over the simulated and replayed rows")
    eval_users: int = Field(
        default=config_default("eval_users"),
        ge=0,
        description="Recall@20 and NDCG@20 over a seeded sample of this many test users, as the arms' offline metrics; 0 = all ($SIMAB_EVAL_USERS)",
    )

    def augmentation(self) -> AugmentationConfig:
        """How the simulated events become training rows and the models are refit."""
        return AugmentationConfig(
            signals=tuple(self.signals),
            **self.model_dump(include={"click_label", "refit", "warm_epochs", "eval_users"}),
        )


@asset(group_name=GROUP, partitions_def=arm_partitions, code_version="1", kinds={"pytorch"}, pool=ARM_POOL)
def augmentation_metrics(
    context: AssetExecutionContext,
    config: AugmentationAssetConfig,
    simulation_events: pl.DataFrame,
    recommender_arm,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """Test AUC, Recall@20 and NDCG@20 of each downstream model trained on the original
    train split and on it plus this arm's simulated clicks / views (Table 5)."""
    arm = context.partition_key
    models, not_applicable = refit_plan(list(config.models) or [arm])
    params = {**config.model_dump(), "models": ",".join(models), "not_applicable": ",".join(not_applicable)}
    with mlflow_tracking.asset_run(context, params=params, tags={"arm": arm}):
        mlflow_tracking.log_frame(simulation_events, f"simulation_events_{arm}", role="training")
        mlflow_tracking.log_frame(train_ratings, "train_ratings", role="training")
        mlflow_tracking.log_frame(test_ratings, "test_ratings", role="evaluation")
        table = refit_models(
            arm,
            models,
            train_ratings,
            valid_ratings,
            test_ratings,
            users,
            catalogue,
            simulation_events,
            config=config.augmentation(),
            original_model=recommender_arm,
            log=context.log.info,
            **config.model_dump(include=REFIT_SETTINGS),
        )
        for step, metrics in metrics_by_seed(table):
            mlflow_tracking.log_metrics(metrics, step=step)
        if config.seeds > 1 and table.height:
            spread = seed_summary(table)
            mlflow_tracking.log_table(spread, "augmentation_seed_summary")
            mlflow_tracking.log_metrics(mean_differences(spread))
        if not_applicable:
            mlflow_tracking.set_tags({"not_applicable": ",".join(not_applicable)})
        if table.height:
            mlflow_tracking.log_table(table, "augmentation_metrics")
            with tempfile.TemporaryDirectory() as tmp:
                figure = augmentation_figure(table, os.path.join(tmp, f"augmentation_auc_{arm}.png"))
                mlflow_tracking.log_artifact(figure, artifact_path="plots")
        digest = mlflow_tracking.log_frame(table, f"augmentation_metrics_{arm}", role="output")
    return MaterializeResult(
        value=table,
        data_version=DataVersion(digest or frame_digest(table)),
        metadata={
            "arm": arm,
            "models": ", ".join(models) or "none",
            "not applicable": ", ".join(not_applicable) or "none",
            "Table 5 (test AUC)": MetadataValue.md(table_5_markdown(table, not_applicable)),
        },
    )

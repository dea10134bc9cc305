"""Lifecycle steps 5–6: the recommender arms, one partition per arm, and their offline metrics.

Arms are partitions (`assets.partitions`); which of them a full run uses is run
configuration.  Every arm reads the one catalogue (the `catalogue` asset).
"""

import dataclasses
import time

import numpy as np
import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetRecordsFilter,
    Config,
    DataVersion,
    Failure,
    MaterializeResult,
    Output,
    ResourceParam,
    asset,
)
from pydantic import Field

from assets.partitions import ARM_POOL, arm_partitions
from ops.agents.profile import population_ids
from ops.arms.base import FitData
from ops.arms.ranking import (
    NOT_AVAILABLE,
    evaluation_users,
    lists_for,
    metrics_from_lists,
    rank_once,
    ranking_users,
)
from ops.arms.recommenders import TrainedArm
from ops.arms.registry import make_arm
from ops.settings import config_default
from ops.simulation.assignment import sample_agents
from ops.studies.mirror import brain_scores
from resources.mlflow_tracking import MlflowTracking
from resources.storage import SimabIOManager, frame_digest

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
    validation_negatives: float = Field(
        default=0.0,
        ge=0,
        description="unrated pairs per validation row added as negatives for early stopping (0: the domain's default, 1 for implicit feedback and none for ratings; $SIMAB_VALIDATION_NEGATIVES)",
    )
    divergence_guard: bool = Field(
        default=True,
        description="stop an arm whose loss is NaN, whose log loss explodes or whose validation AUC stays near 0.5 (ops.arms.trained.DivergenceGuard) instead of registering it",
    )


@asset(group_name=GROUP, partitions_def=arm_partitions, code_version="3", kinds={"pytorch", "mlflow"}, pool=ARM_POOL)
def recommender_arm(
    context: AssetExecutionContext,
    config: ArmTrainingConfig,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
    io_manager: ResourceParam[SimabIOManager],
):
    """One arm (`ops.arms.registry`: a built-in, a plug-in, a lists file, an MLflow model,
    the brain's own ranking) fitted on the train split (early stop on validation AUC); the
    built-ins are registered in MLflow, the others have their spec, parameters and source
    recorded."""
    arm = context.partition_key
    overrides = {"seed": config.seed, "device": config.device, "use_metadata": config.use_metadata}
    if not config.divergence_guard:
        overrides["divergence"] = {"enabled": False}
    if config.max_epochs:
        overrides["max_epochs"] = config.max_epochs
    if config.validation_negatives:
        overrides["validation_negatives"] = config.validation_negatives
    model = make_arm(arm, **overrides)
    rank_users = ranking_users(train_ratings, test_ratings)  # test users (no labels): a lists file covers them
    data = FitData(train_ratings, valid_ratings, users, catalogue, rank_users=rank_users)
    builtin = isinstance(model, TrainedArm)
    if getattr(model, "mirrors_brain", False):
        data = dataclasses.replace(data, brain_scores=_brain_scores(arm, io_manager))
    if not builtin:
        # Before the MLflow run opens: a lists file or a model that fails its checks leaves
        # neither a stored arm nor a run behind.
        mlflow_tracking.client()
        model.fit(data)
    with mlflow_tracking.asset_run(context, tags={"arm": arm}):
        mlflow_tracking.log_frame(train_ratings, "train_ratings", role="training")
        mlflow_tracking.log_frame(valid_ratings, "valid_ratings", role="validation")

        def on_epoch(epoch: int, metrics: dict[str, float]) -> None:
            mlflow_tracking.log_metrics(metrics, step=epoch)
            context.log.info(f"{arm} epoch {epoch}: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))

        if builtin:
            model.fit(FitData(train_ratings, valid_ratings, users, catalogue, on_epoch=on_epoch))
            best = model.history[model.best_epoch - 1] if model.best_epoch else {}
            registered = f"{config.registered_model_prefix}-{arm}"
            best_metrics = {f"best_{k}": v for k, v in best.items()}
            version = mlflow_tracking.log_and_register_arm(model, registered, metrics=best_metrics)
            context.log.info(f"{arm}: registered as {registered} version {version}")
        else:
            registered, version = "", ""
            mlflow_tracking.log_params(_params(model.describe()))
            mlflow_tracking.set_tags({"arm_kind": model.spec.kind, "arm_spec": model.spec.text()})
    described = model.describe() if not builtin else {}
    return Output(
        model,
        metadata={
            "arm": arm,
            "kind": "built-in" if builtin else model.spec.kind,
            "registered_model": registered or "not registered (not a built-in)",
            "registered_version": version,
            "best_epoch": getattr(model, "best_epoch", None) or 0,
            "train_rows": getattr(model, "train_rows", train_ratings.height),
            "can_refit": bool(model.can_refit),
            **{k: str(v) for k, v in described.items() if k.startswith("mlflow_") or k in ("uri", "path", "sha256")},
        },
    )


def registered_arms(instance, arms) -> dict[str, tuple[str, str]]:
    """{arm: (registered model, version)} of the arms whose stored training registered one,
    read from the metadata of each arm's latest `recommender_arm` materialisation (an arm
    skipped as unchanged keeps the version it was stored with)."""
    out = {}
    for arm in arms:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("recommender_arm"), asset_partitions=[arm]), limit=1
        ).records
        if not records or records[0].asset_materialization is None:
            continue
        metadata = records[0].asset_materialization.metadata
        name, version = (
            getattr(metadata.get(key), "value", None) for key in ("registered_model", "registered_version")
        )
        if name and version:
            out[arm] = (str(name), str(version))
    return out


def _brain_scores(arm: str, io_manager: SimabIOManager):
    """The stored embedded brain's click scores, for an arm that ranks by them (`ops.arms.mirror`).
    Read from storage rather than as an input: every other arm would wait for the brain."""
    missing = [asset for asset in ("agents", "embedded_brain") if not io_manager.has_stored(asset)]
    if missing:
        raise Failure(
            description=f"arm {arm!r} ranks by the embedded brain's click scores, but {' and '.join(missing)} "
            "has not been materialised: run the job simab_prepare first",
            allow_retries=False,
        )
    return brain_scores(io_manager.stored("embedded_brain"), io_manager.stored("agents"))


def _params(described: dict) -> dict:
    """An outside arm's description as MLflow params (text, at most MLflow's 6000 characters)."""
    return {k: str(v)[:6000] for k, v in described.items() if v is not None}


class RankingConfig(Config):
    """Whom the ranking pass ranks: the users later steps read."""

    n_agents: int = Field(
        default=config_default("agents"),
        ge=0,
        description="the simulation's agents, a seeded sample whose lists are ranked; 0 = every user ($SIMAB_AGENTS)",
    )
    seed: int = Field(default=0, description="the simulation's seed (its agent sample)")
    eval_users: int = Field(
        default=config_default("eval_users"),
        ge=0,
        description="test users the offline metrics are measured on, a seeded sample; 0 = all ($SIMAB_EVAL_USERS)",
    )


@asset(group_name=GROUP, partitions_def=arm_partitions, code_version="2", kinds={"numpy"}, pool=ARM_POOL)
def arm_rankings(
    context: AssetExecutionContext,
    config: RankingConfig,
    recommender_arm,
    train_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    catalogue: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """The arm's one ranking pass: the 20 best movies of the users read — the simulated
    agents and the evaluated test users — without their train items.  The top-20 lists and
    the offline metrics both read it; nobody else is ranked."""
    started = time.perf_counter()
    simulated = sample_agents(population_ids(train_ratings), config.n_agents, config.seed)
    read = np.union1d(simulated, evaluation_users(test_ratings, config.eval_users))
    items = catalogue.get_column("item_id").to_numpy()
    ranking = rank_once(recommender_arm, train_ratings, test_ratings, items, k=20, users=read)
    seconds = time.perf_counter() - started
    users = ranking.get_column("user_id").n_unique()
    with mlflow_tracking.asset_run(context, tags={"arm": context.partition_key}):
        mlflow_tracking.log_metrics({"ranking_seconds": seconds, "users_ranked": users})
        digest = mlflow_tracking.log_frame(ranking, "arm_rankings", role="output")
    context.log.info(f"{context.partition_key}: ranked {users} users in {seconds:.1f} s")
    return MaterializeResult(
        value=ranking, data_version=DataVersion(digest), metadata={"users": int(users), "seconds": round(seconds, 3)}
    )


@asset(group_name=GROUP, partitions_def=arm_partitions, code_version="2", kinds={"numpy"})
def top20_lists(
    context: AssetExecutionContext,
    arm_rankings: pl.DataFrame,
    train_ratings: pl.DataFrame,
    catalogue: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """The 20 best-scored movies of each ranked train user (the agents' users), excluding
    their train items: the sandbox's input, read from the arm's one ranking pass."""
    lists = lists_for(arm_rankings, train_ratings.get_column("user_id").unique().to_numpy())
    users = lists.get_column("user_id").n_unique()
    with mlflow_tracking.asset_run(context, tags={"arm": context.partition_key}):
        coverage = lists.get_column("item_id").n_unique() / max(catalogue.height, 1)
        mlflow_tracking.log_metrics({"users": users, "catalogue_coverage": coverage})
        digest = mlflow_tracking.log_frame(lists, "top20_lists", role="output")
    return MaterializeResult(
        value=lists,
        data_version=DataVersion(digest),
        metadata={"users": int(users), "catalogue coverage": coverage},
    )


class OfflineMetricsConfig(Config):
    eval_users: int = Field(
        default=config_default("eval_users"),
        ge=0,
        description="test users Recall@20 and NDCG@20 are measured on, a seeded sample; 0 = all ($SIMAB_EVAL_USERS)",
    )


@asset(group_name=GROUP, partitions_def=arm_partitions, code_version="3", kinds={"numpy"})
def offline_metrics(
    context: AssetExecutionContext,
    config: OfflineMetricsConfig,
    recommender_arm,
    arm_rankings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """Test AUC and log-loss (where the arm scores pairs); Recall@20 and NDCG@20 from the
    arm's one ranking pass, over the evaluated test users (docs/definitions.md#lifecycle, step 6)."""
    evaluated = evaluation_users(test_ratings, config.eval_users)
    metrics = metrics_from_lists(recommender_arm, arm_rankings, test_ratings, k=20, evaluated=evaluated)
    values = metrics.model_dump()
    schema = {
        "arm": pl.Utf8,
        "test_auc": pl.Float64,
        "test_log_loss": pl.Float64,
        "recall_at_k": pl.Float64,
        "ndcg_at_k": pl.Float64,
        "k": pl.Int64,
        "users_ranked": pl.Int64,
    }
    row = pl.DataFrame([values], schema=schema)
    numbers = {k: v for k, v in values.items() if isinstance(v, (int, float))}
    registered = registered_arms(context.instance, [context.partition_key]).get(context.partition_key)
    with mlflow_tracking.asset_run(context, tags={"arm": context.partition_key}):
        if registered:
            # Linked to the arm's logged model and the test split: MLflow's model comparison shows them.
            mlflow_tracking.log_model_metrics(numbers, *registered, dataset=(test_ratings, "test_ratings"))
        else:
            mlflow_tracking.log_metrics(numbers)
        if values["test_auc"] is None:
            mlflow_tracking.set_tags({"test_auc": NOT_AVAILABLE})
        mlflow_tracking.log_frame(test_ratings, "test_ratings", role="evaluation")
    return MaterializeResult(
        value=row,
        data_version=DataVersion(frame_digest(row)),
        metadata={
            k: (float(v) if isinstance(v, (float, np.floating)) else (NOT_AVAILABLE if v is None else v))
            for k, v in values.items()
        },
    )

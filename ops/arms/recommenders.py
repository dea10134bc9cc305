"""Training, ranking and evaluating the trained built-in arms: Random, Pop and the DeepCTR
family (A/B Agent §2.3.2, §3.2, Appendix B), each a class in its own file under
`ops/arms/kinds/`, configured by an `ArmConfig` (`ops.arms.trained`).

An arm is a named configuration.  `arm_config("deepfm")` gives DeepFM with the Appendix B
hyper-parameters (the common ones in `ArmConfig`, the model's adjustments in its class's
`appendix_b`); the variants the paper studies are parameters, `train_fraction` (Table 3,
share of the train split) and `feature_set` (Table 4), and DeepFM's are arms of their own
under the paper's names (`deepfm_data50`, `deepfm_user_id_only`, …: its `aliases`, resolved
by `ops.arms.registry`).  Any field can be overridden: `arm_config("afn", max_epochs=3)`.

`train_arm` fits one arm on the train split (`trained_arm(config).fit`: the DeepCTR
models with early stopping on validation AUC and the best epoch's weights restored,
`ops.arms.deepctr`); `TrainedArm.score` scores aligned (user, item) arrays; `top_k` ranks
the whole catalogue for many users at once, excluding each user's train items
(docs/definitions.md#top-20-list); `evaluate_arm` gives the offline metrics of
docs/definitions.md#lifecycle, step 6.  A fitted arm saves into a folder and loads back
from it (`TrainedArm.save`, `load_trained`: JSON, `.npz` and safetensors, no pickle;
`ops.arms.model_registry` adds MLflow).

The configuration's and the registry's names used with these are importable from here as
well (`arm_config`, `ArmConfig`, `TrainedArm`, …): this module sits above both.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ops.arms.base import EpochCallback, FitData
from ops.arms.metrics import relevant_items
from ops.arms.ranking import OfflineMetrics, metrics_from_lists, positive_threshold, ranked
from ops.arms.registry import (
    arm_config,
    kind_config,
    load_trained,
    trained_arm,
    trained_kind,
    trained_kind_names,
)
from ops.arms.trained import (
    FORMAT_VERSION,
    ArmConfig,
    ArmDivergedError,
    DivergenceGuard,
    TrainedArm,
    arm_params,
)

__all__ = [
    "FORMAT_VERSION",
    "ArmConfig",
    "ArmDivergedError",
    "DivergenceGuard",
    "EpochCallback",
    "TrainedArm",
    "arm_config",
    "arm_params",
    "evaluate_arm",
    "kind_config",
    "load_trained",
    "top_k",
    "train_arm",
    "trained_arm",
    "trained_kind",
    "trained_kind_names",
]


def train_arm(
    config: ArmConfig,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    on_epoch: EpochCallback | None = None,
) -> TrainedArm:
    """Fit arm `config` on `train` (RATINGS frames), early-stopping on `valid`'s AUC.
    `catalogue` is MM-ML-1M (the `catalogue` asset): the movies and their side features.

    `on_epoch(epoch, metrics)` is called after every epoch (1-based) with train_loss,
    val_auc, val_log_loss and epoch_seconds, e.g. to log them to MLflow.
    """
    trained = trained_arm(config)
    trained.fit(FitData(train, valid, users, catalogue, on_epoch=on_epoch))
    return trained


def top_k(
    trained: TrainedArm,
    user_ids: np.ndarray,
    item_ids: np.ndarray,
    exclude: pl.DataFrame | None = None,
    k: int = 20,
) -> pl.DataFrame:
    """The `k` best-scored candidates per user, without the user's `exclude` pairs.

    `item_ids` is the candidate catalogue; `exclude` has simab's user_id and item_id
    columns (the train interactions).  Returns a TOP_K frame sorted by user and rank; a user
    with fewer than `k` candidates left gets fewer rows.  Users are scored in blocks of
    users x catalogue: one matrix product per block where the arm has `factors` (Pop, FM),
    per-user and per-item parts computed once for the other DeepCTR models.
    """
    return ranked(trained, user_ids, item_ids, exclude, k)


def evaluate_arm(
    trained: TrainedArm,
    train: pl.DataFrame,
    test: pl.DataFrame,
    item_ids: np.ndarray,
    k: int = 20,
    evaluated: np.ndarray | None = None,
) -> OfflineMetrics:
    """Test AUC and log-loss on the test pairs; Recall@k and NDCG@k by full ranking of the
    catalogue `item_ids` minus each user's train items, relevant = test items rated
    >= the arm's positive threshold (docs/definitions.md#offline-metrics).  Ranks the users with a
    relevant test item only (of `evaluated`, when given: `ops.arms.ranking.evaluation_users`);
    the pipeline ranks once for lists and metrics (`ops.arms.ranking.rank_once`)."""
    ranked_users = relevant_items(test, positive_threshold(trained)).get_column("user_id").unique().to_numpy()
    if evaluated is not None:
        ranked_users = np.intersect1d(ranked_users, evaluated)
    lists = top_k(trained, ranked_users, item_ids, exclude=train.select("user_id", "item_id"), k=k)
    return metrics_from_lists(trained, lists, test, k, evaluated=evaluated)

"""Rank once: the one ranking pass of an arm that feeds both its offline metrics and the
top-20 lists the simulated users see.

`rank_once` ranks the users either needs in one pass — the simulated agents (their lists)
and the test users the offline metrics are measured on (`evaluation_users`: every one, or a
seeded sample) — the catalogue minus each user's train items, and both read-outs slice that
one table: `lists_for` the agents' lists, `metrics_from_lists` Recall@k and NDCG@k (a
user's ranking does not depend on the other users ranked beside it).  A user nobody reads
is not ranked: the cost grows with the users read, not with the log's users.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from pydantic import BaseModel

from ops.arms.base import ScoresNotAvailable
from ops.arms.metrics import auc, log_loss, ndcg_at_k, recall_at_k, relevant_items

NOT_AVAILABLE = "not available"


class OfflineMetrics(BaseModel):
    """docs/definitions.md#lifecycle, step 6 for one arm."""

    arm: str
    # None where the arm gives no score per pair (a lists file without scores): "not available".
    test_auc: float | None
    test_log_loss: float | None  # None where scores are not probabilities (Pop, MF, a lists file)
    recall_at_k: float
    ndcg_at_k: float
    k: int
    users_ranked: int  # users with at least one relevant test item


def ranking_users(train: pl.DataFrame, test: pl.DataFrame) -> np.ndarray:
    """The users one ranking pass serves: the train users (the simulated agents' lists) and
    the test users (offline metrics), sorted."""
    return np.unique(
        np.concatenate([train.get_column("user_id").to_numpy(), test.get_column("user_id").to_numpy()]).astype(np.int64)
    )


def evaluation_users(test: pl.DataFrame, n_users: int = 0, seed: int = 0) -> np.ndarray:
    """The test-window users the offline ranking metrics are measured on, sorted: every one
    (`n_users` 0), or a seeded sample of `n_users` of them (`SIMAB_EVAL_USERS`), the same
    for every arm; the metrics' bootstrap intervals are then over the sample, and wider."""
    users = np.unique(test.get_column("user_id").to_numpy().astype(np.int64))
    if n_users <= 0 or n_users >= users.size:
        return users
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4343]))
    return np.sort(rng.choice(users, size=n_users, replace=False))


def rank_once(
    arm: Any,
    train: pl.DataFrame,
    test: pl.DataFrame,
    item_ids: np.ndarray,
    k: int = 20,
    users: np.ndarray | None = None,
) -> pl.DataFrame:
    """Each user's `k` best items of the catalogue `item_ids` minus the user's train items: a
    TOP_K frame, the arm's one ranking pass.  `users`: the users read (the simulated agents
    and the evaluated test users); None: every train and test user."""
    if users is None:
        users, seen = ranking_users(train, test), train.select("user_id", "item_id")
    else:
        # Only the ranked users' train items: the pairs of users nobody reads are never looked at.
        users = np.unique(np.asarray(users, dtype=np.int64))
        seen = train.select("user_id", "item_id").filter(pl.col("user_id").is_in(pl.Series(users).implode()))
    return ranked(arm, users, item_ids, seen, k)


def ranked(arm: Any, user_ids: np.ndarray, item_ids: np.ndarray, exclude: pl.DataFrame | None, k: int) -> pl.DataFrame:
    """`arm.rank` called from simab's side: `exclude` (user_id, item_id: simab's tables)
    handed over with the arm's item column, the arm's ranking (RANKING, item_id) brought back
    as a TOP_K frame (item_id), so that no arm reads or writes simab's column name."""
    exclude = None if exclude is None else exclude
    return arm.rank(np.asarray(user_ids), np.asarray(item_ids), exclude, k)


def lists_for(ranking: pl.DataFrame, users: np.ndarray | pl.Series) -> pl.DataFrame:
    """The rows of `ranking` of `users` (e.g. the train users: the top-20 lists)."""
    return ranking.filter(pl.col("user_id").is_in(pl.Series(np.asarray(users), dtype=pl.Int64).implode()))


def positive_threshold(arm: Any) -> int:
    config = getattr(arm, "config", None)
    return int(getattr(config, "positive_threshold", getattr(arm, "positive_threshold", 4)))


def metrics_from_lists(
    arm: Any, ranking: pl.DataFrame, test: pl.DataFrame, k: int = 20, evaluated: np.ndarray | None = None
) -> OfflineMetrics:
    """Test AUC and log loss from the arm's scores of the test pairs (None where it has no
    scores, or none that are probabilities); Recall@k and NDCG@k from `ranking`, relevant =
    test items rated >= the arm's positive threshold, over the users with one (of
    `evaluated` only, when given: `evaluation_users`)."""
    threshold = positive_threshold(arm)
    relevant = relevant_items(test, threshold)
    if evaluated is not None:
        relevant = relevant.filter(pl.col("user_id").is_in(pl.Series(evaluated, dtype=pl.Int64).implode()))
    labels = (test.get_column("rating").to_numpy() >= threshold).astype(np.float64)
    test_auc: float | None = None
    test_log_loss: float | None = None
    try:
        scores = np.asarray(
            arm.score(test.get_column("user_id").to_numpy(), test.get_column("item_id").to_numpy()), dtype=np.float64
        )
    except ScoresNotAvailable:
        scores = None
    if scores is not None and labels.size and 0 < labels.sum() < labels.size:
        test_auc = auc(labels, scores)
        if arm.scores_are_probabilities:
            test_log_loss = log_loss(labels, scores)
    return OfflineMetrics(
        arm=arm.name,
        test_auc=test_auc,
        test_log_loss=test_log_loss,
        recall_at_k=recall_at_k(ranking, relevant, k),
        ndcg_at_k=ndcg_at_k(ranking, relevant, k),
        k=k,
        users_ranked=int(relevant.get_column("user_id").n_unique()),
    )

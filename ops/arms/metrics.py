"""Offline metrics of a recommender arm (docs/definitions.md#lifecycle, step 6, A/B Agent §3.1 "Real-World").

- `auc`, `log_loss`: on the test pairs, label = rating >= 4 (scikit-learn's, with the one-class
  cases said plainly).
- `recall_at_k`, `ndcg_at_k` (Järvelin and Kekäläinen, 2002): from each user's top-k list,
  ranked over the whole catalogue minus the user's train items; relevant = the user's test
  items rated >= 4.  Averaged over the users with at least one relevant test item; such a
  user with no list counts as zero.
    Recall@k = |hits in top k| / |relevant|
    NDCG@k   = sum over hits of 1 / log2(rank + 1)  /  sum_{i=1..min(|relevant|, k)} 1 / log2(i + 1)

All are vectorised (scikit-learn, polars joins and group-bys); no loop per user or pair.
"""

from __future__ import annotations

import numpy as np
import polars as pl


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (scikit-learn's `roc_auc_score`): the probability that a random
    positive outscores a random negative, ties counting one half.  Labels of one class only
    have no AUC: a ValueError that says how many of each (scikit-learn's is about its own
    arguments)."""
    from sklearn.metrics import roc_auc_score  # lazy: scikit-learn (a second to import)

    labels = np.asarray(labels).astype(bool).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    if labels.shape != scores.shape:
        raise ValueError(f"auc: {labels.size} labels but {scores.size} scores")
    positives = int(labels.sum())
    negatives = labels.size - positives
    if positives == 0 or negatives == 0:
        raise ValueError(f"auc needs both classes; got {positives} positives and {negatives} negatives")
    return float(roc_auc_score(labels, scores))


def log_loss(labels: np.ndarray, probabilities: np.ndarray, eps: float | None = None) -> float:
    """Mean binary cross-entropy (scikit-learn's `log_loss`).  Probabilities are clipped to
    [eps, 1 - eps]; eps defaults to the float64 machine epsilon, as scikit-learn does.  Labels
    of one class are scored against both classes (scikit-learn would refuse to guess them)."""
    from sklearn.metrics import log_loss as sklearn_log_loss  # lazy: scikit-learn

    labels = np.asarray(labels, dtype=np.float64).ravel()
    p = np.asarray(probabilities, dtype=np.float64).ravel()
    if labels.shape != p.shape:
        raise ValueError(f"log_loss: {labels.size} labels but {p.size} probabilities")
    if labels.size == 0:
        raise ValueError("log_loss of no pairs")
    if np.any((p < 0) | (p > 1)) or np.any(np.isnan(p)):
        raise ValueError("log_loss: probabilities must lie in [0, 1]")
    eps = np.finfo(np.float64).eps if eps is None else eps
    return float(sklearn_log_loss(labels, np.clip(p, eps, 1 - eps), labels=[0.0, 1.0]))


def relevant_items(test: pl.DataFrame, threshold: int = 4) -> pl.DataFrame:
    """(user_id, item_id) of the test items rated >= threshold, one row per pair."""
    return test.filter(pl.col("rating") >= threshold).select("user_id", "item_id").unique().sort("user_id", "item_id")


def recall_at_k(top_k: pl.DataFrame, relevant: pl.DataFrame, k: int = 20) -> float:
    """Mean over users with relevant items of |top-k ∩ relevant| / |relevant|.

    `top_k` has user_id, item_id and rank (1 = best) for one arm; `relevant` has
    user_id and item_id (see `relevant_items`)."""
    per_user = per_user_metrics(top_k, relevant, k)
    return float(per_user["recall_at_k"].mean()) if per_user.height else 0.0


def ndcg_at_k(top_k: pl.DataFrame, relevant: pl.DataFrame, k: int = 20) -> float:
    """Mean over users with relevant items of DCG@k / ideal DCG@k, binary relevance."""
    per_user = per_user_metrics(top_k, relevant, k)
    return float(per_user["ndcg_at_k"].mean()) if per_user.height else 0.0


def per_user_metrics(top_k: pl.DataFrame, relevant: pl.DataFrame, k: int = 20) -> pl.DataFrame:
    """user_id, recall_at_k, ndcg_at_k of every user with relevant items (sorted by user).

    The arm-level Recall@k and NDCG@k are their means; kept per user so that offline
    differences between arms get intervals over users (ops.readout.fidelity.pairwise_agreement)."""
    per_user = _per_user_hits(top_k, relevant, k)
    ideal_by_count = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(np.arange(2, k + 2)))])
    ideal = ideal_by_count[np.minimum(per_user["relevant"].to_numpy(), k)]
    return per_user.select(
        "user_id",
        (pl.col("hits") / pl.col("relevant")).alias("recall_at_k"),
        pl.Series(
            "ndcg_at_k",
            per_user["dcg"].to_numpy() / np.where(ideal > 0, ideal, 1.0) if per_user.height else [],
            dtype=pl.Float64,
        ),
    )


def _per_user_hits(top_k: pl.DataFrame, relevant: pl.DataFrame, k: int) -> pl.DataFrame:
    """One row per user with relevant items: relevant count, hits in the top k, DCG."""
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    for name, frame, columns in (
        ("top_k", top_k, ("user_id", "item_id", "rank")),
        ("relevant", relevant, ("user_id", "item_id")),
    ):
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"table {name!r} lacks column(s) {missing}")
    if "arm" in top_k.columns and top_k.get_column("arm").n_unique() > 1:
        raise ValueError("top_k holds several arms; rank one arm at a time")
    relevant = relevant.select(pl.col("user_id").cast(pl.Int64), pl.col("item_id").cast(pl.Int64)).unique()
    counts = relevant.group_by("user_id").agg(pl.len().alias("relevant"))
    hits = (
        top_k.filter(pl.col("rank") <= k)
        .select(pl.col("user_id").cast(pl.Int64), pl.col("item_id").cast(pl.Int64), pl.col("rank").cast(pl.Int64))
        .join(relevant, on=["user_id", "item_id"], how="inner")
        .group_by("user_id")
        .agg(pl.len().alias("hits"), (1.0 / (pl.col("rank") + 1).cast(pl.Float64).log(2)).sum().alias("dcg"))
    )
    return (
        counts.join(hits, on="user_id", how="left")
        .with_columns(pl.col("hits").fill_null(0), pl.col("dcg").fill_null(0.0))
        .sort("user_id")
    )

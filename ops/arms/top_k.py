"""An arm's scores made its top-k lists: one order shared by every user, matrix products of
factors, or a score matrix, ranked in blocks sized to the memory they may take (the kernels
`ops.arms.base.ArmBase.rank` and the built-in arms use; docs/performance.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from ops.schema import ITEM, TOP_K

# An arm's ranking: TOP_K (arm, user_id, rank, item_id, score).
RANKING = dict(TOP_K)

# Ranking blocks (`_rank_blocks`), in scores.  On ML-1M (1,746 users x 3,883 items, 2 cores
# shared): one block of every user ranked Pop and Random at 0.4-0.6x the speed of 262,144-
# score blocks, and 262,144-score blocks ranked FM at 0.3x the speed of 4 M-score ones (its
# BLAS product runs threads that small blocks keep waiting); hence products in large blocks,
# the top k in small ones, and scores computed in small chunks anyway (Random's hash, the
# DeepCTR arms' passes: `score_block_cells`) in small ones too.
TOP_CELLS = 262_144
SCORE_CELLS = 4_194_304


def rank_arm(
    arm: Any, user_ids: np.ndarray, item_ids: np.ndarray, exclude: pl.DataFrame | None, k: int, memory_mb: float
) -> pl.DataFrame:
    """`rank_by_score` of an arm: one order for everyone where its class says its order is
    the same for every user (`same_order_for_everyone`), by matrix products of its `factors`
    where it gives them (computed once for all the users and items), by its `score_matrix`
    otherwise."""
    user_ids = np.unique(np.asarray(user_ids, dtype=np.int64))
    item_ids = np.unique(np.asarray(item_ids, dtype=np.int64))
    if getattr(arm, "same_order_for_everyone", False) and user_ids.size and item_ids.size:
        scores = np.asarray(arm.score_matrix(user_ids[:1], item_ids), dtype=np.float64).reshape(-1)
        return rank_shared_order(arm.name, scores, user_ids, item_ids, exclude, k)
    factors_of = getattr(arm, "factors", None)
    factors = factors_of(user_ids, item_ids) if factors_of is not None and user_ids.size and item_ids.size else None
    if factors is None:
        cells = getattr(arm, "score_block_cells", SCORE_CELLS)
        return rank_by_score(arm.name, arm.score_matrix, user_ids, item_ids, exclude, k, memory_mb, cells)
    return _rank_blocks(
        arm.name,
        lambda start, stop: factors.scores(slice(start, stop)),
        user_ids,
        item_ids,
        exclude,
        k,
        memory_mb,
        score_cells=SCORE_CELLS,
    )


def rank_by_score(
    name: str,
    matrix: Callable[[np.ndarray, np.ndarray], np.ndarray],
    user_ids: np.ndarray,
    item_ids: np.ndarray,
    exclude: pl.DataFrame | None,
    k: int,
    memory_mb: float,
    score_cells: int = SCORE_CELLS,
) -> pl.DataFrame:
    """The `k` best-scored candidates of each user without its `exclude` pairs (user_id,
    item_id), as a RANKING frame sorted by user and rank, ties broken by item id.  `matrix(users, items)` scores a
    block of users x the catalogue, about `score_cells` scores (an arm's
    `score_block_cells`: large for a product, small for scores computed pair by pair); blocks
    are sized so that it stays within `memory_mb`."""
    user_ids = np.unique(np.asarray(user_ids, dtype=np.int64))
    item_ids = np.unique(np.asarray(item_ids, dtype=np.int64))
    return _rank_blocks(
        name,
        lambda start, stop: matrix(user_ids[start:stop], item_ids),
        user_ids,
        item_ids,
        exclude,
        k,
        memory_mb,
        score_cells,
    )


def rank_shared_order(
    name: str, scores: np.ndarray, user_ids: np.ndarray, item_ids: np.ndarray, exclude: pl.DataFrame | None, k: int
) -> pl.DataFrame:
    """The ranking of an arm whose scores of `item_ids` (sorted) are the same for every user:
    the catalogue sorted once (score descending, ties to the lower item id, as `_rank_blocks`
    breaks them), each user's list the first `k` items of that order outside its `exclude`
    pairs.  No users x items matrix: the j-th item a user has not seen sits at position
    j + #{i : e_i - i <= j} of the order, e_0 < e_1 < … the positions of the user's excluded
    items, one `searchsorted` for every user at once; work and memory grow with users x k
    and the excluded pairs."""
    user_ids = np.unique(np.asarray(user_ids, dtype=np.int64))
    scores = np.where(np.isnan(scores), -np.inf, scores)
    order = np.lexsort((item_ids, -scores))
    ranked = int(np.isfinite(scores).sum())  # -inf (and NaN) never rank
    kk = min(k, ranked)
    if user_ids.size == 0 or kk <= 0:
        return pl.DataFrame(schema=RANKING)
    position = np.empty(item_ids.size, dtype=np.int64)
    position[order] = np.arange(item_ids.size)
    rows, cols = excluded_cells(exclude, user_ids, item_ids)
    span = item_ids.size + 1
    keys = np.unique(rows * span + position[cols])  # sorted by user row, then position
    key_rows = keys // span
    start = np.searchsorted(key_rows, np.arange(user_ids.size))
    # e_i - i within each user's run of positions (non-decreasing there), kept apart by row.
    shifted = key_rows * span + (keys % span) - (np.arange(keys.size) - start[key_rows])
    j = np.arange(kk)
    query = np.arange(user_ids.size)[:, None] * span + j[None, :]
    free = j[None, :] + np.searchsorted(shifted, query, side="right") - start[:, None]
    kept = free < ranked
    users = np.broadcast_to(user_ids[:, None], free.shape)[kept]
    chosen = order[free[kept]]
    return pl.DataFrame(
        {
            "arm": name,
            "user_id": users,
            "rank": np.broadcast_to(j[None, :] + 1, free.shape)[kept],
            ITEM: item_ids[chosen],
            "score": scores[chosen],
        },
        schema=RANKING,
    )


def _rank_blocks(
    name, block_scores, user_ids, item_ids, exclude, k, memory_mb, score_cells: int = TOP_CELLS
) -> pl.DataFrame:
    """`block_scores(start, stop)`: the (users[start:stop], items) scores, float32 or float64.

    Two block sizes: the scores are asked for `score_cells` at a time (SCORE_CELLS for a
    matrix product, whose BLAS threads pay off on large blocks), the top k is taken
    TOP_CELLS at a time (the partial sort's arrays stay in cache and are reused), both within
    `memory_mb` (the score block and three float64 copies of a top block)."""
    n_items = item_ids.size
    if user_ids.size == 0 or n_items == 0 or k <= 0:
        return pl.DataFrame(schema=RANKING)
    blocked_rows, blocked_cols = excluded_cells(exclude, user_ids, item_ids)
    # Sorted by row, so that each block finds its own cells by two binary searches instead of
    # scanning every excluded pair (that scan, once per block, grew as users squared).
    by_row = np.argsort(blocked_rows, kind="stable")
    blocked_rows, blocked_cols = blocked_rows[by_row], blocked_cols[by_row]
    budget = memory_mb * 2**20 / (8 * n_items)  # float64 rows within memory_mb
    top_rows = max(1, min(TOP_CELLS // n_items, int(budget / 4)))
    score_rows = max(top_rows, min(score_cells // n_items, int(budget / 2)) // top_rows * top_rows)
    parts = []
    for start in range(0, user_ids.size, score_rows):
        stop = min(start + score_rows, user_ids.size)
        scores = np.asarray(block_scores(start, stop)).reshape(stop - start, n_items)
        if scores.dtype not in (np.float32, np.float64) or not scores.flags.writeable:
            scores = scores.astype(np.float64)
        for top in range(start, stop, top_rows):
            end = min(top + top_rows, stop)
            part = scores[top - start : end - start]
            parts.append(_top_of_block(name, user_ids[top:end], item_ids, part, blocked_rows, blocked_cols, top, k))
    return pl.concat(parts).filter(pl.col("score").is_finite())


def _top_of_block(name, users_block, item_ids, scores, blocked_rows, blocked_cols, start, k) -> pl.DataFrame:
    """The block's top-k rows; `scores` (float32 or float64, written in place) may be the
    model's own dtype: ranking float32 values in float64 changes no order.  `blocked_rows`
    (sorted) and `blocked_cols`: the excluded cells of every block."""
    first, last = np.searchsorted(blocked_rows, (start, start + users_block.size))
    scores[blocked_rows[first:last] - start, blocked_cols[first:last]] = -np.inf
    nan = np.isnan(scores)
    if nan.any():
        scores[nan] = -np.inf  # a NaN never ranks (and would break the tie cut)
    kk = min(k, item_ids.size)
    best = _best_columns(scores, kk)
    best_scores = np.take_along_axis(scores, best, axis=1).astype(np.float64)
    order = np.lexsort((item_ids[best], -best_scores), axis=1)
    best = np.take_along_axis(best, order, axis=1)
    best_scores = np.take_along_axis(best_scores, order, axis=1)
    return pl.DataFrame(
        {
            "arm": name,
            "user_id": np.repeat(users_block, kk),
            "rank": np.tile(np.arange(1, kk + 1), users_block.size),
            ITEM: item_ids[best].ravel(),
            "score": best_scores.ravel(),
        },
        schema=RANKING,
    )


def _best_columns(scores: np.ndarray, kk: int) -> np.ndarray:
    """The columns of each row's `kk` highest scores, in column order, a tie at the cut going
    to the lower column (item ids are sorted, so the lower id): the same items whatever `kk`
    is, which a partial sort alone does not promise.  A partial sort of the values finds each
    row's kk-th highest (np.partition: a third of np.argpartition's time on a catalogue-wide
    row); a row with more than `kk` scores at or above it has a tie across the cut and is
    settled by column."""
    rows, n = scores.shape
    if kk >= n:
        return np.broadcast_to(np.arange(n), scores.shape).copy()
    cut = np.partition(scores, n - kk, axis=1)[:, n - kk : n - kk + 1]
    chosen = scores >= cut
    tied = chosen.sum(axis=1) > kk
    if not tied.any():
        return np.nonzero(chosen)[1].reshape(rows, kk)
    best = np.empty((rows, kk), dtype=np.int64)
    best[~tied] = np.nonzero(chosen[~tied])[1].reshape(-1, kk)
    best[tied] = _best_columns_by_column(scores[tied], kk)
    return best


def _best_columns_by_column(scores: np.ndarray, kk: int) -> np.ndarray:
    """`_best_columns` of rows with a tie at the cut: the lower columns win it."""
    cut = -np.partition(-scores, kk - 1, axis=1)[:, kk - 1 : kk]
    above = scores > cut
    tied = scores == cut
    wanted = kk - above.sum(axis=1, keepdims=True)
    chosen = above | (tied & (np.cumsum(tied, axis=1) <= wanted))
    return np.nonzero(chosen)[1].reshape(scores.shape[0], kk)


def excluded_cells(exclude: pl.DataFrame | None, user_ids: np.ndarray, item_ids: np.ndarray):
    """(row, column) positions in the users x catalogue score matrix to leave out (`user_ids`
    and `item_ids` sorted); pairs of other users or items are dropped."""
    if exclude is None or exclude.height == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    u = exclude.get_column("user_id").to_numpy().astype(np.int64)
    m = exclude.get_column(ITEM).to_numpy().astype(np.int64)
    row = np.clip(np.searchsorted(user_ids, u), 0, user_ids.size - 1)
    col = np.clip(np.searchsorted(item_ids, m), 0, item_ids.size - 1)
    keep = (user_ids[row] == u) & (item_ids[col] == m)
    return row[keep], col[keep]

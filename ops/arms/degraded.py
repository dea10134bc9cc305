"""An arm's lists made worse on purpose: one rung of a quality ladder.

`degrade_lists` replaces `slots` of each user's top-k list with random unseen items: items
of the catalogue that are neither in the user's train window nor already in the list, drawn
uniformly.  Which slots and which items are drawn from the user's own stream of `seed`, and
the draw does not depend on `slots`: the slots replaced at 5 are among those replaced at 10,
with the same items, so the rungs of a ladder are nested and differ only by the slots added.
The kept items stay in their slots, the list's length and order elsewhere unchanged; every
row's score is its rank read backwards (k for the first slot), so the order reads from it.

The arm kind `degraded` (`ops/arms/kinds/degraded.py`) is that as an arm: `pop@5` (named
`pop-at-5`) or `name=degraded;base=pop;slots=5[;seed=0]` is Pop with 5 of the 20 slots of
every list replaced, simulated through the usual lifecycle
(`--arms pop,pop@5,pop@10,pop@15,pop@20`).  The list-quality sensitivity study
(`ops.studies.alignment.sensitivity`) degrades the control arm's stored lists with the same
function, so `pop@5` shows the agents the lists of its 5-slot rung for the same seed.
"""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl

from ops.arms.base import ITEM, RANKING

LIST_LENGTH = 20  # the sandbox's top-20 list (docs/definitions.md#top-20-list)
_STREAM = zlib.crc32(b"degraded lists")


def degrade_lists(
    lists: pl.DataFrame,
    slots: int,
    seen: pl.DataFrame | None,
    item_ids: np.ndarray,
    seed: int = 0,
    arm: str | None = None,
) -> pl.DataFrame:
    """`lists` (RANKING: arm, user_id, rank, item_id, score) with `slots` of each user's list
    replaced by random items of `item_ids` that are not in the user's `seen` pairs (user_id,
    item_id: the train window) nor in its list (module docstring); `arm` renames the rows.
    A list with fewer unseen candidates than slots keeps the rest of its items."""
    if slots < 0:
        raise ValueError(f"degraded lists: slots must be >= 0, got {slots}")
    lists = lists.select("arm", "user_id", "rank", ITEM, "score").cast(RANKING).sort("user_id", "rank")
    renamed = [pl.lit(arm).alias("arm")] if arm is not None else []
    if lists.is_empty():
        return lists.with_columns(*renamed)
    catalogue = np.unique(np.asarray(item_ids, dtype=np.int64))
    seen_by_user = (
        {u: np.asarray(ms, dtype=np.int64) for u, ms in seen.group_by("user_id").agg(ITEM).iter_rows()}
        if seen is not None and seen.height
        else {}
    )
    users, starts = np.unique(lists.get_column("user_id").to_numpy(), return_index=True)
    movies = lists.get_column(ITEM).to_numpy().copy()
    ends = np.append(starts[1:], movies.size)
    for user, start, end in zip(users.tolist(), starts.tolist(), ends.tolist()):
        length = end - start
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(user), _STREAM]))
        order = rng.permutation(length)  # the slots, in the order they are replaced
        excluded = np.union1d(seen_by_user.get(user, np.zeros(0, np.int64)), movies[start:end])
        pool = np.setdiff1d(catalogue, excluded, assume_unique=True)
        candidates = rng.choice(pool, size=min(length, pool.size), replace=False) if pool.size else pool
        n = min(slots, length, candidates.size)
        movies[start + order[:n]] = candidates[:n]
    ranks = lists.get_column("rank").to_numpy()
    top = int(lists.group_by("user_id").len().get_column("len").max())
    return lists.with_columns(
        pl.Series(ITEM, movies, dtype=pl.Int64),
        pl.Series("score", (top - ranks + 1).astype(np.float64)),
        *renamed,
    ).cast(RANKING)

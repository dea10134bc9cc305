"""The lists the taste and list-quality protocols judge: an agent's held-out items mixed with
items it never rated at a stated ratio (`mixed_lists`), the list-quality yardsticks
(`choose_ladder`) and the papers' hold-out drawn from the history (`history_holdout`).

Choices the papers leave open (SimUSER §4.1, Agent4Rec §3.1, A/B Agent §3.3.1):
- list length 20 with `list_length // (m + 1)` positives and m negatives per positive.  For
  taste discrimination a user with fewer held-out positives gets fewer of both, so the
  ratio holds and the list is shorter (per-item scores do not depend on the length, and
  dropping such users would keep only the most active: the test window holds few items
  for most users).  For list quality (`full_lists_only`) every list has the full length —
  a shorter list would show fewer impressions and so inflate CTR — and a user without
  enough positives for the richest ratio is left out, so the same agents see every ratio;
- negatives drawn uniformly from the catalogue among movies the user never rated in any
  window ("items the user has not interacted with"); uniform, not by popularity, as the
  papers sample them;
- the list is shuffled, so position says nothing about the label.

Sparse windows (`choose_ladder`): where too few users hold the 10 liked held-out items a
list of 20 at 1:1 needs (Steam: no user of the reference copy does, in either window), the
list-quality yardstick keeps its design — every list of one length at every ratio, the
same agents at every ratio — on shorter lists: the first of `LADDERS` that enough users
can fill.  A shorter list has fewer slots for unrelated items, so at the same ratio the
task is no easier; the shares of relevant items differ (`ListQuality.shares` says which).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ops.readout.statistics import named_rng

LIST_SCHEMA = {
    "ratio": pl.Utf8,
    "user_id": pl.Int64,
    "position": pl.Int64,
    "item_id": pl.Int64,
    "relevant": pl.Boolean,
}


# List-quality yardsticks, the papers' first (A/B Agent §3.3.1: lists of 20 at 1:9, 1:4, 1:1),
# then shorter lists for windows where users hold few liked items: (list length, ratios).
LADDERS: tuple[tuple[int, tuple[int, ...]], ...] = ((20, (9, 4, 1)), (10, (9, 4, 1)), (6, (5, 2, 1)), (4, (3, 1)))


@dataclass(frozen=True)
class Ladder:
    """A list-quality yardstick: lists of `list_length` at each ratio 1:m of `ratios`, the
    richest ratio needing `need` positives per user; `agents`: the users who have them."""

    list_length: int
    ratios: tuple[int, ...]
    agents: int

    @property
    def need(self) -> int:
        return max(max(self.list_length // (m + 1), 1) for m in self.ratios)


def choose_ladder(
    positives: pl.DataFrame,
    users: Iterable[int] | None = None,
    min_agents: int = 50,
    ladders: Sequence[tuple[int, tuple[int, ...]]] = LADDERS,
) -> Ladder | None:
    """The first of `ladders` at least `min_agents` users (of `users`, default all) can fill
    from their `positives` (user_id, item_id), else the one most users can fill (the
    longest on a tie); None when no user can fill any."""
    frame = positives.select("user_id", "item_id").unique()
    if users is not None:
        frame = frame.filter(pl.col("user_id").is_in(sorted({int(u) for u in users})))
    counts = frame.group_by("user_id").len().get_column("len").to_numpy()
    shapes = [Ladder(length, tuple(ratios), 0) for length, ratios in ladders]
    shapes = [Ladder(s.list_length, s.ratios, int((counts >= s.need).sum())) for s in shapes]
    for shape in shapes:
        if shape.agents >= min_agents:
            return shape
    best = max(shapes, key=lambda s: s.agents)  # max keeps the first (longest) of equals
    return best if best.agents > 0 else None


def ratio_name(m: int) -> str:
    """The papers' name of a positive-to-negative ratio: 1:m."""
    return f"1:{m}"


def mixed_lists(
    positives: pl.DataFrame,
    excluded: pl.DataFrame,
    item_ids: Sequence[int] | np.ndarray,
    ratios: Sequence[int],
    list_length: int = 20,
    seed: int = 0,
    users: Iterable[int] | None = None,
    stream: str = "lists",
    full_lists_only: bool = False,
) -> pl.DataFrame:
    """One list per (user, ratio 1:m): held-out `positives` (user_id, item_id) mixed with
    movies of `item_ids` the user has no row of in `excluded`; LIST_SCHEMA rows.
    `full_lists_only`: leave out the users with too few positives for a full list at every ratio.

    A user's lists at every ratio draw from its own named random stream, so adding a user
    or a ratio changes no other list."""
    if list_length < 2:
        raise ValueError(f"alignment lists need list_length >= 2, got {list_length}")
    bad = [m for m in ratios if int(m) < 1]
    if bad:
        raise ValueError(f"alignment ratios are 1:m with m >= 1, got m = {bad}")
    catalogue = np.unique(np.asarray(item_ids, dtype=np.int64))
    in_catalogue = set(catalogue.tolist())
    by_user = {
        u: np.asarray(sorted(set(ms)), dtype=np.int64)
        for u, ms in positives.group_by("user_id").agg("item_id").iter_rows()
    }
    seen = {u: set(ms) for u, ms in excluded.group_by("user_id").agg("item_id").iter_rows()}
    chosen = sorted(by_user) if users is None else sorted(set(int(u) for u in users) & set(by_user))
    if full_lists_only:
        need = max(max(list_length // (m + 1), 1) for m in ratios)
        chosen = [u for u in chosen if by_user[u].size >= need]
    rows: list[tuple] = []
    for user in chosen:
        pool = by_user[user]
        never = seen.get(user, set())
        unrated = catalogue.size - len(never & in_catalogue)
        for m in ratios:
            rng = named_rng(seed, stream, int(user), int(m))
            n_pos = min(max(list_length // (m + 1), 1), pool.size)
            pos = rng.choice(pool, n_pos, replace=False)
            if unrated - n_pos < m * n_pos:
                raise ValueError(
                    f"alignment lists: user {user} has rated nearly the whole catalogue; cannot draw {m * n_pos} never-rated movies"
                )
            neg = _never_rated(rng, catalogue, never | set(pos.tolist()), m * n_pos)
            items = np.concatenate([pos, neg])
            relevant = np.r_[np.ones(n_pos, dtype=bool), np.zeros(neg.size, dtype=bool)]
            order = rng.permutation(items.size)
            rows += [(ratio_name(m), int(user), i + 1, int(items[j]), bool(relevant[j])) for i, j in enumerate(order)]
    return pl.DataFrame(rows, schema=LIST_SCHEMA, orient="row")


def history_holdout(
    ratings: pl.DataFrame, users: Iterable[int], n: int, seed: int = 0
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The papers' hold-out (Agent4Rec §3.1: items "the user has interacted with but [that
    were] not utilized for profile initialization"): per user of `users`, up to `n` of its
    `ratings` drawn at random as positives and as many more, disjoint, for fitting the
    answer's thresholds; each at most a quarter of the user's rows, so at least half stays
    for its profile.  (positives, threshold positives) as (user_id, item_id) frames; each
    user draws from its own named stream, so adding a user changes no other's draw.  The
    caller builds the agents and fits the brain on `ratings` without both."""
    if n < 1:
        raise ValueError(f"history hold-out: n must be >= 1, got {n}")
    wanted = sorted({int(u) for u in users})
    picked: list[tuple[int, int]] = []
    tuned: list[tuple[int, int]] = []
    grouped = ratings.filter(pl.col("user_id").is_in(wanted)).group_by("user_id").agg(pl.col("item_id").unique())
    for user, movies in sorted(grouped.iter_rows()):
        movies = np.sort(np.asarray(movies, dtype=np.int64))
        k = min(n, movies.size // 4)
        if k < 1:
            continue
        order = named_rng(seed, "history hold-out", int(user)).permutation(movies.size)
        picked += [(int(user), int(m)) for m in movies[order[:k]]]
        tuned += [(int(user), int(m)) for m in movies[order[k : 2 * k]]]
    schema = {"user_id": pl.Int64, "item_id": pl.Int64}
    return pl.DataFrame(picked, schema=schema, orient="row"), pl.DataFrame(tuned, schema=schema, orient="row")


def _never_rated(rng: np.random.Generator, catalogue: np.ndarray, rated: set, n: int) -> np.ndarray:
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    got: list[int] = []
    taken = set(rated)
    while len(got) < n:  # rejection sampling: a user has rated a small share of the catalogue
        for movie in rng.choice(catalogue, 2 * (n - len(got)) + 4).tolist():
            if movie not in taken:
                taken.add(movie)
                got.append(movie)
                if len(got) == n:
                    break
    return np.asarray(got, dtype=np.int64)

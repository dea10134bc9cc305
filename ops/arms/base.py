"""The `Arm` protocol: what simab asks of a recommender, whichever library it comes from.

An arm is fitted once on the train window (the validation window beside it, for early
stopping), then asked for the ranking of the unseen items of given users; an arm that can
refit is trained again on the train rows plus simulated ones (A/B Agent Table 5).  Random,
Pop and the DeepCTR family (`ops.arms.recommenders.TrainedArm`), the Agent4Rec plug-in's MF,
MultVAE and LightGCN, a team's lists file and an MLflow model all meet it; the registry that
names them is `ops.arms.catalog`.

An outside arm subclasses `ArmBase` and is constructed as `cls(name, **params)`, the params
being those of its spec (`ops.arms.catalog.ArmSpec`).  It implements `fit` and either
`score` (then `rank` is derived, in passes sized to `score_memory_mb`) or `rank` itself,
and `save` / `load` so that its fitted state is stored without pickle.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import polars as pl

from ops.schema import TOP_K

EpochCallback = Callable[[int, dict[str, float]], None]


class ScoresNotAvailable(NotImplementedError):
    """The arm ranks but gives no score per (user, item) pair (a lists file without scores)."""


@dataclass(frozen=True)
class FitData:
    """What an arm is fitted on: RATINGS frames of the train and validation windows, the
    USERS table and the catalogue (MM-ML-1M: movie_id and side features).

    `rank_users`: the users whose lists will be asked for (train and test users), for arms
    that cannot rank a user they were not told of (a lists file must cover them).
    `on_epoch(epoch, metrics)`: called after each epoch by arms that train in epochs.
    `brain_scores(user_ids, item_ids)`: the simulation brain's own score of every user x
    item (higher = likelier clicked), handed only to an arm that ranks by it (one whose
    class sets `mirrors_brain`, `ops.arms.mirror`): this package cannot reach the brain."""

    train: pl.DataFrame
    valid: pl.DataFrame
    users: pl.DataFrame
    catalogue: pl.DataFrame
    rank_users: np.ndarray | None = None
    on_epoch: EpochCallback | None = None
    brain_scores: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None


@runtime_checkable
class Arm(Protocol):
    """A recommender arm.  `describe()` is what MLflow records of it (params)."""

    name: str
    can_refit: bool
    scores_are_probabilities: bool

    def fit(self, data: FitData) -> None: ...

    def score(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray: ...

    def rank(
        self, user_ids: np.ndarray, item_ids: np.ndarray, exclude: pl.DataFrame | None = None, k: int = 20
    ) -> pl.DataFrame: ...

    def refit(self, data: FitData) -> Arm: ...

    def describe(self) -> dict[str, Any]: ...


class ArmBase:
    """Defaults for an outside arm: `rank` from `score`, `refit` as a fresh fit with the same
    parameters, `describe` from the constructor's params, `save` / `load` of the params."""

    can_refit: ClassVar[bool] = True
    scores_are_probabilities: ClassVar[bool] = False
    # Memory a ranking pass may take for its users x catalogue score matrix (float64).
    score_memory_mb: float = 512.0

    def __init__(self, name: str, **params: Any):
        self.name = name
        self.params = dict(params)

    def fit(self, data: FitData) -> None:
        raise NotImplementedError(f"arm {self.name!r} ({type(self).__name__}) does not implement fit")

    def score(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        raise ScoresNotAvailable(f"arm {self.name!r} ({type(self).__name__}) gives no scores")

    def score_matrix(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        """Scores of every user x item, shape (users, items).  From `score` pair by pair by
        default; a factor model overrides it with one matrix product per block of users."""
        return np.asarray(
            self.score(np.repeat(user_ids, item_ids.size), np.tile(item_ids, user_ids.size)), dtype=np.float64
        ).reshape(user_ids.size, item_ids.size)

    def rank(
        self, user_ids: np.ndarray, item_ids: np.ndarray, exclude: pl.DataFrame | None = None, k: int = 20
    ) -> pl.DataFrame:
        return rank_by_score(self.name, self.score_matrix, user_ids, item_ids, exclude, k, self.score_memory_mb)

    def refit(self, data: FitData) -> ArmBase:
        fresh = type(self)(self.name, **self.params)
        fresh.fit(data)
        return fresh

    def describe(self) -> dict[str, Any]:
        return {"arm_class": f"{type(self).__module__}.{type(self).__qualname__}", **self.params}

    def save(self, folder: Path) -> None:
        """Write the fitted state into `folder` (exists, empty).  The default keeps only the
        params: an arm with learnt state overrides it (and `load`)."""
        (folder / "params.json").write_text(json.dumps(self.params, sort_keys=True, default=str))

    @classmethod
    def load(cls, name: str, params: dict[str, Any], folder: Path) -> ArmBase:
        return cls(name, **params)


def rank_by_score(
    name: str,
    matrix: Callable[[np.ndarray, np.ndarray], np.ndarray],
    user_ids: np.ndarray,
    item_ids: np.ndarray,
    exclude: pl.DataFrame | None,
    k: int,
    memory_mb: float,
) -> pl.DataFrame:
    """The `k` best-scored candidates of each user without its `exclude` pairs, as a TOP_K
    frame sorted by user and rank, ties broken by item id.  `matrix(users, items)` scores a
    block of users x the catalogue; blocks are sized so that it stays within `memory_mb`."""
    user_ids = np.unique(np.asarray(user_ids, dtype=np.int64))
    item_ids = np.unique(np.asarray(item_ids, dtype=np.int64))
    n_items = item_ids.size
    if user_ids.size == 0 or n_items == 0 or k <= 0:
        return pl.DataFrame(schema=TOP_K)
    blocked_rows, blocked_cols = excluded_cells(exclude, user_ids, item_ids)
    # Three users x catalogue arrays live at once (ids, scores, argpartition).
    block = max(1, int(memory_mb * 2**20 // (3 * 8 * n_items)))
    parts = []
    for start in range(0, user_ids.size, block):
        users_block = user_ids[start : start + block]
        scores = np.array(matrix(users_block, item_ids), dtype=np.float64).reshape(users_block.size, n_items)
        parts.append(_top_of_block(name, users_block, item_ids, scores, blocked_rows, blocked_cols, start, k))
    return pl.concat(parts).filter(pl.col("score").is_finite())


def _top_of_block(name, users_block, item_ids, scores, blocked_rows, blocked_cols, start, k) -> pl.DataFrame:
    in_block = (blocked_rows >= start) & (blocked_rows < start + users_block.size)
    scores[blocked_rows[in_block] - start, blocked_cols[in_block]] = -np.inf
    scores[np.isnan(scores)] = -np.inf  # a NaN never ranks (and would break the tie cut)
    kk = min(k, item_ids.size)
    best = _best_columns(scores, kk)
    best_scores = np.take_along_axis(scores, best, axis=1)
    order = np.lexsort((item_ids[best], -best_scores), axis=1)
    best = np.take_along_axis(best, order, axis=1)
    best_scores = np.take_along_axis(best_scores, order, axis=1)
    return pl.DataFrame(
        {
            "arm": name,
            "user_id": np.repeat(users_block, kk),
            "rank": np.tile(np.arange(1, kk + 1), users_block.size),
            "movie_id": item_ids[best].ravel(),
            "score": best_scores.ravel(),
        },
        schema=TOP_K,
    )


def _best_columns(scores: np.ndarray, kk: int) -> np.ndarray:
    """The columns of each row's `kk` highest scores, a tie at the cut going to the lower
    column (item ids are sorted, so the lower id): the same items whatever `kk` is, which
    argpartition alone does not promise."""
    cut = -np.partition(-scores, kk - 1, axis=1)[:, kk - 1 : kk]
    above = scores > cut
    tied = scores == cut
    wanted = kk - above.sum(axis=1, keepdims=True)
    chosen = above | (tied & (np.cumsum(tied, axis=1) <= wanted))
    return np.nonzero(chosen)[1].reshape(scores.shape[0], kk)


def excluded_cells(exclude: pl.DataFrame | None, user_ids: np.ndarray, item_ids: np.ndarray):
    """(row, column) positions in the users x catalogue score matrix to leave out."""
    if exclude is None or exclude.height == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    u = exclude.get_column("user_id").to_numpy().astype(np.int64)
    m = exclude.get_column("movie_id").to_numpy().astype(np.int64)
    row = np.clip(np.searchsorted(user_ids, u), 0, user_ids.size - 1)
    col = np.clip(np.searchsorted(item_ids, m), 0, item_ids.size - 1)
    keep = (user_ids[row] == u) & (item_ids[col] == m)
    return row[keep], col[keep]

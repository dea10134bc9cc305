"""The `Arm` protocol: what simab asks of a recommender, whichever library it comes from.

An arm is fitted once on the train window (the validation window beside it, for early
stopping), then asked for the ranking of the unseen items of given users; an arm that can
refit is trained again on the train rows plus simulated ones (A/B Agent Table 5).  Random,
Pop and the DeepCTR family (`ops.arms.trained.TrainedArm`), the Agent4Rec plug-in's MF,
MultVAE and LightGCN, a team's lists file and an MLflow model all meet it; the registry that
names them is `ops.arms.registry`.

An outside arm subclasses `ArmBase` and is constructed as `cls(name, **params)`, the params
being those of its spec (`ops.arms.registry.ArmSpec`).  It implements `fit` and either
`score` (then `rank` is derived, in passes sized to `score_memory_mb`) or `rank` itself,
and `save` / `load` so that its fitted state is stored without pickle.  An arm whose score
is a product of a user vector and an item vector (a factorisation model) says so with
`factors`: it is then ranked by one matrix product per block of users, the fastest a
ranking gets (docs/performance.md).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import polars as pl

from ops.schema import TOP_K

EpochCallback = Callable[[int, dict[str, float]], None]

# What an arm sees names the item `item_id`, whatever the domain (films, games, books), as
# simab's own tables do: FitData's frames, the `exclude` pairs and the ranking `rank` returns.
ITEM = "item_id"

# An arm's ranking: TOP_K.
RANKING = dict(TOP_K)


# Ranking blocks (`_rank_blocks`), in scores.  On ML-1M (1,746 users x 3,883 items, 2 cores
# shared): one block of every user ranked Pop and Random at 0.4-0.6x the speed of 262,144-
# score blocks, and 262,144-score blocks ranked FM at 0.3x the speed of 4 M-score ones (its
# BLAS product runs threads that small blocks keep waiting); hence products in large blocks,
# the top k in small ones, and scores computed in small chunks anyway (Random's hash, the
# DeepCTR arms' passes: `score_block_cells`) in small ones too.
TOP_CELLS = 262_144
SCORE_CELLS = 4_194_304


class ScoresNotAvailable(NotImplementedError):
    """The arm ranks but gives no score per (user, item) pair (a lists file without scores)."""


@dataclass(frozen=True)
class FitData:
    """What an arm is fitted on: RATINGS frames of the train and validation windows, the
    USERS table and the catalogue (item_id and side features: MM-ML-1M's genres and
    metadata on MovieLens), the item column named `item_id` on every domain.

    `rank_users`: the users whose lists will be asked for (train and test users), for arms
    that cannot rank a user they were not told of (a lists file must cover them).
    `on_epoch(epoch, metrics)`: called after each epoch by arms that train in epochs.
    `brain_scores(user_ids, item_ids)`: the simulation brain's own score of every user x
    item (higher = likelier clicked), handed only to an arm that ranks by it (one whose
    class sets `mirrors_brain`, `ops/arms/kinds/mirror.py`): this package cannot reach the brain."""

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


@dataclass(frozen=True)
class Factors:
    """An arm's scores as a product: score(user k, item j) = link(users[k] . items[j]), the
    rows of `users` and `items` aligned with the user and item ids they were asked for.
    `link` is elementwise and non-decreasing (None: the identity) and may work in place."""

    users: np.ndarray  # (users, d)
    items: np.ndarray  # (items, d)
    link: Callable[[np.ndarray], np.ndarray] | None = None

    def scores(self, rows: slice = slice(None)) -> np.ndarray:
        """The (users[rows], items) score matrix: one matrix product."""
        product = self.users[rows] @ self.items.T
        return product if self.link is None else self.link(product)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), in place on a float array."""
    with np.errstate(over="ignore"):
        np.negative(x, out=x)
        np.exp(x, out=x)
    x += 1
    return np.reciprocal(x, out=x)


class ArmBase:
    """Every arm kind's base: `rank` from `score`, `refit` as a fresh fit with the same
    parameters, `describe` from the constructor's params, `save` / `load` of the params.

    What a kind can do is said by its class, never by its name: the class attributes below
    are read by the registry, the assets and the studies (`ops.arms.registry.has_capability`),
    so that nothing outside the kind's own file compares arm names."""

    # Trains again on the train rows plus simulated ones (A/B Agent Table 5); a ranking
    # that nothing learns (Random, Pop, a lists file, an MLflow model) cannot.
    can_refit: ClassVar[bool] = True
    # Its scores are probabilities of a click (log loss is then measured).
    scores_are_probabilities: ClassVar[bool] = False
    # Trains with torch, on the GPU when torch sees one.
    uses_gpu: ClassVar[bool] = False
    # Much slower to train on a CPU than the rest: left out of a run's default arms.
    slow_to_train: ClassVar[bool] = False
    # Ranks by the simulation brain's own scores (`FitData.brain_scores` is handed to it).
    mirrors_brain: ClassVar[bool] = False
    # Measures the simulator, is no candidate: kept out of the verdict, tau and the arm pairs.
    diagnostic: ClassVar[bool] = False
    # May stand as the read-out's control when the named control was not simulated (a
    # diagnostic arm never does: it is no candidate to compare against).
    control_candidate: ClassVar[bool] = True
    # The constructor parameter that `name=<kind>:<source>` fills (a lists file's path, an
    # MLflow model's URI); None: the kind takes no source.
    source_param: ClassVar[str | None] = None
    # Its bare name is an arm (a partition key); False for a kind that means nothing
    # without its source or parameters (a lists file, an MLflow model, degraded lists).
    standalone: ClassVar[bool] = True
    # Other names this kind answers to as an arm (partition keys), each with the parameters it
    # stands for: DeepFM's `deepfm_data50` is `deepfm_data50=deepfm;train_fraction=0.5`.
    aliases: ClassVar[dict[str, dict[str, Any]]] = {}
    # Stores its own spec (a trained built-in: its configuration is its spec), so the registry
    # hands it over as made; any other arm is wrapped with its spec (`PluggedArm`) for storage.
    keeps_its_spec: ClassVar[bool] = False
    # Its order of the catalogue is the same for every user (Pop, a trending list): ranked
    # once, one order, each user's list its first `k` items the user has not seen
    # (`rank_shared_order`), whatever the number of users.  Its scores are read for one user.
    same_order_for_everyone: ClassVar[bool] = False
    # Memory a ranking pass may take for its users x catalogue score matrix (float64).
    score_memory_mb: float = 512.0

    def __init__(self, name: str, **params: Any):
        self.name = name
        self.params = dict(params)

    @classmethod
    def from_spec(
        cls, name: str, params: dict[str, Any], settings: dict[str, Any], make: Callable[[str], Any]
    ) -> ArmBase:
        """An unfitted arm of this kind for a spec's `params`.  `settings` are the run's (seed,
        device, max_epochs, …): passed on where the constructor names them.  `make(spec)`
        makes another arm with the same settings, for a kind built on another arm."""
        return cls(name, **{**params, **accepted_settings(cls, settings)})

    @classmethod
    def shorthand(cls, base: str, k: int) -> tuple[str, dict[str, Any]] | None:
        """The arm name and parameters that `base@k` stands for, where this kind claims that
        shorthand (one kind does: a quality ladder's rung, `ops/arms/kinds/degraded.py`); None,
        the default, where it does not."""
        return None

    @classmethod
    def spec_parameters(cls) -> frozenset[str] | None:
        """The parameters a spec may give this kind (`name=kind;key=value`): its constructor's
        but the name (the source too: `name=mlflow;uri=…` is the long form of `mlflow:…`);
        None where it takes any (`**kwargs`)."""
        return constructor_parameters(cls, exclude={"name"})

    @classmethod
    def source_problem(cls, source: str, tracking_uri: Callable[[], str | None] | None = None) -> str | None:
        """Why the source of `name=<kind>:<source>` cannot serve, checked before a run starts
        (a lists file's header, an MLflow model's URI); None when it can.  `tracking_uri()`:
        the MLflow store the run uses.  The default checks nothing: the arm finds out when it
        is fitted."""
        return None

    def fit(self, data: FitData) -> None:
        raise NotImplementedError(f"arm {self.name!r} ({type(self).__name__}) does not implement fit")

    def score(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        raise ScoresNotAvailable(f"arm {self.name!r} ({type(self).__name__}) gives no scores")

    def factors(self, user_ids: np.ndarray, item_ids: np.ndarray) -> Factors | None:
        """User and item factor blocks whose products are the arm's scores, where its score
        decomposes so (a factorisation model); None, the default, where it does not.  An arm
        that gives them is ranked by one matrix product per block of users."""
        return None

    def score_matrix(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        """Scores of every user x item, shape (users, items): from `factors` where the arm
        gives them, else from `score` pair by pair."""
        factors = self.factors(user_ids, item_ids)
        if factors is not None:
            return factors.scores()
        return np.asarray(
            self.score(np.repeat(user_ids, item_ids.size), np.tile(item_ids, user_ids.size)), dtype=np.float64
        ).reshape(user_ids.size, item_ids.size)

    def rank(
        self, user_ids: np.ndarray, item_ids: np.ndarray, exclude: pl.DataFrame | None = None, k: int = 20
    ) -> pl.DataFrame:
        """Each user's `k` best items of `item_ids` without its `exclude` pairs (user_id,
        item_id): a RANKING frame (arm, user_id, rank, item_id, score)."""
        return rank_arm(self, user_ids, item_ids, exclude, k, self.score_memory_mb)

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


def accepted_settings(cls: type, settings: dict[str, Any]) -> dict[str, Any]:
    """The run settings that `cls`'s constructor takes by name."""
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in settings.items() if k in parameters}


def constructor_parameters(factory: Callable[..., Any], exclude: set[str]) -> frozenset[str] | None:
    """The keyword parameters `factory` takes, less `exclude`; None where it takes any
    (`**kwargs`) or its signature cannot be read."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters if p.kind in kinds) - exclude


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

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import polars as pl

from ops.arms.top_k import RANKING, rank_arm  # noqa: F401 - RANKING: the arms' vocabulary, read from here
from ops.schema import ITEM  # noqa: F401 - the arms' vocabulary, read from here

EpochCallback = Callable[[int, dict[str, float]], None]

# What an arm sees names the item `item_id` (ops.schema.ITEM), whatever the domain, as simab's
# own tables do: FitData's frames, the `exclude` pairs and the ranking `rank` returns (RANKING).


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


def key_values(pairs: Iterable[str]) -> dict[str, Any]:
    """The `key=value` pairs of a spec (an arm's `name=kind;key=value`, a brain's `kind;key=value`):
    a value is JSON where it reads as JSON (numbers, true / false), else the string; ValueError
    naming a pair that is not `key=value`."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"parameter {pair!r} is not key=value")
        try:
            params[key.strip()] = json.loads(value.strip())
        except ValueError:
            params[key.strip()] = value.strip()
    return params


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

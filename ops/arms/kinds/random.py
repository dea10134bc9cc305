"""Random (A/B Agent Table 2's floor): every (user, item) pair gets a fixed uniform (0, 1)
score from a hash of the seed, the user and the item, so that its lists and its test scores
agree and a seed gives the same arm every time.  Nothing is learnt: it cannot be refit."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import polars as pl

from ops.arms.base import FitData
from ops.arms.trained import TrainedArm


class Random(TrainedArm):
    """Uniform scores from a hash of (seed, user, item) (module docstring)."""

    can_refit: ClassVar[bool] = False
    scores_are_probabilities: ClassVar[bool] = True
    reads_common: ClassVar[frozenset[str]] = frozenset({"seed", "score_memory_mb"})  # its hash, the ranking's passes

    def _fit(self, train: pl.DataFrame, data: FitData) -> None:
        """Nothing to learn."""

    def score(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        user_ids = np.asarray(user_ids, dtype=np.int64)
        item_ids = np.asarray(item_ids, dtype=np.int64)
        if user_ids.shape != item_ids.shape:
            raise ValueError(f"score: {user_ids.shape} user ids but {item_ids.shape} item ids")
        return _uniform_hash(self.config.seed, user_ids, item_ids)

    def score_matrix(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        return _uniform_hash_matrix(
            self.config.seed, np.asarray(user_ids, dtype=np.int64), np.asarray(item_ids, dtype=np.int64)
        )


def _uniform_hash(seed: int, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
    """A uniform (0, 1) number per (seed, user, movie): the same pair always gets the same
    score, so Random's lists and its test scores agree (splitmix64 finaliser)."""
    return _mixed(_user_key(seed, user_ids) ^ _item_key(item_ids))


def _uniform_hash_matrix(seed: int, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
    """`_uniform_hash` of every user x movie, (users, movies): each id's key computed once,
    the mixing in place on blocks of ~64k pairs, which stay in cache."""
    users, movies = _user_key(seed, user_ids), _item_key(item_ids)
    out = np.empty((users.size, movies.size), dtype=np.float64)
    step = max(1, 65_536 // max(movies.size, 1))
    for start in range(0, users.size, step):
        out[start : start + step] = _mixed(users[start : start + step, None] ^ movies[None, :])
    return out


def _user_key(seed: int, user_ids: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (user_ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64(seed & 0xFFFFFFFFFFFFFFFF)


def _item_key(item_ids: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return item_ids.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)


def _mixed(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on the keys (written in place), as uniform (0, 1) floats."""
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    x >>= np.uint64(11)
    out = x.astype(np.float64)
    out += 0.5
    out /= float(1 << 53)
    return out

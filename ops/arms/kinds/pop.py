"""Pop (Steck 2011; A/B Agent Table 2's control): every item scored by its count in the train
window (interactions, or positives with `popularity_of="positives"`), scaled to [0, 1] by the
largest, the same for every user: ranked once, one order, each user's list its first 20
items the user has not seen (`ArmBase.same_order_for_everyone`).  Nothing is learnt from the user: it
cannot be refit, and its scores are no probabilities (no log loss)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import polars as pl

from ops.arms.base import Factors, FitData
from ops.arms.trained import ArmConfig, TrainedArm


class PopConfig(ArmConfig):
    """Pop's configuration: the common fields and what it counts."""

    # Rank by number of train interactions (Steck 2011) or by train positives.
    popularity_of: Literal["interactions", "positives"] = "interactions"


@dataclass
class Pop(TrainedArm):
    """Items ranked by their train popularity (module docstring)."""

    popularity: tuple[np.ndarray, np.ndarray] | None = None  # (sorted item ids, scores)
    config_class: ClassVar[type[ArmConfig]] = PopConfig
    can_refit: ClassVar[bool] = False
    scores_are_probabilities: ClassVar[bool] = False
    same_order_for_everyone: ClassVar[bool] = True
    # Its counts (positives above the threshold), the train sample, and the ranking's passes.
    reads_common: ClassVar[frozenset[str]] = frozenset(
        {"positive_threshold", "train_fraction", "seed", "score_memory_mb"}
    )

    def _fit(self, train: pl.DataFrame, data: FitData) -> None:
        self.popularity = _popularity(train, self.config)

    def score(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        user_ids = np.asarray(user_ids, dtype=np.int64)
        item_ids = np.asarray(item_ids, dtype=np.int64)
        if user_ids.shape != item_ids.shape:
            raise ValueError(f"score: {user_ids.shape} user ids but {item_ids.shape} item ids")
        return self._popularity_of(item_ids)

    def factors(self, user_ids: np.ndarray, item_ids: np.ndarray) -> Factors:
        user_ids = np.asarray(user_ids, dtype=np.int64)
        item_ids = np.asarray(item_ids, dtype=np.int64)
        return Factors(np.ones((user_ids.size, 1)), self._popularity_of(item_ids)[:, None])

    def _popularity_of(self, item_ids: np.ndarray) -> np.ndarray:
        ids, scores = self.popularity
        if ids.size == 0:
            return np.zeros(item_ids.shape)
        position = np.clip(np.searchsorted(ids, item_ids), 0, ids.size - 1)
        return np.where(ids[position] == item_ids, scores[position], 0.0)

    def _save_state(self, folder: Path) -> None:
        ids, scores = self.popularity
        np.savez(folder / "popularity.npz", allow_pickle=False, item_ids=ids, scores=scores)

    def _load_state(self, folder: Path, device: str | None) -> None:
        with np.load(folder / "popularity.npz", allow_pickle=False) as arrays:
            # Arms saved before the arm API named the item `item_id` stored "movie_ids".
            ids = arrays["item_ids"] if "item_ids" in arrays else arrays["movie_ids"]
            self.popularity = (ids, arrays["scores"])


def _popularity(train: pl.DataFrame, config: PopConfig) -> tuple[np.ndarray, np.ndarray]:
    """Pop (Steck 2011): an item's count in train, scaled to [0, 1] by the largest."""
    rows = (
        train if config.popularity_of == "interactions" else train.filter(pl.col("rating") >= config.positive_threshold)
    )
    counts = rows.group_by("item_id").len().sort("item_id")
    ids = counts.get_column("item_id").to_numpy().astype(np.int64)
    values = counts.get_column("len").to_numpy().astype(np.float64)
    return ids, values / values.max() if values.size else values

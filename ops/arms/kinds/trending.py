"""Trending: the most popular items of the train window's most recent stretch, the same for
every user — the list production teams run beside Pop ("trending now", "popular this week").

Pop counts the whole train window (Steck 2011); trending counts only its last `window` of
time: a share of the window's span (`window=0.2`, the default: its last fifth) or a number of
days (`days=7`).  Items tied on the recent count (none in the stretch, above all) keep Pop's
order, so the list is never shorter than Pop's.  Nothing is learnt from the user: it cannot be
refit, and its scores are no probabilities.

    SIMAB_ARMS=random,pop,trending,fm                     # the last fifth of the train window
    SIMAB_ARMS="random,pop,week=trending;days=7,fm"       # the last seven days
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from ops.arms.base import FitData
from ops.arms.kinds.pop import Pop, PopConfig, _popularity
from ops.arms.trained import ArmConfig

# The recent stretch when the spec names none: the train window's last fifth (the "trending"
# list of the issue that asked for this kind: the last 20 % of the train window's time).
DEFAULT_WINDOW = 0.2
_DAY_S = 86_400


class TrendingConfig(PopConfig):
    """Pop's configuration and the recent stretch counted: a share of the train window's
    span (`window`) or a number of days (`days`), not both."""

    window: float | None = Field(DEFAULT_WINDOW, gt=0, le=1)
    days: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_stretch(self) -> TrendingConfig:
        if self.days is not None:
            if "window" in self.model_fields_set and self.window is not None:
                raise ValueError("give window (a share of the train window) or days, not both")
            self.window = None
        return self


@dataclass
class Trending(Pop):
    """Items ranked by their popularity in the train window's recent stretch (module docstring)."""

    config_class: ClassVar[type[ArmConfig]] = TrendingConfig
    can_refit: ClassVar[bool] = False
    scores_are_probabilities: ClassVar[bool] = False

    def _fit(self, train: pl.DataFrame, data: FitData) -> None:
        stamps = train.get_column("timestamp")
        end = int(stamps.max()) if train.height else 0
        span = end - int(stamps.min()) if train.height else 0
        days, window = self.config.days, self.config.window
        start = end - (days * _DAY_S if days is not None else (window or DEFAULT_WINDOW) * span)
        ids, everything = _popularity(train, self.config)
        recent_ids, recent = _popularity(train.filter(pl.col("timestamp") >= start), self.config)
        score = np.zeros(ids.size)
        score[np.searchsorted(ids, recent_ids)] = recent
        # Pop's order breaks the ties (an item nobody took lately ranks by its train count),
        # below every item of the recent stretch.
        self.popularity = (ids, (score + everything * 1e-6) / (1.0 + 1e-6))

    def _load_state(self, folder: Path, device: str | None) -> None:
        super()._load_state(folder, device)
        # Arms saved before the stretch was part of the configuration kept it beside.
        stretch = folder / "trending.json"
        if stretch.is_file():
            self.config = self.config.model_copy(update=json.loads(stretch.read_text()))

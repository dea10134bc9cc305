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
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ops.arms.base import FitData
from ops.arms.kinds.pop import Pop, _popularity

# The recent stretch when the spec names none: the train window's last fifth (the "trending"
# list of the issue that asked for this kind: the last 20 % of the train window's time).
DEFAULT_WINDOW = 0.2
_DAY_S = 86_400


@dataclass
class Trending(Pop):
    """Items ranked by their popularity in the train window's recent stretch (module docstring)."""

    window: float | None = DEFAULT_WINDOW  # share of the train window's span
    days: float | None = None  # or a number of days
    can_refit: ClassVar[bool] = False
    scores_are_probabilities: ClassVar[bool] = False

    @classmethod
    def from_spec(cls, name, params, settings, make) -> Trending:
        params = dict(params)
        window, days = params.pop("window", None), params.pop("days", None)
        arm = super().from_spec(name, params, settings, make)
        try:
            arm.days = None if days is None else float(days)
            arm.window = None if days is not None else float(DEFAULT_WINDOW if window is None else window)
        except (TypeError, ValueError):
            raise ValueError(f"arm {name!r}: window must be a share in (0, 1] and days a number of days") from None
        if window is not None and days is not None:
            raise ValueError(f"arm {name!r}: give window (a share of the train window) or days, not both")
        if arm.days is not None and arm.days <= 0:
            raise ValueError(f"arm {name!r}: days must be > 0, got {days!r}")
        if arm.window is not None and not 0 < arm.window <= 1:
            raise ValueError(f"arm {name!r}: window must be a share in (0, 1] of the train window, got {window!r}")
        return arm

    def _fit(self, train: pl.DataFrame, data: FitData) -> None:
        stamps = train.get_column("timestamp")
        end = int(stamps.max()) if train.height else 0
        span = end - int(stamps.min()) if train.height else 0
        start = end - (self.days * _DAY_S if self.days is not None else (self.window or DEFAULT_WINDOW) * span)
        ids, everything = _popularity(train, self.config)
        recent_ids, recent = _popularity(train.filter(pl.col("timestamp") >= start), self.config)
        score = np.zeros(ids.size)
        score[np.searchsorted(ids, recent_ids)] = recent
        # Pop's order breaks the ties (an item nobody took lately ranks by its train count),
        # below every item of the recent stretch.
        self.popularity = (ids, (score + everything * 1e-6) / (1.0 + 1e-6))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "window": self.window, "days": self.days}

    def _save_state(self, folder: Path) -> None:
        super()._save_state(folder)
        (folder / "trending.json").write_text(json.dumps({"window": self.window, "days": self.days}))

    def _load_state(self, folder: Path, device: str | None) -> None:
        super()._load_state(folder, device)
        stretch = json.loads((folder / "trending.json").read_text())
        self.window, self.days = stretch["window"], stretch["days"]

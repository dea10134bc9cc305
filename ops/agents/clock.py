"""The simulation clock: when the agents stand, and what the catalogue looks like from there.

An offline A/B test stands where the held-out test window starts: the arms were trained on the
train window and chosen on the validation window, and the test window is what users did next.
The agents stand there too.  Two instants matter (docs/agents.md, "The simulation clock"):

- the **fit clock**, the end of the train window: the embedded brain's features are read from
  the history up to it, and its models fitted on what users took up next (the validation
  window) — the only place where the log can check a prediction without the test window;
- the **simulation clock**, the end of the validation window: the agents' memories and
  profiles hold their history up to it (train + validation), and the brain reads the same
  features as of it with the coefficients fitted at the fit clock.

What the catalogue looks like from a clock (`CatalogueAtClock`): each item's popularity
weighted by recency (a half-life fitted on the validation window, `fit_half_life`: the
half-life under which the train window's decayed counts best predict which items the
validation window's interactions go to), its trend (recent against long-run popularity) and
its age (time since its first interaction in the log).  A trending list, a model that
surfaces what is rising, is then read by agents who know what is rising.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

DAY_S = 86_400.0
# Half-lives tried by `fit_half_life`, in days; inf is no decay (the window's plain counts).
HALF_LIFE_GRID_DAYS: tuple[float, ...] = (1.0, 2.0, 4.0, 7.0, 14.0, 30.0, 60.0, 120.0, 240.0, 480.0, float("inf"))
# Pseudo-count of every item when the decayed counts are read as a distribution over the
# catalogue (an item with no recent interaction keeps a small chance).
POPULARITY_PRIOR = 0.5


@dataclass(frozen=True)
class Clock:
    """The two instants of a run, unix seconds: the end of the train window (`fit`) and the end
    of the validation window (`simulation`)."""

    fit: int
    simulation: int

    @classmethod
    def of(cls, train: pl.DataFrame, valid: pl.DataFrame) -> Clock:
        fit = _last(train)
        simulation = max(fit, _last(valid)) if valid.height else fit
        return cls(fit, simulation)


def _last(frame: pl.DataFrame) -> int:
    return int(frame.get_column("timestamp").max()) if frame.height else 0


def history_until(train: pl.DataFrame, valid: pl.DataFrame | None) -> pl.DataFrame:
    """Every interaction up to the simulation clock (train, then validation), with `window`
    0 for the train window and 1 for the validation window, so that a memory's train part
    stays its first part whatever the timestamps at the boundary."""
    parts = [train.with_columns(pl.lit(0, dtype=pl.Int8).alias("window"))]
    if valid is not None and valid.height:
        parts.append(valid.select(train.columns).with_columns(pl.lit(1, dtype=pl.Int8).alias("window")))
    return pl.concat(parts, how="vertical_relaxed")


@dataclass(frozen=True)
class CatalogueAtClock:
    """Each catalogue item as seen from one clock (module docstring), in `item_ids` order."""

    clock: int
    half_life_days: float
    count: np.ndarray  # interactions up to the clock
    decayed: np.ndarray  # the same, each weighted 0.5 ** (age / half-life)
    first_seen: np.ndarray  # unix seconds of the item's first interaction, NaN when none

    @property
    def trend(self) -> np.ndarray:
        """log of the recent share against the long-run share: 0 for an item whose
        interactions are all recent, falling as they age; 0 for an item never seen."""
        total, recent = self.count.sum(), self.decayed.sum()
        if total <= 0 or recent <= 0:
            return np.zeros(len(self.count))
        out = np.log((self.decayed / recent + 1e-9) / (self.count / total + 1e-9))
        return np.where(self.count > 0, out, 0.0)

    @property
    def age_days(self) -> np.ndarray:
        """Days from the item's first interaction to the clock; 0 for an item never seen (to
        the log it is new)."""
        return np.where(np.isfinite(self.first_seen), np.maximum(self.clock - self.first_seen, 0.0) / DAY_S, 0.0)


def catalogue_at(history: pl.DataFrame, item_ids: np.ndarray, clock: int, half_life_days: float) -> CatalogueAtClock:
    """`CatalogueAtClock` from the interactions of `history` up to `clock` (RATINGS columns
    `item_id`, `timestamp`); items of `item_ids` outside the history count zero."""
    ids = np.asarray(item_ids, dtype=np.int64)
    past = history.filter(pl.col("timestamp") <= clock)
    count, decayed, first = _per_item(past, ids, clock, half_life_days)
    return CatalogueAtClock(int(clock), float(half_life_days), count, decayed, first)


def _per_item(history: pl.DataFrame, ids: np.ndarray, clock: int, half_life_days: float):
    n = len(ids)
    count, decayed, first = np.zeros(n), np.zeros(n), np.full(n, np.nan)
    if history.height == 0 or n == 0:
        return count, decayed, first
    age = (pl.lit(clock, dtype=pl.Float64) - pl.col("timestamp").cast(pl.Float64)).clip(lower_bound=0.0) / DAY_S
    # No decay (inf): every interaction weighs 1, the window's plain count.
    weight = pl.len().cast(pl.Float64) if not np.isfinite(half_life_days) else (0.5 ** (age / half_life_days)).sum()
    per = history.group_by("item_id").agg(
        pl.len().alias("n"), weight.alias("w"), pl.col("timestamp").min().alias("first")
    )
    movie = per.get_column("item_id").to_numpy().astype(np.int64)
    pos = np.searchsorted(ids, movie)
    ok = (pos < n) & (ids[np.minimum(pos, n - 1)] == movie)
    count[pos[ok]] = per.get_column("n").to_numpy()[ok]
    decayed[pos[ok]] = per.get_column("w").to_numpy()[ok]
    first[pos[ok]] = per.get_column("first").to_numpy().astype(np.float64)[ok]
    return count, decayed, first


def fit_half_life(
    train: pl.DataFrame,
    valid: pl.DataFrame,
    item_ids: np.ndarray,
    grid_days: Sequence[float] = HALF_LIFE_GRID_DAYS,
) -> tuple[float, list[dict]]:
    """The popularity half-life, in days, under which the train window's decayed counts at
    the fit clock best predict the items of the validation window's interactions (the mean
    log-likelihood of a validation interaction under p(item) ∝ decayed count + prior), and
    every half-life tried.  Never reads the test window.  Without validation interactions:
    no decay (inf)."""
    ids = np.asarray(item_ids, dtype=np.int64)
    clock = Clock.of(train, valid).fit
    target = np.zeros(len(ids))
    if valid.height:
        got = valid.group_by("item_id").len()
        pos = np.searchsorted(ids, got.get_column("item_id").to_numpy().astype(np.int64))
        ok = pos < len(ids)
        np.add.at(target, pos[ok], got.get_column("len").to_numpy()[ok])
    grid = []
    for h in grid_days:
        decayed = _per_item(train.filter(pl.col("timestamp") <= clock), ids, clock, h)[1]
        p = (decayed + POPULARITY_PRIOR) / (decayed + POPULARITY_PRIOR).sum()
        ll = float((target * np.log(p)).sum() / max(target.sum(), 1.0))
        grid.append({"half_life_days": float(h), "validation_log_likelihood": ll})
    if target.sum() == 0:
        return float("inf"), grid
    best = max(grid, key=lambda g: g["validation_log_likelihood"])
    return best["half_life_days"], grid

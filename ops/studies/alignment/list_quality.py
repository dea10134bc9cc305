"""List quality (A/B Agent §3.3.1 / Fig. 5).

Sandbox sessions — the one simulation path, `ops.simulation.runner.simulate`, every agent on
its own list — on lists of 20 that mix held-out liked items (rated >= 4) with items the
user never rated, at 1:9, 1:4 and 1:1 — or, where users like too few held-out items for
those, shorter lists at the ratios they can fill (`ops.studies.alignment.mixed_lists.choose_ladder`:
on Steam, 6 items at 1:5, 1:2, 1:1).  If the agents share their users' tastes, CTR, CVR
and AR rise with the ratio.  The read-out is the A/B read-out's (`ops.readout.ab_readout`,
each ratio an "arm", the poorest lists the control): per ratio the mean over agents with its
bootstrap interval, each ratio against the poorest paired over agents and Holm-corrected;
`ListQuality.ratios` orders them by their share of relevant items.

The strength of the response is summarised as an elasticity: the least-squares slope of
log(metric) on log(share of relevant items in the list) over the three ratios, with a
percentile-bootstrap interval over agents.  Real users' elasticity on the same lists
(`real_response`) is the share of list items they actually rated in the window, which is
the share of relevant items by construction: 1.0.  A brain that clicks and watches exactly
the relevant items reaches it; one blind to taste scores 0.  That is the yardstick the
embedded brain is calibrated to (`ops.studies.alignment.calibration`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from ops.agents.session import AgentSession
from ops.readout.ab_readout import ABReadout, ab_readout
from ops.readout.agent_metrics import LABELS
from ops.readout.readout_config import ReadoutConfig
from ops.readout.statistics import bootstrap_means, named_rng, percentile_interval
from ops.schema import TOP_K
from ops.simulation.brains.embedded.config import ListResponse
from ops.simulation.brains.protocol import Brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate
from ops.storage.codec import load_fields, save_fields

# A/B Agent §3.3.1: "positive-to-negative ratios of 1:9, 1:4, and 1:1".
QUALITY_RATIOS: tuple[int, ...] = (9, 4, 1)
QUALITY_METRICS: tuple[str, ...] = ("ctr", "cvr", "average_rating")
ELASTICITY = {
    "metric": pl.Utf8,
    "side": pl.Utf8,
    "agents": pl.Int64,
    "elasticity": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
}


@dataclass
class ListQuality:
    """readout: the A/B read-out with one "arm" per ratio (control 1:9); elasticity:
    ELASTICITY rows, simulated and real; rises: metric -> whether its mean rises from ratio
    to ratio and 1:1 beats 1:9 with an interval clear of 0."""

    readout: ABReadout
    elasticity: pl.DataFrame
    rises: dict[str, bool]
    shares: dict[str, float]  # ratio -> mean share of relevant items in the lists
    calibration: object | None = None  # the embedded brain's ListResponse, when it was calibrated
    brain: str = ""  # the brain's name (events' `brain` column), set by whoever ran it

    def save(self, folder: Path) -> None:
        """Into `folder` without pickle: the read-out through its codec, the rest by `ops.storage.codec.save_fields`."""
        save_fields(folder, "ListQuality", 1, self)

    @classmethod
    def load(cls, folder: Path) -> ListQuality:
        return load_fields(cls, folder, "ListQuality", 1, {"readout": ABReadout, "calibration": ListResponse})

    @property
    def ratios(self) -> list[str]:
        """The ratios' names from the poorest lists to the richest (by share of relevant items)."""
        return quality_order(self.shares)

    def spread(self, metric: str = "ctr") -> dict | None:
        """The trust figure of this protocol: `metric` on the richest lists (1:1) minus on the
        poorest (1:9), by their share of relevant items, paired over agents, with its interval —
        how far the brain tells good lists from bad ones at all (label, best, worst, agents,
        difference, ci_low, ci_high); None when the read-out lacks the comparison (the poorest
        lists are the read-out's control)."""
        order = self.ratios
        if len(order) < 2:
            return None
        best, worst = order[-1], order[0]
        rows = self.readout.comparisons.filter(
            (pl.col("metric") == metric) & (pl.col("arm") == best) & (pl.col("control") == worst)
        )
        if not rows.height or rows.get_column("difference")[0] is None:
            return None
        r = rows.row(0, named=True)
        means = {
            a["arm"]: a["mean"] for a in self.readout.arms.filter(pl.col("metric") == metric).iter_rows(named=True)
        }
        return {
            "metric": metric,
            "label": LABELS.get(metric, metric),
            "best": best,
            "worst": worst,
            "agents": r["n"],
            "difference": r["difference"],
            "ci_low": r["ci_low"],
            "ci_high": r["ci_high"],
            # What the power of the spread needs (`ops.studies.alignment.trust.list_quality_seen`).
            "best_mean": means.get(best),
            "worst_mean": means.get(worst),
            "best_share": self.shares.get(best),
            "worst_share": self.shares.get(worst),
            "agent_variance": self._difference_variance(metric, best, worst),
        }

    def _difference_variance(self, metric: str, best: str, worst: str) -> float | None:
        """The variance over agents of one agent's `metric` on the best lists minus on the worst."""
        per_agent = self.readout.per_agent.filter(pl.col("arm").is_in([best, worst]))
        wide = per_agent.pivot(on="arm", index="user_id", values=metric)
        if best not in wide.columns or worst not in wide.columns:
            return None
        differences = wide.select(pl.col(best) - pl.col(worst)).drop_nulls().to_series()
        return float(differences.var()) if differences.len() >= 2 else None

    def table(self) -> pl.DataFrame:
        order = {r: i for i, r in enumerate(self.ratios)}
        table = self.readout.table()
        keep = ["arm"] + [c for c in ("CTR", "CVR", "AR") if c in table.columns]
        return (
            table.select(keep).rename({"arm": "ratio"}).sort(pl.col("ratio").replace_strict(order, default=len(order)))
        )

    def metrics(self) -> dict[str, float]:
        """Each ratio's means, the elasticities, and the CTR spread (the verdict's trust figure)."""
        metrics = {
            f"{r['arm'].replace(':', '_')}_{r['metric']}": r["mean"] for r in self.readout.arms.iter_rows(named=True)
        }
        metrics |= {
            f"elasticity_{r['metric']}_{r['side']}": r["elasticity"] for r in self.elasticity.iter_rows(named=True)
        }
        spread = self.spread()
        if spread is not None:
            metrics |= {"spread_ctr": spread["difference"], "spread_ctr_ci_low": spread["ci_low"]}
        return metrics

    def tables(self) -> dict[str, pl.DataFrame]:
        return {"list_quality": self.readout.arms, "list_quality_elasticity": self.elasticity}


def as_top_k(lists: pl.DataFrame) -> pl.DataFrame:
    """The mixed lists (LIST_SCHEMA) as a TOP_K table, one "arm" per ratio, rank = position."""
    return lists.select(
        pl.col("ratio").alias("arm"),
        "user_id",
        pl.col("position").alias("rank"),
        "item_id",
        pl.lit(0.0).alias("score"),
    ).cast(TOP_K)


def simulate_lists(
    brain: Brain,
    sessions: Sequence[AgentSession],
    lists: pl.DataFrame,
    catalogue: Catalogue,
    config: SimulationConfig | None = None,
    seed: int = 0,
    concurrency: int = 1,
    sessions_per_agent: Mapping[int, int] | None = None,
) -> pl.DataFrame:
    """Every agent's sandbox session on its list at every ratio: the events of all ratios
    (`concurrency` agents at once, for a brain that waits on the network).  `lists`: ratio
    (each value simulated as an "arm"), user_id, position, item_id — the mixed lists of
    LIST_SCHEMA, or any lists in that shape (`ops.studies.alignment.sensitivity`).
    `sessions_per_agent`: user -> independent sessions of that agent on every list (session
    numbers 0, 1, …, as the simulation numbers them); default one each."""
    return simulate(
        brain,
        sessions,
        as_top_k(lists),
        catalogue,
        config or SimulationConfig(progress=False),
        seed=seed,
        concurrency=concurrency,
        sessions_per_agent=sessions_per_agent or {},
    )


def list_quality(
    events: pl.DataFrame,
    lists: pl.DataFrame,
    window: pl.DataFrame | None = None,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> ListQuality:
    """The read-out of `simulate_lists`' events; `window` (the held-out ratings the positives
    came from) adds real users' response on the same lists."""
    shares = dict(
        lists.group_by("ratio", "user_id")
        .agg(pl.col("relevant").mean())
        .group_by("ratio")
        .agg(pl.col("relevant").mean())
        .iter_rows()
    )
    order = quality_order(shares)
    # The control is the poorest lists: 1:9 on the papers' yardstick, 1:5 or 1:3 on a shorter one.
    readout = ab_readout(
        events,
        control=order[0],
        config=ReadoutConfig(n_bootstrap=n_bootstrap, seed=seed, confidence=confidence),
    )
    per_agent = readout.per_agent.select("arm", "user_id", *QUALITY_METRICS).rename({"arm": "ratio"})
    frames = [elasticity(per_agent, shares, m, "simulated", n_bootstrap, confidence, seed) for m in QUALITY_METRICS]
    if window is not None:
        frames.append(
            elasticity(real_response(lists, window), shares, "rated_share", "real", n_bootstrap, confidence, seed)
        )
    rises = {m: _rises(readout, m, order) for m in QUALITY_METRICS}
    return ListQuality(readout, pl.concat(frames), rises, shares)


def real_response(lists: pl.DataFrame, window: pl.DataFrame) -> pl.DataFrame:
    """ratio, user_id, rated_share: the share of each list's items its user rated in `window`."""
    rated = window.select("user_id", "item_id").with_columns(pl.lit(True).alias("rated"))
    return (
        lists.join(rated, on=["user_id", "item_id"], how="left")
        .group_by("ratio", "user_id")
        .agg(pl.col("rated").fill_null(False).mean().alias("rated_share"))
    )


def elasticity(
    per_agent: pl.DataFrame,
    shares: dict[str, float],
    metric: str,
    side: str,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pl.DataFrame:
    """One ELASTICITY row: the slope of log(mean `metric`) on log(share of relevant items)
    across ratios, and its bootstrap interval over the agents seen at every ratio (paired)."""
    ratios = [r for r in sorted(shares, key=lambda r: shares[r]) if r in set(per_agent.get_column("ratio").to_list())]
    wide = (
        per_agent.select("ratio", "user_id", metric)
        .pivot(on="ratio", index="user_id", values=metric)
        .select("user_id", *ratios)
    )
    values = wide.select(ratios).to_numpy().astype(float)
    x = np.log([shares[r] for r in ratios])
    if len(ratios) < 2 or values.shape[0] < 2:
        return pl.DataFrame(
            [
                {
                    "metric": metric,
                    "side": side,
                    "agents": values.shape[0],
                    "elasticity": None,
                    "ci_low": None,
                    "ci_high": None,
                }
            ],
            schema=ELASTICITY,
        )
    point = _slope(x, np.nanmean(values, axis=0))
    boot = bootstrap_means(values, n_bootstrap, named_rng(seed, "elasticity", metric, side))
    slopes = np.array([_slope(x, row) for row in boot])
    lo, hi = percentile_interval(slopes, confidence)
    return pl.DataFrame(
        [
            {
                "metric": metric,
                "side": side,
                "agents": values.shape[0],
                "elasticity": point,
                "ci_low": float(lo),
                "ci_high": float(hi),
            }
        ],
        schema=ELASTICITY,
    )


def _slope(x: np.ndarray, means: np.ndarray) -> float:
    if not np.all(np.isfinite(means)) or np.any(means <= 0):
        return float("nan")
    return float(np.polyfit(x, np.log(means), 1)[0])


def quality_order(shares: dict[str, float]) -> list[str]:
    """Ratio names by their share of relevant items, poorest first."""
    return sorted(shares, key=lambda r: (shares[r], r))


def _rises(readout: ABReadout, metric: str, order: Sequence[str]) -> bool:
    means = {r["arm"]: r["mean"] for r in readout.arms.filter(pl.col("metric") == metric).iter_rows(named=True)}
    if any(means.get(r) is None for r in order):
        return False
    monotone = all(means[a] < means[b] for a, b in zip(order, order[1:]))
    best = readout.comparisons.filter((pl.col("metric") == metric) & (pl.col("arm") == order[-1]))
    return monotone and best.height == 1 and (best.get_column("ci_low")[0] or 0.0) > 0

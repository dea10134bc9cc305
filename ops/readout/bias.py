"""The simulator's own bias: does the simulation favour lists that look like the brain's
own taste, beyond what they are worth offline?

Two figures, from what the read-out already has (the agents' CTR per arm, each test user's
NDCG@20 per arm, the top-20 lists); the mirror arm (`ops/arms/kinds/mirror.py`: the brain's own
ranking, simulated like an arm) makes them possible.

- **The curve.**  Across the candidate arms (every simulated arm but the mirror), simulated
  CTR against offline NDCG@20 is fitted by a monotone curve (isotonic regression: a better
  list offline is never predicted less CTR), read between the arms by straight lines: the
  CTR the offline metric predicts.  Not a straight line through them all: CTR saturates
  where lists are good (on Steam, DeepFM, FM, Pop and trending at CTR 0.70-0.75 for NDCG@20
  0.061-0.093, random and the ALS far below), and a line steep enough to join random to
  the good arms overshoots every list better than the best arm.  Beyond the arms' NDCG@20
  the curve goes on with the slope of a least-squares line through the better half of the
  arms (by NDCG@20), where the saturation is.  An arm's *residual* is its CTR minus the
  prediction of the curve through the other arms: what the simulation gives it beyond (or
  below) its offline standing.
- **The mirror's excess**: the mirror's CTR minus the CTR the curve predicts from its own
  NDCG@20, with a 95 % bootstrap interval (agents resampled for CTR, paired across arms
  when every arm saw the same agents; test users resampled for NDCG@20; the curve refitted
  in every replicate).  It says how much the simulation favours the brain's own ranking
  beyond its offline standing; beside it, the mirror's simulated and offline rank.
- **Similarity and residual.**  Every candidate arm's similarity to the brain's scorer is
  the mean overlap of its top-20 with the mirror's, over the users both list
  (|A ∩ M| / 20).  If the simulation rewards resemblance to its own scorer, the arms that
  resemble it more get larger residuals.  The test: Spearman's ρ between residual and
  overlap over the candidate arms, one-sided (ρ > 0), its p-value exact over all n!
  orderings of the arms (ties in either column averaged).  It is information, not the
  warning: it can show little with few arms — the smallest p that n arms can reach is 1/n!,
  1/6 with 3 arms, 1/24 with 4, 1/120 with 5 — and a residual on a curve fitted to the same
  few arms is itself noisy.
- **The warning.**  The verdict warns whenever the mirror's excess has its interval clear of
  0 and is at least `EXCESS_FLOOR` (2 CTR points): the simulation gives the brain's own
  ranking more CTR (or less) than its offline standing predicts, which no count of arms can
  excuse.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.stats import rankdata

from ops.figures import table_markdown
from ops.readout.statistics import multiplicities, named_rng, percentile_interval

EXACT_MAX_ARMS = 8  # 8! = 40,320 orderings; beyond, a seeded sample of them
# An excess smaller than this (CTR) is no warning even with its interval clear of 0: with
# thousands of paired agents the interval narrows to a point or two of CTR (Steam, 2,154
# agents: -0.007 [-0.016, -0.001]), below what the list-quality spread's floor (the same
# 0.02, SIMAB_LIST_QUALITY_SPREAD_FLOOR) calls a response to list quality at all.
EXCESS_FLOOR = 0.02
LIST_LENGTH = 20

ARMS_SCHEMA = {
    "arm": pl.Utf8,
    "role": pl.Utf8,  # "candidate" / "mirror"
    "ctr": pl.Float64,
    "ndcg_at_k": pl.Float64,
    "predicted_ctr": pl.Float64,
    "residual": pl.Float64,
    "overlap_with_mirror": pl.Float64,
    "simulated_rank": pl.Int64,
    "offline_rank": pl.Int64,
}


@dataclass(frozen=True)
class SimulatorBias:
    """The figures of the module docstring.  `arms`: ARMS_SCHEMA rows, candidates and
    mirrors; the mirror's excess with its interval (None without a mirror, or with fewer
    than two candidates to fit the line); Spearman's ρ(residual, overlap) over the
    candidates with its one-sided p and the smallest p their number allows."""

    arms: pl.DataFrame
    mirror: str | None
    excess: float | None
    excess_ci_low: float | None
    excess_ci_high: float | None
    rho: float | None
    p_value: float | None
    min_p_value: float | None
    candidates: int

    @property
    def warning(self) -> str | None:
        """The verdict's warning, when the mirror's excess has its interval clear of 0 (module docstring)."""
        if self.excess is None or self.excess_ci_low is None or self.excess_ci_high is None:
            return None
        if self.excess_ci_low <= 0 <= self.excess_ci_high or abs(self.excess) < EXCESS_FLOOR:
            return None
        said = f"{self.excess:+.3f} [{self.excess_ci_low:+.3f}, {self.excess_ci_high:+.3f}]"
        if self.excess_ci_low > 0:
            return (
                f"the simulation favours the brain's own ranking ({self.mirror}): its CTR beyond what its NDCG@20 "
                f"predicts is {said}, clear of 0 — arms whose lists resemble the brain's click model may be favoured "
                "beyond their offline standing too"
            )
        return (
            f"the simulation disfavours the brain's own ranking ({self.mirror}): its CTR beyond what its NDCG@20 "
            f"predicts is {said}, clear of 0 — the simulated CTR does not follow the offline metric for lists unlike "
            "the candidates'"
        )

    def verdict_line(self) -> str:
        """One sentence for the verdict's first lines."""
        if self.mirror is None:
            return (
                "simulator bias: not measured (add the arm mirror to SIMAB_ARMS: the brain's own ranking, no training)"
            )
        row = self.arms.filter(pl.col("arm") == self.mirror).row(0, named=True)
        n = self.arms.height
        where = (
            f"the mirror ({self.mirror}) is {_ordinal(row['simulated_rank'])} of {n} arms on CTR and "
            f"{_ordinal(row['offline_rank'])} on NDCG@20"
        )
        if self.excess is None:
            return f"simulator bias: {where}; too few candidate arms for the CTR its NDCG@20 predicts"
        line = (
            f"simulator bias: {where}; CTR beyond what its NDCG@20 predicts {self.excess:+.3f} "
            f"[{self.excess_ci_low:+.3f}, {self.excess_ci_high:+.3f}]"
        )
        if self.rho is not None:
            line += (
                f"; ρ(residual, overlap with it) = {self.rho:+.2f} over {self.candidates} arms (p = {self.p_value:.2f})"
            )
        return line

    def to_markdown(self) -> str:
        lines = ["## Simulator bias: the brain's own ranking (mirror arm)", ""]
        if self.mirror is None:
            lines += [
                "Not measured: no mirror arm was simulated. Add `mirror` to `SIMAB_ARMS` (the brain's own top-20, "
                "no training; one more simulation partition) to see how far the simulation favours lists that "
                "resemble its click model.",
                "",
            ]
        else:
            lines += [
                f"`{self.mirror}` ranks each user's unseen items by the embedded brain's click model. Residual = "
                "simulated CTR − the CTR that a monotone curve through the candidate arms' (NDCG@20, CTR) "
                f"predicts; overlap = mean |top-20 ∩ {self.mirror}'s top-20| / 20 over the users both list.",
                "",
            ]
        show = self.arms.select(
            "arm",
            "role",
            pl.col("ctr").round(4).alias("CTR"),
            pl.col("ndcg_at_k").round(4).alias("NDCG@20"),
            pl.col("predicted_ctr").round(4).alias("CTR predicted by NDCG@20"),
            pl.col("residual").round(4),
            pl.col("overlap_with_mirror").round(3).alias("overlap with mirror"),
            "simulated_rank",
            "offline_rank",
        )
        lines += [table_markdown(show), ""]
        if self.mirror is not None:
            lines.append("- " + self.verdict_line().removeprefix("simulator bias: "))
        if self.rho is None:
            lines.append(f"- residual against overlap: not tested ({self.candidates} candidate arm(s); needs 3)")
        else:
            lines.append(
                f"- Spearman ρ(residual, overlap) = {self.rho:+.3f} over {self.candidates} candidate arms, one-sided "
                f"exact p = {self.p_value:.3f}; the smallest p {self.candidates} arms can give is "
                f"{self.min_p_value:.3f}.  Information only: the warning rests on the mirror's excess."
            )
        return "\n".join(lines) + "\n\n"


def simulator_bias(
    per_agent: pl.DataFrame,
    offline_per_user: pl.DataFrame,
    lists: Mapping[str, pl.DataFrame],
    mirrors: Sequence[str],
    paired: bool = True,
    simulated: str = "ctr",
    offline: str = "ndcg_at_k",
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    offline_paired: bool = True,
) -> SimulatorBias:
    """The figures of the module docstring.  `per_agent`: arm, user_id, <simulated>
    (ABReadout.per_agent); `offline_per_user`: arm, user_id, <offline>
    (`ops.readout.fidelity.offline_per_user`); `lists`: each arm's top-k lists (TOP_K);
    `mirrors`: the arms that are the brain's own ranking (the first one simulated is used)."""
    arms = sorted(set(per_agent.get_column("arm").to_list()) & set(offline_per_user.get_column("arm").to_list()))
    mirror = next((a for a in sorted(mirrors) if a in arms), None)
    candidates = [a for a in arms if a not in set(mirrors)]
    sim_units, sim_matrix = _wide(per_agent, arms, simulated, paired)
    # `offline_paired` False: the offline side's units differ arm by arm (a random bucket's
    # items that fall in each list), so each arm is resampled on its own.
    off_units, off_matrix = _wide(offline_per_user, arms, offline, offline_paired)
    ctr = _means(sim_matrix)
    ndcg = _means(off_matrix)
    cand = [arms.index(a) for a in candidates]
    line = _curve(ndcg[cand], ctr[cand])
    predicted = line(ndcg) if line is not None else np.full(len(arms), np.nan)
    # A candidate's own prediction comes from the curve through the others (a monotone curve
    # passes through the points it is fitted on, leaving no residual to compare).
    for i in cand:
        others = [j for j in cand if j != i]
        own = _curve(ndcg[others], ctr[others])
        predicted[i] = own(ndcg[i : i + 1])[0] if own is not None else np.nan
    overlap = _overlaps(lists, arms, mirror)
    rows = []
    for i, a in enumerate(arms):
        rows.append(
            {
                "arm": a,
                "role": "mirror" if a in mirrors else "candidate",
                "ctr": _float(ctr[i]),
                "ndcg_at_k": _float(ndcg[i]),
                "predicted_ctr": _float(predicted[i]),
                "residual": _float(ctr[i] - predicted[i]),
                "overlap_with_mirror": overlap.get(a),
                "simulated_rank": _rank(ctr, i),
                "offline_rank": _rank(ndcg, i),
            }
        )
    table = pl.DataFrame(rows, schema=ARMS_SCHEMA)
    excess = lo = hi = None
    if mirror is not None and line is not None:
        m = arms.index(mirror)
        excess = float(ctr[m] - predicted[m])
        rng = named_rng(seed, 7101)
        boot_ctr = _bootstrap(sim_units, sim_matrix, n_bootstrap, rng)
        boot_ndcg = _bootstrap(off_units, off_matrix, n_bootstrap, rng)
        replicates = np.full(n_bootstrap, np.nan)
        for b in range(n_bootstrap):
            fitted = _curve(boot_ndcg[b, cand], boot_ctr[b, cand])
            if fitted is not None:
                replicates[b] = boot_ctr[b, m] - float(fitted(boot_ndcg[b, m : m + 1])[0])
        lo, hi = (float(v) for v in percentile_interval(replicates, confidence))
    rho = p = min_p = None
    tested = table.filter((pl.col("role") == "candidate") & pl.col("residual").is_not_null())
    tested = tested.filter(pl.col("overlap_with_mirror").is_not_null())
    if tested.height >= 3:
        rho, p = spearman_one_sided(
            tested.get_column("residual").to_numpy(), tested.get_column("overlap_with_mirror").to_numpy(), seed
        )
        min_p = 1.0 / math.factorial(tested.height)
    return SimulatorBias(
        table, mirror, excess, lo, hi, rho, p, min_p, tested.height if rho is not None else len(candidates)
    )


def spearman_one_sided(x: np.ndarray, y: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """Spearman's ρ of x and y and the one-sided p of ρ > 0 under exchangeability: the share
    of orderings of y (all of them up to `EXACT_MAX_ARMS` values, else 20,000 seeded ones)
    whose ρ is at least the observed one."""
    rx, ry = rankdata(x), rankdata(y)
    observed = _pearson(rx, ry)
    if not np.isfinite(observed):
        return float("nan"), 1.0
    n = len(rx)
    if n <= EXACT_MAX_ARMS:
        values = [_pearson(rx, ry[list(order)]) for order in itertools.permutations(range(n))]
    else:
        rng = named_rng(seed, 7102)
        values = [_pearson(rx, ry[rng.permutation(n)]) for _ in range(20000)]
    values = np.asarray(values)
    return float(observed), float(np.mean(values >= observed - 1e-12))


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    denominator = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denominator) if denominator > 0 else float("nan")


def _wide(frame: pl.DataFrame, arms: list[str], metric: str, paired: bool) -> tuple[list[np.ndarray], np.ndarray]:
    """Units × arms values: with `paired`, the units every arm has (one resampling for all);
    otherwise each arm's own units stacked (resampled arm by arm)."""
    frame = frame.filter(pl.col("arm").is_in(arms)).select("arm", "user_id", metric).drop_nulls()
    if paired:
        wide = frame.pivot(on="arm", index="user_id", values=metric).drop_nulls()
        matrix = wide.select([a for a in arms if a in wide.columns]).to_numpy().astype(float)
        if matrix.shape[1] == len(arms) and matrix.shape[0] >= 2:
            return [np.arange(matrix.shape[0])], matrix
    # Unpaired: one block per arm, NaN elsewhere, each resampled on its own.
    columns = [frame.filter(pl.col("arm") == a).get_column(metric).to_numpy().astype(float) for a in arms]
    size = max((c.size for c in columns), default=0)
    matrix = np.full((size, len(arms)), np.nan)
    for j, c in enumerate(columns):
        matrix[: c.size, j] = c
    return [np.flatnonzero(np.isfinite(matrix[:, j])) for j in range(len(arms))], matrix


def _means(matrix: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.nanmean(matrix, axis=0) if matrix.size else np.full(matrix.shape[1], np.nan)


def _bootstrap(units: list[np.ndarray], matrix: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, arms) replicate means: one shared resampling of rows when `units` is one block
    (paired), else each arm's rows resampled on their own."""
    out = np.full((n, matrix.shape[1]), np.nan)
    if len(units) == 1:
        counts = multiplicities(units[0].size, n, rng)
        out[:] = counts @ matrix[units[0]] / units[0].size
        return out
    for j, rows in enumerate(units):
        if rows.size:
            counts = multiplicities(rows.size, n, rng)
            out[:, j] = counts @ matrix[rows, j] / rows.size
    return out


def _curve(x: np.ndarray, y: np.ndarray):
    """The module docstring's curve through the points (x, y) as a function of x, or None
    with fewer than two distinct x: isotonic (non-decreasing) in y, linear between its knots,
    beyond the largest x the slope of the least-squares line through the points whose x is
    at least the median x (the whole line's with fewer than two of them; never below 0), below
    the smallest x that of the whole line."""
    # lazy: scikit-learn
    from sklearn.isotonic import IsotonicRegression

    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 2 or np.ptp(x) == 0:
        return None
    fit = IsotonicRegression(increasing=True, out_of_bounds="clip").fit(x, y)
    upper = x >= np.median(x)
    whole = _line(x, y)
    top = _line(x[upper], y[upper]) if upper.sum() >= 2 and np.ptp(x[upper]) > 0 else whole
    high_slope = max(top[1], 0.0) if top is not None else 0.0
    low_slope = max(whole[1], 0.0) if whole is not None else 0.0
    lo, hi = float(x.min()), float(x.max())

    def predict(values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        out = fit.predict(np.clip(values, lo, hi))
        out = out + np.where(values > hi, (values - hi) * high_slope, 0.0)
        return out + np.where(values < lo, (values - lo) * low_slope, 0.0)

    return predict


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """Least-squares intercept and slope of y on x; None with fewer than two distinct x."""
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 2 or np.ptp(x) == 0:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def _overlaps(lists: Mapping[str, pl.DataFrame], arms: list[str], mirror: str | None) -> dict[str, float]:
    """Each arm's mean |top-20 ∩ mirror's top-20| / 20 over the users both list."""
    if mirror is None or mirror not in lists:
        return {}
    top = lists[mirror].filter(pl.col("rank") <= LIST_LENGTH).select("user_id", "item_id")
    users = top.select("user_id").unique()
    out = {}
    for a in arms:
        if a not in lists:
            continue
        mine = lists[a].filter(pl.col("rank") <= LIST_LENGTH).select("user_id", "item_id")
        both = mine.join(users, on="user_id", how="semi")
        if both.height == 0:
            continue
        shared = both.join(top, on=["user_id", "item_id"], how="inner").group_by("user_id").len()
        per_user = both.select("user_id").unique().join(shared, on="user_id", how="left").fill_null(0)
        out[a] = float(per_user.get_column("len").mean()) / LIST_LENGTH
    return out


def _rank(values: np.ndarray, i: int) -> int | None:
    """1 = the highest of `values` (ties share the better rank)."""
    if not np.isfinite(values[i]):
        return None
    return int(1 + np.sum(values[np.isfinite(values)] > values[i]))


def _float(value) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def _ordinal(n: int | None) -> str:
    if n is None:
        return "unranked"
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"

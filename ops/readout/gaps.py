"""Gap sizes: how far the simulation stretches or shrinks the gaps between arms
(docs/definitions.md#gap-sizes).

The fidelity check asks whether the simulation orders the arms as the log does; this asks
whether it sizes their gaps as the log does.  For every candidate arm a (not the control,
not a diagnostic arm such as the mirror), over the simulated agents' users:

- **s_a = CTR_a ÷ CTR_control**, the simulated gap: the read-out's mean CTR over the agents,
  the same agents on both sides where the design pairs them;
- **r_a = H_a ÷ H_control**, the logged gap: H is the mean over the same users of the share
  of the arm's top-20 items the user interacted with in a held-out window (any rating: the
  real counterpart of a click) — what users took of each arm's lists;
- **the arm's own factor f_a = log s_a ÷ log r_a**: 1 where the simulation reproduces the
  logged gap, 2 where it doubles it on the log scale (a logged 10 % lift reads as a
  simulated 1.1² − 1 = 21 %), ½ where it halves it, below 0 where it points the other way.

The run's factor is the median of the arms' own factors over the arms whose logged gap is
clear of 1 (r_a's interval excludes 1): the Theil–Sen slope through the origin of log s on
log r.  Why not the least-squares slope through the origin: it is the mean of the f_a
weighted by (log r_a)², so random, whose logged gap is the widest by far (log r ≈ −3 where
trained arms lie within ±0.5), would decide it alone, and its r rests on the fewest logged
interactions; the median gives every arm one vote.  An arm whose logged gap holds 1 has a
factor of noise over almost nothing (log r ≈ 0): it is shown, not counted.

Intervals: a percentile bootstrap over the agents — each replicate resamples the agents with
their users' hit rates, so s and r move together (paired across arms when the design pairs
them; under a random design each arm's agents are resampled on their own for s and the users
of all arms once for r), the set of arms in the median fixed.

Too few logged interactions make r noise: the control's lists need `MIN_HITS` in the window
over the agents' users, else the whole figure is "not measured (why)"; a candidate with
fewer gets no r and no factor, with its reason.  The verdict warns when the factor lies
outside [`LOW`, `HIGH`]: the simulation's gap sizes are then off by more than a factor of 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ops.figures import table_markdown
from ops.readout.statistics import multiplicities, named_rng, percentile_interval

LIST_LENGTH = 20
# Below ten logged interactions on a list set, the Poisson noise of its count alone is over 30 %.
MIN_HITS = 10
# The verdict warns beyond a factor of 2 either way.
LOW, HIGH = 0.5, 2.0

GAPS = {
    "arm": pl.Utf8,
    "role": pl.Utf8,  # "control" / "candidate"
    "agents": pl.Int64,
    "ctr": pl.Float64,
    "hit_rate": pl.Float64,  # mean share of the top-20 the user interacted with in the window
    "hits": pl.Int64,  # logged interactions on the arm's lists, over the agents' users
    "simulated_ratio": pl.Float64,  # s
    "simulated_ratio_ci_low": pl.Float64,
    "simulated_ratio_ci_high": pl.Float64,
    "logged_ratio": pl.Float64,  # r; null where not measured
    "logged_ratio_ci_low": pl.Float64,
    "logged_ratio_ci_high": pl.Float64,
    "factor": pl.Float64,  # log s ÷ log r; null where r is not measured or holds 1
    "factor_ci_low": pl.Float64,
    "factor_ci_high": pl.Float64,
    "in_fit": pl.Boolean,
    "note": pl.Utf8,  # why an arm has no factor, or is left out of the fit
}


@dataclass(frozen=True)
class GapSizes:
    """The figures of the module docstring: `arms` (GAPS rows, the control first), the run's
    factor with its interval over the `fitted` arms, or the `reason` it is not measured."""

    arms: pl.DataFrame
    control: str
    window: str
    factor: float | None
    ci_low: float | None
    ci_high: float | None
    fitted: int
    reason: str | None = None

    @property
    def measured(self) -> bool:
        return self.factor is not None

    @property
    def warning(self) -> str | None:
        """The verdict's warning when the factor lies outside [LOW, HIGH]."""
        if self.factor is None or LOW <= self.factor <= HIGH:
            return None
        how = (
            "point against the logged ones"
            if self.factor <= 0
            else "stretch the logged ones"
            if self.factor > HIGH
            else "shrink the logged ones"
        )
        return (
            f"the simulation's gaps between arms {how}: simulated gaps ≈ {self._said()} (outside "
            f"[{LOW:g}, {HIGH:g}]); a simulated difference's size is not the size a real test would see — read its "
            "sign and its interval"
        )

    def verdict_line(self) -> str:
        """One sentence for the verdict's first lines."""
        if self.factor is None:
            return f"gap sizes: not measured ({self.reason})"
        return (
            f"gap sizes: simulated gaps ≈ {self._said()} (log CTR ratio against {self.control} ÷ log ratio of "
            f"the {self.window} window's interactions with the same top-{LIST_LENGTH} lists; median over the arms)"
        )

    def _said(self) -> str:
        arms = f"{self.fitted} arm{'' if self.fitted == 1 else 's'}"
        return f"{_x(self.factor)} × the logged ones [{_x(self.ci_low)}, {_x(self.ci_high)}] over {arms}"

    def headline(self) -> dict:
        """The verdict's figures, as plain data (`Verdict.gap_sizes`, Dagster metadata)."""
        return {
            "measured": self.measured,
            "factor": self.factor,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "arms": self.fitted,
            "control": self.control,
            "window": self.window,
            "reason": self.reason,
            "line": self.verdict_line(),
        }

    def metrics(self) -> dict[str, float]:
        """`gap_factor` with its interval, and each arm's s, r and factor, where measured."""
        out = {}
        if self.factor is not None:
            out = {"gap_factor": self.factor, "gap_factor_ci_low": self.ci_low, "gap_factor_ci_high": self.ci_high}
        for r in self.arms.filter(pl.col("role") == "candidate").iter_rows(named=True):
            for key, name in (("simulated_ratio", "s"), ("logged_ratio", "r"), ("factor", "factor")):
                if r[key] is not None:
                    out[f"gap_{name}_{r['arm']}"] = r[key]
        return out

    def to_markdown(self) -> str:
        lines = ["## Gap sizes: simulated against logged", ""]
        lines += [
            f"Per arm against the control {self.control}, over the simulated agents' users: s = CTR ÷ the control's "
            f"CTR; r = the share of the arm's top-{LIST_LENGTH} items the users interacted with in the {self.window} "
            f"window ÷ the same share of the control's; factor = log s ÷ log r (1: the simulation sizes the gap as the "
            "log does; 2: it doubles it; ½: it halves it).  The run's factor is the median over the arms whose r is "
            "clear of 1; 95 % bootstrap intervals over the agents.",
            "",
        ]

        def cell(value, low, high, digits: int = 3) -> str:
            if value is None:
                return "—"
            if low is None or high is None:
                return f"{value:.{digits}f}"
            return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"

        rows = [
            {
                "arm": r["arm"],
                "agents": r["agents"],
                "CTR": cell(r["ctr"], None, None, 4),
                "hit rate": cell(r["hit_rate"], None, None, 4),
                "logged interactions": r["hits"],
                "s (simulated)": cell(r["simulated_ratio"], r["simulated_ratio_ci_low"], r["simulated_ratio_ci_high"]),
                "r (logged)": cell(r["logged_ratio"], r["logged_ratio_ci_low"], r["logged_ratio_ci_high"]),
                "factor": cell(r["factor"], r["factor_ci_low"], r["factor_ci_high"], 2),
                "in the median": "yes" if r["in_fit"] else "no",
                "note": r["note"] or "",
            }
            for r in self.arms.iter_rows(named=True)
        ]
        if rows:
            lines += [table_markdown(pl.DataFrame(rows)), ""]
        lines += ["- " + self.verdict_line().removeprefix("gap sizes: "), ""]
        return "\n".join(lines) + "\n"


def gap_sizes(
    per_agent: pl.DataFrame,
    lists: Mapping[str, pl.DataFrame],
    window: pl.DataFrame,
    control: str,
    candidates: Sequence[str],
    *,
    window_name: str = "test",
    paired: bool = True,
    metric: str = "ctr",
    min_hits: int = MIN_HITS,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> GapSizes:
    """The figures of the module docstring.  `per_agent`: arm, user_id, <metric>
    (`ABReadout.per_agent`); `lists`: arm -> its top-20 lists (user_id, rank, item_id);
    `window`: the held-out interactions (user_id, item_id; any rating) whose hit rates give
    r, named `window_name` in what is said — the read-out passes the test window, the
    calibration the validation window; `candidates`: the arms compared with `control`."""
    arms = [control] + sorted(
        a for a in set(candidates) - {control} if a in lists and a in set(per_agent.get_column("arm"))
    )

    def not_measured(reason: str) -> GapSizes:
        return GapSizes(pl.DataFrame(schema=GAPS), control, window_name, None, None, None, 0, reason)

    if control not in lists or control not in set(per_agent.get_column("arm")):
        return not_measured(f"the control {control} has no simulated agents or no lists")
    if len(arms) < 2:
        return not_measured("no candidate arm beside the control")
    joint, sim_units, sim, hit, counts = _matrices(per_agent, lists, window, arms, metric, paired)
    if hit.shape[0] < 2:
        return not_measured("fewer than two agents' users with a list from every arm")
    if counts[0] < min_hits:
        return not_measured(
            f"the control {control}'s lists hold {counts[0]} logged interaction{'' if counts[0] == 1 else 's'} in the "
            f"{window_name} window over the {hit.shape[0]} agents' users; a logged gap needs {min_hits}"
        )
    ctr, rate = np.nanmean(sim, axis=0), hit.mean(axis=0)
    if not ctr[0] > 0:
        return not_measured(f"no simulated click on the control {control}'s lists")
    rng = named_rng(seed, 7201)
    n = hit.shape[0]
    if joint:  # paired: one resampling of the agents for both sides
        weights = multiplicities(n, n_bootstrap, rng)
        boot_ctr, boot_rate = (weights @ sim) / n, (weights @ hit) / n
    else:
        boot_ctr = np.column_stack(
            [multiplicities(u.size, n_bootstrap, rng) @ sim[u, j] / u.size for j, u in enumerate(sim_units)]
        )
        boot_rate = multiplicities(n, n_bootstrap, rng) @ hit / n
    with np.errstate(divide="ignore", invalid="ignore"):
        s, boot_s = ctr / ctr[0], boot_ctr / boot_ctr[:, :1]
        r, boot_r = rate / rate[0], boot_rate / boot_rate[:, :1]
        f, boot_f = np.log(s) / np.log(r), np.log(boot_s) / np.log(boot_r)
    s_ci, r_ci, f_ci = (percentile_interval(b, confidence) for b in (boot_s, boot_r, boot_f))
    rows, fit = [], []
    for j, arm in enumerate(arms):
        note, has_r, has_f = None, True, True
        if j == 0:
            note, has_f = "the control", False
        elif counts[j] < min_hits:
            note, has_r, has_f = (
                f"r not measured: {counts[j]} logged interactions on its lists (needs {min_hits})",
                False,
                False,
            )
        elif not s[j] > 0:
            note, has_f = "no simulated click: log s undefined", False
        elif r_ci[0, j] <= 1 <= r_ci[1, j]:
            note = "logged tie: r's interval holds 1, its factor is noise over log r ≈ 0"
        else:
            fit.append(j)
        keep_f = has_f and j in fit
        agents = int(np.isfinite(sim[sim_units[j], j]).sum())
        rows.append(
            {
                "arm": arm,
                "role": "control" if j == 0 else "candidate",
                "agents": agents,
                "ctr": _float(ctr[j]),
                "hit_rate": _float(rate[j]) if has_r else None,
                "hits": int(counts[j]),
                "simulated_ratio": _float(s[j]),
                "simulated_ratio_ci_low": _float(s_ci[0, j]) if j else None,
                "simulated_ratio_ci_high": _float(s_ci[1, j]) if j else None,
                "logged_ratio": _float(r[j]) if has_r else None,
                "logged_ratio_ci_low": _float(r_ci[0, j]) if has_r and j else None,
                "logged_ratio_ci_high": _float(r_ci[1, j]) if has_r and j else None,
                "factor": _float(f[j]) if keep_f else None,
                "factor_ci_low": _float(f_ci[0, j]) if keep_f else None,
                "factor_ci_high": _float(f_ci[1, j]) if keep_f else None,
                "in_fit": j in fit,
                "note": note,
            }
        )
    table = pl.DataFrame(rows, schema=GAPS)
    if not fit:
        return GapSizes(
            table,
            control,
            window_name,
            None,
            None,
            None,
            0,
            f"no candidate arm's logged gap in the {window_name} window is clear of 1 with {min_hits}+ interactions",
        )
    with np.errstate(invalid="ignore"):
        replicates = np.nanmedian(np.where(np.isfinite(boot_f[:, fit]), boot_f[:, fit], np.nan), axis=1)
    lo, hi = percentile_interval(replicates, confidence)
    return GapSizes(table, control, window_name, float(np.median(f[fit])), float(lo), float(hi), len(fit))


def hit_rates(lists: pl.DataFrame, window: pl.DataFrame, users: Sequence[int], k: int = LIST_LENGTH) -> pl.DataFrame:
    """user_id, hits, hit_rate for `users` with a list: how many of the user's top-k items
    it interacted with in `window` (any rating), and that count ÷ the list's length."""
    top = lists.filter(pl.col("rank") <= k).select("user_id", "item_id").unique()
    top = top.filter(pl.col("user_id").is_in(list(users)))
    taken = window.select("user_id", "item_id").unique().with_columns(taken=pl.lit(1))
    return (
        top.join(taken, on=["user_id", "item_id"], how="left")
        .group_by("user_id")
        .agg(pl.col("taken").sum().alias("hits"), pl.len().alias("length"))
        .select("user_id", pl.col("hits").cast(pl.Int64), (pl.col("hits") / pl.col("length")).alias("hit_rate"))
    )


def _matrices(per_agent, lists, window, arms, metric, paired):
    """Whether the agents are paired (every arm's column over the same rows, resampled
    together with the hit rates), the rows each arm's simulated column is resampled over,
    the simulated metric (users × arms, NaN where an agent did not see an arm) and the hit
    rates (users × arms) of the agents' users that every arm lists, with the logged
    interactions per arm."""
    frame = per_agent.filter(pl.col("arm").is_in(arms)).select("arm", "user_id", metric).drop_nulls()
    listed = None
    for a in arms:
        users = lists[a].select("user_id").unique()
        listed = users if listed is None else listed.join(users, on="user_id", how="semi")
    frame = frame.join(listed, on="user_id", how="semi")
    wide = frame.pivot(on="arm", index="user_id", values=metric)
    both = wide.drop_nulls() if all(a in wide.columns for a in arms) else wide.clear()
    if paired and both.height >= 2:
        users = both.get_column("user_id").to_list()
        sim = both.select(arms).to_numpy().astype(float)
        sim_units = [np.arange(len(users))] * len(arms)
    else:
        users = sorted(set(frame.get_column("user_id").to_list()))
        index = {u: i for i, u in enumerate(users)}
        sim = np.full((len(users), len(arms)), np.nan)
        sim_units = []
        for j, a in enumerate(arms):
            part = frame.filter(pl.col("arm") == a)
            rows = np.array([index[u] for u in part.get_column("user_id").to_list()], dtype=int)
            sim[rows, j] = part.get_column(metric).to_numpy()
            sim_units.append(rows)
    hit = np.zeros((len(users), len(arms)))
    counts = []
    order = pl.DataFrame({"user_id": users}, schema={"user_id": pl.Int64})
    for j, a in enumerate(arms):
        rates = order.join(hit_rates(lists[a], window, users), on="user_id", how="left").fill_null(0)
        hit[:, j] = rates.get_column("hit_rate").to_numpy()
        counts.append(int(rates.get_column("hits").sum()))
    return paired and both.height >= 2, sim_units, sim, hit, counts


def _x(factor: float) -> str:
    """A factor to two figures: 2.1, 0.48, 13.0."""
    return f"{factor:.1f}" if abs(factor) >= 1 else f"{factor:.2f}"


def _float(value) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None

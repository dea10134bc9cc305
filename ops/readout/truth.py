"""The verdict judged by the truth (docs/definitions.md#the-truth): does the simulation order
the arms as users do when shown a list, and better than the offline metric does?

The log holds what the production system chose to expose, so agreeing with NDCG@20 on its
test window is agreeing with that system's exposure too.  Where there is a judge free of it
(`ops.schema.GROUND_TRUTH`), each arm gets its true outcome on the lists it serves:

- a **planted** world (the synthetic source) gives every user's exact P(click | shown) and
  P(like | shown) for every item: an arm's click truth for a user is the mean of the first over
  the user's top-20 list, its like truth the mean of the second (the expected shares of the list
  the user would click and like);
- a **random-exposure** sample (a random bucket: users shown items drawn uniformly at random,
  their reactions recorded) estimates them: the sampled items that fall in a user's top-20 are
  a random sample of that list, so the share of them liked (clicked, where recorded) estimates
  the list's share.  Units are (arm, user): the items that fall in two arms' lists are
  different samples, so arms are compared unpaired.

Each simulated metric is set against the truth of its kind (CTR against clicks, the like ratio
against likes; every simulated metric against every truth the judge holds is in the table, so
the report can say which tracks it), beside the offline NDCG@20 against the same truth:
Kendall τ over the candidate arms, and over the pairs of arms the truth separates (its 95 %
interval clear of 0), how many the simulation and the offline metric order alike.  The mirror
(the brain's own ranking) is read against the truth too: its CTR beyond what a monotone curve
through the candidates' (truth, CTR) predicts from its own truth (`ops.readout.bias`) — a
mirror that wins because its lists are truly better is no bias.

The judge is read here only, to measure: never by the agents or the arms.  Where a random
bucket records clicks, a seeded half of its users may calibrate the click decision
(`ops.studies.alignment.exposure_calibration`); those users are judged by neither judge.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from scipy.stats import kendalltau

from ops.figures import pyplot, table_markdown
from ops.readout.bias import EXCESS_FLOOR, SimulatorBias, simulator_bias
from ops.readout.statistics import difference_interval, interval_sign, named_rng, percentile_interval

PLANTED, RANDOM_EXPOSURE = "planted", "random_exposure"
# The truth kinds, each with the simulated metric of its kind and the judge's column.
KINDS: dict[str, tuple[str, str]] = {"click": ("ctr", "clicked"), "like": ("like_ratio", "liked")}
SIMULATED = ("ctr", "cvr", "like_ratio", "average_rating")
LABELS = {
    "ctr": "CTR",
    "cvr": "CVR",
    "like_ratio": "like ratio",
    "average_rating": "AR",
    "ndcg_at_k": "NDCG@20",
    "click": "click truth",
    "like": "like truth",
}
# A truth difference smaller than this is a tie even with its interval clear of 0: a planted
# world's exact truth over a thousand users separates arms by a few thousandths that no
# A/B test would act on.
TIE = 0.005

ARMS_SCHEMA = {
    "arm": pl.Utf8,
    "role": pl.Utf8,  # "candidate" / "diagnostic" (the mirror)
    "users": pl.Int64,  # users the truth is read over (random exposure: with a sampled item in the list)
    **{f"{k}_truth{s}": pl.Float64 for k in KINDS for s in ("", "_low", "_high")},
    **{m: pl.Float64 for m in (*SIMULATED, "ndcg_at_k")},
}
TAUS_SCHEMA = {"metric": pl.Utf8, "truth": pl.Utf8, "arms": pl.Int64, "kendall_tau": pl.Float64}


@dataclass(frozen=True)
class TruthJudgement:
    """The figures of the module docstring; `judge` None where the run has no truth."""

    judge: str | None
    arms: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=ARMS_SCHEMA))
    taus: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=TAUS_SCHEMA))
    # per truth kind: {"separated": n, "simulated_alike": a, "offline_alike": b, "metric": sim}
    pairs: dict[str, dict] = field(default_factory=dict)
    mirror: dict[str, SimulatorBias] = field(default_factory=dict)
    primary: str = "ctr"
    # Why there is no judgement, where there is none.
    reason: str = "no truth: neither a planted world nor a random-exposure file"

    @property
    def measured(self) -> bool:
        return self.judge is not None and self.arms.height > 0

    def kinds(self) -> list[str]:
        """The truth kinds the judge holds (a random bucket without clicks holds likes only)."""
        return [k for k in KINDS if self.arms.height and self.arms.get_column(f"{k}_truth").drop_nulls().len()]

    def tau(self, metric: str, kind: str) -> float | None:
        row = self.taus.filter((pl.col("metric") == metric) & (pl.col("truth") == kind))
        return row.get_column("kendall_tau")[0] if row.height else None

    def headline_kind(self) -> str | None:
        """The truth of the primary metric's kind where the judge holds it, else the first held."""
        kinds = self.kinds()
        own = next((k for k, (m, _) in KINDS.items() if m == self.primary), None)
        return own if own in kinds else (kinds[0] if kinds else None)

    def tracking(self) -> str | None:
        """The simulated metric whose τ with the headline truth is highest."""
        kind = self.headline_kind()
        if kind is None:
            return None
        own = KINDS[kind][0]
        scored = [(self.tau(m, kind), m) for m in SIMULATED if self.tau(m, kind) is not None]
        if not scored:
            return None
        best = max(t for t, _ in scored)
        # The metric of the truth's own kind wherever it ties the best.
        return own if self.tau(own, kind) == best else next(m for t, m in scored if t == best)

    def describe(self) -> str:
        return "planted, exact" if self.judge == PLANTED else "a random-exposure sample"

    def lines(self) -> list[str]:
        """The verdict's sentences: per truth kind, τ of the simulation and of NDCG@20 and the pairs."""
        if not self.measured:
            return []
        out = []
        for kind in self.kinds():
            metric = KINDS[kind][0]
            sim, off = self.tau(metric, kind), self.tau("ndcg_at_k", kind)
            p = self.pairs.get(kind, {})
            out.append(
                f"against the truth ({self.describe()}, {LABELS[kind]}): τ(simulated {LABELS[metric]}, truth) = "
                f"{_f(sim)}, τ(offline NDCG@20, truth) = {_f(off)}; of the {p.get('separated', 0)} pairs the truth "
                f"separates, the simulation orders {p.get('simulated_alike', 0)} alike, the offline metric "
                f"{p.get('offline_alike', 0)}"
            )
        kind = self.headline_kind()
        best = self.tracking()
        if kind is not None and best is not None and best != KINDS[kind][0]:
            out.append(
                f"of the simulated metrics, {LABELS[best]} tracks the {LABELS[kind]} best "
                f"(τ {_f(self.tau(best, kind))}; {LABELS[KINDS[kind][0]]}: {_f(self.tau(KINDS[kind][0], kind))})"
            )
        bias = self.mirror.get(kind) if kind else None
        if bias is not None and bias.excess is not None:
            out.append(
                f"the mirror ({bias.mirror}) against the truth: {LABELS[KINDS[kind][0]]} beyond what its "
                f"{LABELS[kind]} predicts {bias.excess:+.3f} [{bias.excess_ci_low:+.3f}, {bias.excess_ci_high:+.3f}]"
            )
        return out

    def warnings(self) -> list[str]:
        """A warning where the simulation orders the arms less like the truth than NDCG@20
        does, and where the mirror's excess against the truth is clear of 0."""
        out = []
        for kind in self.kinds():
            metric = KINDS[kind][0]
            sim, off = self.tau(metric, kind), self.tau("ndcg_at_k", kind)
            if sim is not None and off is not None and sim < off:
                out.append(
                    f"against the truth ({LABELS[kind]}) the simulation does worse than the offline metric: "
                    f"τ(simulated {LABELS[metric]}) {sim:.2f} < τ(NDCG@20) {off:.2f} — read the arms' order from "
                    "NDCG@20, not from this simulation"
                )
            bias = self.mirror.get(kind)
            if bias is not None and bias.excess is not None and bias.excess_ci_low is not None:
                clear = not (bias.excess_ci_low <= 0 <= bias.excess_ci_high)
                if clear and abs(bias.excess) >= EXCESS_FLOOR:
                    verb = "favours" if bias.excess > 0 else "disfavours"
                    out.append(
                        f"against the truth ({LABELS[kind]}) the simulation {verb} the brain's own ranking "
                        f"({bias.mirror}): {LABELS[metric]} {bias.excess:+.3f} [{bias.excess_ci_low:+.3f}, "
                        f"{bias.excess_ci_high:+.3f}] beyond what its true outcome predicts"
                    )
        return out

    def headline(self) -> dict:
        """Plain data for the verdict, Dagster and MLflow."""
        if not self.measured:
            return {"measured": False, "reason": self.reason}
        return {
            "measured": True,
            "judge": self.judge,
            "taus": {f"{r['metric']}|{r['truth']}": r["kendall_tau"] for r in self.taus.iter_rows(named=True)},
            "pairs": self.pairs,
            "mirror_excess": {
                k: [b.excess, b.excess_ci_low, b.excess_ci_high] for k, b in self.mirror.items() if b.excess is not None
            },
            "tracking": self.tracking(),
            "lines": self.lines(),
        }

    def metrics(self) -> dict[str, float]:
        out = {
            f"truth_tau_{r['metric']}_vs_{r['truth']}": r["kendall_tau"]
            for r in self.taus.iter_rows(named=True)
            if r["kendall_tau"] is not None
        }
        for kind, b in self.mirror.items():
            if b.excess is not None:
                out[f"truth_mirror_excess_{kind}"] = b.excess
        return out

    def to_markdown(self) -> str:
        lines = ["## Against the truth", ""]
        if not self.measured:
            return "\n".join(
                [
                    *lines,
                    f"Not measured: {self.reason} (a planted synthetic world, or a `random_exposure` file beside a "
                    "files source's interactions: docs/data_model.md).",
                    "",
                ]
            )
        lines += [
            f"Judge: {self.describe()} (docs/definitions.md#the-truth). An arm's click / like truth is the share "
            "of its top-20 items its users would click / like when shown them, with a 95 % interval over users.",
            "",
            *[f"- {line}" for line in self.lines()],
            "",
            table_markdown(self.arms.sort("arm"), floatfmt=".3f"),
            "",
            "Kendall τ over the candidate arms, each metric against each truth:",
            "",
            table_markdown(self.taus, floatfmt=".2f"),
            "",
        ]
        return "\n".join(lines)

    def figure(self):
        """Each candidate arm's truth against its simulated metric and its NDCG@20, per kind."""

        plt = pyplot()
        kinds = self.kinds()
        fig, axes = plt.subplots(len(kinds), 2, figsize=(9, 3.6 * len(kinds)), squeeze=False)
        for row, kind in enumerate(kinds):
            metric = KINDS[kind][0]
            for col, x in enumerate((metric, "ndcg_at_k")):
                ax = axes[row][col]
                for r in self.arms.iter_rows(named=True):
                    t, lo, hi = r[f"{kind}_truth"], r[f"{kind}_truth_low"], r[f"{kind}_truth_high"]
                    if t is None or r[x] is None:
                        continue
                    marker = "s" if r["role"] == "diagnostic" else "o"
                    ax.errorbar(r[x], t, yerr=[[t - lo], [hi - t]] if lo is not None else None, fmt=marker, ms=5)
                    ax.annotate(r["arm"], (r[x], t), fontsize=8, xytext=(3, 3), textcoords="offset points")
                ax.set_xlabel(f"{'simulated ' if col == 0 else 'offline '}{LABELS[x]}")
                ax.set_ylabel(f"{LABELS[kind]} ({self.describe()})")
                ax.set_title(f"τ = {_f(self.tau(x, kind))}", fontsize=9)
        fig.tight_layout()
        return fig


def judge_against_truth(
    truth: pl.DataFrame | None,
    lists: Mapping[str, pl.DataFrame],
    per_agent: pl.DataFrame,
    offline_per_user: pl.DataFrame,
    mirrors: Sequence[str] = (),
    primary: str = "ctr",
    n_bootstrap: int = 2000,
    seed: int = 0,
    held_out: Collection[int] = (),
) -> TruthJudgement:
    """The judgement of the module docstring.  `truth`: GROUND_TRUTH rows (None or empty: no
    truth; a planted judge is used where both are present, it is exact); `lists`: each arm's
    top-20 lists (TOP_K); `per_agent`: the read-out's per-agent metrics (arm, user_id, ctr, …);
    `offline_per_user`: arm, user_id, ndcg_at_k (`ops.readout.fidelity.offline_per_user`);
    `held_out`: users left out of every figure (the random bucket's calibration half, where it
    calibrated the click decision)."""
    if truth is None or truth.height == 0 or not lists:
        return TruthJudgement(None, primary=primary)
    # The users whose random-exposure rows calibrated the click decision are judged by
    # neither judge (`ops.data.random_exposure.calibration_users`).
    held = frozenset(held_out)
    if held:
        keep = ~pl.col("user_id").is_in(sorted(held))
        truth = truth.filter(keep)
        lists = {a: v.filter(keep) for a, v in lists.items()}
        per_agent, offline_per_user = per_agent.filter(keep), offline_per_user.filter(keep)
    judge = PLANTED if (truth.get_column("judge") == PLANTED).any() else RANDOM_EXPOSURE
    truth = truth.filter(pl.col("judge") == judge)
    arms = sorted(set(lists) & set(per_agent.get_column("arm").unique().to_list()))
    if not arms:
        return TruthJudgement(judge, primary=primary, reason="no simulated arm has top-20 lists")
    per_user = truth_per_user(truth, {a: lists[a] for a in arms}, judge, per_agent)
    if per_user.height == 0:
        return TruthJudgement(judge, primary=primary, reason="no item of the judge falls in any arm's top-20 list")
    mirror_set = set(mirrors)
    candidates = [a for a in arms if a not in mirror_set]
    rng = named_rng(seed, "truth")
    rows = []
    for arm in arms:
        row = {"arm": arm, "role": "diagnostic" if arm in mirror_set else "candidate"}
        mine = per_user.filter(pl.col("arm") == arm)
        row["users"] = mine.height
        for kind in KINDS:
            values = mine.get_column(f"{kind}_truth").drop_nulls().to_numpy()
            mean, lo, hi = _mean_interval(values, n_bootstrap, rng)
            row |= {f"{kind}_truth": mean, f"{kind}_truth_low": lo, f"{kind}_truth_high": hi}
        agents = per_agent.filter(pl.col("arm") == arm)
        for metric in SIMULATED:
            row[metric] = agents.get_column(metric).mean() if metric in agents.columns else None
        offline = offline_per_user.filter(pl.col("arm") == arm)
        row["ndcg_at_k"] = offline.get_column("ndcg_at_k").mean() if offline.height else None
        rows.append(row)
    table = pl.DataFrame(rows, schema=ARMS_SCHEMA)
    cand = table.filter(pl.col("role") == "candidate")
    taus, pairs = [], {}
    for kind in KINDS:
        if not cand.get_column(f"{kind}_truth").drop_nulls().len():
            continue
        for metric in (*SIMULATED, "ndcg_at_k"):
            both = cand.select(metric, f"{kind}_truth").drop_nulls()
            tau = None
            if both.height >= 2:
                stat = kendalltau(both.get_column(metric).to_numpy(), both.get_column(f"{kind}_truth").to_numpy())
                tau = float(stat.statistic) if stat.statistic == stat.statistic else None
            taus.append({"metric": metric, "truth": kind, "arms": both.height, "kendall_tau": tau})
        pairs[kind] = _pairs(per_user, table, candidates, kind, judge, n_bootstrap, rng)
    mirror = {}
    if mirror_set & set(arms) and len(candidates) >= 2:
        paired = per_agent.group_by("user_id").agg(pl.col("arm").n_unique()).get_column("arm").min() == len(
            per_agent.get_column("arm").unique()
        )
        for kind, (metric, _) in KINDS.items():
            if kind not in pairs or metric not in per_agent.columns:
                continue
            mirror[kind] = simulator_bias(
                per_agent,
                per_user.select("arm", "user_id", f"{kind}_truth"),
                lists,
                sorted(mirror_set),
                paired=bool(paired),
                simulated=metric,
                offline=f"{kind}_truth",
                n_bootstrap=n_bootstrap,
                seed=seed,
                # A random bucket's units are (arm, user): no arm is paired with another.
                offline_paired=judge == PLANTED,
            )
    return TruthJudgement(judge, table, pl.DataFrame(taus, schema=TAUS_SCHEMA), pairs, mirror, primary)


def truth_per_user(
    truth: pl.DataFrame, lists: Mapping[str, pl.DataFrame], judge: str, per_agent: pl.DataFrame | None = None
) -> pl.DataFrame:
    """arm, user_id, click_truth, like_truth, items: per arm and user, the true outcome of the
    user's top-20 list.  Planted: the mean probability over the list, over the simulated
    users where there are any (the population the simulation's metrics are over); random
    exposure: the share of the sampled items in the list that were clicked / liked, over the
    users with at least one."""
    frames = []
    for arm, frame in lists.items():
        frames.append(frame.select(pl.lit(arm).alias("arm"), "user_id", "item_id"))
    listed = pl.concat(frames)
    if judge == PLANTED and per_agent is not None and per_agent.height:
        simulated = per_agent.select("user_id").unique()
        kept = listed.join(simulated, on="user_id", how="semi")
        listed = kept if kept.height else listed
    hits = listed.join(truth.select("user_id", "item_id", "clicked", "liked"), on=["user_id", "item_id"])
    return (
        hits.group_by("arm", "user_id")
        .agg(
            pl.col("clicked").mean().alias("click_truth"),
            pl.col("liked").mean().alias("like_truth"),
            pl.len().alias("items"),
        )
        .sort("arm", "user_id")
    )


def _pairs(per_user, table, candidates, kind, judge, n_bootstrap, rng) -> dict:
    """Of the candidate pairs the truth separates (interval clear of 0 and at least TIE
    apart), how many the simulation (its metric of the kind) and NDCG@20 order alike."""
    metric = KINDS[kind][0]
    means = {r["arm"]: r for r in table.iter_rows(named=True)}
    column = f"{kind}_truth"
    separated = sim_alike = off_alike = 0
    for i, a in enumerate(candidates):
        for b in candidates[i + 1 :]:
            fa = per_user.filter(pl.col("arm") == a).select("user_id", pl.col(column).alias("a")).drop_nulls()
            fb = per_user.filter(pl.col("arm") == b).select("user_id", pl.col(column).alias("b")).drop_nulls()
            if judge == PLANTED:
                both = fa.join(fb, on="user_id")
                if both.height < 2:
                    continue
                d, lo, hi = difference_interval(
                    both.get_column("a").to_numpy() - both.get_column("b").to_numpy(), None, n_bootstrap, rng
                )
            else:
                if fa.height < 2 or fb.height < 2:
                    continue
                d, lo, hi = difference_interval(
                    fa.get_column("a").to_numpy(), fb.get_column("b").to_numpy(), n_bootstrap, rng
                )
            sign = interval_sign(lo, hi)
            if sign == 0 or abs(d) < TIE:
                continue
            separated += 1
            for key, m in (("sim", metric), ("off", "ndcg_at_k")):
                va, vb = means[a][m], means[b][m]
                if va is not None and vb is not None and np.sign(va - vb) == sign:
                    if key == "sim":
                        sim_alike += 1
                    else:
                        off_alike += 1
    return {"metric": metric, "separated": separated, "simulated_alike": sim_alike, "offline_alike": off_alike}


def _mean_interval(values: np.ndarray, n_bootstrap: int, rng: np.random.Generator):
    if values.size == 0:
        return None, None, None
    mean = float(values.mean())
    if values.size < 2:
        return mean, None, None
    idx = rng.integers(0, values.size, size=(n_bootstrap, values.size))
    lo, hi = percentile_interval(values[idx].mean(axis=1))
    return mean, float(lo), float(hi)


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"

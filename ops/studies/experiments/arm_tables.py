"""A/B Agent Tables 2, 3 and 4 — per arm the offline metrics and the simulated A/B result,
each with its interval, beside the paper's row — and the brain comparison (the same arms
under two brains).

Everything is assembled from what the lifecycle already stores: the arms' `offline_metrics`
(test AUC), their top-20 lists against the test split (Recall@20, NDCG@20 with bootstrap
intervals over test users, `ops.readout.fidelity.offline_intervals`), the A/B read-out of
their simulations (CTR, CVR, AR with bootstrap intervals over agents) and the fidelity
verdicts (Kendall τ and arm against arm, `ops.readout.fidelity`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl
from scipy.stats import kendalltau

from ops.figures import pyplot, rows_markdown, table_markdown
from ops.readout.ab_readout import ABReadout, ab_readout
from ops.readout.fidelity import agreement_summary, fidelity, offline_intervals, offline_per_user, pairwise_agreement
from ops.readout.readout_config import ReadoutConfig
from ops.readout.verdict import pair_counts

SIMULATED = ("ctr", "cvr", "average_rating")
OFFLINE = ("recall_at_k", "ndcg_at_k")
HEADERS = {
    "test_auc": "AUC",
    "recall_at_k": "Recall@20",
    "ndcg_at_k": "NDCG@20",
    "ctr": "CTR",
    "cvr": "CVR",
    "average_rating": "AR",
}


class ArmExperiment:
    """One arm table (Tables 2-4): `table` (numeric, one row per arm: value, ci_low, ci_high
    per metric), the fidelity τ table, the arm-against-arm pairs and their summary."""

    def __init__(
        self, table: pl.DataFrame, fidelity: pl.DataFrame, pairs: pl.DataFrame, summary: dict, readout: ABReadout
    ) -> None:
        self.table, self.fidelity, self.pairs, self.summary, self.readout = table, fidelity, pairs, summary, readout


def arm_experiment(
    arms: Sequence[str],
    events: Mapping[str, pl.DataFrame],
    offline: Mapping[str, pl.DataFrame],
    top_lists: Mapping[str, pl.DataFrame],
    test: pl.DataFrame,
    control: str | None = None,
    readout_config: ReadoutConfig | None = None,
) -> ArmExperiment:
    """The table of `arms` (in this order) from their simulation `events`, `offline_metrics`
    rows and top-20 lists; raises ValueError naming the arms that lack one of them."""
    missing = {
        name: [a for a in arms if a not in frames]
        for name, frames in (("simulation_events", events), ("offline_metrics", offline), ("top20_lists", top_lists))
    }
    missing = {k: v for k, v in missing.items() if v}
    if missing:
        raise ValueError(
            "experiment arms not materialised: "
            + "; ".join(f"{k} lacks {v}" for k, v in missing.items())
            + " — run the experiment_arm job for them (python -m pipelines.experiments does)"
        )
    config = readout_config or ReadoutConfig()
    control = control if control in arms else arms[0]
    readout = ab_readout(pl.concat([events[a] for a in arms]), control=control, config=config)
    offline_rows = pl.concat([offline[a] for a in arms], how="vertical_relaxed")
    per_user = offline_per_user({a: top_lists[a] for a in arms}, test)
    intervals = offline_intervals(per_user, OFFLINE, n_bootstrap=config.n_bootstrap, seed=config.seed)
    pairs = pairwise_agreement(
        readout.per_agent, per_user, paired=readout.design == "paired", n_bootstrap=config.n_bootstrap, seed=config.seed
    )
    brains = {
        a: ",".join(sorted(str(b) for b in events[a].get_column("brain").drop_nulls().unique().to_list())) for a in arms
    }
    return ArmExperiment(
        _arm_rows(arms, readout, offline_rows, intervals, brains),
        fidelity(readout.arms, offline_rows, per_user),
        pairs,
        agreement_summary(pairs),
        readout,
    )


def arm_markdown(experiment: ArmExperiment, paper: Mapping[str, Mapping[str, float]], paper_label: str) -> list[str]:
    """Markdown lines: ours beside the paper's row for every arm, how the orderings compare,
    and the fidelity verdicts."""
    table = experiment.table
    header = ["arm", "brain", "agents", "AUC"]
    for m in (*OFFLINE, *SIMULATED):
        header += [HEADERS[m], "paper"]
    rows = []
    for row in table.iter_rows(named=True):
        theirs = paper.get(row["arm"], {})
        cells = [row["arm"], row["brain"] or "", str(row["agents"]), _number(row["test_auc"])]
        for m in (*OFFLINE, *SIMULATED):
            cells += [interval_cell(row[m], row[f"{m}_ci_low"], row[f"{m}_ci_high"], m), _number(theirs.get(m), m)]
        rows.append(cells)
    lines = [
        f"Ours (95 % intervals) beside {paper_label}; 'paper' is blank where the paper has no such row.",
        "",
        *rows_markdown(header, rows),
    ]
    lines += ["", *ordering_lines(table, paper), ""]
    if experiment.fidelity.height:
        lines += [
            "Fidelity (Kendall τ-b between the simulated and the offline ordering of these arms):",
            "",
            table_markdown(experiment.fidelity, ".3f"),
            "",
        ]
    s = experiment.summary
    if s.get("pairs"):
        lines += [
            f"Arm against arm (simulated CTR vs offline NDCG@20, 95 % intervals on both sides): {s['pairs']} pairs; "
            f"{pair_counts(s)} (missed: the test set separates the pair, the simulation does not).",
            "",
        ]
        show = experiment.pairs.select(
            "arm_a",
            "arm_b",
            _fmt_interval("offline_difference", "offline_ci_low", "offline_ci_high").alias("NDCG@20 a − b"),
            _fmt_interval("simulated_difference", "simulated_ci_low", "simulated_ci_high").alias("CTR a − b"),
            "verdict",
        )
        lines += [table_markdown(show), ""]
    return lines


def ordering_lines(table: pl.DataFrame, paper: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Per metric, whether our arms come in the paper's order (Kendall τ over the arms both have)."""
    shared = [a for a in table.get_column("arm").to_list() if a in paper]
    if len(shared) < 2:
        return ["Ordering against the paper: fewer than two arms in common."]
    ours = {r["arm"]: r for r in table.iter_rows(named=True)}
    parts = []
    for m in (*OFFLINE, *SIMULATED):
        x = [ours[a][m] for a in shared]
        y = [paper[a][m] for a in shared]
        if any(v is None for v in x):
            continue
        tau = kendalltau(x, y).statistic
        best = shared[int(np.argmax(x))] == shared[int(np.argmax(y))]
        parts.append(
            f"{HEADERS[m]} τ = {tau:.2f}{'' if best else ' (another best arm)'}"
            if tau == tau
            else f"{HEADERS[m]} τ undefined (ties)"
        )
    return [
        f"Ordering of the {len(shared)} arms against the paper's (Kendall τ-b, 1 = same order): "
        + "; ".join(parts)
        + "."
    ]


def brain_comparison(
    events: Mapping[tuple[str, str], pl.DataFrame],
    arms: Sequence[str],
    brains: Sequence[str],
    readout_config: ReadoutConfig | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The same arms under each brain: (table, differences).  `events` maps (arm, brain) to
    that simulation's events.  table: arm, brain, agents, then value / ci_low / ci_high of
    CTR, CVR, AR; differences: arm, brain, against, metric, difference, ci_low, ci_high,
    p_value — each brain against the first of `brains` on the same agents (paired)."""
    missing = [(a, b) for a in arms for b in brains if (a, b) not in events]
    if missing:
        raise ValueError(
            f"brain comparison: no simulation for (arm, brain) {missing} — run experiment_simulation for them"
        )
    config = readout_config or ReadoutConfig()
    config = config.model_copy(update={"metrics": SIMULATED})
    rows, differences = [], []
    for arm in arms:
        # Each brain as an "arm" of a read-out whose control is the first brain: the paired
        # differences come with their intervals and tests.
        frames = [events[(arm, b)].with_columns(arm=pl.lit(b)) for b in brains]
        readout = ab_readout(pl.concat(frames, how="vertical_relaxed"), control=brains[0], config=config)
        for brain in brains:
            part = {r["metric"]: r for r in readout.arms.filter(pl.col("arm") == brain).iter_rows(named=True)}
            row = {"arm": arm, "brain": brain, "agents": part["ctr"]["n_agents"]}
            for m in SIMULATED:
                row |= {m: part[m]["mean"], f"{m}_ci_low": part[m]["ci_low"], f"{m}_ci_high": part[m]["ci_high"]}
            rows.append(row)
        for r in readout.comparisons.iter_rows(named=True):
            differences.append(
                {
                    "arm": arm,
                    "brain": r["arm"],
                    "against": brains[0],
                    "metric": r["metric"],
                    "difference": r["difference"],
                    "ci_low": r["ci_low"],
                    "ci_high": r["ci_high"],
                    "p_value": r["p_value"],
                }
            )
    schema = {"arm": pl.Utf8, "brain": pl.Utf8, "agents": pl.Int64} | {
        f"{m}{s}": pl.Float64 for m in SIMULATED for s in ("", "_ci_low", "_ci_high")
    }
    diff_schema = {
        "arm": pl.Utf8,
        "brain": pl.Utf8,
        "against": pl.Utf8,
        "metric": pl.Utf8,
        "difference": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "p_value": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema), pl.DataFrame(differences, schema=diff_schema)


def brain_markdown(table: pl.DataFrame, differences: pl.DataFrame, brains: Sequence[str]) -> list[str]:
    """The brains side by side per arm, their differences, and whether they order the arms alike."""
    header = ["arm", *[f"{HEADERS[m]} {b}" for m in SIMULATED for b in brains]]
    cells = {(r["arm"], r["brain"]): r for r in table.iter_rows(named=True)}
    arms = list(dict.fromkeys(table.get_column("arm").to_list()))
    rows = []
    for arm in arms:
        out = [arm]
        for m in SIMULATED:
            for b in brains:
                r = cells[(arm, b)]
                out.append(interval_cell(r[m], r[f"{m}_ci_low"], r[f"{m}_ci_high"], m))
        rows.append(out)
    lines = [*rows_markdown(header, rows), ""]
    if differences.height:
        show = differences.select(
            "arm",
            "brain",
            "against",
            pl.col("metric").replace_strict(HEADERS, default=pl.col("metric")),
            _fmt_interval("difference", "ci_low", "ci_high").alias("difference [95 % CI]"),
            pl.col("p_value").round(4),
        )
        lines += [
            "Each brain against " + brains[0] + " on the same agents and lists (paired):",
            "",
            table_markdown(show),
            "",
        ]
    if len(arms) >= 2:
        for b in brains[1:]:
            x = [cells[(a, brains[0])]["ctr"] for a in arms]
            y = [cells[(a, b)]["ctr"] for a in arms]
            tau = kendalltau(x, y).statistic
            lines.append(
                f"Arms ordered by CTR: {brains[0]} {_order(arms, x)}; {b} {_order(arms, y)}; Kendall τ = "
                + (f"{tau:.2f}" if tau == tau else "undefined")
                + "."
            )
        lines.append("")
    return lines


def interval_cell(value, low, high, metric: str = "") -> str:
    """ "value [low, high]" with the read-out's precision (AR with 2 decimals, ratios with 4)."""
    digits = 2 if metric == "average_rating" else 4

    def f(v):
        return "n/a" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"

    return f(value) if low is None and high is None else f"{f(value)} [{f(low)}, {f(high)}]"


def arm_figure(table: pl.DataFrame, title: str):
    """Simulated CTR and offline NDCG@20 per arm with their intervals, side by side: do the
    two orderings agree, and are the differences bigger than the intervals?"""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    names = table.get_column("arm").to_list()
    x = np.arange(len(names))
    for ax, metric in zip(axes, ("ctr", "ndcg_at_k")):
        mean = table.get_column(metric).fill_null(np.nan).to_numpy()
        lo = table.get_column(f"{metric}_ci_low").fill_null(np.nan).to_numpy()
        hi = table.get_column(f"{metric}_ci_high").fill_null(np.nan).to_numpy()
        ax.errorbar(x, mean, yerr=[mean - lo, hi - mean], fmt="o", capsize=4, color="#4c72b0")
        ax.set_xticks(x, names, rotation=30, ha="right")
        ax.set_title(f"{'simulated' if metric == 'ctr' else 'offline'} {HEADERS[metric]} (95 % CI)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def brain_figure(table: pl.DataFrame):
    """CTR per arm, one bar per brain with its interval: where do the brains differ?"""
    plt = pyplot()
    arms = list(dict.fromkeys(table.get_column("arm").to_list()))
    brains = list(dict.fromkeys(table.get_column("brain").to_list()))
    width = 0.8 / max(len(brains), 1)
    fig, ax = plt.subplots(figsize=(max(4.5, 1.3 * len(arms) + 2), 3.4))
    for i, brain in enumerate(brains):
        part = {r["arm"]: r for r in table.filter(pl.col("brain") == brain).iter_rows(named=True)}
        xs = np.arange(len(arms)) + (i - (len(brains) - 1) / 2) * width
        mean = np.array([part[a]["ctr"] for a in arms], dtype=float)
        lo = np.array([part[a]["ctr_ci_low"] for a in arms], dtype=float)
        hi = np.array([part[a]["ctr_ci_high"] for a in arms], dtype=float)
        ax.bar(xs, mean, width, yerr=[mean - lo, hi - mean], capsize=3, label=brain)
    ax.set_xticks(range(len(arms)), arms)
    ax.set_ylabel("simulated CTR (95 % CI)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _arm_rows(
    arms: Sequence[str], readout: ABReadout, offline: pl.DataFrame, intervals: pl.DataFrame, brains: Mapping[str, str]
) -> pl.DataFrame:
    sim = {(r["arm"], r["metric"]): r for r in readout.arms.iter_rows(named=True)}
    off = {(r["arm"], r["metric"]): r for r in intervals.iter_rows(named=True)}
    auc = {r["arm"]: r.get("test_auc") for r in offline.iter_rows(named=True)}
    rows = []
    for arm in arms:
        row = {"arm": arm, "brain": brains.get(arm), "agents": sim[(arm, "ctr")]["n_agents"], "test_auc": auc.get(arm)}
        for m in OFFLINE:
            r = off.get((arm, m), {})
            row |= {m: r.get("mean"), f"{m}_ci_low": r.get("ci_low"), f"{m}_ci_high": r.get("ci_high")}
        for m in SIMULATED:
            r = sim[(arm, m)]
            row |= {m: r["mean"], f"{m}_ci_low": r["ci_low"], f"{m}_ci_high": r["ci_high"]}
        rows.append(row)
    schema = {"arm": pl.Utf8, "brain": pl.Utf8, "agents": pl.Int64, "test_auc": pl.Float64}
    schema |= {f"{m}{s}": pl.Float64 for m in (*OFFLINE, *SIMULATED) for s in ("", "_ci_low", "_ci_high")}
    return pl.DataFrame(rows, schema=schema)


def _number(value, metric: str = "") -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return ""
    return f"{value:.2f}" if metric == "average_rating" else f"{value:.4f}"


def _fmt_interval(value: str, low: str, high: str) -> pl.Expr:
    return pl.format("{} [{}, {}]", pl.col(value).round(4), pl.col(low).round(4), pl.col(high).round(4))


def _order(arms: Sequence[str], values: Sequence[float]) -> str:
    return " > ".join(a for _, a in sorted(zip(values, arms), key=lambda t: -t[0]))

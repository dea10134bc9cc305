"""The alignment protocols' figures (matplotlib Figures for MLflow and the report), each
drawn beside the paper's own figure where the paper gives numbers."""

from __future__ import annotations

import numpy as np
import polars as pl

from ops.figures import pyplot
from ops.studies.alignment.papers import AB_AGENT_FIG6_CLICKS, AGENT4REC_TABLE1, SIMUSER_TABLE1
from ops.studies.alignment.social import TIERS

_METRIC_INDEX = {"accuracy": 0, "precision": 1, "recall": 2, "f1": 3}


def taste_figure(summary: pl.DataFrame, per_item: pl.DataFrame | None = None, holdout: pl.DataFrame | None = None):
    """Accuracy, precision, recall and F1 per ratio with intervals, SimUSER's and Agent4Rec's
    MovieLens values beside them; `per_item`: the per-item protocol's summary, drawn beside
    the sandbox protocol's; `holdout`: the per-item protocol under the papers' hold-out."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(12, 3.2), sharey=True)
    ratios = summary.get_column("ratio").unique(maintain_order=True).to_list()
    x = np.arange(len(ratios))
    for ax, metric in zip(axes, _METRIC_INDEX):
        rows = {r["ratio"]: r for r in summary.filter(pl.col("metric") == metric).iter_rows(named=True)}
        mean = np.array([_nan(rows[r]["mean"]) for r in ratios])
        lo = np.array([_nan(rows[r]["ci_low"]) for r in ratios])
        hi = np.array([_nan(rows[r]["ci_high"]) for r in ratios])
        label = "simab, sandbox" if per_item is not None else "simab"
        ax.errorbar(x, mean, yerr=_spans(mean, lo, hi), fmt="o", capsize=4, label=label)
        for shift, frame, fmt, name in ((0.15, per_item, "D", "per item"), (0.3, holdout, "v", "papers' hold-out")):
            if frame is None:
                continue
            other = {r["ratio"]: r for r in frame.filter(pl.col("metric") == metric).iter_rows(named=True)}
            m2 = np.array([_nan(other[r]["mean"]) if r in other else np.nan for r in ratios])
            l2 = np.array([_nan(other[r]["ci_low"]) if r in other else np.nan for r in ratios])
            h2 = np.array([_nan(other[r]["ci_high"]) if r in other else np.nan for r in ratios])
            ax.errorbar(x + shift, m2, yerr=_spans(m2, l2, h2), fmt=fmt, capsize=4, label=f"simab, {name}")
        for paper, values, marker in (("SimUSER", SIMUSER_TABLE1, "s"), ("Agent4Rec", AGENT4REC_TABLE1, "^")):
            ys = [values[r][_METRIC_INDEX[metric]] if r in values else np.nan for r in ratios]
            ax.plot(x, ys, marker, linestyle="none", alpha=0.7, label=paper)
        ax.set_xticks(x, ratios)
        ax.set_title(metric, fontsize=9)
        ax.set_ylim(0, 1)
    axes[0].legend(fontsize=7)
    fig.suptitle("Taste discrimination (95 % CI over agents) beside SimUSER / Agent4Rec Table 1, MovieLens", fontsize=9)
    fig.tight_layout()
    return fig


def rating_figure(distribution: pl.DataFrame, prediction: pl.DataFrame):
    """Left: per-star shares, real beside simulated (Agent4Rec Fig. 3); right: RMSE per
    predictor with intervals."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    stars = distribution.get_column("star").to_numpy()
    left.bar(stars - 0.2, distribution.get_column("real_share").fill_null(0).to_numpy(), 0.4, label="real (held-out)")
    left.bar(stars + 0.2, distribution.get_column("simulated_share").fill_null(0).to_numpy(), 0.4, label="agents")
    left.set_xlabel("stars")
    left.set_ylabel("share of ratings")
    left.legend(fontsize=8)
    left.set_title("Rating distribution (cf. Agent4Rec Fig. 3)", fontsize=9)
    rows = prediction.sort("rmse")
    names = rows.get_column("predictor").to_list()
    y = np.arange(len(names))
    rmse = rows.get_column("rmse").to_numpy()
    lo, hi = rows.get_column("rmse_ci_low").to_numpy(), rows.get_column("rmse_ci_high").to_numpy()
    colours = [
        "#c44e52" if k == "brain" else "#55a868" if k == "best offline arm" else "#4c72b0"
        for k in rows.get_column("kind").to_list()
    ]
    right.barh(y, rmse, xerr=[rmse - lo, hi - rmse], color=colours, capsize=3)
    right.set_yticks(y, names, fontsize=8)
    right.set_xlabel("RMSE (95 % CI over agents)")
    right.set_title("Rating prediction on the same held-out pairs", fontsize=9)
    fig.tight_layout()
    return fig


def social_figure(table: pl.DataFrame):
    """Mean behaviour per tier, real beside simulated, one panel per trait (Agent4Rec Fig.
    4); the activity panel also shows A/B Agent Fig. 6's clicks per tier."""
    plt = pyplot()
    traits = [
        ("activity", "interactions"),
        ("conformity", "rating_gap"),
        ("diversity", "genres"),
        ("activity", "clicks"),
    ]
    fig, axes = plt.subplots(1, len(traits), figsize=(13, 3.2))
    x = np.arange(len(TIERS))
    for ax, (trait, behaviour) in zip(axes, traits):
        for offset, side in ((-0.2, "real"), (0.2, "simulated")):
            row = table.filter(
                (pl.col("trait") == trait) & (pl.col("behaviour") == behaviour) & (pl.col("side") == side)
            )
            if row.height and row.get_column("agents")[0]:
                r = row.row(0, named=True)
                ax.bar(x + offset, [_nan(r[f"mean_{t}"]) for t in TIERS], 0.4, label=f"{side} (ρ={_fmt(r['rho'])})")
        if behaviour == "clicks":
            ax.plot(x, [AB_AGENT_FIG6_CLICKS[t] for t in TIERS], "k^", label="A/B Agent Fig. 6")
        ax.set_xticks(x, TIERS)
        ax.set_title(f"{trait} tier → {behaviour.replace('_', ' ')}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def list_quality_figure(readout_arms: pl.DataFrame, order: list[str]):
    """CTR, CVR and AR per list ratio with intervals (A/B Agent Fig. 5)."""
    plt = pyplot()
    metrics = [("ctr", "CTR"), ("cvr", "CVR"), ("average_rating", "AR")]
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.1))
    x = np.arange(len(order))
    for ax, (metric, label) in zip(axes, metrics):
        rows = {r["arm"]: r for r in readout_arms.filter(pl.col("metric") == metric).iter_rows(named=True)}
        mean = np.array([_nan(rows.get(r, {}).get("mean")) for r in order])
        lo = np.array([_nan(rows.get(r, {}).get("ci_low")) for r in order])
        hi = np.array([_nan(rows.get(r, {}).get("ci_high")) for r in order])
        ax.errorbar(x, mean, yerr=_spans(mean, lo, hi), fmt="o-", capsize=4)
        ax.set_xticks(x, order)
        ax.set_title(f"{label} by positive:negative ratio", fontsize=9)
    fig.suptitle("List quality (95 % CI over agents; cf. A/B Agent Fig. 5)", fontsize=9)
    fig.tight_layout()
    return fig


def calibration_figure(grid: list[dict], real: float, chosen: float):
    """The brain's elasticity to list quality per click-logit scale, against real users'."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    scales = [g["scale"] for g in grid]
    for key, label in (("elasticity_cvr", "CVR"), ("elasticity_ctr", "CTR")):
        ax.plot(scales, [_nan(g.get(key)) for g in grid], "o-", label=f"brain, {label}")
    ax.axhline(real, color="k", linestyle="--", label=f"real users ({real:.2f})")
    ax.axvline(chosen, color="#c44e52", linewidth=0.8, label=f"chosen scale {chosen:g}")
    ax.set_xscale("log")
    ax.set_xlabel("click log-odds scale")
    ax.set_ylabel("elasticity to the share of relevant items")
    ax.set_title("List-response calibration (validation window)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _nan(value) -> float:
    return np.nan if value is None else float(value)


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _spans(mean: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The error bars below and above each mean: an interval that collapses on its mean
    (every agent alike) can put a bound a rounding error past it, which matplotlib refuses."""
    return np.clip(np.array([mean - lo, hi - mean], dtype=float), 0, None)


def sensitivity_figure(sensitivity):
    """The sensitivity ladder (`ops.studies.alignment.sensitivity.Sensitivity`): left, CTR per
    rung with its interval, a bar between two rungs whose step the simulation separates;
    right, each rung's CTR difference against the intact lists with its interval (green:
    detected), and minus the MDE of a step at this run's agents, dashed."""
    plt = pyplot()
    steps = sensitivity.steps.sort("slots")
    slots = steps.get_column("slots").to_numpy()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    ctr = np.array([_nan(v) for v in steps.get_column("ctr").to_list()])
    lo = np.array([_nan(v) for v in steps.get_column("ctr_low").to_list()])
    hi = np.array([_nan(v) for v in steps.get_column("ctr_high").to_list()])
    left.errorbar(slots, ctr, yerr=_spans(ctr, lo, hi), fmt="o-", capsize=4, color="#4c72b0")
    top = np.nanmax(hi) if np.isfinite(hi).any() else 1.0
    gap = 0.08 * (slots.max() - slots.min() if slots.size > 1 else 1)
    for r in sensitivity.adjacent.iter_rows(named=True):
        colour = "#55a868" if r["separated"] else "#c44e52"
        left.plot([r["from_slots"] + gap, r["to_slots"] - gap], [top * 1.04] * 2, color=colour, lw=3)
        left.annotate(
            f"{r['difference']:+.3f}",
            ((r["from_slots"] + r["to_slots"]) / 2, top * 1.04),
            textcoords="offset points",
            xytext=(0, 4),
            ha="center",
            fontsize=7,
        )
    left.plot([], [], color="#55a868", lw=3, label="step separated (95 % interval)")
    left.plot([], [], color="#c44e52", lw=3, label="step not separated")
    left.set_ylim(top=top * 1.12)
    left.set_xticks(slots, [f"{s}/{sensitivity.list_length}" for s in slots])
    left.set_xlabel("slots replaced by random unseen items")
    left.set_ylabel("simulated CTR")
    left.set_title(
        f"{sensitivity.control}'s lists degraded: {sensitivity.agents} agents × {sensitivity.sessions} session(s)",
        fontsize=9,
    )
    left.legend(fontsize=8, loc="lower left")
    d = np.array([_nan(v) for v in steps.get_column("difference").to_list()])
    dlo = np.array([_nan(v) for v in steps.get_column("ci_low").to_list()])
    dhi = np.array([_nan(v) for v in steps.get_column("ci_high").to_list()])
    detected = steps.get_column("detected").to_list()
    for i, s in enumerate(slots):
        colour = "#55a868" if detected[i] else "#8c8c8c"
        spans = [[max(d[i] - dlo[i], 0.0)], [max(dhi[i] - d[i], 0.0)]]
        right.errorbar(s, d[i], yerr=spans, fmt="o", capsize=4, color=colour)
    mde = [v for v in sensitivity.adjacent.get_column("minimum_detectable_difference").to_list() if v is not None]
    if mde:
        right.axhline(-float(np.median(mde)), color="#dd8452", ls="--", lw=1, label="− MDE of one step")
        right.legend(fontsize=8, loc="lower left")
    right.axhline(0.0, color="#999999", lw=0.8)
    right.set_xticks(slots, [f"{s}/{sensitivity.list_length}" for s in slots])
    right.set_xlabel("slots replaced by random unseen items")
    right.set_ylabel("CTR − CTR on the intact lists")
    right.set_title("against the intact lists (green: detected)", fontsize=9)
    fig.tight_layout()
    return fig

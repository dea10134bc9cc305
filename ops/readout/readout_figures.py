"""Figures of the read-outs, each a matplotlib Figure (or a PNG) for MLflow: the A/B
read-out per metric, fidelity arm against arm, the power of the simulated test, and the
data augmentation's test AUC."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from ops.figures import pyplot, save_figure
from ops.readout.ab_readout import ABReadout
from ops.readout.agent_metrics import LABELS
from ops.readout.augmentation_summary import ORIGINAL


def write_ab_figures(readout: ABReadout, folder: str | Path, drawn: bool = False) -> list[Path]:
    """The read-out's figures as PNG files `ab_<metric>.png`, for the report and MLflow.
    `drawn`: the files already in `folder` were drawn from this read-out (by its asset, in the
    report's own run folder) and are kept; only missing ones are drawn (a tenth of a second each)."""
    paths = {metric: Path(folder) / f"ab_{metric}.png" for metric in readout.config.metrics}
    for metric, path in paths.items():
        if not (drawn and path.is_file()):
            save_figure(ab_metric_figure(readout, metric), path)
    return list(paths.values())


def ab_metric_figure(readout: ABReadout, metric: str):
    """One metric of the A/B read-out: the arm means with their intervals (the control in a
    different colour) and, beside them, the differences against the control (green where
    Holm-significant)."""
    plt = pyplot()
    arms = readout.arms.filter(pl.col("metric") == metric).sort("arm")
    comps = readout.comparisons.filter(pl.col("metric") == metric).sort("arm")
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    names = arms.get_column("arm").to_list()
    x = np.arange(len(names))
    mean = arms.get_column("mean").fill_null(np.nan).to_numpy()
    lo = arms.get_column("ci_low").fill_null(np.nan).to_numpy()
    hi = arms.get_column("ci_high").fill_null(np.nan).to_numpy()
    colours = ["#c44e52" if n == readout.control else "#4c72b0" for n in names]
    for i in range(len(names)):
        left.errorbar(x[i], mean[i], yerr=[[mean[i] - lo[i]], [hi[i] - mean[i]]], fmt="o", color=colours[i], capsize=4)
    pooled = arms.get_column("pooled").fill_null(np.nan).to_numpy()
    if np.isfinite(pooled).any():
        left.plot(x, pooled, "x", color="#555555", label="pooled ratio")
        left.legend(fontsize=8)
    left.set_xticks(x, names, rotation=30, ha="right")
    left.set_title(f"{LABELS[metric]} by arm (mean over agents, {readout.config.confidence:.0%} CI)", fontsize=9)
    if comps.height:
        cn = comps.get_column("arm").to_list()
        cx = np.arange(len(cn))
        d = comps.get_column("difference").fill_null(np.nan).to_numpy()
        dlo = comps.get_column("ci_low").fill_null(np.nan).to_numpy()
        dhi = comps.get_column("ci_high").fill_null(np.nan).to_numpy()
        sig = comps.get_column("significant").to_list()
        for i in range(len(cn)):
            right.errorbar(
                cx[i],
                d[i],
                yerr=[[d[i] - dlo[i]], [dhi[i] - d[i]]],
                fmt="o",
                capsize=4,
                color="#55a868" if sig[i] else "#8c8c8c",
            )
        right.axhline(0.0, color="#999999", linewidth=0.8)
        right.set_xticks(cx, cn, rotation=30, ha="right")
    right.set_title(f"difference vs {readout.control} (green: Holm p ≤ {readout.config.alpha})", fontsize=9)
    fig.tight_layout()
    return fig


# The pair verdicts' colours (ops.readout.fidelity.PAIR_VERDICTS).
VERDICT_COLOURS = {"agree": "#55a868", "disagree": "#c44e52", "missed": "#dd8452", "offline tie": "#8c8c8c"}


def fidelity_pairs(pairs: pl.DataFrame):
    """Offline difference against simulated difference per pair of arms, with both
    intervals, coloured by verdict: points in the upper-right quadrant are pairs the
    simulation orders right; a missed pair sits right of 0 with its simulated interval
    across 0."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    shown = set()
    for r in pairs.drop_nulls(["offline_difference", "simulated_difference"]).iter_rows(named=True):
        x, y = r["offline_difference"], r["simulated_difference"]
        verdict = r.get("verdict")
        ax.errorbar(
            x,
            y,
            xerr=[[x - r["offline_ci_low"]], [r["offline_ci_high"] - x]],
            yerr=[[y - r["simulated_ci_low"]], [r["simulated_ci_high"] - y]],
            fmt="o",
            capsize=3,
            color=VERDICT_COLOURS.get(verdict, "#4c72b0"),
            label=verdict if verdict not in shown else None,
        )
        shown.add(verdict)
        ax.annotate(f"{r['arm_a']} − {r['arm_b']}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.axhline(0, color="grey", lw=0.8)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("offline NDCG@20 difference (a − b)")
    ax.set_ylabel("simulated CTR difference (a − b)")
    ax.set_title("Fidelity arm against arm (95 % intervals)")
    if shown:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def power_figure(power):
    """The power of the simulated test per pair of arms (`ops.readout.power.PowerAnalysis`):
    left, the observed simulated difference beside the smallest one this run detects (a
    pair whose dot sits below its bar is underpowered); right, the agents needed to detect
    the observed difference against sessions per agent, with this run's agents dashed."""
    plt = pyplot()
    pairs = power.pairs.sort("arm_a", "arm_b")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    names = [f"{a} − {b}" for a, b in zip(pairs.get_column("arm_a"), pairs.get_column("arm_b"))]
    x = np.arange(len(names))
    mde = pairs.get_column("minimum_detectable_difference").to_numpy()
    observed = pairs.get_column("simulated_difference").to_numpy()
    left.bar(x, mde, color="#dddddd", label=f"MDE (power {power.config.power:.0%}, α {power.config.alpha:g})")
    colours = {
        "powered": "#55a868",
        "underpowered": "#dd8452",
        "opposite direction": "#c44e52",
        "offline tie": "#8c8c8c",
    }
    for i, verdict in enumerate(pairs.get_column("verdict").to_list()):
        left.plot(x[i], abs(observed[i]), "o", color=colours.get(verdict, "#4c72b0"))
    for verdict, colour in colours.items():
        left.plot([], [], "o", color=colour, label=f"|observed|: {verdict}")
    left.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    metric = pairs.get_column("metric")[0] if pairs.height else ""
    left.set_title(f"{metric}: observed difference vs minimum detectable", fontsize=9)
    left.legend(fontsize=7)
    for (a, b), part in power.plan.sort("sessions").group_by("arm_a", "arm_b", maintain_order=True):
        right.plot(
            part.get_column("sessions").to_numpy(),
            part.get_column("agents_needed").to_numpy(),
            "o-",
            label=f"{a} − {b}",
        )
    if pairs.height:
        right.axhline(
            int(pairs.get_column("agents")[0]),
            color="#555555",
            linestyle="--",
            linewidth=0.8,
            label="this run's agents",
        )
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("sessions per agent")
    right.set_ylabel("agents needed")
    right.set_title("Agents needed to separate the pairs the offline metric separates", fontsize=9)
    right.legend(fontsize=7)
    fig.tight_layout()
    return fig


def augmentation_figure(table: pl.DataFrame, path: str | Path) -> Path:
    """Test AUC per downstream model, original beside each augmented training set (the
    bars of Table 5), with the difference written over each augmented bar."""
    plt = pyplot()
    # Several training seeds: one bar per model and training set, at the mean over seeds.
    simulated = table.get_column("simulated_arm").drop_nulls().to_list() if table.height else []
    table = table.group_by("arm", "training_set", maintain_order=True).agg(
        pl.col("test_auc").mean(), pl.col("auc_difference").mean()
    )
    models = list(dict.fromkeys(table.get_column("arm").to_list()))
    sets = list(dict.fromkeys(table.get_column("training_set").to_list()))
    width = 0.8 / max(len(sets), 1)
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 * len(models) + 2), 3.6))
    low = float(table.get_column("test_auc").min()) if table.height else 0.5
    high = float(table.get_column("test_auc").max()) if table.height else 1.0
    for i, name in enumerate(sets):
        part = {r["arm"]: r for r in table.filter(pl.col("training_set") == name).iter_rows(named=True)}
        xs = [j + (i - (len(sets) - 1) / 2) * width for j, _ in enumerate(models)]
        heights = [part[m]["test_auc"] if m in part else np.nan for m in models]
        bars = ax.bar(xs, heights, width, label=name)
        if name != ORIGINAL:
            for bar, m in zip(bars, models):
                if m in part:
                    ax.annotate(
                        f"{part[m]['auc_difference']:+.4f}",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center",
                        va="bottom",
                        fontsize=7,
                    )
    margin = max(0.005, (high - low) * 0.5)
    ax.set_ylim(max(0.0, low - margin), min(1.0, high + margin))
    ax.set_xticks(range(len(models)), models)
    ax.set_ylabel("test AUC")
    arms = ", ".join(sorted(set(simulated)))
    ax.set_title(f"Simulated under {arms}: test AUC" if arms else "Test AUC, original vs augmented", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def gap_figure(gaps):
    """Gap sizes (`ops.readout.gaps.GapSizes`): each candidate arm's log simulated ratio to the
    control (log s) against its log logged ratio (log r), with both intervals; the identity
    line (the simulation sizes gaps as the log does) and the fitted factor's line through the
    origin.  Arms left out of the median are hollow."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    rows = gaps.arms.filter((pl.col("role") == "candidate") & pl.col("logged_ratio").is_not_null())
    rows = rows.filter((pl.col("logged_ratio") > 0) & (pl.col("simulated_ratio") > 0))
    span = [0.0]
    for r in rows.iter_rows(named=True):
        x, y = np.log(r["logged_ratio"]), np.log(r["simulated_ratio"])
        xlo, xhi = (np.log(max(v, 1e-12)) for v in (r["logged_ratio_ci_low"], r["logged_ratio_ci_high"]))
        ylo, yhi = (np.log(max(v, 1e-12)) for v in (r["simulated_ratio_ci_low"], r["simulated_ratio_ci_high"]))
        colour = "#4c72b0" if r["in_fit"] else "#8c8c8c"
        ax.errorbar(
            x,
            y,
            xerr=[[max(x - xlo, 0)], [max(xhi - x, 0)]],
            yerr=[[max(y - ylo, 0)], [max(yhi - y, 0)]],
            fmt="o",
            capsize=3,
            color=colour,
            mfc=colour if r["in_fit"] else "white",
        )
        ax.annotate(r["arm"], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        span += [x, y, xlo, xhi, ylo, yhi]
    low, high = min(span), max(span)
    margin = max(0.1, 0.1 * (high - low))
    grid = np.linspace(low - margin, high + margin, 2)
    ax.set_xlim(grid[0], grid[1])
    ax.set_ylim(grid[0], grid[1])
    ax.plot(grid, grid, color="#999999", linestyle="--", linewidth=0.9, label="identity (gaps as logged)")
    if gaps.factor is not None:
        ax.plot(grid, gaps.factor * grid, color="#c44e52", linewidth=1.2, label=f"fitted: factor {gaps.factor:.2f}")
    ax.axhline(0, color="grey", lw=0.6)
    ax.axvline(0, color="grey", lw=0.6)
    ax.set_xlabel(f"log r: logged ratio to {gaps.control} ({gaps.window} window's interactions with the lists)")
    ax.set_ylabel(f"log s: simulated CTR ratio to {gaps.control}")
    ax.set_title("Gap sizes: simulated against logged (95 % intervals; hollow: not in the median)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig

"""Figures people would rather look at than read; each returns a matplotlib Figure that
the assets log to MLflow (`mlflow.log_figure`).  Agg backend: no display is needed."""

from __future__ import annotations

from pathlib import Path

import polars as pl


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def rating_distribution(ratings: pl.DataFrame, title: str = "Rating distribution"):
    plt = _plt()
    counts = ratings.group_by("rating").len().sort("rating")
    share = counts.get_column("len") / max(ratings.height, 1)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.bar(counts.get_column("rating").to_list(), share.to_list(), color="#4c72b0")
    ax.set_xlabel("rating")
    ax.set_ylabel("share of ratings")
    ax.set_title(f"{title} (n={ratings.height:,})")
    fig.tight_layout()
    return fig


def activity_and_popularity(ratings: pl.DataFrame):
    """Ratings per user and per movie, sorted: the long tails on a log scale."""
    plt = _plt()
    per_user = ratings.group_by("user_id").len().get_column("len").sort(descending=True)
    per_item = ratings.group_by("movie_id").len().get_column("len").sort(descending=True)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, series, what in ((axes[0], per_user, "users"), (axes[1], per_item, "movies")):
        ax.plot(range(1, series.len() + 1), series.to_list())
        ax.set_yscale("log")
        ax.set_xlabel(f"{what} by rank")
        ax.set_ylabel("ratings")
        ax.set_title(f"ratings per {what[:-1]}")
    fig.tight_layout()
    return fig


def split_timeline(split_frames: dict[str, pl.DataFrame]):
    """Ratings per week, coloured by split: shows the chronological cut points."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for name, frame in split_frames.items():
        if frame.height == 0:
            continue
        weeks = (frame.get_column("timestamp") // (7 * 86400)).value_counts().sort("timestamp")
        ax.plot((weeks.get_column("timestamp") * 7).to_list(), weeks.get_column("count").to_list(), label=f"{name} ({frame.height:,})")
    ax.set_xlabel("days since 1970-01-01")
    ax.set_ylabel("ratings per week")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    return fig


def fidelity_pairs(pairs: pl.DataFrame):
    """Offline difference against simulated difference per pair of arms, with both
    intervals: points in the upper-right quadrant are pairs the simulation orders right."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for r in pairs.drop_nulls(["offline_difference", "simulated_difference"]).iter_rows(named=True):
        x, y = r["offline_difference"], r["simulated_difference"]
        ax.errorbar(x, y, xerr=[[x - r["offline_ci_low"]], [r["offline_ci_high"] - x]], yerr=[[y - r["simulated_ci_low"]], [r["simulated_ci_high"] - y]], fmt="o", capsize=3)
        ax.annotate(f"{r['arm_a']} − {r['arm_b']}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.axhline(0, color="grey", lw=0.8)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("offline NDCG@20 difference (a − b)")
    ax.set_ylabel("simulated CTR difference (a − b)")
    ax.set_title("Fidelity arm against arm (95 % intervals)")
    fig.tight_layout()
    return fig


def save_figure(fig, path: str | Path) -> Path:
    """A figure as PNG at `path` (folders made), then closed so figures do not pile up."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path

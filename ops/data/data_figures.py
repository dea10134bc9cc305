"""Figures of the data stage, logged by the ingestion and split assets
(`mlflow.log_figure`): the rating distribution, the long tails of activity and
popularity, and the chronological split.  Each returns a matplotlib Figure."""

from __future__ import annotations

import polars as pl

from ops.figures import pyplot


def rating_distribution(ratings: pl.DataFrame, title: str = "Rating distribution"):
    """Share of the ratings at each rating value, 1 to 5."""
    plt = pyplot()
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
    plt = pyplot()
    per_user = ratings.group_by("user_id").len().get_column("len").sort(descending=True)
    per_item = ratings.group_by("item_id").len().get_column("len").sort(descending=True)
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
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for name, frame in split_frames.items():
        if frame.height == 0:
            continue
        weeks = (frame.get_column("timestamp") // (7 * 86400)).value_counts().sort("timestamp")
        ax.plot(
            (weeks.get_column("timestamp") * 7).to_list(),
            weeks.get_column("count").to_list(),
            label=f"{name} ({frame.height:,})",
        )
    ax.set_xlabel("days since 1970-01-01")
    ax.set_ylabel("ratings per week")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    return fig

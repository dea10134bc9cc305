"""The read-out's metrics, per agent, from the event log of `ops.simulation.runner`
(docs/definitions.md#metrics; A/B Agent §2.3.2, §3.1; Agent4Rec §3.3):

- home impressions: distinct movies shown on a home page during the session;
- CTR = clicks ÷ home impressions; CVR = watch-and-rate actions ÷ home impressions;
  click-to-watch = watch-and-rate ÷ clicks (undefined without a click);
- AR = mean rating of the watched items (undefined without a watch);
- Agent4Rec set: view ratio = watched items ÷ home impressions; likes = watched items rated
  ≥ 4; like ratio = likes ÷ home impressions; exit page = the home page number at exit;
  satisfaction = the exit interview's 1–10 score.

Each metric per session, then per agent (the mean over its sessions); the counts the ratio
metrics are made of are kept beside them for the pooled ratios.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from ops.simulation.observation import CLICK_MOVIE, EXIT, EXIT_INTERVIEW, WATCH_AND_RATE

METRICS: tuple[str, ...] = (
    "ctr",
    "cvr",
    "click_to_watch",
    "average_rating",
    "view_ratio",
    "likes",
    "like_ratio",
    "exit_page",
    "satisfaction",
)
# Ratio metrics: the per-agent counts their pooled ratio is made of (numerator, denominator).
RATIO_PARTS: dict[str, tuple[str, str]] = {
    "ctr": ("clicks", "impressions"),
    "cvr": ("watches", "impressions"),
    "click_to_watch": ("watches", "clicks"),
    "average_rating": ("rating_sum", "watches"),
    "view_ratio": ("watched", "impressions"),
    "like_ratio": ("likes", "impressions"),
}
# Per-agent counts: summed over an agent's sessions.
COUNTS: tuple[str, ...] = ("clicks", "watches", "watched", "rating_sum", "likes", "impressions")
LABELS: dict[str, str] = {
    "ctr": "CTR",
    "cvr": "CVR",
    "click_to_watch": "click-to-watch",
    "average_rating": "AR",
    "view_ratio": "view ratio",
    "likes": "likes",
    "like_ratio": "like ratio",
    "exit_page": "exit page",
    "satisfaction": "satisfaction",
}


def per_agent_metrics(events: pl.DataFrame, like_threshold: int = 4) -> pl.DataFrame:
    """One row per (arm, agent): the counts and the metrics of the module docstring.

    The agent is the unit.  With several sessions per agent (events with `session` 1, 2,
    …) each metric and each count is the mean of the agent's per-session values (sessions
    where a metric is undefined left out of it), and `sessions` says how many there were;
    with one session the agent's row is that session's."""
    return agent_means(per_session_metrics(events, like_threshold))


def per_session_metrics(events: pl.DataFrame, like_threshold: int = 4) -> pl.DataFrame:
    """One row per (arm, agent, session): the counts and metrics of that session alone.
    Events without a `session` column (written before sessions existed) are session 0."""
    needed = ("arm", "user_id", "page_type", "page_number", "action", "item_id", "shown", "rating", "satisfaction")
    missing = [c for c in needed if c not in events.columns]
    if missing:
        raise ValueError(f"read-out: the events lack column(s) {missing}")
    session = pl.col("session").fill_null(0) if "session" in events.columns else pl.lit(0)
    events = events.with_columns(session.cast(pl.Int64).alias("session"))
    keys = ["arm", "user_id", "session"]
    agents = events.select(keys).unique().sort(keys)
    impressions = (
        events.filter(pl.col("page_type") == "home")
        .select(*keys, pl.col("shown"))
        .explode("shown")
        .drop_nulls("shown")
        .group_by(keys)
        .agg(pl.col("shown").n_unique().alias("impressions"))
    )
    watch = pl.col("action") == WATCH_AND_RATE
    counts = events.group_by(keys).agg(
        (pl.col("action") == CLICK_MOVIE).sum().alias("clicks"),
        watch.sum().alias("watches"),
        pl.col("item_id").filter(watch).n_unique().alias("watched"),
        pl.col("rating").filter(watch).sum().alias("rating_sum"),
        (watch & (pl.col("rating") >= like_threshold)).sum().alias("likes"),
        pl.col("page_number").filter(pl.col("action") == EXIT).last().alias("exit_page"),
        pl.col("satisfaction").filter(pl.col("action") == EXIT_INTERVIEW).last().alias("satisfaction"),
    )
    frame = (
        agents.join(counts, on=keys, how="left")
        .join(impressions, on=keys, how="left")
        .with_columns(pl.col("impressions").fill_null(0))
        .with_columns(pl.col(c).cast(pl.Int64) for c in COUNTS)
    )
    if (frame.get_column("impressions") == 0).any():
        bad = frame.filter(pl.col("impressions") == 0).head(5).select(keys).to_dicts()
        raise ValueError(f"read-out: agents with no home impression (no home page rows), e.g. {bad}")

    def ratio(num: str, den: str) -> pl.Expr:
        return pl.when(pl.col(den) > 0).then(pl.col(num) / pl.col(den)).otherwise(None)

    return frame.with_columns(
        # `likes` is both a count (the like ratio's numerator) and a metric of its own.
        *(
            ratio(*RATIO_PARTS[m]).alias(m)
            for m in ("ctr", "cvr", "click_to_watch", "average_rating", "view_ratio", "like_ratio")
        ),
        pl.col("exit_page").cast(pl.Int64),
        pl.col("satisfaction").cast(pl.Int64),
    )


def agent_means(per_session: pl.DataFrame) -> pl.DataFrame:
    """Per-session metrics (`per_session_metrics`) to one row per (arm, agent): with one
    session per agent the rows are returned as they are (less the session column); with
    more, metrics and counts are averaged over each agent's sessions.  Counts are averaged
    rather than summed because `likes` is both a count and a metric, and the pooled ratios
    (sum of numerators ÷ sum of denominators) come out the same either way when every agent
    has the same number of sessions."""
    keys = ["arm", "user_id"]
    if per_session.is_empty() or per_session.group_by(keys).len().get_column("len").max() == 1:
        return per_session.drop("session")
    values = [c for c in per_session.columns if c not in (*keys, "session")]
    return (
        per_session.group_by(keys)
        .agg(pl.len().alias("sessions"), *(pl.col(c).cast(pl.Float64).mean() for c in values))
        .sort(keys)
    )


def metric_matrix(frame: pl.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """The columns as a float matrix, one row per row of `frame`, null as NaN."""
    out = np.empty((frame.height, len(columns)))
    for j, c in enumerate(columns):
        out[:, j] = frame.get_column(c).cast(pl.Float64).fill_null(np.nan).to_numpy()
    return out

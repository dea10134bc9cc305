"""The A/B read-out of simulated sessions (docs/definitions.md#lifecycle, step 9, and #metrics;
A/B Agent §2.3.2, §3.1; Agent4Rec §3.3).

Per agent, from the event log of `ops.simulation.runner`:

- home impressions: distinct movies shown on a home page during the session;
- CTR = clicks ÷ home impressions; CVR = watch-and-rate actions ÷ home impressions;
  click-to-watch = watch-and-rate ÷ clicks (undefined without a click);
- AR = mean rating of the watched items (undefined without a watch);
- Agent4Rec set: view ratio = watched items ÷ home impressions; likes = watched items rated
  ≥ 4; like ratio = likes ÷ home impressions; exit page = the home page number at exit;
  satisfaction = the exit interview's 1–10 score.

Per arm: the mean over agents (agents where a metric is undefined are left out of that
metric) with a 95 % percentile-bootstrap interval over agents, and beside it the pooled
ratio (sum of numerators ÷ sum of denominators) with its own bootstrap interval.

Each arm against a control: the difference of means, its bootstrap interval and a p-value,
Holm-corrected.  In the paired design (the same agents in every arm) agents are matched by
user id: the interval resamples agents (pairs) and the test is the paired t-test.  Why t
and not Wilcoxon: the read-out's estimand is the *mean* difference, which the t-test tests
and the interval covers, and with hundreds or thousands of agents the mean difference is
close to normal whatever the metric's shape; Wilcoxon's signed-rank test tests a shift of
the pseudo-median instead, and the discrete metrics here (exit page 1–4, satisfaction 1–10,
likes) give many zero differences that it has to drop or split.  `paired_test="wilcoxon"`
is there for small samples.  When agents were assigned to arms at random, arms are
independent samples: Welch's t-test (or Mann–Whitney) and independent bootstraps.

Fallbacks (the LLM brain recorded a safe action instead of a decision: `fallback` and
`fallback_reason` in the events) are counted per arm — events, agents with at least one,
and failed agents (the endpoint kept failing or a deadline passed for them) — in
`ABReadout.fallbacks` and beside each arm in the Markdown table.  They stay in the metrics:
an arm with more than `max_failed_agents_share` failed agents never reaches the read-out
(the simulation fails), and below it the reader sees how many there were.

Holm's correction runs by default over the whole family of arm × metric comparisons, the
hypotheses a reader scans in one table; `holm_family="per_metric"` corrects over arms
within each metric instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
from pydantic import BaseModel

from ops.readout.slots import slot_clicks
from ops.readout.statistics import (
    bootstrap_means,
    holm,
    named_rng,
    paired_p_value,
    percentile_interval,
    unpaired_p_value,
)
from ops.simulation.observation import AGENT_FAILURES, CLICK_MOVIE, EXIT, EXIT_INTERVIEW, WATCH_AND_RATE

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


class ReadoutConfig(BaseModel):
    confidence: float = 0.95  # docs/definitions.md#metrics: 95 % intervals
    n_bootstrap: int = 2000
    seed: int = 0
    like_threshold: int = 4  # Agent4Rec §3.3: a rating above 3 is a like
    paired_test: Literal["t", "wilcoxon"] = "t"
    unpaired_test: Literal["welch", "mann_whitney"] = "welch"
    holm_family: Literal["all", "per_metric"] = "all"
    alpha: float = 0.05  # for the "significant" flag after Holm
    metrics: tuple[str, ...] = METRICS
    bootstrap_chunk: int = 250  # replicates per matrix product: bounds memory at 6,040 agents


@dataclass
class ABReadout:
    """The read-out: per-agent metrics, per-arm summaries, comparisons with the control."""

    per_agent: pl.DataFrame  # arm, user_id, counts, metrics
    arms: pl.DataFrame  # arm, metric, n_agents, mean, ci_low, ci_high, pooled, pooled_ci_low, pooled_ci_high
    comparisons: (
        pl.DataFrame
    )  # arm, control, metric, n, difference, ci_low, ci_high, test, p_value, p_holm, significant
    control: str
    design: str  # "paired" / "random"
    config: ReadoutConfig
    # arm, agents, fallback_events, fallback_agents, failed_agents (see `fallback_counts`)
    fallbacks: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=FALLBACKS))
    per_session: pl.DataFrame | None = None  # arm, user_id, session, counts, metrics (the power analysis reads it)
    # One row per home-page click: displayed and list slot (`ops.readout.slots`, the report's clicks by slot).
    slot_clicks: pl.DataFrame | None = None

    @property
    def sessions_per_agent(self) -> int:
        """The most sessions any agent had (1 for a single-session run)."""
        if self.per_session is None or self.per_session.is_empty():
            return 1
        return int(self.per_session.group_by("arm", "user_id").len().get_column("len").max())

    def table(self, pooled: bool = False) -> pl.DataFrame:
        """One row per arm, one "mean [low, high]" column per metric: the table people read
        (`pooled=True`: the pooled ratios and their intervals instead)."""
        cols = ("pooled", "pooled_ci_low", "pooled_ci_high") if pooled else ("mean", "ci_low", "ci_high")
        frame = self.arms.filter(pl.col(cols[0]).is_not_null()) if pooled else self.arms
        metrics = [m for m in self.config.metrics if m in set(frame.get_column("metric").to_list())]
        out: dict[str, list[str]] = {"arm": []}
        for m in metrics:
            out[LABELS[m]] = []
        for arm in frame.get_column("arm").unique(maintain_order=True).to_list():
            out["arm"].append(arm)
            rows = {r["metric"]: r for r in frame.filter(pl.col("arm") == arm).iter_rows(named=True)}
            for m in metrics:
                r = rows.get(m)
                out[LABELS[m]].append("n/a" if r is None else _cell(r[cols[0]], r[cols[1]], r[cols[2]], m))
        return pl.DataFrame(out, schema={k: pl.Utf8 for k in out})

    def save(self, folder: Path) -> None:
        """Into `folder`, without pickle: the tables as Parquet, the rest as JSON."""
        from ops.storage.codec import save_json, save_table

        folder.mkdir(parents=True, exist_ok=True)
        for name in _TABLES:
            save_table(folder / f"{name}.parquet", getattr(self, name))
        if self.per_session is not None:
            save_table(folder / "per_session.parquet", self.per_session)
        if self.slot_clicks is not None:
            save_table(folder / "slot_clicks.parquet", self.slot_clicks)
        save_json(
            folder / "readout.json",
            {
                "kind": "ABReadout",
                "format_version": 1,
                "control": self.control,
                "design": self.design,
                "config": self.config.model_dump(mode="json"),
            },
        )

    @classmethod
    def load(cls, folder: Path) -> ABReadout:
        from ops.storage.codec import check_format, load_json, load_table

        meta = load_json(folder / "readout.json")
        check_format(meta, "ABReadout", 1, folder / "readout.json")
        tables = {name: load_table(folder / f"{name}.parquet") for name in _TABLES}
        if (folder / "per_session.parquet").exists():
            tables["per_session"] = load_table(folder / "per_session.parquet")
        if (folder / "slot_clicks.parquet").exists():
            tables["slot_clicks"] = load_table(folder / "slot_clicks.parquet")
        return cls(
            **tables,
            control=meta["control"],
            design=meta["design"],
            config=ReadoutConfig.model_validate(meta["config"]),
        )

    def to_markdown(self) -> str:
        sessions = self.sessions_per_agent
        fewest = (
            int(self.per_session.group_by("arm", "user_id").len().get_column("len").min())
            if self.per_session is not None and not self.per_session.is_empty()
            else sessions
        )
        # Visits by activity tier (ops/simulation/visits.py): agents come a different number of times.
        count = f"{fewest}–{sessions}" if fewest < sessions else f"{sessions}"
        unit = f"; {count} sessions per agent, averaged per agent" if sessions > 1 else ""
        lines = [
            f"### Arms ({self.design} design, {self.config.confidence:.0%} bootstrap intervals over agents{unit})",
            "",
        ]
        table = self.table()
        if self.fallbacks.height:
            # Recorded fallbacks beside each arm: agents with one (events), of which failed.
            cells = {
                r["arm"]: f"{r['fallback_agents']} agents ({r['fallback_events']} events), {r['failed_agents']} failed"
                for r in self.fallbacks.iter_rows(named=True)
            }
            table = table.with_columns(pl.col("arm").replace_strict(cells, default="0").alias("fallbacks"))
        lines += _markdown(table)
        if self.arms.get_column("pooled").is_not_null().any():
            lines += ["", "### Pooled ratios (sum over agents of numerators ÷ denominators)", ""]
            lines += _markdown(self.table(pooled=True))
        if not self.comparisons.is_empty():
            family = "all comparisons" if self.config.holm_family == "all" else "arms within each metric"
            lines += ["", f"### Against the control {self.control} (Holm-corrected over {family})", ""]
            header = ["arm", "metric", "n", "difference [CI]", "test", "p", "p (Holm)", "significant"]
            lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            for r in self.comparisons.iter_rows(named=True):
                cells = [
                    r["arm"],
                    LABELS[r["metric"]],
                    str(r["n"]),
                    _cell(r["difference"], r["ci_low"], r["ci_high"], r["metric"]),
                    r["test"],
                    _fmt_p(r["p_value"]),
                    _fmt_p(r["p_holm"]),
                    "yes" if r["significant"] else "no",
                ]
                lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"


def ab_readout(
    events: pl.DataFrame,
    control: str,
    design: Literal["auto", "paired", "random"] = "auto",
    config: ReadoutConfig | None = None,
) -> ABReadout:
    """The whole read-out from the events of every arm (ops.schema.EVENTS rows).

    `design="auto"` is paired when every arm simulated exactly the same agents."""
    config = config or ReadoutConfig()
    unknown = [m for m in config.metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"read-out: unknown metric(s) {unknown}; the metrics are {METRICS}")
    per_session = per_session_metrics(events, config.like_threshold)
    per_agent = agent_means(per_session)
    arms = per_agent.get_column("arm").unique(maintain_order=True).sort().to_list()
    if control not in arms:
        raise ValueError(f"read-out: control arm {control!r} has no events; the arms are {arms}")
    users = {a: per_agent.filter(pl.col("arm") == a).get_column("user_id") for a in arms}
    if design == "auto":
        first = set(users[control].to_list())
        design = "paired" if all(set(u.to_list()) == first for u in users.values()) else "random"
    if design not in ("paired", "random"):
        raise ValueError(f"read-out: design must be 'auto', 'paired' or 'random', got {design!r}")

    summaries, boots = [], {}
    for arm in arms:
        frame = per_agent.filter(pl.col("arm") == arm).sort("user_id")
        summary, boot = _summarise_arm(arm, frame, config)
        summaries.append(summary)
        boots[arm] = boot
    arm_table = pl.concat(summaries)

    comparisons = []
    for arm in arms:
        if arm == control:
            continue
        if design == "paired":
            comparisons.append(_compare_paired(arm, control, per_agent, config))
        else:
            comparisons.append(_compare_unpaired(arm, control, per_agent, boots, config))
    comparison_table = _with_holm(pl.concat(comparisons) if comparisons else _empty_comparisons(), config)
    fallbacks = pl.DataFrame(
        [{"arm": arm, **fallback_counts(events.filter(pl.col("arm") == arm))} for arm in arms], schema=FALLBACKS
    )
    return ABReadout(
        per_agent, arm_table, comparison_table, control, design, config, fallbacks, per_session, slot_clicks(events)
    )


FALLBACKS = {
    "arm": pl.Utf8,
    "agents": pl.Int64,
    "fallback_events": pl.Int64,
    "fallback_agents": pl.Int64,
    "failed_agents": pl.Int64,
}


def fallback_counts(events: pl.DataFrame) -> dict[str, int]:
    """How often the brain fell back in these events: {"agents", "fallback_events",
    "fallback_agents" (agents with at least one), "failed_agents" (agents whose answers stayed
    invalid, whose endpoint kept failing or whose deadline passed: `observation.AGENT_FAILURES`)}.  Events written before
    the `fallback` column existed count as none."""
    agents = events.get_column("user_id").n_unique() if "user_id" in events.columns else 0
    if "fallback" not in events.columns or events.is_empty():
        return {"agents": agents, "fallback_events": 0, "fallback_agents": 0, "failed_agents": 0}
    fell = events.filter(pl.col("fallback").fill_null(False))
    kind = pl.col("fallback_reason").str.split(":").list.first().str.strip_chars()
    failed = fell.filter(kind.is_in(list(AGENT_FAILURES)))
    return {
        "agents": agents,
        "fallback_events": fell.height,
        "fallback_agents": fell.get_column("user_id").n_unique(),
        "failed_agents": failed.get_column("user_id").n_unique(),
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
    needed = ("arm", "user_id", "page_type", "page_number", "action", "movie_id", "shown", "rating", "satisfaction")
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
        pl.col("movie_id").filter(watch).n_unique().alias("watched"),
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


# -- helpers ---------------------------------------------------------------------------------


def _summarise_arm(arm: str, frame: pl.DataFrame, config: ReadoutConfig) -> tuple[pl.DataFrame, np.ndarray]:
    metrics = list(config.metrics)
    ratios = [m for m in metrics if m in RATIO_PARTS]
    values = _matrix(frame, metrics)
    num = _matrix(frame, [RATIO_PARTS[m][0] for m in ratios])
    den = _matrix(frame, [RATIO_PARTS[m][1] for m in ratios])
    rng = named_rng(config.seed, "arm", arm)
    # Metric means and pooled parts share each resample of agents; the ratio of the mean
    # numerator to the mean denominator is the pooled ratio (the n cancels).
    both = np.concatenate([values, num, den], axis=1)
    boot_parts = bootstrap_means(both, config.n_bootstrap, rng, config.bootstrap_chunk)
    k, r = len(metrics), len(ratios)
    boot = boot_parts[:, :k]
    boot_pooled = boot_parts[:, k : k + r] / np.where(boot_parts[:, k + r :] > 0, boot_parts[:, k + r :], np.nan)
    with np.errstate(invalid="ignore"):
        mean = np.array([np.nanmean(values[:, j]) if np.isfinite(values[:, j]).any() else np.nan for j in range(k)])
    ci = percentile_interval(boot, config.confidence)
    pooled = np.full(k, np.nan)
    pooled_ci = np.full((2, k), np.nan)
    for i, m in enumerate(ratios):
        j = metrics.index(m)
        total_den = den[:, i].sum()
        pooled[j] = num[:, i].sum() / total_den if total_den > 0 else np.nan
        pooled_ci[:, j] = percentile_interval(boot_pooled[:, i], config.confidence)
    n_agents = np.isfinite(values).sum(axis=0)
    summary = pl.DataFrame(
        {
            "arm": [arm] * k,
            "metric": metrics,
            "n_agents": n_agents.astype(np.int64),
            "mean": mean,
            "ci_low": ci[0],
            "ci_high": ci[1],
            "pooled": pooled,
            "pooled_ci_low": pooled_ci[0],
            "pooled_ci_high": pooled_ci[1],
        }
    ).with_columns(
        pl.col(c).fill_nan(None) for c in ("mean", "ci_low", "ci_high", "pooled", "pooled_ci_low", "pooled_ci_high")
    )
    return summary, boot


def _compare_paired(arm: str, control: str, per_agent: pl.DataFrame, config: ReadoutConfig) -> pl.DataFrame:
    metrics = list(config.metrics)
    treat = per_agent.filter(pl.col("arm") == arm).select("user_id", *metrics)
    base = per_agent.filter(pl.col("arm") == control).select("user_id", *metrics)
    joined = treat.join(base, on="user_id", how="inner", suffix="__control").sort("user_id")
    t = _matrix(joined, metrics)
    c = _matrix(joined, [f"{m}__control" for m in metrics])
    d = t - c  # NaN where either side is undefined: that agent is out of that metric's pairs
    boot = bootstrap_means(
        d, config.n_bootstrap, named_rng(config.seed, "paired", arm, control), config.bootstrap_chunk
    )
    ci = percentile_interval(boot, config.confidence)
    rows = []
    for j, metric in enumerate(metrics):
        ok = ~np.isnan(d[:, j])
        diff = float(d[ok, j].mean()) if ok.any() else np.nan
        p = paired_p_value(t[ok, j], c[ok, j], config.paired_test)
        rows.append((arm, control, metric, int(ok.sum()), diff, ci[0, j], ci[1, j], f"paired {config.paired_test}", p))
    return _comparison_frame(rows)


def _compare_unpaired(
    arm: str, control: str, per_agent: pl.DataFrame, boots: dict, config: ReadoutConfig
) -> pl.DataFrame:
    metrics = list(config.metrics)
    t = _matrix(per_agent.filter(pl.col("arm") == arm).sort("user_id"), metrics)
    c = _matrix(per_agent.filter(pl.col("arm") == control).sort("user_id"), metrics)
    # Independent samples: the arms' own independent bootstraps, differenced.
    diff_boot = boots[arm] - boots[control]
    ci = percentile_interval(diff_boot, config.confidence)
    rows = []
    for j, metric in enumerate(metrics):
        x, y = t[~np.isnan(t[:, j]), j], c[~np.isnan(c[:, j]), j]
        diff = float(x.mean() - y.mean()) if x.size and y.size else np.nan
        p = unpaired_p_value(x, y, config.unpaired_test)
        rows.append((arm, control, metric, int(x.size + y.size), diff, ci[0, j], ci[1, j], config.unpaired_test, p))
    return _comparison_frame(rows)


def _with_holm(comparisons: pl.DataFrame, config: ReadoutConfig) -> pl.DataFrame:
    p = comparisons.get_column("p_value").to_numpy().astype(float)
    adjusted = np.full(p.shape, np.nan)
    if config.holm_family == "all":
        adjusted = holm(p)
    else:
        metrics = comparisons.get_column("metric").to_numpy()
        for m in np.unique(metrics):
            rows = np.flatnonzero(metrics == m)
            adjusted[rows] = holm(p[rows])
    return comparisons.with_columns(
        pl.Series("p_holm", adjusted).fill_nan(None),
    ).with_columns((pl.col("p_holm") <= config.alpha).fill_null(False).alias("significant"))


def _comparison_frame(rows: list[tuple]) -> pl.DataFrame:
    names = ("arm", "control", "metric", "n", "difference", "ci_low", "ci_high", "test", "p_value")
    cols = list(zip(*rows))
    frame = pl.DataFrame(
        {name: list(col) for name, col in zip(names, cols)},
        schema={
            "arm": pl.Utf8,
            "control": pl.Utf8,
            "metric": pl.Utf8,
            "n": pl.Int64,
            "difference": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "test": pl.Utf8,
            "p_value": pl.Float64,
        },
    )
    return frame.with_columns(pl.col(c).fill_nan(None) for c in ("difference", "ci_low", "ci_high", "p_value"))


def _empty_comparisons() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "arm": pl.Utf8,
            "control": pl.Utf8,
            "metric": pl.Utf8,
            "n": pl.Int64,
            "difference": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "test": pl.Utf8,
            "p_value": pl.Float64,
        }
    )


def _matrix(frame: pl.DataFrame, columns: Sequence[str]) -> np.ndarray:
    out = np.empty((frame.height, len(columns)))
    for j, c in enumerate(columns):
        out[:, j] = frame.get_column(c).cast(pl.Float64).fill_null(np.nan).to_numpy()
    return out


def _cell(value: float | None, low: float | None, high: float | None, metric: str) -> str:
    # Ratios read best with 4 decimals; counts and scales (AR, likes, exit page,
    # satisfaction) with 2.
    digits = 4 if metric in RATIO_PARTS and metric != "average_rating" else 2

    def f(v):
        return "n/a" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"

    return f"{f(value)} [{f(low)}, {f(high)}]"


def _fmt_p(p: float | None) -> str:
    if p is None or not np.isfinite(p):
        return "n/a"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _markdown(frame: pl.DataFrame) -> list[str]:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in frame.iter_rows()]
    return [header, rule, *body]


# ABReadout's tables, one Parquet file each (`ABReadout.save`).
_TABLES = ("per_agent", "arms", "comparisons", "fallbacks")

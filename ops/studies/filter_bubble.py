"""The filter-bubble experiment (Agent4Rec §4.1): rounds of an arm (`ops.studies.rounds`)
and, per round, how narrow the lists and the watches get.

The filter-bubble figures (`filter_bubble_metrics`), per round, with percentile-bootstrap
intervals over agents (`ops.readout.statistics`):
- `recommended_top1_genre_share` — Agent4Rec's P̄_top1-genre: per agent, the share of its
  list's movies that carry the list's most frequent genre; `recommended_genres` — N̄_genres:
  the number of distinct genres in the list;
- `watched_top1_genre_share`, `watched_genres` — the same for what the agent watched
  (agents who watched nothing are left out of these two);
- `catalogue_coverage` — distinct movies recommended to the agents ÷ the round's pool, with
  a delete-one-agent jackknife interval (a bootstrap resample repeats agents, which biases
  a count of distinct movies low);
- `satisfaction` — the exit interview's 1–10.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats

from ops.agents.movie_facts import genre_vocabulary
from ops.arms.recommenders import arm_config
from ops.figures import pyplot, table_markdown
from ops.readout.agent_metrics import per_agent_metrics
from ops.readout.statistics import bootstrap_means, named_rng, percentile_interval
from ops.simulation.assignment import sample_agents
from ops.simulation.observation import WATCH_AND_RATE
from ops.studies.rounds import RoundResult, RoundsConfig, simulate_rounds

FILTER_BUBBLE_METRICS = (
    "recommended_top1_genre_share",
    "recommended_genres",
    "watched_top1_genre_share",
    "watched_genres",
    "catalogue_coverage",
    "satisfaction",
)


@dataclass(frozen=True)
class FilterBubble:
    """The filter-bubble experiment: its figures by round (`filter_bubble_metrics`)."""

    metrics: pl.DataFrame
    agents: int
    seconds: float

    def table(self) -> str:
        """The figures as "mean [low, high]", one column a round, in Markdown."""
        wide = self.metrics.with_columns(
            pl.format(
                "{} [{}, {}]", pl.col("mean").round(3), pl.col("ci_low").round(3), pl.col("ci_high").round(3)
            ).alias("value")
        ).pivot(on="round", index="metric", values="value")
        return table_markdown(wide)


def filter_bubble(
    arm: str,
    config: RoundsConfig,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame,
    catalogue_frame: pl.DataFrame,
    agents,
    brain_model,
    *,
    n_agents: int = 0,
    max_epochs: int = 0,
) -> FilterBubble:
    """Agent4Rec §4.1: `config.rounds` rounds of arm `arm` for `n_agents` agents (0: all),
    and the filter-bubble figures with their intervals."""
    started = time.perf_counter()
    results, chosen = play_rounds(
        arm, config, train, valid, users, catalogue_frame, agents, brain_model, n_agents=n_agents, max_epochs=max_epochs
    )
    metrics = filter_bubble_metrics(results, catalogue_frame, config.n_bootstrap, config.confidence, config.seed)
    return FilterBubble(metrics, len(chosen), time.perf_counter() - started)


def play_rounds(
    arm: str,
    config: RoundsConfig,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame,
    catalogue_frame: pl.DataFrame,
    agents,
    brain_model,
    *,
    n_agents: int = 0,
    max_epochs: int = 0,
) -> tuple[list[RoundResult], list[int]]:
    """The filter-bubble study's rounds — arm `arm` retrained `config.rounds` times for a
    seeded sample of `n_agents` agents (0: all) — and the agents sampled.  A round is a pure
    function of its inputs and the seed, so the causal study (`ops.studies.causal`) that
    plays them with the same settings reads the same events."""
    overrides = {"max_epochs": max_epochs} if max_epochs else {}
    chosen = sample_agents(agents.profiles, n_agents, config.seed)
    results = simulate_rounds(
        arm_config(arm, settings=overrides), train, valid, users, catalogue_frame, agents, brain_model, config, chosen
    )
    return results, chosen


def filter_bubble_metrics(
    results: Sequence[RoundResult],
    catalogue_frame: pl.DataFrame,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pl.DataFrame:
    """One row per (round, metric): mean over agents and its bootstrap interval (module
    docstring); coverage is over each round's own pool."""
    genres = _genre_matrix(catalogue_frame)
    rows = []
    for result in results:
        per_agent = _per_agent_diversity(result, genres)
        satisfaction = per_agent_metrics(result.events).select("user_id", "satisfaction")
        per_agent = per_agent.join(satisfaction, on="user_id", how="left")
        names = [m for m in FILTER_BUBBLE_METRICS if m != "catalogue_coverage"]
        values = per_agent.select(names).to_numpy().astype(float)
        rng = named_rng(seed, "filter_bubble", result.round)
        boots = bootstrap_means(values, n_bootstrap, rng)
        interval = percentile_interval(boots, confidence)
        with np.errstate(invalid="ignore"):
            means = np.nanmean(values, axis=0) if len(values) else np.full(len(names), np.nan)
        for j, name in enumerate(names):
            rows.append(
                (
                    result.round,
                    name,
                    float(means[j]),
                    float(interval[0, j]),
                    float(interval[1, j]),
                    int(np.isfinite(values[:, j]).sum()),
                )
            )
        coverage, low, high = _coverage(
            result.lists, per_agent.get_column("user_id").to_numpy(), result.pool_size, confidence
        )
        rows.append((result.round, "catalogue_coverage", coverage, low, high, per_agent.height))
    schema = {
        "round": pl.Int64,
        "metric": pl.Utf8,
        "mean": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "agents": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row").sort("metric", "round")


def filter_bubble_figure(metrics: pl.DataFrame, title: str = ""):
    """Agent4Rec Figure 8 and beside it the same for what agents watched, coverage and
    satisfaction: each metric over rounds with its interval."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    for ax, name in zip(axes.ravel(), FILTER_BUBBLE_METRICS):
        part = metrics.filter(pl.col("metric") == name).sort("round")
        x = part.get_column("round").to_numpy()
        y = part.get_column("mean").to_numpy()
        err = np.vstack([y - part.get_column("ci_low").to_numpy(), part.get_column("ci_high").to_numpy() - y])
        ax.errorbar(x, y, yerr=np.clip(np.nan_to_num(err), 0.0, None), marker="o", capsize=4)
        ax.set_title(name.replace("_", " "))
        ax.set_xlabel("round")
        ax.set_xticks(x)
    fig.suptitle(title or "Filter bubble over rounds (Agent4Rec §4.1, Fig. 8), 95 % intervals over agents")
    fig.tight_layout()
    return fig


def _genre_matrix(catalogue_frame: pl.DataFrame) -> dict[int, np.ndarray]:
    vocabulary = genre_vocabulary(catalogue_frame)
    index = {g: j for j, g in enumerate(vocabulary)}
    out = {}
    for item_id, names in catalogue_frame.select("item_id", "genres").iter_rows():
        row = np.zeros(len(vocabulary), dtype=bool)
        for g in names or ():
            if g in index:
                row[index[g]] = True
        out[int(item_id)] = row
    return out


def _diversity(item_ids: Sequence[int], genres: Mapping[int, np.ndarray]) -> tuple[float, float]:
    """(share of the movies carrying their most frequent genre, distinct genres)."""
    if not item_ids:
        return float("nan"), float("nan")
    counts = np.sum([genres[m] for m in item_ids], axis=0)
    return float(counts.max() / len(item_ids)), float((counts > 0).sum())


def _per_agent_diversity(result: RoundResult, genres: Mapping[int, np.ndarray]) -> pl.DataFrame:
    users = sorted(set(result.events.get_column("user_id").to_list()))
    listed = dict(
        result.lists.sort("user_id", "rank").group_by("user_id", maintain_order=True).agg(pl.col("item_id")).iter_rows()
    )
    watched = dict(
        result.events.filter(pl.col("action") == WATCH_AND_RATE)
        .group_by("user_id")
        .agg(pl.col("item_id").unique())
        .iter_rows()
    )
    rows = []
    for u in users:
        rec = _diversity(listed.get(u, []), genres)
        seen = _diversity(watched.get(u, []), genres)
        rows.append((u, *rec, *seen))
    names = [
        "user_id",
        "recommended_top1_genre_share",
        "recommended_genres",
        "watched_top1_genre_share",
        "watched_genres",
    ]
    return pl.DataFrame(rows, schema={n: (pl.Int64 if n == "user_id" else pl.Float64) for n in names}, orient="row")


def _coverage(lists: pl.DataFrame, users: np.ndarray, pool: int, confidence: float) -> tuple[float, float, float]:
    """Distinct movies recommended to `users` ÷ pool, with a delete-one-agent jackknife
    interval.  Not the bootstrap: a resample repeats agents, so its distinct count is
    biased low — on the synthetic default the percentile interval lay wholly below the
    estimate and the bias-corrected (basic) one wholly above it."""
    listed = dict(lists.group_by("user_id").agg(pl.col("item_id").unique()).iter_rows())
    per_user = [np.asarray(listed.get(int(u), []), dtype=np.int64) for u in users]
    n = len(per_user)
    if n == 0 or pool <= 0:
        return float("nan"), float("nan"), float("nan")
    movies, counts = np.unique(np.concatenate(per_user), return_counts=True)
    point = len(movies) / pool
    if n < 2:
        return float(point), float("nan"), float("nan")
    only = set(movies[counts == 1].tolist())
    # Leaving agent i out loses the movies only it was recommended.
    leave_out = np.array([(len(movies) - sum(int(m) in only for m in p)) / pool for p in per_user])
    se = float(np.sqrt((n - 1) / n * np.sum((leave_out - leave_out.mean()) ** 2)))
    half = float(stats.norm.ppf(0.5 + confidence / 2)) * se
    return float(point), float(max(0.0, point - half)), float(min(1.0, point + half))

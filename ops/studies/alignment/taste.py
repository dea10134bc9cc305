"""Taste discrimination (SimUSER §4.1 / Table 1, Agent4Rec §3.1 / Table 1).

Each agent is shown a list mixing movies its user rated in the held-out (test) window with
movies the user never rated, at 1:1, 1:3, 1:9 (the papers') and 1:4 (A/B Agent's list
quality ratio), and says which it would watch: a binary classification scored by accuracy,
precision, recall and F1 per agent, averaged over agents with bootstrap intervals (the
pooled, micro-averaged figures beside them).

Through the sandbox's own decision path (`taste_discrimination`): the list is laid out on
home pages of five (`ops.simulation.sandbox.Sandbox`), and for each page the brain's
`decide` is asked as on a first visit (fresh session: no fatigue spent, nothing in
short-term memory, so one page's judgement does not leak into the next).  What the agent
"would watch" is what caught its eye on the page plus the movie it clicks — the home-page
answer of both brains (`Decision.caught_eye`; for the LLM brain the same prompt and JSON
schema as in the sandbox).  Why the home page and not the detail page: the papers show a
title and a description and ask for a choice, which is the home page's question; the
detail page's watch decision is asked only of movies already chosen.  What an agent
"would watch" is then bounded by how much of the list one session gets through.

Beside it the papers' own protocol, every item of the list judged (`per_item`), and that
protocol again under the papers' hold-out; `TasteDiscrimination` holds all three.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl

from ops.agents.session import AgentSession
from ops.readout.statistics import mean_intervals
from ops.simulation.brains.protocol import Brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.fatigue import FatigueConfig
from ops.simulation.observation import CLICK_MOVIE, NEXT_PAGE, Decision
from ops.simulation.sandbox import Sandbox, SandboxConfig
from ops.simulation.session import agent_rng
from ops.storage.codec import load_fields, save_fields
from ops.studies.alignment.mixed_lists import ratio_name
from ops.studies.alignment.questioning import brain_workers, check_fallbacks, fresh_session, map_in_order

# SimUSER and Agent4Rec's ratios, then A/B Agent's 1:4 (§3.3.1).
TASTE_RATIOS: tuple[int, ...] = (1, 3, 9, 4)
TASTE_METRICS: tuple[str, ...] = ("accuracy", "precision", "recall", "f1")


@dataclass
class TasteDiscrimination:
    """per_agent: ratio, user_id, items, positives, tp, fp, fn, tn and the four metrics
    (precision undefined when the agent picks nothing); summary: ratio, metric, agents,
    mean, ci_low, ci_high, pooled."""

    per_agent: pl.DataFrame
    summary: pl.DataFrame
    brain: str = ""  # the brain's name (events' `brain` column), set by whoever ran it
    protocol: str = "sandbox"  # "sandbox" | "per item" (module docstring)
    # The per-item protocol's per_agent and summary beside this (sandbox) one, and the
    # embedded brain's thresholds per ratio (None: not run / the LLM brain).
    per_item_agents: pl.DataFrame | None = None
    per_item: pl.DataFrame | None = None
    thresholds: dict | None = None
    # The per-item protocol under the papers' hold-out (`papers_holdout_taste`): per_agent,
    # summary and the embedded brain's thresholds (fitted on the second drawn set).
    holdout_agents: pl.DataFrame | None = None
    holdout: pl.DataFrame | None = None
    holdout_thresholds: dict | None = None

    def save(self, folder: Path) -> None:
        """Into `folder` without pickle (`ops.storage.codec.save_fields`)."""
        save_fields(folder, "TasteDiscrimination", 1, self)

    @classmethod
    def load(cls, folder: Path) -> TasteDiscrimination:
        return load_fields(cls, folder, "TasteDiscrimination", 1)

    def metrics(self) -> dict[str, float]:
        """The figures logged: each metric's mean per ratio ("<metric>_1_<n>"), the per-item
        protocol's ("per_item_…") and its thresholds, the papers' hold-out's ("papers_holdout_…")."""

        def means(summary: pl.DataFrame, prefix: str = "") -> dict[str, float]:
            return {
                f"{prefix}{r['metric']}_1_{r['ratio'].split(':')[1]}": r["mean"] for r in summary.iter_rows(named=True)
            }

        metrics = means(self.summary)
        if self.per_item is not None:
            metrics |= means(self.per_item, "per_item_")
        metrics |= {f"per_item_threshold_1_{k.split(':')[1]}": v for k, v in (self.thresholds or {}).items()}
        if self.holdout is not None:
            metrics |= means(self.holdout, "papers_holdout_")
        return metrics

    def tables(self) -> dict[str, pl.DataFrame]:
        """The summaries, by the name they are logged under."""
        tables = {"taste_discrimination": self.summary}
        if self.per_item is not None:
            tables["taste_discrimination_per_item"] = self.per_item
        if self.holdout is not None:
            tables["taste_discrimination_papers_holdout"] = self.holdout
        return tables

    def table(self) -> pl.DataFrame:
        """One row per ratio, one "mean [low, high]" column per metric (the papers' Table 1
        layout); with the per-item protocol beside, one row per (protocol, ratio)."""
        if self.per_item is None:
            return _wide(self.summary)
        tables = [
            _wide(self.summary).insert_column(0, pl.lit(self.protocol).alias("protocol")),
            _wide(self.per_item).insert_column(0, pl.lit(PER_ITEM).alias("protocol")),
        ]
        if self.holdout is not None:
            tables.append(_wide(self.holdout).insert_column(0, pl.lit(PAPERS_HOLDOUT).alias("protocol")))
        return pl.concat(tables, how="diagonal_relaxed")

    def with_per_item(
        self, result: TasteDiscrimination, thresholds: Mapping[str, float] | None = None
    ) -> TasteDiscrimination:
        """This result with the per-item protocol's (`taste_per_item`) beside it."""
        cuts = None if thresholds is None else {k: float(v) for k, v in thresholds.items()}
        return replace(self, per_item_agents=result.per_agent, per_item=result.summary, thresholds=cuts)

    def with_holdout(
        self, result: TasteDiscrimination, thresholds: Mapping[str, float] | None = None
    ) -> TasteDiscrimination:
        """This result with the per-item protocol under the papers' hold-out beside it."""
        cuts = None if thresholds is None else {k: float(v) for k, v in thresholds.items()}
        return replace(self, holdout_agents=result.per_agent, holdout=result.summary, holdout_thresholds=cuts)


def taste_discrimination(
    brain: Brain,
    sessions: Sequence[AgentSession],
    lists: pl.DataFrame,
    catalogue: Catalogue,
    seed: int = 0,
    fatigue: FatigueConfig | None = None,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    progress: bool = False,
) -> TasteDiscrimination:
    """Ask `brain` about every list of `lists` (ops.studies.alignment.mixed_lists.mixed_lists)
    and score its choices; `sessions` are the agents' templates (Agents.sessions())."""
    by_user = {s.user_id: s for s in sessions}
    missing = sorted(set(lists.get_column("user_id").to_list()) - set(by_user))
    if missing:
        raise ValueError(f"taste discrimination: no agent for user(s) {missing[:10]}")
    questions = list_questions(lists)
    users = sorted({user for _, user, _, _ in questions})
    items = lists.group_by("user_id").agg(pl.col("item_id").unique())
    brain.prepare([by_user[u] for u in users], {u: ms for u, ms in items.iter_rows()})
    outcomes: list[str | None] = []  # every decision's fallback reason (None: answered)

    def judge(question) -> tuple:
        ratio, user, movies, relevant = question
        rng = agent_rng(seed, user, f"taste {ratio}")
        return judged(question, would_watch(brain, by_user[user], movies, catalogue, rng, fatigue, outcomes))

    # One list per thread, as many as the endpoint serves at once (one at a time made 0.28
    # calls/s on a server that serves 2).
    rows = map_in_order(judge, questions, brain_workers(brain), "taste discrimination", progress)
    check_fallbacks("taste discrimination (sandbox)", outcomes)
    per_agent = per_agent_frame(rows)
    return TasteDiscrimination(per_agent, taste_summary(per_agent, n_bootstrap, confidence, seed))


def would_watch(
    brain: Brain,
    template: AgentSession,
    movies: Sequence[int],
    catalogue: Catalogue,
    rng: np.random.Generator,
    fatigue: FatigueConfig | None = None,
    outcomes: list | None = None,
) -> set[int]:
    """The movies of `movies` the agent would watch: page by page, what catches its eye on a
    first visit and what it clicks.  `outcomes` gets each decision's fallback reason (None
    when the brain answered)."""
    sandbox = Sandbox(movies, catalogue, SandboxConfig(list_length=max(len(movies), 1)))
    picked: set[int] = set()
    for page in range(1, sandbox.n_pages + 1):
        if page > 1:
            sandbox.apply(Decision(NEXT_PAGE, 3, "next page of the list being judged"))
        decision = brain.decide(fresh_session(template, fatigue), sandbox.observe(), rng)
        if outcomes is not None:
            outcomes.append(decision.fallback_reason)
        on_page = set(sandbox.page_items())
        picked |= on_page & set(decision.caught_eye)
        if decision.action == CLICK_MOVIE and decision.item_id in on_page:
            picked.add(int(decision.item_id))
    return picked


def taste_summary(
    per_agent: pl.DataFrame, n_bootstrap: int = 2000, confidence: float = 0.95, seed: int = 0
) -> pl.DataFrame:
    """ratio, metric, agents, mean, ci_low, ci_high, pooled: the mean over agents with its
    bootstrap interval, and the metric of the counts summed over agents."""
    means = mean_intervals(per_agent, "ratio", TASTE_METRICS, n_bootstrap, confidence, seed, stream="taste")
    pooled = per_agent.group_by("ratio").agg(pl.col("tp", "fp", "fn", "tn").sum())
    pooled = _with_metrics(pooled).unpivot(
        index="ratio", on=list(TASTE_METRICS), variable_name="metric", value_name="pooled"
    )
    order = {ratio_name(m): i for i, m in enumerate(TASTE_RATIOS)}
    return (
        means.join(pooled, on=["ratio", "metric"], how="left")
        .with_columns(
            pl.col("ratio").replace_strict(order, default=len(order)).alias("_o"),
            pl.col("metric").replace_strict({m: i for i, m in enumerate(TASTE_METRICS)}).alias("_m"),
        )
        .sort("_o", "ratio", "_m")
        .drop("_o", "_m")
    )


def list_questions(lists: pl.DataFrame) -> list[tuple]:
    """(ratio, user id, movies in list order, relevant flags) per list of `lists` (`lists.mixed_lists`)."""
    grouped = (
        lists.sort("ratio", "user_id", "position")
        .group_by("ratio", "user_id", maintain_order=True)
        .agg("item_id", "relevant")
    )
    return list(grouped.iter_rows())


def judged(question: tuple, picked: set[int]) -> tuple:
    """One list's row of the per-agent table: ratio, user, items, positives and the confusion
    counts of `picked` (what the agent would watch) against the list's relevant movies."""
    ratio, user, movies, relevant = question
    y = np.asarray(relevant, dtype=bool)
    p = np.array([m in picked for m in movies], dtype=bool)
    return (ratio, user, len(movies), int(y.sum()), *_confusion(y, p))


def per_agent_frame(rows: list[tuple]) -> pl.DataFrame:
    """The per-agent table of `judged` rows, with the four metrics."""
    schema = {name: pl.Int64 for name in ("user_id", "items", "positives", "tp", "fp", "fn", "tn")}
    return _with_metrics(pl.DataFrame(rows, schema={"ratio": pl.Utf8, **schema}, orient="row"))


def _confusion(y: np.ndarray, p: np.ndarray) -> tuple[int, int, int, int]:
    return int((y & p).sum()), int((~y & p).sum()), int((y & ~p).sum()), int((~y & ~p).sum())


def _with_metrics(frame: pl.DataFrame) -> pl.DataFrame:
    tp, fp, fn, tn = (pl.col(c).cast(pl.Float64) for c in ("tp", "fp", "fn", "tn"))
    return frame.with_columns(
        ((tp + tn) / (tp + fp + fn + tn)).alias("accuracy"),
        pl.when(tp + fp > 0).then(tp / (tp + fp)).otherwise(None).alias("precision"),
        pl.when(tp + fn > 0).then(tp / (tp + fn)).otherwise(None).alias("recall"),
        # 2TP / (2TP + FP + FN): defined whenever the list holds a positive, and 0 for an
        # agent that picks none of them (where precision is undefined).
        pl.when(tp + fn > 0).then(2 * tp / (2 * tp + fp + fn)).otherwise(None).alias("f1"),
    )


def _wide(summary: pl.DataFrame) -> pl.DataFrame:
    cells = summary.with_columns(
        cell=pl.format("{} [{}, {}]", pl.col("mean").round(3), pl.col("ci_low").round(3), pl.col("ci_high").round(3))
    )
    agents = summary.group_by("ratio", maintain_order=True).agg(pl.col("agents").max())
    return agents.join(
        cells.pivot(on="metric", index="ratio", values="cell"), on="ratio", how="left", maintain_order="left"
    )


PER_ITEM = "per item"
PAPERS_HOLDOUT = "per item, papers' hold-out"
SANDBOX = "sandbox"

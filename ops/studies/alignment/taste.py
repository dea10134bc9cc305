"""Taste discrimination (SimUSER §4.1 / Table 1, Agent4Rec §3.1 / Table 1).

Each agent is shown a list mixing movies its user rated in the held-out (test) window with
movies the user never rated, at 1:1, 1:3, 1:9 (the papers') and 1:4 (A/B Agent's list
quality ratio), and says which it would watch: a binary classification scored by accuracy,
precision, recall and F1 per agent, averaged over agents with bootstrap intervals (the
pooled, micro-averaged figures beside them).

Through the sandbox's own decision path: the list is laid out on home pages of five
(`ops.simulation.sandbox.Sandbox`), and for each page the brain's `decide` is asked as on a
first visit (fresh session: no fatigue spent, nothing in short-term memory, so one page's
judgement does not leak into the next).  What the agent "would watch" is what caught its
eye on the page plus the movie it clicks — the home-page answer of both brains
(`Decision.caught_eye`; for the LLM brain the same prompt and JSON schema as in the
sandbox).  Why the home page and not the detail page: the papers show a title and a
description and ask for a choice, which is the home page's question; the detail page's
watch decision is asked only of movies already chosen.

Two protocols, reported side by side:
- "sandbox" (`taste_discrimination`): the decision path above; what an agent "would
  watch" is bounded by how much of the list one session gets through;
- "per item" (`taste_per_item`): the papers' — the agent sees its whole list (title,
  genres, description; poster where the brain sees posters) and says for EVERY item
  whether it would watch it.  The embedded brain answers yes where its click-and-watch
  probability reaches a threshold per ratio fitted on the VALIDATION window's lists
  (`fit_taste_thresholds`, guarded by `windows.check_threshold_window`: the test window is
  never read); the LLM brain gives one structured answer listing the ids it would watch
  (`llm_answerer`, `LIST_ANSWER`).

And the per-item protocol once more under the papers' hold-out (`papers_holdout_taste`):
their positives are "items the user has interacted with but [that were] not utilized for
profile initialization" (Agent4Rec §3.1), drawn from anywhere in the history.  From each
judged user's train window `held_out` ratings are drawn at random as positives and as many
for the thresholds (`lists.history_holdout`); the agents are rebuilt without either set,
and the embedded brain refitted on what is left (train) + validation.  The test-window
protocol stays the headline: an A/B test asks about the future.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl

from ops.agents.session import AgentSession
from ops.readout.statistics import named_rng
from ops.simulation.brains.protocol import Brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.fatigue import FatigueConfig
from ops.simulation.observation import CLICK_MOVIE, NEXT_PAGE, Decision
from ops.simulation.sandbox import Sandbox, SandboxConfig
from ops.simulation.session import agent_rng
from ops.studies.alignment.lists import (
    brain_workers,
    check_fallbacks,
    fresh_session,
    history_holdout,
    map_in_order,
    mean_intervals,
    mixed_lists,
    ratio_name,
)

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
        """Into `folder` without pickle (`ops.codec.save_fields`)."""
        from ops.codec import save_fields

        save_fields(folder, "TasteDiscrimination", 1, self)

    @classmethod
    def load(cls, folder: Path) -> TasteDiscrimination:
        from ops.codec import load_fields

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
    """Ask `brain` about every list of `lists` (ops.studies.alignment.lists.mixed_lists)
    and score its choices; `sessions` are the agents' templates (Agents.sessions())."""
    from tqdm.auto import tqdm

    by_user = {s.user_id: s for s in sessions}
    missing = sorted(set(lists.get_column("user_id").to_list()) - set(by_user))
    if missing:
        raise ValueError(f"taste discrimination: no agent for user(s) {missing[:10]}")
    grouped = (
        lists.sort("ratio", "user_id", "position")
        .group_by("ratio", "user_id", maintain_order=True)
        .agg("movie_id", "relevant")
    )
    users = sorted(set(grouped.get_column("user_id").to_list()))
    items = lists.group_by("user_id").agg(pl.col("movie_id").unique())
    brain.prepare([by_user[u] for u in users], {u: ms for u, ms in items.iter_rows()})
    questions = list(grouped.iter_rows())
    outcomes: list[str | None] = []  # every decision's fallback reason (None: answered)

    def judge(question) -> tuple:
        ratio, user, movies, relevant = question
        rng = agent_rng(seed, user, f"taste {ratio}")
        picked = would_watch(brain, by_user[user], movies, catalogue, rng, fatigue, outcomes)
        y = np.asarray(relevant, dtype=bool)
        p = np.array([m in picked for m in movies], dtype=bool)
        return (ratio, user, len(movies), int(y.sum()), *_confusion(y, p))

    # One list per thread, as many as the endpoint serves at once (one at a time made 0.28
    # calls/s on a server that serves 2).
    rows = map_in_order(
        judge,
        questions,
        brain_workers(brain),
        lambda it: tqdm(it, total=len(questions), desc="taste discrimination", disable=not progress, mininterval=2.0),
    )
    check_fallbacks("taste discrimination (sandbox)", outcomes)
    per_agent = _with_metrics(
        pl.DataFrame(
            rows,
            schema={
                "ratio": pl.Utf8,
                "user_id": pl.Int64,
                "items": pl.Int64,
                "positives": pl.Int64,
                "tp": pl.Int64,
                "fp": pl.Int64,
                "fn": pl.Int64,
                "tn": pl.Int64,
            },
            orient="row",
        )
    )
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
        if decision.action == CLICK_MOVIE and decision.movie_id in on_page:
            picked.add(int(decision.movie_id))
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


# -- the papers' per-item protocol --------------------------------------------------------------

PER_ITEM = "per item"
PAPERS_HOLDOUT = "per item, papers' hold-out"
SANDBOX = "sandbox"

# An answerer: (agent template, the list's movies, its ratio name) -> the movies it would watch.
Answerer = Callable[[AgentSession, Sequence[int], str], set[int]]
# A scorer: (agent template, movies) -> P(would watch) per movie.
Scorer = Callable[[AgentSession, Sequence[int]], np.ndarray]


def taste_per_item(
    answer: Answerer,
    sessions: Sequence[AgentSession],
    lists: pl.DataFrame,
    seed: int = 0,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    progress: bool = False,
    workers: int | None = None,
) -> TasteDiscrimination:
    """The papers' protocol: every list of `lists` (mixed_lists) shown whole, a yes / no for
    every item from `answer` (`threshold_answerer`, `llm_answerer`), scored as
    `taste_discrimination` scores the sandbox's picks.  `workers` lists are asked at once
    (default: the answerer's `concurrency`, 1 when it has none)."""
    from tqdm.auto import tqdm

    by_user = {s.user_id: s for s in sessions}
    missing = sorted(set(lists.get_column("user_id").to_list()) - set(by_user))
    if missing:
        raise ValueError(f"taste discrimination (per item): no agent for user(s) {missing[:10]}")
    grouped = (
        lists.sort("ratio", "user_id", "position")
        .group_by("ratio", "user_id", maintain_order=True)
        .agg("movie_id", "relevant")
    )
    questions = list(grouped.iter_rows())

    def judge(question) -> tuple:
        ratio, user, movies, relevant = question
        picked = answer(by_user[user], movies, ratio)
        y = np.asarray(relevant, dtype=bool)
        p = np.array([m in picked for m in movies], dtype=bool)
        return (ratio, user, len(movies), int(y.sum()), *_confusion(y, p))

    rows = map_in_order(
        judge,
        questions,
        brain_workers(answer) if workers is None else workers,
        lambda it: tqdm(it, total=len(questions), desc="taste, per item", disable=not progress, mininterval=2.0),
    )
    if getattr(answer, "outcomes", None) is not None:  # an answerer that can fail (the LLM's)
        check_fallbacks("taste discrimination (per item)", answer.outcomes)
    per_agent = _with_metrics(
        pl.DataFrame(
            rows,
            schema={
                "ratio": pl.Utf8,
                "user_id": pl.Int64,
                "items": pl.Int64,
                "positives": pl.Int64,
                "tp": pl.Int64,
                "fp": pl.Int64,
                "fn": pl.Int64,
                "tn": pl.Int64,
            },
            orient="row",
        )
    )
    return TasteDiscrimination(per_agent, taste_summary(per_agent, n_bootstrap, confidence, seed), protocol=PER_ITEM)


def embedded_scorer(brain, fatigue: FatigueConfig | None = None, relative: bool = True) -> Scorer:
    """The embedded brain's click-and-watch probability of each item, as a log probability
    (the calibrated click log-odds saturate: their probabilities would tie at 1), for an
    agent arriving on the site (first slot: no position effect; the papers' list has no pages).

    `relative` (the default): standardised within the list (z-scores), so the answer reads
    how much an item stands out of the list the agent is shown — the agent sees the whole
    list, as the papers' LLM does — rather than a level that differs from agent to agent.
    Chosen on the validation window's threshold lists (ML-1M users 1–1999, 600 agents, mean
    F1 at 1:1 / 1:3 / 1:9 / 1:4): absolute 0.797 / 0.613 / 0.454 / 0.597; z-scores 0.816 /
    0.644 / 0.483 / 0.623, the best sum of the five transforms tried (minus the list's
    maximum, its mean, its second best)."""

    def score(template: AgentSession, movies: Sequence[int]) -> np.ndarray:
        p = np.asarray(
            brain.click_and_watch_log_probability(fresh_session(template, fatigue), movies), dtype=np.float64
        )
        if not relative:
            return p
        return (p - p.mean()) / max(float(p.std()), 1e-9) if p.size > 1 else np.zeros_like(p)

    return score


def threshold_answerer(score: Scorer, thresholds: Mapping[str, float]) -> Answerer:
    """Yes where `score` reaches the list's ratio's threshold (`fit_taste_thresholds`)."""

    def answer(template: AgentSession, movies: Sequence[int], ratio: str) -> set[int]:
        if ratio not in thresholds:
            raise ValueError(f"taste (per item): no threshold fitted for ratio {ratio}; fitted {sorted(thresholds)}")
        p = np.asarray(score(template, movies), dtype=np.float64)
        return {int(m) for m, pi in zip(movies, p.tolist()) if pi >= thresholds[ratio]}

    return answer


def fit_taste_thresholds(
    score: Scorer,
    sessions: Sequence[AgentSession],
    window: pl.DataFrame,
    fitted: Mapping[str, pl.DataFrame],
    held_out: pl.DataFrame,
    movie_ids: Sequence[int] | np.ndarray,
    ratios: Sequence[int] = TASTE_RATIOS,
    list_length: int = 20,
    seed: int = 0,
    max_agents: int = 0,
) -> dict[str, float]:
    """Per ratio, the threshold on `score` that maximises the mean F1 over agents on lists
    built from `window` (the VALIDATION window: its ratings are the positives, movies the
    user rated in neither `window` nor any of `fitted` are the negatives).

    `held_out` (the test window) is read only by the leakage guard, which refuses a
    `window` sharing a pair with it or reaching past its start; its labels are never used.
    `max_agents` (0: all) caps the agents, drawn with `seed`."""
    from ops.studies.alignment.windows import check_threshold_window

    check_threshold_window(window, held_out, "taste threshold")
    known = pl.concat([f.select("user_id", "movie_id") for f in (*fitted.values(), window)])
    by_user = {s.user_id: s for s in sessions}
    users = sorted(set(window.get_column("user_id").to_list()) & set(by_user))
    if max_agents and len(users) > max_agents:
        users = sorted(
            np.random.default_rng(np.random.SeedSequence([seed, 2222]))
            .choice(users, max_agents, replace=False)
            .tolist()
        )
    if not users:
        raise ValueError("taste threshold: no agent has ratings in the threshold window")
    lists = mixed_lists(window, known, movie_ids, ratios, list_length, seed, users, stream="taste threshold")
    return thresholds_on_lists(score, sessions, lists)


def thresholds_on_lists(score: Scorer, sessions: Sequence[AgentSession], lists: pl.DataFrame) -> dict[str, float]:
    """Per ratio, the threshold on `score` that maximises the mean F1 over agents on
    `lists` (mixed_lists rows).  The caller owns which labels these are: they must not be
    the lists the thresholds will be scored on (`fit_taste_thresholds` builds them from the
    validation window; the papers' hold-out protocol from a second set of held-out ratings)."""
    by_user = {s.user_id: s for s in sessions}
    grouped = (
        lists.sort("ratio", "user_id", "position")
        .group_by("ratio", "user_id", maintain_order=True)
        .agg("movie_id", "relevant")
    )
    scored: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for ratio, user, movies, relevant in grouped.iter_rows():
        scored.setdefault(ratio, []).append(
            (np.asarray(score(by_user[user], movies), dtype=np.float64), np.asarray(relevant, dtype=bool))
        )
    return {ratio: _best_threshold(items) for ratio, items in scored.items()}


def _best_threshold(items: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """The candidate cut with the highest mean per-agent F1; candidates are the midpoints
    between the pooled scores' successive quantiles (a cut in the middle of a gap, not on a
    score that happens to be the largest negative), and the lowest quantile (pick all)."""
    pooled = np.concatenate([p for p, _ in items])
    q = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, 201)))
    candidates = np.r_[q[:1], (q[:-1] + q[1:]) / 2]
    f1 = np.zeros(len(candidates))
    for p, y in items:
        picked = p[None, :] >= candidates[:, None]
        tp = (picked & y).sum(axis=1)
        f1 += 2 * tp / np.maximum(2 * tp + (picked & ~y).sum(axis=1) + (~picked & y).sum(axis=1), 1)
    return float(candidates[int(np.argmax(f1))])


# The LLM brain's per-item answer: the ids it would watch, nothing else.  `list_answer_schema`
# is the same answer as a strict JSON schema with the list's ids as an enum, sent as the
# endpoint's structured output mode asks; the prompt states it and `check_list_answer`
# enforces it either way.
LIST_ANSWER = (
    'Answer with JSON only, exactly {{"watch": [ids]}}: the ids (numbers in brackets) of every movie above you would '
    "watch, from {ids}; [] if none."
)


def list_answer_schema(movies: Sequence[int]) -> dict:
    # uniqueItems is left out: OpenAI's strict mode refuses it; a repeated id counts once.
    return {
        "type": "object",
        "properties": {
            "watch": {
                "type": "array",
                "items": {"type": "integer", "enum": [int(m) for m in movies]},
                "maxItems": len(movies),
            }
        },
        "required": ["watch"],
        "additionalProperties": False,
    }


def check_list_answer(text: str, movies: Sequence[int]) -> set[int]:
    """The ids of a per-item answer; AnswerError (the LLM brain re-asks) when it is not
    {"watch": [ids of the list]}."""
    import json

    from ops.simulation.brains.llm.answers import AnswerError

    try:
        value = json.loads(text.strip().removeprefix("```json").removeprefix("```").removesuffix("```"))
    except json.JSONDecodeError as exc:
        raise AnswerError(f"the answer is not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(value, dict) or not isinstance(value.get("watch"), list):
        raise AnswerError('the answer must be an object {"watch": [ids]}')
    ids = value["watch"]
    bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, int) or i not in set(int(m) for m in movies)]
    if bad:
        raise AnswerError(f"ids {bad[:5]} are not in the list; answer with ids from {[int(m) for m in movies]}")
    return {int(i) for i in ids}


def list_messages(brain, template: AgentSession, movies: Sequence[int], catalogue: Catalogue) -> list[dict]:
    """The per-item question for the LLM brain: who the agent is (its system prompt), the
    memories its page prompt would recall, and the whole list as the papers show it."""
    from ops.simulation.brains.llm import prompts

    c = brain.config
    system = prompts.system_prompt(template.profile, c.fatigue.base_costs, c.fatigue.phi_min, c.fatigue.phi_max)
    parts = [
        {"type": "text", "text": prompts.memories_text(brain.recall(template, list(movies), "home")) + "\n"},
        {"type": "text", "text": "Here is a list of movies. For each one, decide whether you would watch it."},
    ]
    for m in movies:
        info = catalogue[int(m)]
        overview = (info.overview or "n/a")[:300]
        parts.append(
            {
                "type": "text",
                "text": f"[{int(m)}] {info.title} | genres: {', '.join(info.genres) or 'n/a'} | {overview}",
            }
        )
        parts.extend(brain._poster_parts(info.poster_small, "small"))
    parts.append({"type": "text", "text": "\n" + LIST_ANSWER.format(ids=[int(m) for m in movies])})
    return [{"role": "system", "content": system}, {"role": "user", "content": prompts.merge_text_parts(parts)}]


def llm_answerer(brain, catalogue: Catalogue, seed: int = 0) -> Answerer:
    """One structured request per list (`list_answer_schema`); a list the endpoint never
    answered validly counts as no picks (counted in `brain.usage` as every failed request
    is).  The answerer carries the brain's `concurrency` (`taste_per_item` asks that many
    lists at once) and `outcomes`, each list's failure (None when answered), which
    `taste_per_item` checks (`lists.check_fallbacks`)."""

    async def ask(template: AgentSession, movies: Sequence[int], ratio: str):
        from ops.simulation.brains.llm.transport import LLMTransportError

        try:
            await brain.aready()  # vision probed before the list's posters are written
        except LLMTransportError as exc:
            answer.outcomes.append(f"transport: {exc}")
            return None
        messages = list_messages(brain, fresh_session(template), movies, catalogue)
        request_seed = int(named_rng(seed, "taste per item", int(template.user_id), ratio).integers(2**31))
        got, _, errors, failure = await brain._ask(
            messages,
            lambda text: check_list_answer(text, movies),
            request_seed,
            None,
            ("list_answer", list_answer_schema(movies)),
        )
        if got is None and failure is None:
            failure = f"invalid_answer: invalid {len(errors)} times (last: {errors[-1] if errors else 'none'})"
        answer.outcomes.append(failure)
        return got

    def answer(template: AgentSession, movies: Sequence[int], ratio: str) -> set[int]:
        got = brain.transport.run_sync(ask, template, movies, ratio)
        return set() if got is None else got

    answer.concurrency = brain_workers(brain)
    answer.outcomes = []
    return answer


def papers_holdout_taste(
    answerer_for: Callable[[object, pl.DataFrame, pl.DataFrame], tuple[Answerer, dict | None]],
    rebuild_agents: Callable[[pl.DataFrame], object],
    train: pl.DataFrame,
    judged: Sequence[int],
    known: pl.DataFrame,
    movie_ids: Sequence[int] | np.ndarray,
    held_out: int = 10,
    ratios: Sequence[int] = TASTE_RATIOS,
    list_length: int = 20,
    seed: int = 0,
    n_bootstrap: int = 2000,
    progress: bool = False,
) -> tuple[TasteDiscrimination | None, dict | None]:
    """The per-item protocol under the papers' hold-out (module docstring): `held_out`
    positives and as many threshold positives drawn per judged user from `train`
    (`history_holdout`), `rebuild_agents(kept)` the agents of the train window without them,
    `answerer_for(agents, kept, threshold_lists)` the answerer and its thresholds (the
    embedded brain refitted on `kept` and its thresholds fitted on the threshold lists; the
    LLM brain asks, with no thresholds).  Negatives are movies the user has no row of in
    `known` (every window).  Returns the per-item result and the thresholds; (None, None)
    when no judged user has enough train ratings for a draw."""
    positives, tuning = history_holdout(train, judged, held_out, seed)
    kept = train.join(
        pl.concat([positives, tuning]).select("user_id", "movie_id"), on=["user_id", "movie_id"], how="anti"
    )
    agents = rebuild_agents(kept)
    users = sorted(set(positives.get_column("user_id").to_list()) & set(agents.profiles))
    if not users:  # no judged user has train ratings enough for a draw
        return None, None
    threshold_lists = mixed_lists(tuning, known, movie_ids, ratios, list_length, seed, users, "taste threshold")
    answer, thresholds = answerer_for(agents, kept, threshold_lists)
    lists = mixed_lists(positives, known, movie_ids, ratios, list_length, seed, users, "taste")
    result = taste_per_item(answer, agents.sessions(users), lists, seed, n_bootstrap, progress=progress)
    return replace(result, protocol=PAPERS_HOLDOUT), thresholds

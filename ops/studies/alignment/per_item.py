"""The papers' per-item taste protocol (SimUSER §4.1, Agent4Rec §3.1): the agent sees its
whole list (title, genres, description; poster where the brain sees posters) and says for
EVERY item whether it would watch it; scored as `taste.taste_discrimination` scores the
sandbox's picks.

How a brain answers is its kind's (`BrainKind.answer_taste`), from the ways a
`TasteQuestion` offers: its own scores cut at a threshold per ratio fitted on lists the
protocol holds out — on the VALIDATION window's lists (`fit_taste_thresholds`, guarded by
`windows.check_threshold_window`: the test window is never read) — as the embedded brain
answers; one structured answer per list listing the ids it would watch (`llm_answerer`,
`LIST_ANSWER`), as the LLM brain does; or an answerer of the kind's own.

And the protocol once more under the papers' hold-out (`papers_holdout_taste`): their
positives are "items the user has interacted with but [that were] not utilized for profile
initialization" (Agent4Rec §3.1), drawn from anywhere in the history.  From each judged
user's train window `held_out` ratings are drawn at random as positives and as many for the
thresholds (`lists.history_holdout`); the agents are rebuilt without either set, and the
brain's kind refits it on what is left (train) + validation (`BrainKind.refitted`).  The
test-window protocol stays the headline: an A/B test asks about the future.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from ops.agents.session import AgentSession
from ops.readout.statistics import named_rng
from ops.simulation.brains.llm import prompts
from ops.simulation.brains.llm.answers import AnswerError
from ops.simulation.brains.llm.tokens import prompt_tokens, text_tokens
from ops.simulation.brains.llm.transport import LLMTransportError
from ops.simulation.catalogue import Catalogue
from ops.simulation.fatigue import FatigueConfig
from ops.simulation.kinds.embedded import taste_scores
from ops.studies.alignment.mixed_lists import history_holdout, mixed_lists
from ops.studies.alignment.questioning import brain_workers, check_fallbacks, fresh_session, map_in_order
from ops.studies.alignment.taste import (
    PAPERS_HOLDOUT,
    PER_ITEM,
    TASTE_RATIOS,
    TasteDiscrimination,
    judged,
    list_questions,
    per_agent_frame,
    taste_summary,
)
from ops.studies.alignment.windows import check_threshold_window

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
    by_user = {s.user_id: s for s in sessions}
    missing = sorted(set(lists.get_column("user_id").to_list()) - set(by_user))
    if missing:
        raise ValueError(f"taste discrimination (per item): no agent for user(s) {missing[:10]}")
    questions = list_questions(lists)

    def judge(question) -> tuple:
        ratio, user, movies, _ = question
        return judged(question, answer(by_user[user], movies, ratio))

    workers = brain_workers(answer) if workers is None else workers
    rows = map_in_order(judge, questions, workers, "taste, per item", progress)
    if getattr(answer, "outcomes", None) is not None:  # an answerer that can fail (the LLM's)
        check_fallbacks("taste discrimination (per item)", answer.outcomes)
    per_agent = per_agent_frame(rows)
    return TasteDiscrimination(per_agent, taste_summary(per_agent, n_bootstrap, confidence, seed), protocol=PER_ITEM)


def embedded_scorer(brain, fatigue: FatigueConfig | None = None, relative: bool = True) -> Scorer:
    """The embedded brain's scores of a list for an agent arriving on the site
    (`ops.simulation.kinds.embedded.taste_scores`), on agent templates."""
    return lambda template, movies: taste_scores(brain, fresh_session(template, fatigue), movies, relative)


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
    item_ids: Sequence[int] | np.ndarray,
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
    check_threshold_window(window, held_out, "taste threshold")
    known = pl.concat([f.select("user_id", "item_id") for f in (*fitted.values(), window)])
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
    lists = mixed_lists(window, known, item_ids, ratios, list_length, seed, users, stream="taste threshold")
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
        .agg("item_id", "relevant")
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


@dataclass(frozen=True)
class TasteQuestion:
    """The per-item question as the protocol puts it to a brain's kind
    (`BrainKind.answer_taste`), with the ways of answering it; each returns (answerer,
    thresholds or None).  `thresholds(scorer)` fits a threshold per ratio for a scorer on
    agent templates, on lists the protocol holds out for that (the validation window's, or
    the papers' hold-out's second drawn set)."""

    catalogue: Catalogue
    seed: int
    thresholds: Callable[[Scorer], dict[str, float]]
    fatigue: FatigueConfig | None = None

    def cut(self, score: Callable[[AgentSession, Sequence[int]], Sequence[float]]) -> tuple[Answerer, dict]:
        """Yes where `score(session, movies)` — an agent arriving on the site — reaches the
        list's ratio's threshold, fitted here."""
        scorer = lambda template, movies: score(fresh_session(template, self.fatigue), movies)  # noqa: E731
        cuts = self.thresholds(scorer)
        return threshold_answerer(scorer, cuts), cuts

    def ask(self, brain) -> tuple[Answerer, None]:
        """One structured request per list to `brain` (the LLM brain's `_ask`): `llm_answerer`."""
        return llm_answerer(brain, self.catalogue, self.seed), None

    def answer_with(self, answerer: Answerer) -> tuple[Answerer, None]:
        """The kind's own answerer."""
        return answerer, None


@dataclass(frozen=True)
class CountedTasteQuestion:
    """The question in a dry run, put to a brain that writes and counts its prompts
    (`ops.simulation.cost`): asking counts the one request per list that would be sent (and
    a reply naming half the list) and answers nothing; scores and a kind's own answerer send
    nothing to count (None)."""

    catalogue: Catalogue

    def cut(self, score) -> None:
        return None

    def ask(self, meter) -> tuple[Answerer, None]:
        def answer(template, movies: Sequence[int], ratio):
            meter.prompt[template.user_id].append(
                prompt_tokens(list_messages(meter.llm, fresh_session(template), movies, self.catalogue))
            )
            reply = json.dumps({"watch": list(movies)[: len(movies) // 2]})
            meter.completion[template.user_id].append(text_tokens(reply))
            return set()

        return answer, None

    def answer_with(self, answerer) -> None:
        return None


def papers_holdout_taste(
    answerer_for: Callable[[object, pl.DataFrame, pl.DataFrame], tuple[Answerer, dict | None]],
    rebuild_agents: Callable[[pl.DataFrame], object],
    train: pl.DataFrame,
    judged: Sequence[int],
    known: pl.DataFrame,
    item_ids: Sequence[int] | np.ndarray,
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
        pl.concat([positives, tuning]).select("user_id", "item_id"), on=["user_id", "item_id"], how="anti"
    )
    agents = rebuild_agents(kept)
    users = sorted(set(positives.get_column("user_id").to_list()) & set(agents.profiles))
    if not users:  # no judged user has train ratings enough for a draw
        return None, None
    threshold_lists = mixed_lists(tuning, known, item_ids, ratios, list_length, seed, users, "taste threshold")
    answer, thresholds = answerer_for(agents, kept, threshold_lists)
    lists = mixed_lists(positives, known, item_ids, ratios, list_length, seed, users, "taste")
    result = taste_per_item(answer, agents.sessions(users), lists, seed, n_bootstrap, progress=progress)
    return replace(result, protocol=PAPERS_HOLDOUT), thresholds

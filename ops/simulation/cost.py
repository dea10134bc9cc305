"""The bill before the run: how many calls, tokens and dollars simulating an arm with the
LLM brain will take, estimated without calling the endpoint.

A dry run of the real loop (`ops.simulation.runner.simulate`) on a seeded sample of the
arm's agents: the sandbox shows each page, the fatigue system charges each action against
the agent's budget, and at every step the LLM brain's own prompt builder writes the request
it would send (`LLMBrain.page_messages`, `interview_messages`: the profile, the fatigue, the
memories retrieved for that page, the session so far, the page with its posters), whose
tokens are counted (`brains.llm.tokens`).  What the agent does next comes from a stand-in
brain — `behaviour`, by default the fitted embedded brain, the project's model of these
users — and the answer the model would write for that decision is counted as the
completion.  With the brain's `reflect_every`, the reflections it would ask for at the
same steps are counted too (their prompts exactly, their answers and the summary they add
to later page prompts at a typical length).  Calls, tokens and cost of the sample are scaled to all the arm's agents and
priced with the brain's price table (`LLMBrainConfig.price_*_per_1m`).

The estimate is as good as the stand-in's behaviour: an LLM that explores more than it
costs more.  The *ceiling* says how far that can go: every agent spends its whole fatigue
budget on the cheapest action at the highest interest (with Table 8's costs, one call per
unit of budget), each call as long as the longest prompt seen and answered with
`max_tokens`.  Cached answers cost nothing and re-asks cost more; neither is in the estimate.

`check_cost_limit` refuses a run whose estimate is above a limit (the `llm` resource's
`max_cost_usd`), naming both.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.agents.session import AgentSession
from ops.simulation.brains.llm.persona import (
    RATING_TEMPLATE,
    SAMPLE_PERSONA,
    SAMPLE_RATING,
    persona_prompt,
    rating_movies,
)
from ops.simulation.brains.llm.prompts import reflection_state_text
from ops.simulation.brains.llm.tokens import prompt_tokens, text_tokens
from ops.simulation.budget import (  # noqa: F401  (re-exported: the bill's errors and ledger)
    CostLimitExceeded,
    RunBudget,
)
from ops.simulation.catalogue import Catalogue
from ops.simulation.fatigue import fatigue_cost
from ops.simulation.observation import EXIT, Decision, Observation
from ops.simulation.request import SimulationConfig, activity_tier_of
from ops.simulation.runner import simulate
from ops.simulation.visits import session_budget


class CostEstimateConfig(BaseModel):
    # Agents whose sessions are dry-run; the rest are extrapolated from them.  50 keeps the
    # dry run to seconds; session lengths vary a lot between agents, and the interval of the
    # estimate (`cost_low_usd`, `cost_high_usd`) says how much that leaves uncertain.
    sample_agents: int = Field(50, ge=1)
    seed: int = Field(0, ge=0)


@dataclass(frozen=True)
class CostEstimate:
    """Calls, tokens and cost of one arm's simulation: expected and the ceiling."""

    arm: str
    model: str
    behaviour: str  # the stand-in brain whose decisions the dry run followed
    agents: int
    sampled_agents: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    # 95 % prediction interval of the run's cost under the same behaviour: the sample's
    # spread of per-agent costs, for a run whose every agent draws its session anew.
    cost_low_usd: float
    cost_high_usd: float
    ceiling_calls: int
    ceiling_prompt_tokens: int
    ceiling_completion_tokens: int
    ceiling_cost_usd: float
    price_prompt_per_1m: float
    price_completion_per_1m: float

    def as_dict(self) -> dict:
        return asdict(self)

    def over_sessions(self, sessions: float) -> CostEstimate:
        """The bill of `sessions` independent sessions per agent (a mean when agents come a
        different number of times, `ops.simulation.visits`): expected calls, tokens, cost and
        ceiling times `sessions` (counts rounded up); the interval's half-widths times
        √sessions (the sessions draw independently, so their spreads add in variance)."""
        if sessions == 1:
            return self
        if sessions < 1:
            raise ValueError(f"cost estimate: sessions must be >= 1, got {sessions}")
        root = sessions**0.5
        counts = (
            "calls",
            "prompt_tokens",
            "completion_tokens",
            "ceiling_calls",
            "ceiling_prompt_tokens",
            "ceiling_completion_tokens",
        )
        scaled = {name: math.ceil(getattr(self, name) * sessions) for name in counts}
        scaled |= {name: getattr(self, name) * sessions for name in ("cost_usd", "ceiling_cost_usd")}
        low = scaled["cost_usd"] - (self.cost_usd - self.cost_low_usd) * root
        high = scaled["cost_usd"] + (self.cost_high_usd - self.cost_usd) * root
        return replace(self, **scaled, cost_low_usd=max(low, 0.0), cost_high_usd=high)

    def describe(self) -> str:
        """One line for a console or a log."""
        return (
            f"arm {self.arm}: {self.agents} agents × ~{self.calls / max(self.agents, 1):.1f} calls = {self.calls:,} calls, "
            f"{self.prompt_tokens + self.completion_tokens:,} tokens, ${self.cost_usd:,.2f} "
            f"(95 % ${self.cost_low_usd:,.2f}–{self.cost_high_usd:,.2f}) on {self.model} "
            f"(ceiling ${self.ceiling_cost_usd:,.2f}; behaviour: {self.behaviour}, {self.sampled_agents} agents dry-run)"
        )

    def to_markdown(self) -> str:
        rows = [
            ("calls", f"{self.calls:,}", f"{self.ceiling_calls:,}"),
            ("prompt tokens", f"{self.prompt_tokens:,}", f"{self.ceiling_prompt_tokens:,}"),
            ("completion tokens", f"{self.completion_tokens:,}", f"{self.ceiling_completion_tokens:,}"),
            (
                "cost (USD)",
                f"{self.cost_usd:,.4f} (95 %: {self.cost_low_usd:,.4f}–{self.cost_high_usd:,.4f})",
                f"{self.ceiling_cost_usd:,.4f}",
            ),
        ]
        lines = ["| | expected | ceiling |", "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows]
        lines += [
            "",
            f"{self.agents} agents on arm {self.arm}, model {self.model} at ${self.price_prompt_per_1m:g} / "
            f"${self.price_completion_per_1m:g} per 1M prompt / completion tokens; sessions of {self.sampled_agents} agents "
            f"dry-run with the {self.behaviour} brain's decisions and the LLM brain's own prompts.  Ceiling: every agent spends "
            "its whole fatigue budget on the cheapest action, every answer max_tokens long.",
        ]
        return "\n".join(lines)


def estimate_llm_cost(
    arm: str,
    top_k: pl.DataFrame,
    agents: Sequence[AgentSession],
    catalogue: Catalogue,
    llm_brain,
    behaviour,
    sim_config: SimulationConfig | None = None,
    users: Iterable[int] | None = None,
    config: CostEstimateConfig | None = None,
) -> CostEstimate:
    """The bill of simulating `users` (default: every agent) on `arm` with `llm_brain`
    (an `LLMBrain`, used only to write prompts and price tokens: it sends nothing), the
    dry run following `behaviour`'s decisions."""
    config = config or CostEstimateConfig()
    sim_config = (sim_config or SimulationConfig()).model_copy(update={"progress": False})
    chosen = sorted({a.user_id for a in agents} if users is None else {int(u) for u in users})
    if not chosen:
        raise ValueError(f"cost estimate of arm {arm!r}: no agent to simulate")
    rng = np.random.default_rng([config.seed, len(chosen)])
    sample = sorted(rng.choice(chosen, size=min(config.sample_agents, len(chosen)), replace=False).tolist())
    meter = _PromptMeter(llm_brain, behaviour)
    # One session each, whatever the visits: the caller scales the bill to every session (`over_sessions`).
    once = dict.fromkeys(sample, 1)
    simulate(
        meter, agents, top_k, catalogue, sim_config, arms=[arm], users=sample, sessions_per_agent=once, seed=config.seed
    )

    n, total = len(sample), len(chosen)
    scale = total / n
    calls, prompt, completion, longest = meter.counts()
    c = llm_brain.config
    cost = llm_brain.transport.cost
    per_agent = np.array([cost(sum(meter.prompt[u]), sum(meter.completion[u])) for u in sample])
    spread = 1.96 * total * (per_agent.std(ddof=1) if n > 1 else per_agent.mean()) * math.sqrt(1 / n + 1 / total)
    by_user = {a.user_id: a for a in agents}
    ceiling_calls = sum(_ceiling_calls(by_user[u], sim_config, meter.reflect_every) for u in chosen)
    expected_prompt, expected_completion = round(prompt * scale), round(completion * scale)
    expected_cost = cost(expected_prompt, expected_completion)
    return CostEstimate(
        arm=arm,
        model=c.model,
        behaviour=getattr(behaviour, "name", type(behaviour).__name__),
        agents=len(chosen),
        sampled_agents=len(sample),
        calls=round(calls * scale),
        prompt_tokens=expected_prompt,
        completion_tokens=expected_completion,
        cost_usd=expected_cost,
        cost_low_usd=max(0.0, expected_cost - spread),
        cost_high_usd=expected_cost + spread,
        **_ceiling(c, cost, ceiling_calls, longest),
    )


def estimate_persona_cost(brain, inputs: Mapping, n_candidates: int = 5, seed: int = 0, history_sample: int = 50):
    """The bill of `ops.simulation.brains.llm.persona.match_personas(brain, inputs, n_candidates)` before it runs, sending
    nothing: each user's persona prompt is written exactly as it will be sent; the rating
    prompt carries a persona of typical length (`SAMPLE_PERSONA`), the answers are as long
    as a typical candidate and one rating entry per movie.  The ceiling: every request
    re-asked as often as the brain allows, every answer `max_tokens` long.  Cached answers
    cost nothing and are not subtracted.  A `CostEstimate` named
    `llm_personas` (its interval is the expected figure: prompts are known, only answer
    lengths vary, and the ceiling bounds them)."""
    c = brain.config
    price = brain.transport.cost
    persona_answer = text_tokens(SAMPLE_PERSONA.model_dump_json())
    rating_answer = text_tokens(SAMPLE_RATING)
    prompt = completion = longest = 0
    for user_id in sorted(inputs):
        history, validation = inputs[user_id]
        _, written = persona_prompt(brain, user_id, history, seed, history_sample)
        rating = RATING_TEMPLATE.format(persona=SAMPLE_PERSONA.text(), movies=rating_movies(brain, validation))
        asks = (
            prompt_tokens([{"role": "user", "content": written}]),
            prompt_tokens([{"role": "user", "content": rating}]),
        )
        prompt += n_candidates * sum(asks)
        completion += n_candidates * (persona_answer + len(validation) * rating_answer + 3)
        longest = max(longest, *asks)
    calls = 2 * n_candidates * len(inputs)
    tries = 1 + c.reasks
    behaviour = "persona matching (every candidate written and scored)"
    ceiling = _ceiling(c, price, calls * tries, longest + c.max_tokens)
    return _exact("llm_personas", c, behaviour, len(inputs), (calls, prompt, completion), price, ceiling)


def _exact(arm: str, config, behaviour: str, agents: int, counts: tuple, price, ceiling: dict) -> CostEstimate:
    """A bill whose prompts are all known (only the answers' lengths vary, and the ceiling
    bounds them): its interval is the expected figure."""
    calls, prompt, completion = counts
    cost = price(prompt, completion)
    known = {"agents": agents, "sampled_agents": agents, "calls": calls, "prompt_tokens": prompt}
    known |= {"completion_tokens": completion, "cost_usd": cost, "cost_low_usd": cost, "cost_high_usd": cost}
    return CostEstimate(arm=arm, model=config.model, behaviour=behaviour, **known, **ceiling)


def _ceiling(config, price, calls: int, prompt_per_call: int) -> dict:
    """The ceiling of a bill — `calls` calls of `prompt_per_call` prompt tokens, each answered
    with `max_tokens` — and the prices, as `CostEstimate` fields."""
    prompt, completion = calls * prompt_per_call, calls * config.max_tokens
    return {
        "ceiling_calls": calls,
        "ceiling_prompt_tokens": prompt,
        "ceiling_completion_tokens": completion,
        "ceiling_cost_usd": price(prompt, completion),
        "price_prompt_per_1m": config.price_prompt_per_1m,
        "price_completion_per_1m": config.price_completion_per_1m,
    }


def check_cost_limit(estimates: CostEstimate | Sequence[CostEstimate], max_cost_usd: float | None) -> None:
    """Refuse (CostLimitExceeded) when the estimated cost is above `max_cost_usd`
    (None or 0: no limit), naming the estimate and the limit."""
    if not max_cost_usd:
        return
    estimates = [estimates] if isinstance(estimates, CostEstimate) else list(estimates)
    total = sum(e.cost_usd for e in estimates)
    if total > max_cost_usd:
        arms = ", ".join(f"{e.arm} ${e.cost_usd:,.2f}" for e in estimates)
        raise CostLimitExceeded(
            f"the LLM simulation is estimated at ${total:,.2f} ({arms}; {sum(e.calls for e in estimates):,} calls), above "
            f"max_cost_usd=${max_cost_usd:,.2f}: raise the limit (the llm resource's max_cost_usd, $SIMAB_MAX_COST_USD), "
            "simulate fewer agents (n_agents, $SIMAB_AGENTS) or choose a cheaper model"
        )


# A reflection's answer as the model writes it (one or two sentences, two integers), and
# the state the page prompts after it carry: counted for every reflection of the dry run.
_SAMPLE_REFLECTION = {
    "preferences": "I want more clever science fiction like the last one I watched, and no more slow dramas tonight.",
    "satisfaction": 6,
    "fatigue": 3,
}


class _PromptMeter:
    """A brain for the dry run: writes and counts the LLM brain's request for each page and
    the answer the model would give, while `behaviour` decides; with `reflect_every`, the
    reflections the LLM brain would ask for (at the same steps) and the longer page prompts
    that carry their summary."""

    def __init__(self, llm_brain, behaviour) -> None:
        self.llm = llm_brain
        self.behaviour = behaviour
        self.name = getattr(behaviour, "name", "behaviour")
        self.prompt: dict[int, list[int]] = defaultdict(list)  # user id -> tokens per call
        self.completion: dict[int, list[int]] = defaultdict(list)
        self.reflect_every = int(getattr(llm_brain.config, "reflect_every", 0) or 0)
        self._reflected: dict[int, int] = {}  # user id -> short-term length at its last reflection
        self._reflection_answer = text_tokens(json.dumps(_SAMPLE_REFLECTION))
        self._reflection_state = text_tokens(reflection_state_text(_SAMPLE_REFLECTION["preferences"], 6, 3)) + 2

    def counts(self) -> tuple[int, int, int, int]:
        """(calls, prompt tokens, completion tokens, the longest prompt's tokens) written so far."""
        calls = sum(len(v) for v in self.prompt.values())
        prompt = sum(sum(v) for v in self.prompt.values())
        completion = sum(sum(v) for v in self.completion.values())
        return calls, prompt, completion, max((t for v in self.prompt.values() for t in v), default=0)

    def prepare(self, sessions, shown) -> None:
        self.behaviour.prepare(sessions, shown)

    def _reflect(self, session: AgentSession) -> int:
        """Count the reflection due before this page, as `LLMBrain._reflect` asks it; the
        tokens its summary adds to this page's prompt."""
        uid, n = session.user_id, len(session.short_term)
        if n == 0:
            self._reflected.pop(uid, None)
        every = self.reflect_every
        if every and n > 0 and n % every == 0 and self._reflected.get(uid) != n:
            self._reflected[uid] = n
            self.prompt[uid].append(prompt_tokens(self.llm.reflection_messages(session)))
            self.completion[uid].append(self._reflection_answer)
        return self._reflection_state if uid in self._reflected else 0

    def decide(self, session: AgentSession, observation: Observation, rng: np.random.Generator) -> Decision:
        state = self._reflect(session)
        self.prompt[session.user_id].append(prompt_tokens(self.llm.page_messages(session, observation)) + state)
        decision = self.behaviour.decide(session, observation, rng)
        answer = {
            "action": decision.action,
            "interest": decision.interest,
            "caught_eye": list(decision.caught_eye),
            "reason": decision.reason,
        }
        answer |= {"item_id": decision.item_id} if observation.page_type == "home" else {"rating": decision.rating}
        self.completion[session.user_id].append(text_tokens(json.dumps(answer)))
        return decision

    def exit_interview(self, session: AgentSession, rng: np.random.Generator) -> tuple[int, str]:
        self.prompt[session.user_id].append(prompt_tokens(self.llm.interview_messages(session)))
        satisfaction, reason = self.behaviour.exit_interview(session, rng)
        self.completion[session.user_id].append(
            text_tokens(json.dumps({"satisfaction": satisfaction, "reason": reason}))
        )
        return satisfaction, reason


def _ceiling_calls(agent: AgentSession, config: SimulationConfig, reflect_every: int = 0) -> int:
    return ceiling_session_calls(activity_tier_of(agent, None), config, reflect_every)


def ceiling_session_calls(activity_tier: str, config: SimulationConfig, reflect_every: int = 0) -> int:
    """The most brain calls one session of an agent of `activity_tier` can take: steps until
    the budget is spent on the cheapest costing action at the highest interest, capped by
    max_steps, a reflection every `reflect_every` of those steps, and the interview."""
    fatigue = config.fatigue
    cheapest = min(fatigue_cost(a, fatigue.interest_max, fatigue) for a in fatigue.base_costs if a != EXIT)
    budget = session_budget(activity_tier, fatigue, config.visits)
    steps = config.max_steps if cheapest <= 0 else min(config.max_steps, math.ceil(budget / cheapest))
    reflections = (steps - 1) // reflect_every if reflect_every else 0
    return steps + reflections + 1


def estimate_protocol_cost(
    name: str, llm_brain, behaviour, run: Callable[[object], object], agents: int
) -> CostEstimate:
    """The bill of a protocol that asks the brain through its decision path (the alignment
    protocols): `run(meter)` is the protocol itself, run here with a brain that writes and
    counts the LLM brain's prompt for every decision and interview while `behaviour` decides
    (nothing is sent).  Every prompt is the one that will be sent, so the count is exact up
    to the answers' lengths; the ceiling re-asks every call as often as the brain allows and
    answers each with `max_tokens`."""
    meter = _PromptMeter(llm_brain, behaviour)
    run(meter)
    c = llm_brain.config
    price = llm_brain.transport.cost
    calls, prompt, completion, longest = meter.counts()
    tries = 1 + int(getattr(c, "reasks", 0) or 0)
    ceiling_calls = calls * tries
    behaviour_name = getattr(behaviour, "name", type(behaviour).__name__)
    ceiling = _ceiling(c, price, ceiling_calls, longest)
    return _exact(name, c, behaviour_name, agents, (calls, prompt, completion), price, ceiling)

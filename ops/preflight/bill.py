"""The whole LLM bill of a lifecycle from its settings alone, before the first step, and the
spending limit it is held to.

Nothing is known of the data yet (prepare has not run), so every step is priced from counts
the settings give and from figures measured once on the reference data with the project's
own dry run (docs/cost.md gives the command):

- each arm's simulation: agents × sessions × calls per session;
- the trust protocols that ask the brain (taste, rating, list quality): their agents — sized
  by the interval half-width they must reach (`ops.studies.alignment.sizing`) unless
  `SIMAB_ALIGNMENT_AGENTS` says — × the calls each agent is asked;
- the calls priced at the endpoint's prices per million prompt and completion tokens.

Each step has an *expected* figure (calls and tokens as the dry run of the embedded brain's
behaviour measured them) and an *at most* figure: every session runs until its fatigue
budget is spent on the cheapest action (`ops.simulation.cost.ceiling_session_calls`), every
question is re-asked as often as the brain allows, every prompt is half again as long as the
longest measured and every answer `max_tokens` long.  The arms' lists are not known before
they are trained, and a list changes how long an agent browses: the *at most* figure holds
whatever they are.

The runner refuses to start when the expected bill is above the limit — the run would be
stopped before it ends — and says which settings bring it under.  The limit itself holds
for the run as it goes whatever the estimate said: every call reserves its ceiling in the
run's bill first (`ops.simulation.budget.RunBudget`), and a trust protocol that no longer
fits is not measured while the A/B read-out and its report are still written.

Persona matching (`simab_personas`) and the papers' experiments (`pipelines.experiments`)
are not part of the lifecycle; each estimates its own bill before its first call.  The one
experiment that asks the LLM whatever the brain, the believability judge, is priced from its
settings too (`judge_bill`), printed before the experiments' first step and refused there
when above the limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from ops.data.domain import find_file
from ops.data.movielens import find_tables
from ops.settings import DEFAULT_MAX_COST_USD, NO_LIMIT, SettingError, Settings
from ops.simulation.brains.llm.config import LLMBrainConfig
from ops.simulation.brains.llm.endpoint import key_required
from ops.simulation.cost import ceiling_session_calls
from ops.simulation.fatigue import ACTIVITY_TIERS
from ops.simulation.kinds import DEFAULT_BRAIN, BrainKind, UnknownBrain, brain_kind
from ops.simulation.runner import SimulationConfig
from ops.simulation.visits import visits_config
from ops.studies.alignment.sizing import DEFAULT_HALF_WIDTH, agents_for_half_width

# Figures measured with the dry run (`ops.simulation.cost`: the LLM brain's own prompts, the
# embedded brain deciding) on the synthetic data, posters as images at low detail; the
# commands and the tables are in docs/cost.md.
# Simulation: calls per session, prompt tokens per call (mean, longest).
SESSION_CALLS = 6.0
PAGE_PROMPT, PAGE_PROMPT_LONGEST = 1_400, 2_100
ANSWER_TOKENS = 40  # a decision's JSON answer
# Taste: per agent 4 lists of 20 × (4 pages + 1 per-item question) + 4 papers' hold-out questions.
TASTE_CALLS = 4 * (4 + 1) + 4
TASTE_PROMPT, TASTE_PROMPT_LONGEST = 2_400, 5_100
# Rating: one question per held-out pair (at most max_pairs_per_agent, 20); 11–12 on average.
RATING_CALLS, RATING_CALLS_MAX = 12.0, 20
RATING_PROMPT, RATING_PROMPT_LONGEST = 1_100, 1_200
# List quality: one session on each of 3 lists (1:9, 1:4, 1:1), 7.3 calls each.
LIST_SESSIONS = 3
LIST_SESSION_CALLS = 7.3
# A prompt may run longer than any measured one: the same margin the run's bill reserves.
PROMPT_MARGIN = 1.5
# Users of the data sets whose size is known before they are read.
KNOWN_USERS = {"ml-1m": 6040, "ml-100k": 943}
SYNTHETIC_USERS = 1000  # ops.data.synthetic.SyntheticConfig.n_users

TRUST_PROTOCOLS = ("taste_alignment", "rating_alignment", "list_quality_alignment")


@dataclass(frozen=True)
class CostLimit:
    """The spending limit in force: `usd` None when there is none, and why."""

    usd: float | None
    why: str

    def text(self) -> str:
        return (f"cost limit ${self.usd:,.2f} ({self.why})" if self.usd is not None else self.why).strip()


def brain_of(settings: Settings) -> BrainKind:
    """The brain the settings name ($SIMAB_BRAIN; the registry's default when unset); a
    SettingError naming the variable and the known brains when no brain is called so."""
    try:
        return brain_kind(settings.brain or DEFAULT_BRAIN)
    except UnknownBrain as exc:
        raise SettingError(f"SIMAB_BRAIN={settings.brain!r}: {exc}") from None


def cost_limit(settings: Settings) -> CostLimit:
    """The limit a lifecycle with these settings runs under, in words for its first line."""
    if brain_of(settings).decides_offline:
        return CostLimit(None, "no LLM cost, no limit needed")
    config = llm_config(settings)
    if not (config.price_prompt_per_1m or config.price_completion_per_1m):
        return CostLimit(None, "endpoint priced at $0 (SIMAB_LLM_PRICE_*): no cost limit needed")
    if settings.max_cost_usd == NO_LIMIT:
        return CostLimit(None, "NO cost limit (SIMAB_MAX_COST_USD=none)")
    if settings.max_cost_usd is None:
        return CostLimit(DEFAULT_MAX_COST_USD, "the default; SIMAB_MAX_COST_USD sets another, =none lifts it")
    return CostLimit(float(settings.max_cost_usd), "SIMAB_MAX_COST_USD")


def llm_config(settings: Settings) -> LLMBrainConfig:
    """The LLM brain's configuration as the `llm` resource will give it: its defaults, then
    what the settings set."""
    fields = {k: v for k, v in settings.resource_fields("llm").items() if k in LLMBrainConfig.model_fields}
    return LLMBrainConfig(**fields)


@dataclass(frozen=True)
class StepBill:
    """One step's LLM calls and cost: expected, and at most."""

    step: str
    agents: int
    calls: float
    usd: float
    calls_at_most: int
    usd_at_most: float
    sizing: str  # how many agents and why, in words
    trust: bool  # a trust protocol: the verdict does not need it

    def line(self) -> str:
        return (
            f"  {self.step:<28}{self.sizing}: ~{self.calls:,.0f} calls, ${self.usd:,.2f} "
            f"(at most {self.calls_at_most:,} calls, ${self.usd_at_most:,.2f})"
        )


@dataclass(frozen=True)
class LifecycleBill:
    """Every step of a lifecycle that calls the LLM, the model and its prices, the limit."""

    steps: tuple[StepBill, ...]
    model: str
    price_prompt_per_1m: float
    price_completion_per_1m: float
    limit: CostLimit
    unknown: str = ""  # what cannot be priced before the data is read (then nothing is)
    scope: str = "lifecycle"  # or "night" (`night_bill`)

    @property
    def usd(self) -> float:
        return sum(s.usd for s in self.steps)

    @property
    def usd_at_most(self) -> float:
        return sum(s.usd_at_most for s in self.steps)

    @property
    def fits(self) -> bool:
        """Whether the run is expected to end under the limit (no limit: always)."""
        if self.limit.usd is None:
            return True
        return not self.unknown and self.usd <= self.limit.usd

    def lines(self) -> list[str]:
        """The bill as the runner prints it before the first step."""
        if not self.steps and not self.unknown:
            return []
        head = (
            f"LLM bill of this {self.scope}, from the settings ({self.model} at ${self.price_prompt_per_1m:g} / "
            f"${self.price_completion_per_1m:g} per 1M prompt / completion tokens):"
        )
        if self.unknown:
            return [head, f"  not known before the data is read: {self.unknown}"]
        return [
            head,
            *(s.line() for s in self.steps),
            f"  {'whole ' + self.scope:<28}${self.usd:,.2f} expected, at most ${self.usd_at_most:,.2f} — "
            "the arms' lists are not known before they are trained: 'at most' holds whatever they are",
            "  (persona matching and the papers' experiments are not part of the lifecycle: their jobs estimate "
            "their own bill before the first call)",
        ]

    def refusal(self, settings: Settings) -> str:
        """Why the runner does not start, and the settings that would bring the bill under."""
        limit = self.limit.usd or 0.0
        if self.unknown:
            return (
                f"simab: the LLM bill cannot be priced before the data is read ({self.unknown}), and a cost limit of "
                f"${limit:,.2f} is in force: set SIMAB_AGENTS, or SIMAB_MAX_COST_USD=none to run without a limit"
            )
        over = ", ".join(f"{s.step} ${s.usd:,.2f}" for s in sorted(self.steps, key=lambda s: -s.usd))
        ways = [f"raise the limit (SIMAB_MAX_COST_USD={math.ceil(self.usd * 1.1 * 100) / 100:g} or more)"]
        trust = sum(s.usd for s in self.steps if s.trust)
        if trust:
            ways.append(
                f"switch the trust protocols off (SIMAB_TRUST_PROTOCOLS=off: −${trust:,.2f}; the A/B verdict stays, "
                "they show as not measured)"
            )
            agents = _fitting_trust_agents(settings, limit - (self.usd - trust))
            if 0 < agents < max(s.agents for s in self.steps if s.trust):
                ways.append(f"fewer trust agents (SIMAB_ALIGNMENT_AGENTS={agents}, or a wider SIMAB_TRUST_HALF_WIDTH)")
        arms = [s for s in self.steps if not s.trust]
        agents = _fitting_agents(settings, limit - trust)
        if arms and 0 < agents < max(s.agents for s in arms):
            ways.append(f"fewer agents (SIMAB_AGENTS={agents})")
        ways.append(
            f"a model at least {self.usd / limit:,.1f}× cheaper (SIMAB_LLM_MODEL with SIMAB_LLM_PRICE_PROMPT_PER_1M "
            "and SIMAB_LLM_PRICE_COMPLETION_PER_1M), or a local server priced at 0"
            if limit
            else "a local server priced at 0"
        )
        return (
            f"simab: the LLM bill of this {self.scope} is expected at ${self.usd:,.2f} ({over}), above the cost limit "
            f"${limit:,.2f} ({self.limit.why}); nothing was run. To bring it under: " + "; ".join(ways) + "."
        )


def lifecycle_bill(settings: Settings, users: int | None = None) -> LifecycleBill:
    """The bill of `simab_prepare`, `simab_arm` per arm and `simab_readout` with these
    settings; `users`: the data's users when known (default: from the source's settings)."""
    config = llm_config(settings)
    limit = cost_limit(settings)
    bill = dict(
        model=config.model,
        price_prompt_per_1m=config.price_prompt_per_1m,
        price_completion_per_1m=config.price_completion_per_1m,
        limit=limit,
    )
    if brain_of(settings).decides_offline:
        return LifecycleBill(steps=(), **bill)
    users = known_users(settings) if users is None else users
    agents = settings.agents or users
    if agents is None:
        return LifecycleBill(
            steps=(),
            unknown=f"SIMAB_AGENTS={settings.agents or 0} simulates every user, and source "
            f"{settings.source} does not say how many there are",
            **bill,
        )
    steps = [simulation_bill(arm, agents, settings, config) for arm in settings.arms or ()]
    if settings.trust_protocols is not False:
        if trust_agents(settings, users)[0] is None:
            return LifecycleBill(
                steps=(),
                unknown=f"SIMAB_ALIGNMENT_AGENTS=0 asks every user, and source {settings.source} does not say how many "
                "there are",
                **bill,
            )
        steps += [trust_bill(name, settings, config, users) for name in TRUST_PROTOCOLS]
    return LifecycleBill(steps=tuple(steps), **bill)


def night_bill(settings: Settings) -> LifecycleBill:
    """A night of the schedule (`SIMAB_NIGHTLY`): fresh — every arm simulated again, then
    read out by the sensor with its trust protocols; continue — each arm's next round, which
    the read-out sensor does not follow."""
    bill = replace(lifecycle_bill(settings), scope="night")
    if settings.nightly == "continue":
        bill = replace(bill, steps=tuple(s for s in bill.steps if not s.trust))
    return bill


def known_users(settings: Settings) -> int | None:
    """How many users the source holds, where the settings tell without reading the data."""
    source = settings.source or "synthetic"
    if source == "synthetic":
        overrides = settings.overrides.get("ingestion", {})
        return int(overrides.get("synthetic_users") or SYNTHETIC_USERS)
    if source == "download":
        return KNOWN_USERS[settings.dataset or "ml-1m"]
    if source == "local" and settings.local_path:
        fmt, files = find_tables(settings.local_path)
        with Path(files["users"]).open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    if source == "files" and settings.files_path:
        path = find_file(Path(settings.files_path).expanduser(), "interactions")
        frame = pl.scan_parquet(path) if path.suffix == ".parquet" else pl.scan_csv(path, infer_schema=False)
        try:
            return int(frame.select(pl.col("user_id").n_unique()).collect().item())
        except (OSError, pl.exceptions.PolarsError):  # the step that reads it names the fault
            return None
    return None


def simulation_bill(arm: str, agents: int, settings: Settings, config: LLMBrainConfig) -> StepBill:
    """One arm's simulation: `agents` × their sessions × the calls of a session."""
    visits = visits_config(settings.activity_drives or "session_length", settings.visits or [1, 2, 3])
    sim = SimulationConfig(visits=visits)
    per_agent = settings.sessions or 1
    if visits.activity_drives == "visits":
        sessions, sessions_max = per_agent * sum(visits.visits.values()) / 3, per_agent * max(visits.visits.values())
    else:
        sessions = sessions_max = per_agent
    longest_session = max(ceiling_session_calls(tier, sim, config.reflect_every) for tier in ACTIVITY_TIERS)
    calls = agents * sessions * SESSION_CALLS
    at_most = agents * sessions_max * longest_session * (1 + config.reasks)
    return StepBill(
        step=f"simulation_events[{arm}]",
        agents=agents,
        calls=calls,
        usd=_price(config, calls * PAGE_PROMPT, calls * ANSWER_TOKENS),
        calls_at_most=at_most,
        usd_at_most=_price(config, at_most * PAGE_PROMPT_LONGEST * PROMPT_MARGIN, at_most * config.max_tokens),
        sizing=f"{agents} agents × {sessions:g} session(s)",
        trust=False,
    )


def trust_bill(name: str, settings: Settings, config: LLMBrainConfig, users: int | None) -> StepBill:
    """One trust protocol asked of its agents (sized by `SIMAB_TRUST_HALF_WIDTH` unless
    `SIMAB_ALIGNMENT_AGENTS` names a number; no more than the data's users)."""
    agents, sizing = trust_agents(settings, users)
    return protocol_bill(name, agents or 0, config, sizing)


def protocol_bill(name: str, agents: int, config: LLMBrainConfig, sizing: str = "") -> StepBill:
    """A trust protocol (`TRUST_PROTOCOLS`) asked of `agents` agents through the LLM brain."""
    tries = 1 + config.reasks
    if name == "taste_alignment":
        calls, most, prompt, longest = agents * TASTE_CALLS, agents * TASTE_CALLS, TASTE_PROMPT, TASTE_PROMPT_LONGEST
    elif name == "rating_alignment":
        calls, most = agents * RATING_CALLS, agents * RATING_CALLS_MAX
        prompt, longest = RATING_PROMPT, RATING_PROMPT_LONGEST
    else:
        sim = SimulationConfig()
        longest_session = max(ceiling_session_calls(tier, sim, config.reflect_every) for tier in ACTIVITY_TIERS)
        calls, most = agents * LIST_SESSIONS * LIST_SESSION_CALLS, agents * LIST_SESSIONS * longest_session
        prompt, longest = PAGE_PROMPT, PAGE_PROMPT_LONGEST
    most *= tries
    return StepBill(
        step=name,
        agents=agents,
        calls=calls,
        usd=_price(config, calls * prompt, calls * ANSWER_TOKENS),
        calls_at_most=int(most),
        usd_at_most=_price(config, most * longest * PROMPT_MARGIN, most * config.max_tokens),
        sizing=sizing or f"{agents} agents",
        trust=True,
    )


def trust_agents(settings: Settings, users: int | None = None) -> tuple[int | None, str]:
    """The agents each trust protocol asks (None: every user, and how many is not known),
    and why that many."""
    if settings.alignment_agents is not None:
        agents = settings.alignment_agents or users
        if agents is None:
            return None, "every user (SIMAB_ALIGNMENT_AGENTS=0)"
        why = f"{agents} agents (SIMAB_ALIGNMENT_AGENTS={settings.alignment_agents})"
    else:
        half = settings.trust_half_width or DEFAULT_HALF_WIDTH
        agents = agents_for_half_width(half)
        why = f"{agents} agents (95 % intervals ±{half:g})"
    if users is not None and agents > users:
        agents, why = users, f"{users} agents (every user)"
    return agents, why


def _price(config: LLMBrainConfig, prompt_tokens: float, completion_tokens: float) -> float:
    return (prompt_tokens * config.price_prompt_per_1m + completion_tokens * config.price_completion_per_1m) / 1e6


def _fitting_agents(settings: Settings, budget: float) -> int:
    """The most agents per arm whose simulations are expected to cost no more than `budget`."""
    if budget <= 0 or not settings.arms:
        return 0
    config = llm_config(settings)
    one = sum(simulation_bill(arm, 1, settings, config).usd for arm in settings.arms)
    return int(budget / one) if one else 0


def _fitting_trust_agents(settings: Settings, budget: float) -> int:
    """The most trust agents whose protocols are expected to cost no more than `budget`."""
    if budget <= 0:
        return 0
    config = llm_config(settings)
    one = settings.model_copy(update={"alignment_agents": 1})
    per_agent = sum(trust_bill(name, one, config, None).usd for name in TRUST_PROTOCOLS)
    return int(budget / per_agent) if per_agent else 0


# The believability judge (SimUSER §4.4, `ops.studies.believability`): one call per sampled
# session, re-asked when malformed.  Prompt tokens per session as rendered for the judge
# (mean, longest): 604 and 1,177 measured on 100 of the demo's embedded-brain sessions of
# arm pop (docs/cost.md), rounded up for arms whose sessions run longer.
JUDGE_PROMPT, JUDGE_PROMPT_LONGEST = 650, 1_600
JUDGE_ANSWER = 45
JUDGE_STEP = "simuser_believability"


def judge_configured(settings: Settings, environ: Mapping[str, str]) -> bool:
    """Whether the settings give the judge an endpoint it can call: a key in the environment,
    or an endpoint that needs none (the loopback)."""
    config = llm_config(settings)
    return bool(environ.get(config.api_key_env)) or not key_required(config.api_key_required, config.base_url)


def judge_bill(settings: Settings, trajectories: int) -> StepBill:
    """The judge asked about `trajectories` sessions (arms × brains × per arm and brain)."""
    config = llm_config(settings)
    tries = 1 + config.reasks
    most = trajectories * tries
    return StepBill(
        step=JUDGE_STEP,
        agents=trajectories,
        calls=trajectories,
        usd=_price(config, trajectories * JUDGE_PROMPT, trajectories * JUDGE_ANSWER),
        calls_at_most=most,
        usd_at_most=_price(config, most * JUDGE_PROMPT_LONGEST * PROMPT_MARGIN, most * config.max_tokens),
        sizing=f"{trajectories} sessions",
        trust=False,
    )


def judge_limit(settings: Settings) -> CostLimit:
    """The limit the judge runs under whatever the brain is (the embedded brain's sessions
    are judged by the LLM too)."""
    config = llm_config(settings)
    if not (config.price_prompt_per_1m or config.price_completion_per_1m):
        return CostLimit(None, "endpoint priced at $0 (SIMAB_LLM_PRICE_*): no cost limit needed")
    if settings.max_cost_usd == NO_LIMIT:
        return CostLimit(None, "NO cost limit (SIMAB_MAX_COST_USD=none)")
    if settings.max_cost_usd is None:
        return CostLimit(DEFAULT_MAX_COST_USD, "the default; SIMAB_MAX_COST_USD sets another, =none lifts it")
    return CostLimit(float(settings.max_cost_usd), "SIMAB_MAX_COST_USD")


def experiment_bill(step: StepBill, settings: Settings) -> tuple[list[str], str | None]:
    """The judge's bill as the experiments' runner prints it before step 1, and why it does
    not start (expected above the limit), or None."""
    config = llm_config(settings)
    limit = judge_limit(settings)
    lines = [
        f"LLM bill of the believability judge, from the settings ({config.model} at ${config.price_prompt_per_1m:g} / "
        f"${config.price_completion_per_1m:g} per 1M prompt / completion tokens; {limit.text()}):",
        step.line(),
        "  (its step prices the sessions it samples before the first call, and is refused above what the run has left)",
    ]
    if limit.usd is not None and step.usd > limit.usd:
        return lines, (
            f"simab: the believability judge is expected at ${step.usd:,.2f} for {step.agents} sessions, above the cost "
            f"limit ${limit.usd:,.2f} ({limit.why}); nothing was run. Judge fewer sessions "
            "(--set simuser_believability.per_arm_and_brain=N), raise SIMAB_MAX_COST_USD, or use a cheaper model."
        )
    return lines, None

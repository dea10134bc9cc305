"""Simulation of one arm: every sampled agent browses the arm's top-20 list until it exits
(A/B Agent §2.4, §3.1; design.md lifecycle step 8): the one runner, for every brain.

The loop per agent: observe the page → `brain.decide` → the sandbox validates and carries
out the action → fatigue is charged at the stated interest → one event row → the step is
appended to short-term memory; until the agent exits or the fatigue spent reaches the
budget, in which case the loop writes a *forced* exit row with the reason.  The session
closes with the exit interview (satisfaction 1–10 and a reason), written as a last event row
with action `exit_interview`, so one partition is one file holding everything about the arm
and a re-run replaces it whole.

Randomness: each agent's generator comes from `SeedSequence([seed, user_id, crc32(arm)])`
(with the session number appended for sessions 1, 2, … of `simulate_arm(session=…)`), so an
agent's session does not depend on which other agents run, nor in what order.
Agents are processed in user-id order and the frame is built once at the end, so the same
seed gives the same events, byte for byte, for any brain whose decisions depend only on its
inputs and the generator (the LLM brain's measured latencies are the exception).

Design of the experiment: by default every arm sees the same sampled agents (a paired
design, `assign_agents(..., design="paired")`); `design="random"` splits the agents across
arms at random instead.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.agents.memory import ShortTermEntry
from ops.agents.session import AgentSession
from ops.schema import EVENTS, TOP_K, conform
from ops.simulation.brains.protocol import Brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.fatigue import FatigueConfig, fatigue_budget, interest_modifier
from ops.simulation.observation import EXIT, EXIT_INTERVIEW
from ops.simulation.sandbox import Sandbox, SandboxConfig

Design = Literal["paired", "random"]


class SimulationConfig(BaseModel):
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    fatigue: FatigueConfig = Field(default_factory=FatigueConfig)
    # A safety net, not a behaviour: with Table 8 costs the budget ends a session long
    # before this; it matters only for a configuration with zero-cost actions.
    max_steps: int = 500
    # Satisfaction scale of the exit interview (Agent4Rec §3.3: 1–10).
    satisfaction_min: int = 1
    satisfaction_max: int = 10
    # False (design default): the generator depends on (seed, user, arm).  True: on (seed,
    # user) only, so an agent draws the same random numbers in every arm (common random
    # numbers, a variance reduction for the paired design).
    common_random_numbers: bool = False
    progress: bool = True


def simulate_arm(
    arm: str,
    top_k: pl.DataFrame,
    agents: Sequence[AgentSession],
    catalogue: Catalogue,
    brain: Brain,
    config: SimulationConfig | None = None,
    seed: int = 0,
    run_id: str = "",
    users: Iterable[int] | None = None,
    activity_tiers: Mapping[int, str] | None = None,
    concurrency: int = 1,
    session: int = 0,
) -> pl.DataFrame:
    """Run every agent (or those in `users`) on `arm`'s top-20 lists; return the events
    (schema `ops.schema.EVENTS`), ordered by user id then step.

    `session` numbers an independent repetition: each agent draws from its own generator
    for (seed, user, arm, session), and the events carry it; session 0 is the generator a
    single-session run has always used.

    `top_k` follows ops.schema.TOP_K (rows of other arms are ignored).  `agents` are session
    templates: each run starts from a fresh copy (no fatigue spent, empty short-term memory),
    with the budget of the agent's activity tier — taken from `activity_tiers`, else from
    `profile.activity_tier` (attribute or mapping key).

    `concurrency` > 1 runs that many agents at once on a pool of threads sharing `brain`
    (worth it for a brain that waits on the network; the brain must be thread-safe, as
    LLMBrain is).  Agents are independent and their generators depend only on (seed, user,
    arm), so the events are the same for any concurrency, measured latencies aside.
    """
    config = config or SimulationConfig()
    if seed < 0:
        raise ValueError(f"simulation seed must be >= 0, got {seed}")
    if concurrency < 1:
        raise ValueError(f"simulation concurrency must be >= 1, got {concurrency}")
    if session < 0:
        raise ValueError(f"simulation session must be >= 0, got {session}")
    by_user = {a.user_id: a for a in agents}
    if len(by_user) != len(agents):
        raise ValueError("simulation: agents repeat a user_id")
    chosen = sorted(by_user) if users is None else sorted(set(int(u) for u in users))
    unknown = [u for u in chosen if u not in by_user]
    if unknown:
        raise ValueError(f"simulation of arm {arm!r}: no agent for user(s) {unknown[:10]}")
    lists = top_k_lists(top_k, arm)
    missing = [u for u in chosen if u not in lists]
    if missing:
        raise ValueError(f"simulation of arm {arm!r}: the top-k table has no list for user(s) {missing[:10]}")

    sessions = []
    for user_id in chosen:
        template = by_user[user_id]
        tier = _activity_tier(template, activity_tiers)
        sessions.append(
            AgentSession(
                user_id=user_id,
                profile=template.profile,
                memory=template.memory,
                fatigue_spent=0.0,
                fatigue_budget=fatigue_budget(tier, config.fatigue),
                short_term=[],
            )
        )
    brain.prepare(sessions, {s.user_id: lists[s.user_id] for s in sessions})
    session_number = session  # inside `one`, `session` is the agent's AgentSession

    def one(session: AgentSession) -> list[tuple]:
        rows: list[tuple] = []
        rng = agent_rng(seed, session.user_id, arm, config.common_random_numbers, session=session_number)
        try:
            _run_session(arm, run_id, session, lists[session.user_id], catalogue, brain, config, rng, rows)
        except Exception as exc:
            exc.add_note(f"while simulating user {session.user_id} on arm {arm!r}")
            raise
        return rows

    from tqdm.auto import tqdm

    progress = dict(total=len(sessions), desc=f"simulate {arm}", disable=not config.progress, mininterval=2.0)
    if concurrency == 1:
        per_agent = [one(s) for s in tqdm(sessions, **progress)]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"simab-{arm}") as pool:
            per_agent = list(tqdm(pool.map(one, sessions), **progress))
    return _events_frame([row for rows in per_agent for row in rows], session)


def agent_rng(
    seed: int, user_id: int, arm: str, common_random_numbers: bool = False, session: int = 0
) -> np.random.Generator:
    """The agent's own generator, a pure function of (seed, user, arm, session); session 0
    keeps the entropy of the single-session runs, so their events do not change."""
    entropy = [seed, user_id] if common_random_numbers else [seed, user_id, zlib.crc32(arm.encode("utf-8"))]
    if session:
        entropy.append(session)
    return np.random.default_rng(np.random.SeedSequence(entropy))


def agents_of_arm(
    candidates: Iterable[int], arm: str, n_agents: int = 0, design: Design = "paired", arms: Sequence[str] = (), seed: int = 0
) -> list[int]:
    """The agents one arm simulates: `n_agents` sampled from `candidates` (the same sample in
    every arm for a seed; 0 = all), then, with design "random", this arm's share of them
    when dealt among `arms` (the arm itself added if missing)."""
    chosen = sample_agents(candidates, n_agents, seed)
    if design == "random":
        arms = list(arms) if arm in arms else [*arms, arm]
        chosen = assign_agents(chosen, arms, "random", seed)[arm]
    return chosen


def sample_agents(user_ids: Iterable[int], n_agents: int, seed: int) -> list[int]:
    """The agents of a run: the same sample in every arm for a given seed."""
    ids = sorted(int(u) for u in user_ids)
    if n_agents <= 0 or n_agents >= len(ids):
        return ids
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4242]))
    return sorted(int(u) for u in rng.choice(ids, size=n_agents, replace=False))


def assign_agents(user_ids: Iterable[int], arms: Sequence[str], design: Design = "paired", seed: int = 0) -> dict[str, list[int]]:
    """Which agents each arm simulates.  "paired": all agents in every arm (each agent is
    its own control).  "random": the agents shuffled (seeded) and dealt round-robin, so arm
    sizes differ by at most one."""
    users = sorted(set(int(u) for u in user_ids))
    if len(set(arms)) != len(arms) or not arms:
        raise ValueError(f"assign_agents: arms must be distinct and non-empty, got {list(arms)}")
    if design == "paired":
        return {arm: list(users) for arm in arms}
    if design == "random":
        rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(b"assign_agents")]))
        order = rng.permutation(len(users))
        return {arm: sorted(users[i] for i in order[k :: len(arms)]) for k, arm in enumerate(arms)}
    raise ValueError(f"assign_agents: design must be 'paired' or 'random', got {design!r}")


def top_k_lists(top_k: pl.DataFrame, arm: str) -> dict[int, list[int]]:
    """user id -> movie ids by rank, for one arm of a TOP_K table."""
    frame = conform(top_k, TOP_K, "top_k").filter(pl.col("arm") == arm)
    if frame.is_empty():
        raise ValueError(f"table 'top_k' has no rows for arm {arm!r}")
    dup = frame.filter(pl.struct("user_id", "rank").is_duplicated())
    if not dup.is_empty():
        raise ValueError(f"table 'top_k', arm {arm!r}: (user_id, rank) repeats, e.g. {dup.head(3).to_dicts()}")
    grouped = frame.sort("user_id", "rank").group_by("user_id", maintain_order=True).agg(pl.col("movie_id"))
    return dict(zip(grouped.get_column("user_id").to_list(), grouped.get_column("movie_id").to_list()))


# -- the session loop --------------------------------------------------------------------


def _run_session(
    arm: str,
    run_id: str,
    session: AgentSession,
    ranked: Sequence[int],
    catalogue: Catalogue,
    brain: Brain,
    config: SimulationConfig,
    rng: np.random.Generator,
    rows: list[tuple],
) -> None:
    sandbox = Sandbox(ranked, catalogue, config.sandbox)
    fatigue = config.fatigue
    budget = session.fatigue_budget
    user_id = session.user_id
    brain_name = brain.name
    step = 0
    while True:
        observation = sandbox.observe()
        decision = brain.decide(session, observation, rng)
        step += 1
        # Interest first, so that a bad decision changes nothing; then the sandbox validates
        # the action itself (IllegalActionError) before anything is charged.
        modifier = interest_modifier(decision.interest, fatigue)
        result = sandbox.apply(decision)
        cost = fatigue.base_costs[decision.action] * modifier
        before = session.fatigue_spent
        after = before + cost
        session.fatigue_spent = after
        page_type = observation.page_type
        shown = [c.movie_id for c in observation.items] if page_type == "home" else [observation.detail.card.movie_id]
        caught = list(decision.caught_eye)
        rows.append(
            (
                run_id, arm, user_id, step, page_type, observation.page_number, decision.action,
                result.movie_id, result.position, shown, caught, int(decision.interest),
                before, after, budget, result.rating, None, False, decision.reason, brain_name,
                float(decision.latency_s), int(decision.prompt_tokens), int(decision.completion_tokens),
                float(decision.cost_usd),
            )
        )
        session.short_term.append(
            ShortTermEntry(
                step=step,
                page_type=page_type,
                page_number=observation.page_number,
                caught_eye=tuple(caught),
                interest=int(decision.interest),
                action=decision.action,
                movie_id=result.movie_id,
                rating=result.rating,
            )
        )
        if sandbox.done:
            break
        if after >= budget:
            _forced_exit(sandbox, rows, run_id, arm, user_id, step + 1, after, budget, brain_name,
                         f"fatigue budget spent: {after:g} of {budget:g}")
            step += 1
            break
        if step >= config.max_steps:
            _forced_exit(sandbox, rows, run_id, arm, user_id, step + 1, after, budget, brain_name,
                         f"step limit reached: {config.max_steps} steps")
            step += 1
            break

    satisfaction, reason = brain.exit_interview(session, rng)
    lo, hi = config.satisfaction_min, config.satisfaction_max
    if isinstance(satisfaction, bool) or not isinstance(satisfaction, (int, np.integer)) or not lo <= satisfaction <= hi:
        raise ValueError(f"exit interview of user {user_id}: satisfaction must be an integer in {lo}..{hi}, got {satisfaction!r}")
    spent = session.fatigue_spent
    # exit_interview returns only (satisfaction, reason); a brain that pays for it (the LLM
    # brain) keeps the bill per user, so the interview row carries its tokens and cost too.
    bill = getattr(brain, "interview_accounting", {}).get(user_id, {})
    rows.append(
        (
            run_id, arm, user_id, step + 1, sandbox.page_type, sandbox.page_number, EXIT_INTERVIEW,
            None, None, [], [], None, spent, spent, budget, None, int(satisfaction), False, str(reason),
            brain_name, float(bill.get("latency_s", 0.0)), int(bill.get("prompt_tokens", 0)),
            int(bill.get("completion_tokens", 0)), float(bill.get("cost_usd", 0.0)),
        )
    )


def _forced_exit(sandbox, rows, run_id, arm, user_id, step, spent, budget, brain_name, reason) -> None:
    # The agent lands on the page its last action led to, then leaves: that page is shown
    # (home impressions count it) but the agent takes no further decision on it.
    observation = sandbox.observe()
    if observation.page_type == "home":
        shown = [c.movie_id for c in observation.items]
    else:
        shown = [observation.detail.card.movie_id]
    sandbox.end(reason)
    rows.append(
        (
            run_id, arm, user_id, step, observation.page_type, observation.page_number, EXIT,
            None, None, shown, [], None, spent, spent, budget, None, None, True, reason, brain_name,
            0.0, 0, 0, 0.0,
        )
    )


def _events_frame(rows: list[tuple], session: int = 0) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema=EVENTS)
    # The session number is the same for every row of a call: the rows leave it out.
    columns = dict(zip([name for name in EVENTS if name != "session"], zip(*rows)))
    series = []
    for name, dtype in EVENTS.items():
        if name == "session":
            series.append(pl.Series(name, [session] * len(rows), dtype=dtype))
            continue
        values = columns[name]
        if isinstance(dtype, pl.List):
            series.append(_list_column(name, values))
        else:
            series.append(pl.Series(name, values, dtype=dtype))
    return pl.DataFrame(series)


def _list_column(name: str, lists: Sequence[list[int]]) -> pl.Series:
    # One Arrow list array from flat values and offsets: building a Polars list column
    # from Python lists costs a Series per row, which dominated the whole simulation.
    import pyarrow as pa

    lengths = np.fromiter((len(v) for v in lists), dtype=np.int32, count=len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.fromiter((m for v in lists for m in v), dtype=np.int64, count=int(offsets[-1]))
    array = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))
    return pl.Series(name, array, dtype=pl.List(pl.Int64))


def _activity_tier(agent: AgentSession, activity_tiers: Mapping[int, str] | None) -> str:
    if activity_tiers is not None:
        if agent.user_id not in activity_tiers:
            raise ValueError(f"simulation: activity_tiers has no tier for user {agent.user_id}")
        return activity_tiers[agent.user_id]
    profile = agent.profile
    tier = profile.get("activity_tier") if isinstance(profile, Mapping) else getattr(profile, "activity_tier", None)
    if tier is None:
        raise ValueError(
            f"simulation: user {agent.user_id} has no activity tier (profile.activity_tier, or pass activity_tiers)"
        )
    return str(tier)

"""Simulation of one arm: every sampled agent browses the arm's top-20 list until it exits
(A/B Agent §2.4, §3.1; docs/definitions.md#lifecycle, step 8): the one runner, for every brain.

The loop per agent: observe the page → the brain decides → the sandbox validates and
carries out the action → fatigue is charged at the stated interest → one event row → the
step is appended to short-term memory; until the agent exits or the fatigue spent reaches
the budget, in which case the loop writes a *forced* exit row with the reason.  The session
closes with the exit interview (satisfaction 1–10 and a reason), written as a last event row
with action `exit_interview`, so one partition is one file holding everything about the arm
and a re-run replaces it whole.

The loop is written once (`_session_loop`, a generator that yields what it needs from the
brain) and driven once (`_run`): every agent a coroutine on one event loop, `concurrency` in
flight.  A brain with coroutines (`adecide`, `aexit_interview`: the LLM brain) is awaited,
many agents waiting on the endpoint at once, which is what 300 ms per call needs; a
synchronous brain (the embedded brain) is called in place, one agent at a time, or on
threads when more are asked for.

Randomness: each agent's generator comes from `SeedSequence([seed, user_id, crc32(arm)])`
(with the session number appended for sessions 1, 2, … of `simulate_arm(session=…)`),
so an agent's session does not depend on which other agents run, nor in what order.
The frame is built once at the end in user-id order, so the same seed gives the same
events, byte for byte, for any brain whose decisions depend only on its inputs and the
generator (the LLM brain's measured latencies are the exception), however the agents ran,
and whether or not some came back from a checkpoint (`simulate_arm(checkpoint_dir=…)`).

Design of the experiment: by default every arm sees the same sampled agents (a paired
design, `assign_agents(..., design="paired")`); `design="random"` splits the agents across
arms at random instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import math
import threading
import zlib
from collections.abc import Generator, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.agents.memory import ShortTermEntry
from ops.agents.session import AgentSession
from ops.atomic import atomic_write_bytes
from ops.checkpoint import JsonlCheckpoint, partition_lock
from ops.schema import EVENTS, TOP_K, conform
from ops.simulation.brains.protocol import Brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.fatigue import FatigueConfig, interest_modifier
from ops.simulation.observation import AGENT_FAILURES, CLICK_MOVIE, EXIT, EXIT_INTERVIEW, Observation, fallback_kind
from ops.simulation.sandbox import Sandbox, SandboxConfig
from ops.simulation.visits import VisitsConfig, agents_by_session, session_budget
from ops.web import redact

log = logging.getLogger(__name__)

Design = Literal["paired", "random"]
# Bump when the checkpoint's record layout or what the key covers changes.
CHECKPOINT_FORMAT = 1
# A row holds every EVENTS column but `session`, which is the same for a whole call.
_ROW_COLUMNS = [name for name in EVENTS if name != "session"]
_FALLBACK_REASON = _ROW_COLUMNS.index("fallback_reason")


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
    # The arm fails once more than this share of its agents failed (the endpoint kept
    # failing or a decision's deadline passed for them); below it, their fallbacks are
    # recorded and counted in the read-out.
    max_failed_agents_share: float = Field(0.05, ge=0, le=1)
    # A tqdm bar when the output is a terminal; none in a log file or a pipe.
    progress: bool = True
    # What the activity tier changes: the session's fatigue budget (A/B Agent, the default)
    # or how many times the agent comes back (`ops.simulation.visits`).
    visits: VisitsConfig = Field(default_factory=VisitsConfig)


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
    checkpoint_dir: str | Path | None = None,
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

    `concurrency`: agents in flight at once.  A brain that offers `adecide` and
    `aexit_interview` (the LLM brain) runs its sessions as coroutines on one event loop,
    `concurrency` of them at once; any other brain runs on that many threads sharing it
    (it must be thread-safe), or serially for 1.  Agents are independent and their
    generators depend only on (seed, user, arm), so the events are the same for any
    concurrency and either way, measured latencies aside.

    `checkpoint_dir`: a folder of this partition's own (one per arm or shard).  Each agent's
    rows are appended to `<checkpoint_dir>/<key>.jsonl` (fsynced, `ops.checkpoint`) as soon
    as its session ends; a killed run called again with the same inputs keeps those agents'
    rows and simulates only the others.  The key digests everything that determines the
    events (`checkpoint_key`), so a changed input never reuses stale rows; checkpoints of
    other keys in the folder are superseded (deleted) when a run starts, and a complete one
    is kept, so an unchanged re-run simulates nothing.  Agents whose brain failed (see
    below) are not checkpointed: a re-run tries them again.  Rows read back take this
    run's `run_id`.  One run writes a folder at a time (`ops.checkpoint.partition_lock`): a
    second call on the same folder waits for the first and then resumes from its checkpoint,
    or fails past `$SIMAB_PARTITION_LOCK_TIMEOUT_S` naming the run that holds it.

    Failed agents: an agent whose decision fell back because the endpoint kept failing or
    the decision's deadline passed (`observation.AGENT_FAILURES`) has its session ended with
    a recorded fallback (a forced exit, an interview row without satisfaction).  The arm
    fails — `SimulationFailed`, naming the share and examples — as soon as more than
    `config.max_failed_agents_share` of its agents have failed.
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
        tier = activity_tier_of(template, activity_tiers)
        sessions.append(
            AgentSession(
                user_id=user_id,
                profile=template.profile,
                memory=template.memory,
                fatigue_spent=0.0,
                fatigue_budget=session_budget(tier, config.fatigue, config.visits),
                short_term=[],
            )
        )
    # Every agent is prepared, resumed or not, so a brain that scores them together
    # (the embedded brain) sees the same population either way.
    brain.prepare(sessions, {s.user_id: lists[s.user_id] for s in sessions})

    if checkpoint_dir is None:
        return _simulate_sessions(
            arm, run_id, chosen, sessions, lists, catalogue, brain, config, seed, session, concurrency, None
        )
    # One run per partition at a time: a second one waits, then resumes from a complete checkpoint.
    with partition_lock(checkpoint_dir, f"simulation of arm {arm!r}", holder=run_id):
        return _simulate_sessions(
            arm, run_id, chosen, sessions, lists, catalogue, brain, config, seed, session, concurrency, checkpoint_dir
        )


def simulate(
    brain: Brain,
    agents: Sequence[AgentSession],
    top_k: pl.DataFrame,
    catalogue: Catalogue,
    config: SimulationConfig | None = None,
    *,
    arms: Sequence[str] | None = None,
    users: Iterable[int] | None = None,
    sessions_per_agent: int | Mapping[int, int] = 1,
    activity_tiers: Mapping[int, str] | None = None,
    checkpoint_dir: str | Path | None = None,
    **kwargs,
) -> pl.DataFrame:
    """The simulation, the one path every study takes (the lifecycle's arms, the papers'
    experiments, rounds, the trust protocols): every session of every agent in `users`
    (default: each arm's users with a list) on each arm of `arms` (default: every arm of
    `top_k`, in the order they first appear), the events of all in one frame, arm by arm.

    Each arm is `simulate_arm` once per session number, for the agents that have that session:
    `sessions_per_agent` an int — that many each, times the visits of the agent's activity tier
    when `config.visits.activity_drives` is "visits" (`ops.simulation.visits.agents_by_session`)
    — or user -> sessions, taken as given.  `checkpoint_dir`: the folder of a single arm; with
    several arms each has `<checkpoint_dir>/<arm>`.  The other keyword arguments (seed, run_id,
    concurrency) go to `simulate_arm`."""
    config = config or SimulationConfig()
    arms = list(dict.fromkeys(top_k.get_column("arm").to_list())) if arms is None else list(arms)
    by_user = {a.user_id: a for a in agents}
    frames = []
    for arm in arms:
        if users is None:
            chosen = sorted(set(top_k.filter(pl.col("arm") == arm).get_column("user_id").to_list()))
        else:
            chosen = sorted(set(int(u) for u in users))
        unknown = [u for u in chosen if u not in by_user]
        if unknown:
            raise ValueError(f"simulation of arm {arm!r}: no agent for user(s) {unknown[:10]}")
        if isinstance(sessions_per_agent, Mapping):
            counts = {u: int(sessions_per_agent.get(u, 1)) for u in chosen}
            by_session = [sorted(u for u, n in counts.items() if n > s) for s in range(max(counts.values(), default=0))]
        else:
            tiers = {u: activity_tier_of(by_user[u], activity_tiers) for u in chosen}
            by_session = agents_by_session(chosen, tiers, sessions_per_agent, config.visits)
        folder = checkpoint_dir if checkpoint_dir is None or len(arms) == 1 else Path(checkpoint_dir) / arm
        for session, session_users in enumerate(by_session or [[]]):
            if not session_users and session:
                continue
            frames.append(
                simulate_arm(
                    arm,
                    top_k,
                    agents,
                    catalogue,
                    brain,
                    config,
                    users=session_users,
                    activity_tiers=activity_tiers,
                    session=session,
                    checkpoint_dir=folder,
                    **kwargs,
                )
            )
    if not frames:
        return pl.DataFrame(schema=EVENTS)
    return pl.concat(frames)


def _simulate_sessions(
    arm: str,
    run_id: str,
    chosen: list[int],
    sessions: list[AgentSession],
    lists: dict,
    catalogue: Catalogue,
    brain: Brain,
    config: SimulationConfig,
    seed: int,
    session: int,
    concurrency: int,
    checkpoint_dir: str | Path | None,
) -> pl.DataFrame:
    done: dict[int, list[tuple]] = {}
    checkpoint = None
    if checkpoint_dir is not None:
        key = checkpoint_key(arm, seed, sessions, lists, catalogue, brain, config, session)
        # Each session its own folder: a checkpoint supersedes the others in its folder.
        folder = Path(checkpoint_dir) / f"session-{session}" if session else Path(checkpoint_dir)
        checkpoint = _open_checkpoint(folder, key, arm, seed, brain, len(sessions))
        wanted = set(chosen)
        done = {u: [(run_id, *row) for row in rec["rows"]] for u, rec in checkpoint.records.items() if u in wanted}
    todo = [s for s in sessions if s.user_id not in done]
    if done:
        log.info(
            "simulation of arm %r: %d of %d agents resumed from checkpoint %s",
            arm,
            len(done),
            len(sessions),
            checkpoint.path,
        )
    failures = _Failures(arm, len(sessions), config.max_failed_agents_share)

    def finish(user_id: int, rows: list[tuple]) -> dict | None:
        """Account for one finished agent; its checkpoint record, or None when it failed."""
        failed = next((r[_FALLBACK_REASON] for r in rows if fallback_kind(r[_FALLBACK_REASON]) in AGENT_FAILURES), None)
        if failed is not None:
            failures.add(user_id, failed)  # raises past the allowed share
            return None
        return {"user_id": user_id, "rows": [list(row[1:]) for row in rows]}  # run_id re-stamped on resume

    from tqdm.auto import tqdm

    progress = tqdm(
        total=len(sessions),
        initial=len(done),
        desc=f"simulate {arm}",
        disable=None if config.progress else True,
        mininterval=2.0,
    )
    try:
        fresh = _run(
            arm, run_id, todo, lists, catalogue, brain, config, seed, session, concurrency, finish, checkpoint, progress
        )
    finally:
        progress.close()
    if failures.users:
        log.warning("simulation of arm %r: %s", arm, failures.describe())
    per_agent = {**done, **fresh}
    return _events_frame([row for user_id in chosen for row in per_agent[user_id]], session)


class SimulationFailed(RuntimeError):
    """More of an arm's agents failed than `SimulationConfig.max_failed_agents_share` allows."""


def checkpoint_key(
    arm: str,
    seed: int,
    sessions: Sequence[AgentSession],
    lists: Mapping[int, Sequence[int]],
    catalogue: Catalogue,
    brain: Brain,
    config: SimulationConfig,
    session: int = 0,
) -> str:
    """SHA-256 of everything that determines an arm's events: the event schema, arm, seed,
    the simulation config, the brain (name and `brain.fingerprint()`, or its pydantic
    `config` / `params`), the catalogue, and per agent its user id, fatigue budget, top-k
    list, profile and long-term memory."""
    h = hashlib.sha256()

    def put(*parts) -> None:
        for part in parts:
            h.update(part if isinstance(part, bytes) else str(part).encode("utf-8"))
            h.update(b"\x1f")

    put(CHECKPOINT_FORMAT, json.dumps({k: str(v) for k, v in EVENTS.items()}), arm, seed)
    if session:  # session 0 keeps the keys of single-session runs
        put("session", session)
    put(config.model_dump_json(exclude={"progress", "max_failed_agents_share"}))
    put(brain.name, brain_fingerprint(brain))
    for movie_id in sorted(catalogue.movie_ids()):
        put(repr(catalogue[movie_id]))
    for session in sorted(sessions, key=lambda s: s.user_id):
        put(session.user_id, session.fatigue_budget, list(lists[session.user_id]), repr(session.profile))
        memory = session.memory
        arrays = [getattr(memory, name, None) for name in ("rows", "ratings", "timestamps")]
        if all(isinstance(a, np.ndarray) for a in arrays):
            put(
                getattr(getattr(memory, "vectors", None), "digest", ""),
                *(np.ascontiguousarray(a).tobytes() for a in arrays),
            )
        else:
            put(repr(memory))
    return h.hexdigest()


def brain_fingerprint(brain: Brain) -> str:
    """What distinguishes two brains of one name: `brain.fingerprint()` when the brain has
    one, else its class and its pydantic `config` and `params`."""
    own = getattr(brain, "fingerprint", None)
    if callable(own):
        return str(own())
    parts = [f"{type(brain).__module__}.{type(brain).__qualname__}"]
    for name in ("config", "params"):
        value = getattr(brain, name, None)
        if isinstance(value, BaseModel):
            parts.append(value.model_dump_json())
    return "|".join(parts)


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
    candidates: Iterable[int],
    arm: str,
    n_agents: int = 0,
    design: Design = "paired",
    arms: Sequence[str] = (),
    seed: int = 0,
) -> list[int]:
    """The agents one arm simulates: `n_agents` sampled from `candidates` (the same sample in
    every arm for a seed; 0 = all), then, with design "random", this arm's share of them
    when dealt among `arms` (the arm itself added if missing)."""
    chosen = sample_agents(candidates, n_agents, seed)
    if design == "random":
        arms = list(arms) if arm in arms else [*arms, arm]
        chosen = assign_agents(chosen, arms, "random", seed)[arm]
    return chosen


def user_shard(user_id: int, shards: int) -> int:
    """The user shard of an agent: a stable hash of its user id (CRC-32 of the decimal id),
    not of the seed or the arm, so an agent stays in one shard — one checkpoint folder, one
    worker's response cache — across arms, seeds and re-runs.  Agents are independent
    (their generators depend only on seed, user, arm, session), so which shard simulates an
    agent changes nothing in its events."""
    if shards < 1:
        raise ValueError(f"user shards must be >= 1, got {shards}")
    return zlib.crc32(str(int(user_id)).encode("ascii")) % shards


def agents_of_shard(agents: Iterable[int], shard: int, shards: int) -> list[int]:
    """The agents of `agents` (an arm's, from `agents_of_arm`) that shard `shard` of `shards` simulates."""
    if not 0 <= shard < shards:
        raise ValueError(f"user shard must be in 0..{shards - 1}, got {shard}")
    return [int(u) for u in agents if user_shard(u, shards) == shard]


def combine_shards(by_shard: Mapping[int, pl.DataFrame], shards: int) -> pl.DataFrame:
    """One arm's events from its user shards, in the order one unsharded run writes them
    (session, then user id, then step).  Refuses shards that do not fit together: an agent
    simulated by the wrong shard or by two (shards made with another shard count)."""
    seen: dict[int, int] = {}
    for shard, frame in sorted(by_shard.items()):
        conform(frame, EVENTS, f"simulation shard {shard}")
        for user_id in frame.get_column("user_id").unique().to_list():
            if user_shard(user_id, shards) != shard:
                raise ValueError(
                    f"simulation shard {shard} of {shards} holds user {user_id}, who belongs to shard {user_shard(user_id, shards)}: re-simulate it"
                )
            if user_id in seen:
                raise ValueError(f"user {user_id} is in simulation shards {seen[user_id]} and {shard}")
            seen[user_id] = shard
    frames = [by_shard[k] for k in sorted(by_shard)]
    if not frames:
        return pl.DataFrame(schema=EVENTS)
    return pl.concat(frames).sort(["session", "user_id", "step"], maintain_order=True)


def sample_agents(user_ids: Iterable[int], n_agents: int, seed: int) -> list[int]:
    """The agents of a run: the same sample in every arm for a given seed; 0 = all of them."""
    if n_agents < 0:
        # Not "all": with the LLM brain a typo would simulate (and pay for) every user.
        raise ValueError(f"n_agents={n_agents}: a number of agents ≥ 0 (0: every user)")
    ids = sorted(int(u) for u in user_ids)
    if n_agents == 0 or n_agents >= len(ids):
        return ids
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4242]))
    return sorted(int(u) for u in rng.choice(ids, size=n_agents, replace=False))


def assign_agents(
    user_ids: Iterable[int], arms: Sequence[str], design: Design = "paired", seed: int = 0
) -> dict[str, list[int]]:
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


def _session_loop(
    arm: str,
    run_id: str,
    session: AgentSession,
    ranked: Sequence[int],
    catalogue: Catalogue,
    brain_name: str,
    config: SimulationConfig,
    rows: list[tuple],
) -> Generator[Observation | None, object, None]:
    """One agent's session, written once for every way of calling the brain: yields an
    Observation when it needs a decision, None when it needs the exit interview, and is
    sent the brain's answer (`_drive`)."""
    sandbox = Sandbox(ranked, catalogue, config.sandbox)
    fatigue = config.fatigue
    budget = session.fatigue_budget
    user_id = session.user_id
    step = 0
    failed: str | None = None  # the fallback reason that ended the agent's session
    while True:
        observation = sandbox.observe()
        decision = yield observation
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
        fallback_reason = decision.fallback_reason
        slot = None
        if page_type == "home" and decision.action == CLICK_MOVIE and result.movie_id in shown:
            slot = decision.slot if decision.slot is not None else shown.index(result.movie_id) + 1
        rows.append(
            (
                run_id,
                arm,
                user_id,
                step,
                page_type,
                observation.page_number,
                decision.action,
                result.movie_id,
                result.position,
                slot,
                shown,
                caught,
                int(decision.interest),
                before,
                after,
                budget,
                result.rating,
                None,
                False,
                decision.reason,
                brain_name,
                float(decision.latency_s),
                int(decision.prompt_tokens),
                int(decision.completion_tokens),
                float(decision.cost_usd),
                fallback_reason is not None,
                fallback_reason,
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
        if fallback_kind(fallback_reason) in AGENT_FAILURES:
            failed = fallback_reason
        if sandbox.done:
            break
        stop = (
            f"the brain could not decide: {failed}"
            if failed is not None
            else f"fatigue budget spent: {after:g} of {budget:g}"
            if after >= budget
            else f"step limit reached: {config.max_steps} steps"
            if step >= config.max_steps
            else None
        )
        if stop is not None:
            _forced_exit(sandbox, rows, run_id, arm, user_id, step + 1, after, budget, brain_name, stop, failed)
            step += 1
            break

    spent = session.fatigue_spent
    if failed is not None:
        # The endpoint has failed this agent already: no interview is asked, none is made up.
        satisfaction, reason, bill = (
            None,
            f"not asked: the brain could not decide ({failed})",
            {"fallback_reason": failed},
        )
    else:
        # The driver sends (satisfaction, reason, bill): exit_interview returns only the first
        # two, and a brain that pays for the interview (the LLM brain) keeps its bill per user
        # in `interview_accounting`, so the interview row carries its tokens and cost too.
        satisfaction, reason, bill = yield None
        lo, hi = config.satisfaction_min, config.satisfaction_max
        if fallback_kind(bill.get("fallback_reason")) in AGENT_FAILURES:
            satisfaction = None
        elif (
            isinstance(satisfaction, bool)
            or not isinstance(satisfaction, (int, np.integer))
            or not lo <= satisfaction <= hi
        ):
            raise ValueError(
                f"exit interview of user {user_id}: satisfaction must be an integer in {lo}..{hi}, got {satisfaction!r}"
            )
    fallback_reason = bill.get("fallback_reason")
    rows.append(
        (
            run_id,
            arm,
            user_id,
            step + 1,
            sandbox.page_type,
            sandbox.page_number,
            EXIT_INTERVIEW,
            None,
            None,
            None,
            [],
            [],
            None,
            spent,
            spent,
            budget,
            None,
            None if satisfaction is None else int(satisfaction),
            False,
            str(reason),
            brain_name,
            float(bill.get("latency_s", 0.0)),
            int(bill.get("prompt_tokens", 0)),
            int(bill.get("completion_tokens", 0)),
            float(bill.get("cost_usd", 0.0)),
            fallback_reason is not None,
            fallback_reason,
        )
    )


def _forced_exit(
    sandbox, rows, run_id, arm, user_id, step, spent, budget, brain_name, reason, fallback_reason=None
) -> None:
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
            run_id,
            arm,
            user_id,
            step,
            observation.page_type,
            observation.page_number,
            EXIT,
            None,
            None,
            None,
            shown,
            [],
            None,
            spent,
            spent,
            budget,
            None,
            None,
            True,
            reason,
            brain_name,
            0.0,
            0,
            0,
            0.0,
            fallback_reason is not None,
            fallback_reason,
        )
    )


async def _drive(loop: Generator, decide, interview, brain: Brain, session: AgentSession, rng) -> None:
    """Run a session loop, awaiting the brain's answers (`_brain_calls`)."""
    answer = None
    try:
        while True:
            ask = loop.send(answer)
            if ask is None:
                satisfaction, reason = await interview(session, rng)
                answer = (satisfaction, reason, _bill(brain, session.user_id))
            else:
                answer = await decide(session, ask, rng)
    except StopIteration:
        return


def _brain_calls(brain: Brain, concurrency: int):
    """(decide, exit_interview, awaited) with the first two coroutine functions: a brain's own
    coroutines (`adecide`, `aexit_interview`: the LLM brain, many agents in flight on one
    loop; awaited True); else its synchronous methods, called in place when one agent runs at
    a time, or on threads when several do (the brain must then be thread-safe)."""
    if all(inspect.iscoroutinefunction(getattr(brain, name, None)) for name in ("adecide", "aexit_interview")):
        return brain.adecide, brain.aexit_interview, True
    if concurrency == 1:

        async def decide(session, observation, rng):
            return brain.decide(session, observation, rng)

        async def interview(session, rng):
            return brain.exit_interview(session, rng)

    else:

        async def decide(session, observation, rng):
            return await asyncio.to_thread(brain.decide, session, observation, rng)

        async def interview(session, rng):
            return await asyncio.to_thread(brain.exit_interview, session, rng)

    return decide, interview, False


def _bill(brain: Brain, user_id: int) -> dict:
    return getattr(brain, "interview_accounting", {}).get(user_id, {})


def _run(
    arm, run_id, todo, lists, catalogue, brain, config, seed, number, concurrency, finish, checkpoint, progress
) -> dict[int, list[tuple]]:
    """Every agent of `todo` as a coroutine on one event loop, `concurrency` in flight (a
    fresh loop, on a thread of its own when the caller's thread already runs one); each
    finished agent is checkpointed before it counts as done."""
    decide, interview, awaited = _brain_calls(brain, concurrency)

    async def main() -> dict[int, list[tuple]]:
        results: dict[int, list[tuple]] = {}
        commit = _GroupCommit(checkpoint) if checkpoint is not None else None
        pending = iter(todo)  # shared by the workers: each takes the next agent
        stopping = False

        async def worker() -> None:
            for session in pending:
                if stopping:
                    return
                rows: list[tuple] = []
                rng = agent_rng(seed, session.user_id, arm, config.common_random_numbers, session=number)
                loop = _session_loop(arm, run_id, session, lists[session.user_id], catalogue, brain.name, config, rows)
                try:
                    await _drive(loop, decide, interview, brain, session, rng)
                except Exception as exc:
                    exc.add_note(f"while simulating user {session.user_id} on arm {arm!r}")
                    raise
                record = finish(session.user_id, rows)
                if record is not None and commit is not None:
                    await commit.add(record)  # durable before the agent counts as done
                results[session.user_id] = rows
                progress.update()

        tasks = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, len(todo)))]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # A failure stops the others: agents waiting on an endpoint are dropped; agents
            # a thread is deciding for finish (a thread cannot be stopped) and are checkpointed.
            stopping = True
            if awaited:
                for task in tasks:
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            release = getattr(brain, "aclose_connections", None)
            if release is not None:
                await release()
        return results

    if not todo:
        return {}
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"simab-{arm}-loop") as pool:
        return pool.submit(asyncio.run, main()).result()


class _GroupCommit:
    """Checkpoint appends from coroutines: agents that finish while a write is in flight
    share the next one (one fsync for many), and the disk wait runs off the event loop."""

    def __init__(self, checkpoint: JsonlCheckpoint) -> None:
        self.checkpoint = checkpoint
        self.pending: list[tuple[dict, object]] = []
        self.flushing = None

    async def add(self, record: dict) -> None:
        done = asyncio.get_running_loop().create_future()
        self.pending.append((record, done))
        if self.flushing is None:
            self.flushing = asyncio.ensure_future(self._flush())
        await done

    async def _flush(self) -> None:
        try:
            while self.pending:
                batch, self.pending = self.pending, []
                try:
                    await asyncio.to_thread(self.checkpoint.append_many, [record for record, _ in batch])
                except BaseException as exc:
                    for _, done in batch + self.pending:
                        if not done.done():
                            done.set_exception(exc)
                    self.pending = []
                    raise
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)
        finally:
            self.flushing = None


class _Failures:
    """The arm's failed agents; raises SimulationFailed as soon as there are more than the
    allowed share (the count only grows, so waiting for the rest would not save the arm)."""

    def __init__(self, arm: str, n_agents: int, max_share: float) -> None:
        self.arm, self.n_agents, self.max_share = arm, n_agents, max_share
        self.allowed = math.floor(max_share * n_agents + 1e-9)
        self.users: dict[int, str] = {}
        self._lock = threading.Lock()

    def add(self, user_id: int, reason: str) -> None:
        with self._lock:
            self.users[user_id] = reason
            over = len(self.users) > self.allowed
            message = self.describe() if over else ""
        if over:
            raise SimulationFailed(message)

    def describe(self) -> str:
        n = len(self.users)
        examples = "; ".join(f"user {u}: {redact(r)}" for u, r in sorted(self.users.items())[:3])
        return (
            f"{n} of {self.n_agents} agents failed ({n / max(self.n_agents, 1):.1%}) on arm {self.arm!r}; "
            f"max_failed_agents_share={self.max_share:.1%} allows {self.allowed}. E.g. {examples}"
        )


def _open_checkpoint(folder: Path, key: str, arm: str, seed: int, brain: Brain, n_agents: int) -> JsonlCheckpoint:
    """This key's checkpoint in `folder`; checkpoints of other keys there are superseded."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key[:32]}.jsonl"
    for stale in folder.glob("*.jsonl"):
        if stale != path:
            log.info("simulation checkpoint %s superseded (its inputs differ): removed", stale)
            stale.unlink(missing_ok=True)
            stale.with_suffix(".json").unlink(missing_ok=True)
    # What the key stands for, for a person wondering why a checkpoint was (not) reused.
    about = {"key": key, "arm": arm, "seed": seed, "brain": brain.name, "agents": n_agents, "format": CHECKPOINT_FORMAT}
    atomic_write_bytes(path.with_suffix(".json"), json.dumps(about, indent=1).encode("utf-8"))
    return JsonlCheckpoint(path, key="user_id")


def _events_frame(rows: list[tuple], session: int = 0) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema=EVENTS)
    # The session number is the same for every row of a call: the rows leave it out.
    columns = dict(zip(_ROW_COLUMNS, zip(*rows)))
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


def activity_tier_of(agent: AgentSession, activity_tiers: Mapping[int, str] | None) -> str:
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

"""Simulation of arms: every sampled agent browses an arm's top-20 list until it exits
(A/B Agent §2.4, §3.1; docs/definitions.md#lifecycle, step 8): the one runner, for every brain.

`simulate` is the one entry point, the path every study takes (the lifecycle's partitions
through `ops.simulation.partition`, the papers' experiments, rounds, the trust protocols, the
benches).  For each arm and session number it makes one `SimulationRequest`
(`ops.simulation.request`), and that value goes down: the driver (`ops.simulation.driver`)
runs every agent's session loop (`ops.simulation.session`) on one event loop; finished agents
are checkpointed (`ops.simulation.checkpointing`) so a killed run resumes; the runner counts
the agents whose brain failed and puts the events together.  Who is simulated where — the
sample, the design, the user shards — is `ops.simulation.assignment`.

Randomness: each agent's generator comes from `SeedSequence([seed, user_id, crc32(arm)])`
(with the session number appended for sessions 1, 2, …), so an agent's session does not
depend on which other agents run, nor in what order.  Each arm's frame is built once at the
end in user-id order, so the same seed gives the same events, byte for byte, for any brain
whose decisions depend only on its inputs and the generator (the LLM brain's measured
latencies are the exception), however the agents ran, and whether or not some came back
from a checkpoint.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import polars as pl
from tqdm.auto import tqdm

from ops.agents.session import AgentSession
from ops.schema import EVENTS, TOP_K, conform
from ops.simulation.brains.protocol import Brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.checkpointing import record, resume
from ops.simulation.driver import drive
from ops.simulation.observation import AGENT_FAILURES, fallback_kind
from ops.simulation.request import SimulationConfig, SimulationRequest, activity_tier_of
from ops.simulation.session import FALLBACK_REASON, events_frame
from ops.simulation.visits import agents_by_session
from ops.storage.checkpoint import partition_lock
from ops.web import redact

log = logging.getLogger(__name__)


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
    seed: int = 0,
    run_id: str = "",
    concurrency: int = 1,
) -> pl.DataFrame:
    """Every session of every agent in `users` (default: each arm's users with a list) on
    each arm of `arms` (default: every arm of `top_k`, in the order they first appear): the
    events of all in one frame (schema `ops.schema.EVENTS`), arm by arm, each arm's session
    by session, then by user id and step.

    `top_k` follows ops.schema.TOP_K.  `agents` are session templates: each session starts
    from a fresh copy (no fatigue spent, empty short-term memory) with the budget of the
    agent's activity tier — from `activity_tiers`, else `profile.activity_tier` (attribute or
    mapping key).  `sessions_per_agent`: an int — that many each, times the visits of the
    agent's tier when `config.visits.activity_drives` is "visits"
    (`ops.simulation.visits.agents_by_session`) — or user -> sessions, taken as given.  Each
    session is an independent repetition: the agent draws from its own generator for (seed,
    user, arm, session), and the events carry its number (0, 1, …).

    `concurrency`: agents in flight at once.  A brain that offers `adecide` and
    `aexit_interview` (the LLM brain) runs its sessions as coroutines on one event loop,
    `concurrency` of them at once; any other brain runs on that many threads sharing it (it
    must be thread-safe), or serially for 1.  The events are the same for any concurrency,
    measured latencies aside.

    `checkpoint_dir`: the folder of a single arm (with several arms each has
    `<checkpoint_dir>/<arm>`), one of this partition's own (one per arm or shard).  Each
    agent's rows are appended to `<checkpoint_dir>/<key>.jsonl` (fsynced,
    `ops.storage.checkpoint`) as soon as its session ends; a killed run called again with the
    same inputs keeps those agents' rows and simulates only the others.  The key digests
    everything that determines the events (`ops.simulation.checkpointing.checkpoint_key`), so
    a changed input never reuses stale rows; checkpoints of other keys in the folder are
    superseded (deleted) when a run starts, and a complete one is kept, so an unchanged re-run
    simulates nothing.  Agents whose brain failed are not checkpointed: a re-run tries them
    again.  Rows read back take this run's `run_id`.  One run writes a folder at a time
    (`ops.storage.checkpoint.partition_lock`): a second call on the same folder waits for the
    first and then resumes from its checkpoint, or fails past
    `$SIMAB_PARTITION_LOCK_TIMEOUT_S` naming the run that holds it.

    Failed agents: an agent whose decision fell back because the endpoint kept failing or the
    decision's deadline passed (`observation.AGENT_FAILURES`) has its session ended with a
    recorded fallback (a forced exit, an interview row without satisfaction).  The arm fails —
    `SimulationFailed`, naming the share and examples — as soon as more than
    `config.max_failed_agents_share` of its agents have failed.
    """
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
        lists = _top_k_lists(top_k, arm)  # once per arm, for every session
        common = dict(
            activity_tiers=activity_tiers, seed=seed, run_id=run_id, concurrency=concurrency, checkpoint_dir=folder
        )
        for session, session_users in enumerate(by_session or [[]]):
            if not session_users and session:
                continue
            request = SimulationRequest.of(
                arm, lists, agents, catalogue, brain, config, session_users, session=session, **common
            )
            frames.append(_run(request))
    if not frames:
        return pl.DataFrame(schema=EVENTS)
    return pl.concat(frames)


class SimulationFailed(RuntimeError):
    """More of an arm's agents failed than `SimulationConfig.max_failed_agents_share` allows."""


def _run(request: SimulationRequest) -> pl.DataFrame:
    """The events of `request`, in user-id order; with a checkpoint folder, under its
    partition lock."""
    # Every agent is prepared, resumed or not, so a brain that scores them together
    # (the embedded brain) sees the same population either way.
    request.brain.prepare(list(request.sessions), dict(request.lists))
    if request.checkpoint_dir is None:
        return _events(request)
    with partition_lock(request.checkpoint_dir, f"simulation of arm {request.arm!r}", holder=request.run_id):
        return _events(request)


def _top_k_lists(top_k: pl.DataFrame, arm: str) -> dict[int, list[int]]:
    """user id -> movie ids by rank, for one arm of a TOP_K table."""
    frame = conform(top_k, TOP_K, "top_k").filter(pl.col("arm") == arm)
    if frame.is_empty():
        raise ValueError(f"table 'top_k' has no rows for arm {arm!r}")
    dup = frame.filter(pl.struct("user_id", "rank").is_duplicated())
    if not dup.is_empty():
        raise ValueError(f"table 'top_k', arm {arm!r}: (user_id, rank) repeats, e.g. {dup.head(3).to_dicts()}")
    grouped = frame.sort("user_id", "rank").group_by("user_id", maintain_order=True).agg(pl.col("item_id"))
    return dict(zip(grouped.get_column("user_id").to_list(), grouped.get_column("item_id").to_list()))


def _events(request: SimulationRequest) -> pl.DataFrame:
    checkpoint, done = resume(request) if request.checkpoint_dir is not None else (None, {})
    todo = [s for s in request.sessions if s.user_id not in done]
    failures = _Failures(request.arm, len(request.sessions), request.config.max_failed_agents_share)

    def finish(user_id: int, rows: list[tuple]) -> dict | None:
        """Account for one finished agent; its checkpoint record, or None when it failed."""
        failed = next((r[FALLBACK_REASON] for r in rows if fallback_kind(r[FALLBACK_REASON]) in AGENT_FAILURES), None)
        if failed is not None:
            failures.add(user_id, failed)  # raises past the allowed share
            return None
        return record(user_id, rows)

    progress = tqdm(
        total=len(request.sessions),
        initial=len(done),
        desc=f"simulate {request.arm}",
        disable=None if request.config.progress else True,
        mininterval=2.0,
    )
    try:
        fresh = drive(request, todo, finish, checkpoint, progress)
    finally:
        progress.close()
    if failures.users:
        log.warning("simulation of arm %r: %s", request.arm, failures.describe())
    per_agent = {**done, **fresh}
    return events_frame([row for user_id in request.users for row in per_agent[user_id]], request.session)


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

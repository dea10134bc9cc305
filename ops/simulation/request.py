"""What a simulation is asked: one arm's lists, the agents that browse them, the brain that
decides, the seed, the session number and where its checkpoint goes (`SimulationRequest`),
and the simulation's configuration (`SimulationConfig`: the sandbox, fatigue, the limits).

A request is made once, where the caller's arguments enter the runner (`SimulationRequest.of`):
the users chosen and checked, each agent's list taken from the arm's, each agent's session
started fresh with its tier's budget.  Everything below the runner — the driver, the
session loop, the checkpoint — reads that one value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from ops.agents.session import AgentSession
from ops.simulation.brains.protocol import Brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.fatigue import FatigueConfig
from ops.simulation.sandbox import SandboxConfig
from ops.simulation.visits import VisitsConfig, session_budget


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


@dataclass(frozen=True)
class SimulationRequest:
    """One call of the simulation: `sessions` (fresh, in user-id order) browse their `lists`
    (user id -> the arm's movie ids by rank) on `arm`, `brain` deciding; `seed` and
    `session` (the repetition's number) make each agent's generator; `run_id` stamps the
    rows; `concurrency` agents run at once; `checkpoint_dir` (None: none) keeps each
    finished agent's rows."""

    arm: str
    lists: Mapping[int, Sequence[int]]
    sessions: tuple[AgentSession, ...]
    catalogue: Catalogue
    brain: Brain
    config: SimulationConfig
    seed: int = 0
    session: int = 0
    run_id: str = ""
    concurrency: int = 1
    checkpoint_dir: Path | None = None

    def __post_init__(self) -> None:
        for name, least in (("seed", 0), ("concurrency", 1), ("session", 0)):
            if getattr(self, name) < least:
                raise ValueError(f"simulation {name} must be >= {least}, got {getattr(self, name)}")
        if self.checkpoint_dir is not None:
            object.__setattr__(self, "checkpoint_dir", Path(self.checkpoint_dir))

    @classmethod
    def of(
        cls,
        arm: str,
        lists: Mapping[int, Sequence[int]],
        agents: Sequence[AgentSession],
        catalogue: Catalogue,
        brain: Brain,
        config: SimulationConfig,
        users: Iterable[int] | None = None,
        activity_tiers: Mapping[int, str] | None = None,
        **fields,
    ) -> SimulationRequest:
        """The request of one arm and session of `ops.simulation.runner.simulate` (its
        docstring says what each argument does), checked: every agent of `users` (default:
        all) has one template in `agents` and a list in `lists`; each starts a fresh session
        with its activity tier's budget (from `activity_tiers`, else its profile).  `fields`: seed, session, run_id, concurrency,
        checkpoint_dir."""
        by_user = {a.user_id: a for a in agents}
        if len(by_user) != len(agents):
            raise ValueError("simulation: agents repeat a user_id")
        chosen = sorted(by_user) if users is None else sorted(set(int(u) for u in users))
        unknown = [u for u in chosen if u not in by_user]
        if unknown:
            raise ValueError(f"simulation of arm {arm!r}: no agent for user(s) {unknown[:10]}")
        missing = [u for u in chosen if u not in lists]
        if missing:
            raise ValueError(f"simulation of arm {arm!r}: the top-k table has no list for user(s) {missing[:10]}")
        sessions = tuple(
            AgentSession(
                user_id=user_id,
                profile=by_user[user_id].profile,
                memory=by_user[user_id].memory,
                fatigue_spent=0.0,
                fatigue_budget=session_budget(
                    activity_tier_of(by_user[user_id], activity_tiers), config.fatigue, config.visits
                ),
                short_term=[],
            )
            for user_id in chosen
        )
        return cls(arm, {u: lists[u] for u in chosen}, sessions, catalogue, brain, config, **fields)

    @property
    def users(self) -> list[int]:
        return [s.user_id for s in self.sessions]


def activity_tier_of(agent: AgentSession, activity_tiers: Mapping[int, str] | None) -> str:
    """The agent's activity tier: from `activity_tiers`, else its profile's `activity_tier`
    (attribute or mapping key)."""
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

"""Visits: what an agent's activity tier changes in the simulation
(docs/definitions.md#visits).

Two designs:

- "session_length" (the default; A/B Agent §2.4.4, Table 8 and Fig. 6): one session per
  agent and arm (times `sessions_per_agent`), its fatigue budget set by the activity tier,
  so a more active agent does more per session.
- "visits": every session has the medium tier's budget and an agent comes back
  `visits[tier]` times (times `sessions_per_agent`), so a more active agent comes more
  often and does about as much per visit.  This is the shape of the real data: on ML-1M
  users 1–1999 (test window, sessions cut at an hour without a rating) the train-window
  activity tier goes WITH the number of sessions (ρ +0.24 [+0.13, +0.35]) and slightly
  AGAINST the ratings per session (ρ −0.16 [−0.27, −0.06]), where the session-length
  design makes it go with the ratings per session (+0.59).  `bench/alignment.py` prints
  both designs beside the real data.

The read-out treats the agent as the unit whatever the design: each agent's metrics are the
mean over its sessions (`ops.readout.agent_metrics.agent_means`), so an agent that comes three
times weighs as much as one that comes once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field, model_validator

from ops.settings import ActivityDrives
from ops.simulation.fatigue import ACTIVITY_TIERS, FatigueConfig, fatigue_budget


class VisitsConfig(BaseModel):
    """How the activity tier shows: the session's fatigue budget, or the number of visits."""

    activity_drives: ActivityDrives = "session_length"
    # "visits" only: sessions per agent and arm by activity tier (times sessions_per_agent).
    # 1 / 2 / 3 is a monotone guess, not a fit: ML-1M's real mean sessions per tier in the
    # test window are 8.5 / 16.3 / 13.1 (bench/alignment.py prints them for your data).
    visits: dict[str, int] = Field(default_factory=lambda: {"low": 1, "medium": 2, "high": 3})

    @model_validator(mode="after")
    def _check(self) -> VisitsConfig:
        missing = [t for t in ACTIVITY_TIERS if t not in self.visits]
        if missing:
            raise ValueError(f"visits lack the activity tier(s) {missing}; got {sorted(self.visits)}")
        bad = {t: v for t, v in self.visits.items() if not (isinstance(v, int) and v >= 1)}
        if bad:
            raise ValueError(f"visits per tier must be integers >= 1, got {bad}")
        return self


def visits_config(activity_drives: ActivityDrives, visits_per_tier: Sequence[int]) -> VisitsConfig:
    """From the asset config's two fields: visits for the low, medium and high tiers in order."""
    if len(visits_per_tier) != len(ACTIVITY_TIERS):
        raise ValueError(
            f"visits_per_tier: one number per activity tier {list(ACTIVITY_TIERS)}, got {list(visits_per_tier)}"
        )
    return VisitsConfig(activity_drives=activity_drives, visits=dict(zip(ACTIVITY_TIERS, visits_per_tier)))


def budget_tier(activity_tier: str, config: VisitsConfig) -> str:
    """The tier whose fatigue budget a session of an agent of `activity_tier` gets."""
    if activity_tier not in ACTIVITY_TIERS:
        raise ValueError(f"visits: unknown activity tier {activity_tier!r}; the tiers are {list(ACTIVITY_TIERS)}")
    return activity_tier if config.activity_drives == "session_length" else "medium"


def session_budget(activity_tier: str, fatigue: FatigueConfig, config: VisitsConfig) -> float:
    """The fatigue budget of one session of an agent of `activity_tier`."""
    return fatigue_budget(budget_tier(activity_tier, config), fatigue)


def sessions_of(activity_tier: str, sessions_per_agent: int, config: VisitsConfig) -> int:
    """How many sessions an agent of `activity_tier` has on each arm."""
    if sessions_per_agent < 1:
        raise ValueError(f"sessions per agent must be >= 1, got {sessions_per_agent}")
    if activity_tier not in ACTIVITY_TIERS:
        raise ValueError(f"visits: unknown activity tier {activity_tier!r}; the tiers are {list(ACTIVITY_TIERS)}")
    if config.activity_drives == "session_length":
        return sessions_per_agent
    return sessions_per_agent * config.visits[activity_tier]


def agents_by_session(
    users: Iterable[int], tiers: Mapping[int, str], sessions_per_agent: int, config: VisitsConfig
) -> list[list[int]]:
    """For session 0, 1, …: the users (sorted) who have that session.  Session s holds every
    user with more than s sessions, so sessions are numbered 0 … n−1 for each agent and an
    agent's session s is the same generator whatever the design (`session.agent_rng`)."""
    counts = {int(u): sessions_of(tiers[int(u)], sessions_per_agent, config) for u in users}
    most = max(counts.values(), default=0)
    return [sorted(u for u, n in counts.items() if n > s) for s in range(most)]


def mean_sessions(tiers: Iterable[str], sessions_per_agent: int, config: VisitsConfig) -> float:
    """The mean number of sessions per agent over agents of these tiers (the cost estimate's
    multiplier)."""
    counts = [sessions_of(t, sessions_per_agent, config) for t in tiers]
    return sum(counts) / len(counts) if counts else float(sessions_per_agent)

"""One agent in one session: what a brain may read about its agent (docs/definitions.md#brains: the
agent — profile, memory, fatigue, perception — is the same whatever the brain).

The simulation runner starts every session from a template (`Agents.sessions()`): no
fatigue spent, the budget of the agent's activity tier, an empty short-term memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ops.agents.memory import ShortTermEntry


@dataclass
class AgentSession:
    """What a brain may read about its agent during one session.

    `profile` is an `ops.agents.profile.AgentProfile`, `memory` the agent's long-term memory
    (`ops.agents.memory.LongTermMemory`); both are typed loosely so that test brains can
    pass plain mappings.
    """

    user_id: int
    profile: object
    memory: object
    fatigue_spent: float
    fatigue_budget: float
    short_term: list[ShortTermEntry] = field(default_factory=list)

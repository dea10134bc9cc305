"""A brain that decides uniformly at random: the floor every real brain must beat.

Used as the baseline of `python -m bench.simulation` (so the cost of the agent itself is
visible) and as a test double for the sandbox and the simulation loop: it reads nothing but
the observation's legal actions, so any behaviour it shows comes from the sandbox, the
fatigue system or the loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel

from ops.agents.session import AgentSession
from ops.simulation.observation import CLICK_MOVIE, WATCH_AND_RATE, Decision, Observation


class UniformRandomConfig(BaseModel):
    # Scales of the sandbox and the exit interview (A/B Agent §2.4.4; Agent4Rec §3.3).
    interest_min: int = 1
    interest_max: int = 5
    rating_min: int = 1
    rating_max: int = 5
    satisfaction_min: int = 1
    satisfaction_max: int = 10
    reason: str = "uniform random policy"


class UniformRandomBrain:
    """Uniform over the legal actions; uniform movie, rating, interest and satisfaction."""

    name = "uniform_random"
    decides_offline = True  # no call per decision: studies may repeat its simulations freely

    def __init__(self, config: UniformRandomConfig | None = None) -> None:
        self.config = config or UniformRandomConfig()

    def prepare(self, sessions: Sequence[AgentSession], shown: Mapping[int, Sequence[int]]) -> None:
        return None

    def decide(self, session: AgentSession, observation: Observation, rng: np.random.Generator) -> Decision:
        c = self.config
        # One vector draw per decision: scalar Generator calls cost microseconds each and
        # this brain is the speed baseline.
        u = rng.random(4)
        legal = observation.legal_actions
        action = legal[int(u[0] * len(legal))]
        interest = c.interest_min + int(u[1] * (c.interest_max - c.interest_min + 1))
        item_id = None
        rating = None
        if action == CLICK_MOVIE:
            items = observation.items
            item_id = items[int(u[2] * len(items))].item_id
        elif action == WATCH_AND_RATE:
            rating = c.rating_min + int(u[3] * (c.rating_max - c.rating_min + 1))
        return Decision(action=action, interest=interest, reason=c.reason, item_id=item_id, rating=rating)

    def exit_interview(self, session: AgentSession, rng: np.random.Generator) -> tuple[int, str]:
        c = self.config
        return int(rng.integers(c.satisfaction_min, c.satisfaction_max + 1)), c.reason

"""The Brain protocol: how an agent decides, pluggable (docs/definitions.md#brains).

The simulation runner (`ops.simulation.runner`) drives every brain the same way:
`prepare` once with every agent's list, then `decide` per page and `exit_interview` when
the session ends.  A brain that waits on the network may also offer coroutines with the
same meaning — `adecide`, `aexit_interview` — and `aclose_connections` (called when the
runner's event loop ends); the runner then keeps many agents in flight on one event loop.
A brain may offer `fingerprint()`: what, besides its name, determines its decisions (the
checkpoint key of `simulate(checkpoint_dir=…)`); without it the runner uses the brain's
class and its pydantic `config` / `params`.  `decides_offline` (default False) says that a
decision costs no request to a metered endpoint, so that a study may repeat simulations
freely (the sensitivity ladder, `ops.studies.alignment.sensitivity`, runs only then unless
asked).  Implementations: `ops.simulation.brains.embedded` (offline default),
`ops.simulation.brains.llm` (any OpenAI-compatible endpoint) and
`ops.simulation.brains.random_policy` (a uniform baseline).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from ops.agents.session import AgentSession
from ops.simulation.observation import Decision, Observation


class Brain(Protocol):
    """How an agent decides; pluggable (docs/definitions.md#brains)."""

    name: str
    decides_offline: bool

    def prepare(self, sessions: Sequence[AgentSession], shown: Mapping[int, Sequence[int]]) -> None:
        """Optional batch work before the sessions run: `shown` maps user id -> the movie ids of
        that user's top-20 list, so a brain can score every (user, item) pair at once."""

    def decide(self, session: AgentSession, observation: Observation, rng: np.random.Generator) -> Decision:
        """The next action for the page observed; must be one of `observation.legal_actions`."""

    def exit_interview(self, session: AgentSession, rng: np.random.Generator) -> tuple[int, str]:
        """Satisfaction 1..10 with a one-line reason, asked when the session ends."""

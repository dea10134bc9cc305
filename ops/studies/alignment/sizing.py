"""How many agents a trust protocol asks: enough for the 95 % interval of its figures to be
as narrow as asked, whatever the agents answer.

The protocols report means over agents of figures in [0, 1] — taste F1, precision and recall
per agent, the click rate of a list — with bootstrap intervals over agents, whose half-width
is about z·σ/√n.  A figure in [0, 1] has a standard deviation of at most 0.5 (half the agents
at 0, half at 1), so n = ⌈(z · 0.5 / h)²⌉ agents give a half-width of at most h: 97 agents
for ±0.10, 385 for ±0.05.  The rating protocol's RMSE is in stars, not in [0, 1]; it is
asked of the same agents and its interval is shown beside it as measured.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from ops.settings import config_default

# The half-width the protocols are sized for unless told otherwise ($SIMAB_TRUST_HALF_WIDTH):
# wide enough to tell the papers' 1:1 from 1:9 taste F1 (0.6–0.8 apart), at half the
# agents 200 took.
DEFAULT_HALF_WIDTH = config_default("trust_half_width")
WORST_SD = 0.5  # the largest standard deviation of a figure in [0, 1]


def agents_for_half_width(half_width: float, confidence: float = 0.95) -> int:
    """The agents that give a `confidence` interval of at most ±`half_width` on the mean of
    a figure in [0, 1], whatever its spread."""
    if not 0 < half_width <= WORST_SD:
        raise ValueError(f"half-width must be in (0, {WORST_SD}], got {half_width}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return math.ceil((z * WORST_SD / half_width) ** 2)


def protocol_agents(n_agents: int | None, half_width: float, confidence: float = 0.95) -> int:
    """The agents a protocol samples: `n_agents` when given (0 = every agent it can
    measure), else as many as `agents_for_half_width` says."""
    return agents_for_half_width(half_width, confidence) if n_agents is None else n_agents

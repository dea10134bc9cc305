"""The brain's own scorer as an arm's input: the scores the mirror arm (`ops/arms/kinds/mirror.py`)
ranks the catalogue by.

For the embedded brain the scorer is its click decision's log-odds before the position
decay (`EmbeddedBrain.click_logits`: the click model, times the list-response calibration's
positive scale, plus its shift), an agent's memory and profile read as in any session.  A
user with no agent (first seen in the test window) gets the mean score of the agents
scored beside it: the brain's view of an unknown user.  Reflection plays no part (the
lists are made before any session).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ops.agents.build import Agents
from ops.simulation.brains.embedded import EmbeddedBrainModel

# Agents scored together: each holds its users x catalogue features in memory (ML-1M:
# 3,883 movies x 19 features x 8 bytes = 0.6 MB per agent).
BLOCK_AGENTS = 32


def brain_scores(model: EmbeddedBrainModel, agents: Agents) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """`scores(user_ids, item_ids)` -> (users, items) click log-odds of the fitted brain."""

    def scores(user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        user_ids = np.asarray(user_ids, dtype=np.int64)
        items = [int(m) for m in np.asarray(item_ids, dtype=np.int64)]
        out = np.full((user_ids.size, len(items)), np.nan)
        known = [i for i, u in enumerate(user_ids.tolist()) if u in agents.profiles]
        for start in range(0, len(known), BLOCK_AGENTS):
            rows = known[start : start + BLOCK_AGENTS]
            sessions = agents.sessions(user_ids[rows])
            brain = model.brain()  # a fresh one per block: it keeps every scored pair
            brain.prepare(sessions, {s.user_id: items for s in sessions})
            by_user = {s.user_id: s for s in sessions}
            for row in rows:
                out[row] = brain.click_logits(by_user[int(user_ids[row])], items)
        if known and len(known) < user_ids.size:
            unknown = np.setdiff1d(np.arange(user_ids.size), known)
            out[unknown] = out[known].mean(axis=0)
        return out

    return scores

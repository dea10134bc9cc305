"""The brain's own scorer as an arm's input: the scores the mirror arm (`ops/arms/kinds/mirror.py`)
ranks the catalogue by.

For the embedded brain the scorer is its click decision's log-odds before the position
decay (`EmbeddedBrain.click_logits`: the click model, times the list-response calibration's
positive scale, plus its shift), an agent's memory and profile read as in any session.  A
user with no agent (first seen after the train window) gets the mean score of the agents
scored beside it: the brain's view of an unknown user.  Reflection plays no part (the
lists are made before any session).

The brain ranks at the fit clock (`ops.agents.clock`): its features read from the train
window, the agents' memories cut at its end — what every arm is trained on.  At the
simulation clock it also knows the validation window, and its ranking would then be a
recommender with a window more than the arms had (on Steam its NDCG@20 0.115 against the
best arm's 0.097, on ML-1M 0.211 against 0.186): the line through the arms' CTR against their
NDCG@20 would be stretched past its data to judge it, and the excess would measure the
extra window, not the simulator's taste.

Only the best items need their exact score.  The click model is linear in its features, and
all but the four memory-retrieval ones (`RETRIEVAL_FEATURES`: the expensive part, a top-k
over the agent's memory for every item) cost a few array operations for the whole
catalogue.  Those four are bounded — a familiarity is a mean of cosine similarities, so it
lies between the item's least and greatest similarity to any other item; an affinity is a
weighted mean of the agent's centred ratings, so it lies between their extremes — which
bounds every item's score from above and below.  An item whose upper bound falls below the
`depth`-th best lower bound cannot be among the best `depth`: it keeps its bound's floor as
its score (never ranked above those), and only the others are scored exactly.  The lists
are the ones full scoring gives (`tests/test_mirror.py` checks it); on ML-1M most of the
catalogue never reaches the retrieval.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ops.agents.build import Agents
from ops.simulation.brains.embedded import EmbeddedBrainModel
from ops.simulation.brains.embedded.brain import SEEN_LOGIT
from ops.simulation.brains.embedded.config import FEATURES
from ops.simulation.brains.embedded.features import RETRIEVAL_FEATURES, pair_features

# Agents scored together: each holds its catalogue's features in memory (ML-1M: 3,883
# movies x 21 features x 8 bytes = 0.65 MB per agent).
BLOCK_AGENTS = 32
# Below every exact score: the score an item gets when its bound shows it cannot be among the
# best (a finite number, so that a ranking's ties and exclusions work as for any score).
PRUNED = SEEN_LOGIT - 1.0


def brain_scores(
    model: EmbeddedBrainModel, agents: Agents, depth: int = 20, clock: str = "fit"
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """`scores(user_ids, item_ids)` -> (users, items) click log-odds of the fitted brain, exact
    for every item that can be among a user's best `depth` (module docstring), `PRUNED` for
    the others; `clock`: "fit" (the default, where the arms are trained) or "simulation"
    (where the agents decide)."""
    at_fit = clock == "fit"
    bounds = _Bounds(model, model.fit_context if at_fit else model.context)
    agents = agents.at_fit_clock() if at_fit else agents

    def scores(user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        user_ids = np.asarray(user_ids, dtype=np.int64)
        items = np.asarray(item_ids, dtype=np.int64)
        out = np.full((user_ids.size, items.size), np.nan)
        known = [i for i, u in enumerate(user_ids.tolist()) if u in agents.profiles]
        for start in range(0, len(known), BLOCK_AGENTS):
            rows = known[start : start + BLOCK_AGENTS]
            sessions = agents.sessions(user_ids[rows])
            brain = model.fit_brain() if at_fit else model.brain()  # a fresh one per block: it keeps every scored pair
            low, high = bounds.of(brain, sessions, items)
            best = {}
            for j, s in enumerate(sessions):
                # The depth-th best floor among the items the agent has not taken (those it
                # took score SEEN_LOGIT exactly and sort last anyway).
                floor = np.sort(low[j][low[j] > SEEN_LOGIT])[::-1]
                cut = floor[depth - 1] if floor.size >= depth else -np.inf
                keep = high[j] >= cut
                best[s.user_id] = items[keep].tolist()
                out[rows[j]] = np.where(keep, np.nan, PRUNED)
            brain.prepare(sessions, best)
            for j, s in enumerate(sessions):
                keep = np.isnan(out[rows[j]])
                out[rows[j], keep] = brain.click_logits(s, best[s.user_id])
        if known and len(known) < user_ids.size:
            unknown = np.setdiff1d(np.arange(user_ids.size), known)
            out[unknown] = out[known].mean(axis=0)
        return out

    return scores


class _Bounds:
    """Lower and upper bounds of the click log-odds of every (agent, item) pair: the click
    model on every feature but the retrieval ones, plus the least and the most those can add."""

    def __init__(self, model: EmbeddedBrainModel, ctx) -> None:
        params = model.params
        coef = dict(zip(params.click.features, params.click.coef))
        self.scale, self.shift = params.click_scale, params.click_shift
        self.coef = {f: coef.get(f, 0.0) for f in RETRIEVAL_FEATURES}
        # Each item's least and greatest cosine similarity to another item, by text and by poster.
        self.familiar = {}
        for kind in ("text", "poster"):
            sim = ctx.similarity(kind, model.config.similarity_cache_max_movies)
            if sim is None or (kind == "poster" and ctx.vectors.poster.shape[1] == 0):
                n = len(ctx.facts.item_ids)
                self.familiar[kind] = (np.full(n, -1.0), np.full(n, 1.0))
                continue
            masked = np.array(sim, dtype=np.float64, copy=True)
            # An item the agent remembers is one it does not click (skip_seen); otherwise its
            # own similarity, 1, may enter its familiarity.
            if model.config.skip_seen:
                np.fill_diagonal(masked, np.nan)
            self.familiar[kind] = (np.nanmin(masked, axis=1), np.nanmax(masked, axis=1))
        self.ctx, self.config = ctx, model.config

    def of(self, brain, sessions, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(low, high), each (agents x items)."""
        brain.prepare(sessions, {})  # the agents' states, nothing scored
        states = [brain._agents[s.user_id] for s in sessions]
        rows = self.ctx.vectors.rows_of(items)
        X, _, _ = pair_features(states, [rows] * len(states), self.ctx, self.config, retrieval=False, credits=False)
        base = brain.params.click.score(X).reshape(len(states), len(rows))
        low = np.zeros_like(base)
        high = np.zeros_like(base)
        for kind in ("text", "poster"):
            lo_f, hi_f = self.familiar[kind]
            c = self.coef[f"{kind}_familiarity"]
            lo_f, hi_f = np.minimum(lo_f[rows], 0.0), np.maximum(hi_f[rows], 0.0)
            low += np.minimum(c * lo_f, c * hi_f)[None, :]
            high += np.maximum(c * lo_f, c * hi_f)[None, :]
            c = self.coef[f"{kind}_affinity"]
            for j, a in enumerate(states):
                lo_a = min(0.0, float(a.centred.min())) if len(a.centred) else 0.0
                hi_a = max(0.0, float(a.centred.max())) if len(a.centred) else 0.0
                low[j] += min(c * lo_a, c * hi_a)
                high[j] += max(c * lo_a, c * hi_a)
        low = self.scale * (base + low) + self.shift
        high = self.scale * (base + high) + self.shift
        if self.config.skip_seen:
            for j, a in enumerate(states):
                seen = np.isin(rows, a.rows)
                low[j, seen] = high[j, seen] = SEEN_LOGIT
        return low, high


assert set(RETRIEVAL_FEATURES) <= set(FEATURES)

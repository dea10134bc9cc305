"""The embedded brain as a brain kind: the offline default, fitted on the train and
validation windows (`ops.simulation.brains.embedded`), free, one agent at a time; it answers
the papers' per-item taste question with its own scores of the list, cut at thresholds the
protocol fits on held-out lists (`taste_scores`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ops.simulation.brains.embedded import EmbeddedBrain, fit_embedded_brain
from ops.simulation.kinds.base import BrainKind, BrainSources


class Embedded(BrainKind):
    name = "embedded"
    min_fit_users = 2  # ops.simulation.brains.embedded.fitting.fit: its click model needs two users
    summary = "the offline default: fitted on the train and validation windows, no network"
    brain_class = EmbeddedBrain
    family = "embedded"
    reads_poster_vectors = True
    posters = True

    def brain(self, sources: BrainSources) -> EmbeddedBrain:
        model = self._model(sources)
        config = None if self.sees_posters else model.config.model_copy(update={"use_posters": False})
        return model.brain(config)

    def fitted_through(self, sources: BrainSources) -> int | None:
        return self._model(sources).params.fit_last_timestamp

    def refitted(self, sources: BrainSources, agents, train, valid, users) -> BrainSources:
        return sources.replace(embedded=fit_embedded_brain(agents, train, valid, users, self._model(sources).config))

    def answer_taste(self, brain: EmbeddedBrain, question):
        """Its own scores of the list (`taste_scores`), cut at thresholds the protocol fits."""
        return question.cut(lambda session, movies: taste_scores(brain, session, movies))

    def list_response(self, sources: BrainSources):
        return self._model(sources).params.list_response

    def _model(self, sources: BrainSources):
        model = sources.get("embedded")
        if model is None:
            raise ValueError(f"the {self.name} brain needs the fitted embedded brain (asset embedded_brain)")
        return model


def taste_scores(brain: EmbeddedBrain, session, movies: Sequence[int], relative: bool = True) -> np.ndarray:
    """The brain's click-and-watch probability of each of `movies` for `session` (an agent
    arriving on the site: first slot, no position effect; the papers' list has no pages), as a
    log probability (the calibrated click log-odds saturate: their probabilities would tie at 1).

    `relative` (the default): standardised within the list (z-scores), so the answer reads
    how much an item stands out of the list the agent is shown — the agent sees the whole
    list, as the papers' LLM does — rather than a level that differs from agent to agent.
    Chosen on the validation window's threshold lists (ML-1M users 1–1999, 600 agents, mean
    F1 at 1:1 / 1:3 / 1:9 / 1:4): absolute 0.797 / 0.613 / 0.454 / 0.597; z-scores 0.816 /
    0.644 / 0.483 / 0.623, the best sum of the five transforms tried (minus the list's
    maximum, its mean, its second best)."""
    p = np.asarray(brain.click_and_watch_log_probability(session, movies), dtype=np.float64)
    if not relative:
        return p
    return (p - p.mean()) / max(float(p.std()), 1e-9) if p.size > 1 else np.zeros_like(p)

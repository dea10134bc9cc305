"""The embedded brain as a brain kind: the offline default, fitted on the train and
validation windows (`ops.simulation.brains.embedded`), free, one agent at a time."""

from __future__ import annotations

from dataclasses import replace

from ops.simulation.brains.embedded import EmbeddedBrain, fit_embedded_brain
from ops.simulation.kinds import BrainKind, BrainSources


class Embedded(BrainKind):
    name = "embedded"
    summary = "the offline default: fitted on the train and validation windows, no network"
    brain_class = EmbeddedBrain
    family = "embedded"
    per_item = "scores"
    reads_poster_vectors = True
    sees_posters = True
    without_posters = "embedded-no-vision"

    def brain(self, sources: BrainSources) -> EmbeddedBrain:
        model = self._model(sources)
        config = None if self.sees_posters else model.config.model_copy(update={"use_posters": False})
        return model.brain(config)

    def fitted_through(self, sources: BrainSources) -> int | None:
        return self._model(sources).params.fit_last_timestamp

    def refitted(self, sources: BrainSources, agents, train, valid, users) -> BrainSources:
        return replace(sources, embedded=fit_embedded_brain(agents, train, valid, users, self._model(sources).config))

    def list_response(self, sources: BrainSources):
        return self._model(sources).params.list_response

    def _model(self, sources: BrainSources):
        if sources.embedded is None:
            raise ValueError(f"the {self.name} brain needs the fitted embedded brain (asset embedded_brain)")
        return sources.embedded

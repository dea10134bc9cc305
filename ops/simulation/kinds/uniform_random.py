"""The uniform random policy as a brain kind: the floor every real brain must beat, free and
offline; it answers every protocol through its decisions (and the papers' per-item taste
question not at all: it has no scores to threshold)."""

from __future__ import annotations

from ops.simulation.brains.random_policy import UniformRandomBrain
from ops.simulation.kinds.base import BrainKind, BrainSources


class UniformRandom(BrainKind):
    name = "uniform-random"
    summary = "uniform over the legal actions: the baseline every brain must beat"
    brain_class = UniformRandomBrain
    family = UniformRandomBrain.name

    def brain(self, sources: BrainSources) -> UniformRandomBrain:
        return UniformRandomBrain()

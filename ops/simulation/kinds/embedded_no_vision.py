"""The embedded brain without posters (A/B Agent Table 5's "w/o vision" ablation): the same
fitted parameters, the poster features left out; its events name it `embedded:no-vision`."""

from __future__ import annotations

from ops.simulation.kinds.embedded import Embedded


class EmbeddedNoVision(Embedded):
    name = "embedded-no-vision"
    summary = "the embedded brain without posters (Table 5's ablation)"
    sees_posters = False

"""The LLM brain without posters (A/B Agent Table 5's "w/o vision" ablation): palette
captions instead of images; its events name it `llm:<model>:no-vision`."""

from __future__ import annotations

from ops.simulation.kinds.llm import LLM


class LLMNoVision(LLM):
    name = "llm-no-vision"
    summary = "the LLM brain without posters: palette captions instead of images (Table 5's ablation)"
    sees_posters = False

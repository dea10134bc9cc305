"""AutoInt (Song et al. 2019), A/B Agent Table 5: multi-head self-attention over the fields'
embeddings beside a DNN."""

from __future__ import annotations

from typing import Any, ClassVar

from ops.arms.deepctr import DeepCTRArm
from ops.arms.recommenders import ArmConfig


class AutoInt(DeepCTRArm):
    """deepctr-torch's AutoInt."""

    deepctr_class: ClassVar[str] = "AutoInt"
    # deepctr-torch's AutoInt takes no l2_reg_linear (its linear part is not regularised).
    has_linear: ClassVar[bool] = False
    # Appendix B, "Specific adjustments": two attention layers of two heads.
    appendix_b: ClassVar[dict[str, Any]] = {"model_kwargs": {"att_layer_num": 2, "att_head_num": 2}}

    @classmethod
    def activation_floats_per_row(cls, model, config: ArmConfig) -> int:
        """The attention holds fields x fields weights per head beside the field embeddings."""
        fields = max(1, len(getattr(model, "embedding_dict", {}) or {}))
        heads = int(config.model_kwargs.get("att_head_num", 2))
        return fields * fields * heads * 2 + fields * config.embedding_dim * 6

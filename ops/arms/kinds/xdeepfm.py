"""xDeepFM (Lian et al. 2018), A/B Agent Table 5: a compressed interaction network (CIN)
beside a DNN."""

from __future__ import annotations

from typing import Any, ClassVar

from ops.arms.deepctr import DeepCTRArm
from ops.arms.trained import ArmConfig


class XDeepFM(DeepCTRArm):
    """deepctr-torch's xDeepFM."""

    deepctr_class: ClassVar[str] = "xDeepFM"
    # Appendix B, "Specific adjustments": dropout 0.5.  Its "linear L2" value was lost from
    # the text we have: ArmConfig's l2_reg_linear stands in.
    appendix_b: ClassVar[dict[str, Any]] = {"dnn_dropout": 0.5}

    @classmethod
    def activation_floats_per_row(cls, model, config: ArmConfig) -> int:
        """The CIN holds the outer product of a layer's feature maps with the fields, feature
        maps x fields x embedding (128 x m x 64) per scored pair."""
        fields = max(1, len(getattr(model, "embedding_dict", {}) or {}))
        maps = (fields, *config.model_kwargs.get("cin_layer_size", (256, 128)))
        return max(maps) * fields * config.embedding_dim * 2

    @classmethod
    def parts_head(cls):
        """The CIN on the per-pair stack of field embeddings, the DNN's first layer split by side."""
        from ops.arms.deepctr_parts import Head  # torch: imported when an arm first scores

        return Head(_logit)


def _logit(scorer, users, items, pairs):
    model = scorer.model
    logit = pairs.add(users.linear, items.linear)
    if model.use_cin:
        logit = logit + model.cin_linear(model.cin(scorer.pair_fields(users, items, pairs))).reshape(-1)
    if model.use_dnn:
        logit = logit + model.dnn_linear(scorer.deep(users, items, pairs, model.dnn)).reshape(-1)
    return logit

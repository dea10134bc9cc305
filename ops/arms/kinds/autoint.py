"""AutoInt (Song et al. 2019), A/B Agent Table 5: multi-head self-attention over the fields'
embeddings beside a DNN."""

from __future__ import annotations

from typing import Any, ClassVar

from ops.arms.deepctr import DeepCTRArm
from ops.arms.trained import ArmConfig


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

    @classmethod
    def parts_head(cls):
        """The attention on the per-pair stack of field embeddings, the DNN's first layer
        split by side."""
        from ops.arms.deepctr_parts import Head  # torch: imported when an arm first scores

        return Head(_logit)


def _logit(scorer, users, items, pairs):
    import torch

    model = scorer.model
    logit = pairs.add(users.linear, items.linear)
    deep = len(model.dnn_hidden_units) > 0
    if model.att_layer_num > 0:
        att = scorer.pair_fields(users, items, pairs)
        for layer in model.int_layers:
            att = layer(att)
        att_output = torch.flatten(att, start_dim=1)
    if deep:
        deep_out = scorer.deep(users, items, pairs, model.dnn)
    if deep and model.att_layer_num > 0:
        logit = logit + model.dnn_linear(torch.cat([att_output, deep_out], dim=-1)).reshape(-1)
    elif deep:
        logit = logit + model.dnn_linear(deep_out).reshape(-1)
    elif model.att_layer_num > 0:
        logit = logit + model.dnn_linear(att_output).reshape(-1)
    return logit

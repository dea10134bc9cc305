"""Deep & Cross Network (Wang et al. 2017), A/B Agent Table 5: a cross network beside a DNN."""

from __future__ import annotations

from typing import Any, ClassVar

from ops.arms.deepctr import DeepCTRArm


class DCN(DeepCTRArm):
    """deepctr-torch's DCN."""

    deepctr_class: ClassVar[str] = "DCN"
    # Appendix B, "Specific adjustments": dropout 0.5, two cross layers.  Its "linear L2"
    # value was lost from the text we have: ArmConfig's l2_reg_linear stands in.
    appendix_b: ClassVar[dict[str, Any]] = {"dnn_dropout": 0.5, "model_kwargs": {"cross_num": 2}}

    @classmethod
    def parts_head(cls):
        """The cross network on the per-pair input, the DNN's first layer split by side."""
        from ops.arms.deepctr_parts import Head  # torch: imported when an arm first scores

        return Head(_logit)


def _logit(scorer, users, items, pairs):
    import torch

    model = scorer.model
    logit = pairs.add(users.linear, items.linear)
    deep = len(model.dnn_hidden_units) > 0
    if deep:
        deep_out = scorer.deep(users, items, pairs, model.dnn)
    if model.cross_num > 0:
        cross_out = model.crossnet(scorer.dnn_input(users, items, pairs))
    if deep and model.cross_num > 0:
        logit = logit + model.dnn_linear(torch.cat((cross_out, deep_out), dim=-1)).reshape(-1)
    elif deep:
        logit = logit + model.dnn_linear(deep_out).reshape(-1)
    elif model.cross_num > 0:
        logit = logit + model.dnn_linear(cross_out).reshape(-1)
    return logit

"""Product-based Neural Network (Qu et al. 2016), A/B Agent Table 5.  Appendix B: "PNN and
NFM follow the default configuration"."""

from __future__ import annotations

from typing import ClassVar

from ops.arms.deepctr import DeepCTRArm


class PNN(DeepCTRArm):
    """deepctr-torch's PNN, with Appendix B's common settings."""

    deepctr_class: ClassVar[str] = "PNN"
    # PNN has no linear part: it takes only the DNN feature columns, and no linear L2.
    has_linear: ClassVar[bool] = False
    linear_columns: ClassVar[bool] = False

    @classmethod
    def parts_head(cls):
        """The inner and outer products on the per-pair stack of field embeddings."""
        from ops.arms.deepctr_parts import Head  # torch: imported when an arm first scores

        return Head(_logit)


def _logit(scorer, users, items, pairs):
    import torch

    model = scorer.model
    stack = scorer.pair_fields(users, items, pairs)
    embedded = list(stack.split(1, dim=1))
    parts = [stack.flatten(1)]
    if model.use_inner:
        parts.append(torch.flatten(model.innerproduct(embedded), start_dim=1))
    if model.use_outter:
        parts.append(model.outterproduct(embedded))
    dnn_input = torch.cat([torch.cat(parts, dim=1), scorer.pair_dense(users, items, pairs)], dim=1)
    return model.dnn_linear(model.dnn(dnn_input)).reshape(-1)

"""Neural FM (He and Chua 2017), A/B Agent Table 5: a DNN over the bi-interaction pooling of
the embeddings.  Appendix B: "PNN and NFM follow the default configuration"."""

from __future__ import annotations

from typing import ClassVar

from ops.arms.deepctr import DeepCTRArm


class NFM(DeepCTRArm):
    """deepctr-torch's NFM, with Appendix B's common settings."""

    deepctr_class: ClassVar[str] = "NFM"

    @classmethod
    def parts_head(cls):
        """The bi-interaction as a per-side term plus the product of the sides' embedding sums."""
        from ops.arms.deepctr_parts import Head  # torch: imported when an arm first scores

        return Head(_logit, prepare=_prepare)


def _prepare(scorer, side, is_user) -> None:
    scorer.embedding_sums(side)
    total = side.extra["sum"]
    side.extra["bi"] = 0.5 * (total.pow(2) - side.fields.pow(2).sum(dim=1))


def _logit(scorer, users, items, pairs):
    """NFM's bi-interaction 0.5((S_u + S_i)^2 - Q_u - Q_i) = bi_u + bi_i + S_u * S_i."""
    import torch

    model = scorer.model
    bi = pairs.add(users.extra["bi"], items.extra["bi"]) + pairs.multiply(users.extra["sum"], items.extra["sum"])
    dnn_input = torch.cat([bi, scorer.pair_dense(users, items, pairs)], dim=1)
    return pairs.add(users.linear, items.linear) + model.dnn_linear(model.dnn(dnn_input)).reshape(-1)

"""Wide & Deep (Cheng et al. 2016), A/B Agent Table 5: a linear model beside a DNN."""

from __future__ import annotations

from typing import Any, ClassVar

from ops.arms.deepctr import DeepCTRArm


class WDL(DeepCTRArm):
    """deepctr-torch's WDL."""

    deepctr_class: ClassVar[str] = "WDL"
    # Appendix B, "Specific adjustments": WDL's DNN (256, 64), dropout 0.5.
    appendix_b: ClassVar[dict[str, Any]] = {"dnn_hidden_units": (256, 64), "dnn_dropout": 0.5}

    @classmethod
    def parts_head(cls):
        """The linear share per side plus the DNN, its first layer split by side; without a
        DNN the logit is one product."""
        from ops.arms.deepctr_parts import Head  # torch: imported when an arm first scores

        return Head(_logit, factors=_factors, decomposes=lambda model: not model.use_dnn)


def _logit(scorer, users, items, pairs):
    model = scorer.model
    logit = pairs.add(users.linear, items.linear)
    if model.use_dnn:
        logit = logit + model.dnn_linear(scorer.deep(users, items, pairs, model.dnn)).reshape(-1)
    return logit


def _factors(scorer, users, items):
    import torch

    one_u, one_i = torch.ones_like(users.linear)[:, None], torch.ones_like(items.linear)[:, None]
    return torch.cat([users.linear[:, None], one_u], dim=1), torch.cat([one_i, items.linear[:, None]], dim=1)

"""DeepFM (Guo et al. 2017), A/B Agent Tables 2-5: an FM and a DNN over the same embeddings.
Tables 3 and 4 study it on a share of the train window and on fewer features: those
variants are parameters (`train_fraction`, `feature_set`) and, under the names the paper's
tables give them, arms of their own (`aliases`: `deepfm_data50`, `deepfm_user_id_only`, …)."""

from __future__ import annotations

from typing import Any, ClassVar

from ops.arms.deepctr import DeepCTRArm


class DeepFM(DeepCTRArm):
    """deepctr-torch's DeepFM (FM's model too: `fm.py`)."""

    deepctr_class: ClassVar[str] = "DeepFM"
    # Appendix B, "Specific adjustments": DeepFM's DNN (256, 128, 64), dropout 0.5.
    appendix_b: ClassVar[dict[str, Any]] = {"dnn_hidden_units": (256, 128, 64), "dnn_dropout": 0.5}
    # Table 3 (data scale) and Table 4 (feature sets): arms of their own (partition keys),
    # each the parameters it stands for.
    aliases: ClassVar[dict[str, dict[str, Any]]] = {
        "deepfm_data50": {"train_fraction": 0.5},
        "deepfm_data75": {"train_fraction": 0.75},
        "deepfm_user_id_only": {"feature_set": "user_id_only"},
        "deepfm_movie_id_only": {"feature_set": "movie_id_only"},
    }

    @classmethod
    def parts_head(cls):
        """Linear and FM terms per side plus <sum of user embeddings, sum of item embeddings>,
        the DNN's first layer split by side; without a DNN (FM) the logit is one product."""
        from ops.arms.deepctr_parts import Head  # torch: imported when an arm first scores

        return Head(_logit, prepare=_prepare, factors=_factors, decomposes=lambda model: not model.use_dnn)


def _prepare(scorer, side, is_user) -> None:
    scorer.embedding_sums(side)


def _logit(scorer, users, items, pairs):
    model = scorer.model
    if model.use_fm and users.fields.shape[1] + items.fields.shape[1] > 0:
        logit = pairs.add(users.linear + users.extra["fm"], items.linear + items.extra["fm"])
        logit = logit + pairs.dot(users.extra["sum"], items.extra["sum"])
    else:
        logit = pairs.add(users.linear, items.linear)
    if model.use_dnn:
        logit = logit + model.dnn_linear(scorer.deep(users, items, pairs, model.dnn)).reshape(-1)
    return logit


def _factors(scorer, users, items):
    """FM (DeepFM without its DNN): logit = [S_u, c_u, 1] . [S_i, 1, c_i], S the sums of
    the embeddings, c the linear share plus the side's own second-order term."""
    import torch

    if not scorer.model.use_fm:
        users.extra["sum"] = users.fields.new_zeros((users.fields.shape[0], 0))
        items.extra["sum"] = items.fields.new_zeros((items.fields.shape[0], 0))
        users.extra["fm"] = torch.zeros_like(users.linear)
        items.extra["fm"] = torch.zeros_like(items.linear)
    one_u, one_i = torch.ones_like(users.linear)[:, None], torch.ones_like(items.linear)[:, None]
    left = torch.cat([users.extra["sum"], (users.linear + users.extra["fm"])[:, None], one_u], dim=1)
    right = torch.cat([items.extra["sum"], one_i, (items.linear + items.extra["fm"])[:, None]], dim=1)
    return left, right

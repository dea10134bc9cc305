"""DeepFM (Guo et al. 2017), A/B Agent Tables 2-5: an FM and a DNN over the same embeddings.
Tables 3 and 4 study it on a share of the train window and on fewer features: those
variants are parameters (`train_fraction`, `feature_set`) and, under the names the paper's
tables give them, arms of their own (`aliases`: `deepfm_data50`, `deepfm_user_id_only`, …)."""

from __future__ import annotations

from typing import Any, ClassVar

from ops.arms.deepctr import DeepCTRArm


class DeepFM(DeepCTRArm):
    """deepctr-torch's DeepFM."""

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

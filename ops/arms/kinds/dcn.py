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

"""Wide & Deep (Cheng et al. 2016), A/B Agent Table 5: a linear model beside a DNN."""

from __future__ import annotations

from typing import Any, ClassVar

from ops.arms.deepctr import DeepCTRArm


class WDL(DeepCTRArm):
    """deepctr-torch's WDL."""

    deepctr_class: ClassVar[str] = "WDL"
    # Appendix B, "Specific adjustments": WDL's DNN (256, 64), dropout 0.5.
    appendix_b: ClassVar[dict[str, Any]] = {"dnn_hidden_units": (256, 64), "dnn_dropout": 0.5}

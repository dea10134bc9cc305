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

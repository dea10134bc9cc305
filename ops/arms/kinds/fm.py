"""FM (Rendle 2010), A/B Agent Table 2: DeepFM without its DNN (deepctr-torch has no FM
class).  Its logit is a product of a user factor and an item factor, so it ranks by one
matrix product (DeepFM's head, `deepfm.py`)."""

from __future__ import annotations

from typing import Any, ClassVar

from ops.arms.deepctr import DeepCTRArm
from ops.arms.kinds.deepfm import DeepFM


class FM(DeepCTRArm):
    """Factorisation machine: DeepFM with no DNN layers."""

    deepctr_class: ClassVar[str] = "DeepFM"
    # Appendix B, "Specific adjustments": FM keeps no DNN.  Its "linear L2" value was lost
    # from the text we have: ArmConfig's l2_reg_linear (deepctr's default) stands in.
    appendix_b: ClassVar[dict[str, Any]] = {"dnn_hidden_units": ()}

    @classmethod
    def parts_head(cls):
        """DeepFM's head: with no DNN its logit is a product of user and item factors."""
        return DeepFM.parts_head()

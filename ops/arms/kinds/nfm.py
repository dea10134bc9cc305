"""Neural FM (He and Chua 2017), A/B Agent Table 5: a DNN over the bi-interaction pooling of
the embeddings.  Appendix B: "PNN and NFM follow the default configuration"."""

from __future__ import annotations

from typing import ClassVar

from ops.arms.deepctr import DeepCTRArm


class NFM(DeepCTRArm):
    """deepctr-torch's NFM, with Appendix B's common settings."""

    deepctr_class: ClassVar[str] = "NFM"

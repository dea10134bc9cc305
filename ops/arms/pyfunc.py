"""MLflow "models from code" definition of a simab arm as a pyfunc model.

MLflow runs this file when a registered arm is loaded (`mlflow.pyfunc.load_model`); it is
never imported by the engine itself, which is why mlflow is imported at the top here.
Input: a frame with user_id and item_id columns; output: one score per row.  Each
registered model carries the copy of this file it was logged with: those logged before the
arm API said item_id take movie_id, and their signature says so (the `mlflow:` arm kind
reads it).
"""

import mlflow
import numpy as np
from mlflow.pyfunc import PythonModel

from ops.arms.model_registry import load_arm


class ArmPythonModel(PythonModel):
    """Scores (user_id, item_id) rows with a saved simab arm (artefact "arm")."""

    def load_context(self, context):
        self.arm = load_arm(context.artifacts["arm"])

    def predict(self, context, model_input, params=None):
        missing = [c for c in ("user_id", "item_id") if c not in model_input.columns]
        if missing:
            raise ValueError(f"model input lacks column(s) {missing}")
        return self.arm.score(
            model_input["user_id"].to_numpy(dtype=np.int64), model_input["item_id"].to_numpy(dtype=np.int64)
        )


mlflow.models.set_model(ArmPythonModel())

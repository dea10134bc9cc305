"""A team's model as MLflow "models from code" (nothing pickled): popularity over the train
interactions, answering in either shape simab takes — scores for (user_id, item_id) pairs,
or the top k items per user_id.  `examples/mlflow_model.py` logs it twice, once per shape."""

import mlflow
import numpy as np
import pandas as pd
from mlflow.pyfunc import PythonModel


class Popularity(PythonModel):
    def load_context(self, context):
        counts = pd.read_csv(context.artifacts["counts"])
        self.items = counts["item_id"].to_numpy()
        self.scores = counts["n"].to_numpy() / counts["n"].max()

    def predict(self, context, model_input, params=None):
        if "item_id" in model_input.columns:  # the scoring shape: one score per row
            at = np.clip(np.searchsorted(self.items, model_input["item_id"].to_numpy()), 0, self.items.size - 1)
            hit = self.items[at] == model_input["item_id"].to_numpy()
            return pd.Series(np.where(hit, self.scores[at], 0.0))
        k = int((params or {}).get("k", 20))  # the top-k shape: k rows per user
        order = np.lexsort((self.items, -self.scores))[:k]
        users = model_input["user_id"].to_numpy()
        return pd.DataFrame(
            {
                "user_id": np.repeat(users, order.size),
                "rank": np.tile(np.arange(1, order.size + 1), users.size),
                "item_id": np.tile(self.items[order], users.size),
                "score": np.tile(self.scores[order], users.size),
            }
        )


mlflow.models.set_model(Popularity())

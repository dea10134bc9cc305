"""A team's models in an MLflow registry, for the tests: popularity, in the two shapes simab
takes (`ops.arms.mlflow_model`).

`log_popularity_models(train, folder, name)` registers, in the tracking store MLflow is set
to, `<name>-score` (input user_id, item_id; output one score per row) and `<name>-topk`
(input user_id and the param k; output user_id, rank, item_id, score), version 1 each, the
second also under the alias "champion".  Both are "models from code" (`popularity_model.py`
written beside them), so nothing is pickled; they score as simab's Pop does (train
interactions over the largest count, ties by item id).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

MODEL_CODE = """
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
        if "item_id" in model_input.columns:
            at = np.clip(np.searchsorted(self.items, model_input["item_id"].to_numpy()), 0, self.items.size - 1)
            hit = self.items[at] == model_input["item_id"].to_numpy()
            return pd.Series(np.where(hit, self.scores[at], 0.0))
        k = int((params or {}).get("k", 20))
        order = np.lexsort((self.items, -self.scores))[:k]
        users = model_input["user_id"].to_numpy()
        return pd.DataFrame({
            "user_id": np.repeat(users, order.size),
            "rank": np.tile(np.arange(1, order.size + 1), users.size),
            "item_id": np.tile(self.items[order], users.size),
            "score": np.tile(self.scores[order], users.size),
        })


mlflow.models.set_model(Popularity())
"""


def log_popularity_models(train: pl.DataFrame, folder: Path, name: str = "team-pop") -> None:
    import mlflow
    import pandas as pd
    from mlflow.models import infer_signature

    folder = Path(folder)
    code = folder / "popularity_model.py"
    code.write_text(MODEL_CODE)
    counts = folder / "counts.csv"
    train.group_by("item_id").len("n").sort("item_id").write_csv(counts)
    pairs = pd.DataFrame({"user_id": [1, 1], "item_id": [1, 2]})
    users = pd.DataFrame({"user_id": [1]})
    listed = pd.DataFrame({"user_id": [1], "rank": [1], "item_id": [1], "score": [1.0]})
    client = mlflow.MlflowClient()
    # Its own experiment with artefacts under `folder`, not ./mlruns in the working directory.
    found = client.get_experiment_by_name(f"{name}-team")
    experiment = (
        found.experiment_id
        if found
        else client.create_experiment(f"{name}-team", artifact_location=(folder / "artifacts").as_uri())
    )
    with mlflow.start_run(experiment_id=experiment):
        mlflow.pyfunc.log_model(
            name="score",
            python_model=str(code),
            artifacts={"counts": str(counts)},
            signature=infer_signature(pairs, pd.Series([0.5, 0.2])),
            registered_model_name=f"{name}-score",
            pip_requirements=["mlflow"],
        )
        mlflow.pyfunc.log_model(
            name="topk",
            python_model=str(code),
            artifacts={"counts": str(counts)},
            signature=infer_signature(users, listed, params={"k": 20}),
            registered_model_name=f"{name}-topk",
            pip_requirements=["mlflow"],
        )
    mlflow.MlflowClient().set_registered_model_alias(f"{name}-topk", "champion", "1")

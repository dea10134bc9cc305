"""Bring your own model, 2: an MLflow model.

A pyfunc in a registry (or any URI `mlflow.pyfunc.load_model` takes) is an arm named
`prod=mlflow:models:/<name>/<version>` (or `@alias`, or `runs:/<id>/<path>`):

    .venv/bin/python examples/mlflow_model.py [--home data/examples]

It prepares a small synthetic data set in the home (or reuses the one already there, when
prepared the same way), registers the popularity model of
`examples/popularity_model.py` in the home's MLflow store in both shapes — `team-pop-score`
(scores per user-item pair) and `team-pop-topk` (k items per user, alias `champion`) — and
simulates both beside a random control.
"""

from __future__ import annotations

from pathlib import Path

import mlflow
import pandas as pd
import polars as pl
from _common import home_from_args, instance, prepare, run_arms, summary
from mlflow.models import infer_signature

home = home_from_args(__doc__)
dagster = instance()
prepare(dagster)

mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
client = mlflow.MlflowClient()
counts = home / "team" / "counts.csv"
counts.parent.mkdir(parents=True, exist_ok=True)
pl.read_parquet(home / "assets" / "train_ratings.parquet").group_by("item_id").len("n").sort("item_id").write_csv(
    counts
)
found = client.get_experiment_by_name("team-models")
experiment = (
    found.experiment_id
    if found
    else client.create_experiment("team-models", artifact_location=(home / "team" / "artifacts").as_uri())
)
code = str(Path(__file__).with_name("popularity_model.py"))
with mlflow.start_run(experiment_id=experiment):
    score = mlflow.pyfunc.log_model(
        name="score",
        python_model=code,
        artifacts={"counts": str(counts)},
        signature=infer_signature(pd.DataFrame({"user_id": [1, 1], "item_id": [1, 2]}), pd.Series([0.5, 0.2])),
        registered_model_name="team-pop-score",
        pip_requirements=["mlflow"],
    )
    topk = mlflow.pyfunc.log_model(
        name="topk",
        python_model=code,
        artifacts={"counts": str(counts)},
        signature=infer_signature(
            pd.DataFrame({"user_id": [1]}),
            pd.DataFrame({"user_id": [1], "rank": [1], "item_id": [1], "score": [1.0]}),
            params={"k": 20},
        ),
        registered_model_name="team-pop-topk",
        pip_requirements=["mlflow"],
    )
client.set_registered_model_alias("team-pop-topk", "champion", topk.registered_model_version)

names = run_arms(
    dagster,
    [
        "random",
        f"prod=mlflow:models:/team-pop-score/{score.registered_model_version}",
        # The same arm with parameters, `uri` the source: `request` is how many items simab asks
        # the top-k shape for per user before dropping the user's train items (100 unless set);
        # a few users of this small catalogue rated close to half of it.
        "cand=mlflow;uri=models:/team-pop-topk@champion;request=200",
    ],
    control="random",
)
print(summary(home, names))

"""Saving, loading and registering trained arms in MLflow."""

from __future__ import annotations

import numpy as np
import pytest

from fakes.planted_data import planted_metadata, planted_movielens
from ops.arms.model_registry import arm_params, load_arm, log_and_register, model_id_of, point_aliases, save_arm
from ops.arms.recommenders import arm_config, train_arm
from ops.data.catalogue import build_catalogue
from ops.data.split import chronological_split


@pytest.fixture(scope="module")
def trained():
    import torch

    torch.set_num_threads(1)
    users, movies, ratings = planted_movielens(seed=3, n_users=80, n_movies=60, ratings_per_user=30)
    split = chronological_split(ratings)
    metadata = planted_metadata(movies)
    # Two epochs on 80 users: a fixture for saving and loading, not a learner (guard off).
    arms = {
        name: train_arm(
            arm_config(
                name,
                settings={"max_epochs": 2, "learning_rate": 0.01, "embedding_dim": 8, "divergence": {"enabled": False}},
            ),
            split.train,
            split.valid,
            users,
            build_catalogue(movies, metadata),
        )
        for name in ("deepfm", "pop", "random")
    }
    return arms, split


@pytest.mark.parametrize("name", ["deepfm", "pop", "random"])
def test_save_and_load_score_identically(trained, tmp_path, name):
    arms, split = trained
    arm = arms[name]
    folder = save_arm(arm, tmp_path / "arm")
    (tmp_path / "arm" / "stale").write_text("x")
    save_arm(arm, tmp_path / "arm")  # overwriting replaces the folder as a whole
    assert not (folder / "stale").exists()
    again = load_arm(folder, device="cpu")
    u, m = split.test["user_id"].to_numpy(), split.test["item_id"].to_numpy()
    assert np.array_equal(again.score(u, m), arm.score(u, m))
    assert again.config == arm.config and again.history == arm.history and again.best_epoch == arm.best_epoch
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_load_names_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="arm.json"):
        load_arm(tmp_path)


def test_register_versions_and_pyfunc_scores(trained, tmp_path, monkeypatch):
    import mlflow

    arms, split = trained
    previous = mlflow.get_tracking_uri()
    # A SQLite store keeps artefacts in ./mlruns of the working directory: the test's own folder.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    try:
        _register_and_check(arms, split)
    finally:
        mlflow.set_tracking_uri(previous)


def _register_and_check(arms, split):
    import mlflow
    import pandas as pd

    arm = arms["deepfm"]
    with pytest.raises(RuntimeError, match="active MLflow run"):
        log_and_register(arm, "simab-deepfm")
    with mlflow.start_run() as run:
        first = log_and_register(arm, "simab-deepfm", metrics={"test_auc": 0.71, "test_log_loss": None})
    with mlflow.start_run():
        second = log_and_register(arm, "simab-deepfm")
    assert (first, second) == ("1", "2")
    logged = mlflow.get_run(run.info.run_id).data
    assert logged.params["model"] == "deepfm" and logged.params["dnn_hidden_units"] == "[256, 128, 64]"
    assert logged.params["best_epoch"] == str(arm.best_epoch)
    assert logged.metrics["test_auc"] == pytest.approx(0.71)
    model = mlflow.pyfunc.load_model("models:/simab-deepfm/2")
    # The registered arm takes the arm API's item column, and says so in its signature (which
    # the `mlflow:` arm kind reads).
    assert model.metadata.signature.inputs.input_names() == ["user_id", "item_id"]
    frame = pd.DataFrame({"user_id": split.test["user_id"].to_numpy(), "item_id": split.test["item_id"].to_numpy()})
    assert np.allclose(
        np.asarray(model.predict(frame)), arm.score(frame["user_id"].to_numpy(), frame["item_id"].to_numpy())
    )
    assert "features" in arm_params(arm) and arm_params(arms["pop"])["model"] == "pop"
    # The metrics logged with the arm are linked to its logged model (MLflow 3's model comparison).
    logged_model = mlflow.get_logged_model(model_id_of("simab-deepfm", first))
    assert {m.key: m.value for m in logged_model.metrics} == {"test_auc": pytest.approx(0.71)}
    _aliases_follow_the_verdict(arms, frame)


def _aliases_follow_the_verdict(arms, frame):
    """@winner moves to the arm the latest verdict names and leaves the other arms' models."""
    import mlflow

    client = mlflow.MlflowClient()
    with mlflow.start_run():
        assert log_and_register(arms["pop"], "simab-pop") == "1"
    names = ["simab-deepfm", "simab-pop"]
    first = point_aliases({"winner": ("simab-deepfm", "2"), "control": ("simab-pop", "1")}, names, label="lc-1")
    assert first == {"winner": "models:/simab-deepfm@winner", "control": "models:/simab-pop@control"}
    assert client.get_registered_model("simab-deepfm").aliases == {"winner": 2}
    point_aliases({"winner": ("simab-pop", "1"), "control": ("simab-pop", "1")}, names, label="lc-2")
    assert client.get_registered_model("simab-deepfm").aliases == {}
    assert client.get_registered_model("simab-pop").aliases == {"winner": 1, "control": 1}
    version = client.get_model_version_by_alias("simab-pop", "winner")
    assert (version.tags["simab_winner"], version.tags["simab_control"]) == ("lc-2", "lc-2")
    winner = mlflow.pyfunc.load_model("models:/simab-pop@winner")
    users, items = frame["user_id"].to_numpy(), frame["item_id"].to_numpy()
    assert np.allclose(np.asarray(winner.predict(frame)), arms["pop"].score(users, items))


def test_a_model_registered_before_the_module_was_renamed_still_finds_load_arm():
    """Each registered model carries the pyfunc.py it was logged with; older copies import
    `load_arm` from `ops.arms.registry`, which now names the arm kinds' registry."""
    from ops.arms.registry import load_arm as old_path

    assert old_path is load_arm

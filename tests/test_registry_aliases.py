"""After a lifecycle, the Model Registry follows its verdict: `models:/simab-<arm>@winner` loads
the arm the verdict named (the control when no arm beat it), `@control` the control, and each
arm's offline test metrics are linked to its logged model.  Read from a copy of the session's
planted lifecycle (arms random and pop), no lifecycle of its own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ops.readout.verdict import Verdict, registry_roles
from tests.conftest import copy_planted

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_the_verdict_sets_winner_and_control_aliases_and_links_offline_metrics(planted_lifecycle, tmp_path):
    import mlflow
    from dagster import AssetKey, DagsterInstance

    home, dagster_home = copy_planted(planted_lifecycle, tmp_path)
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        report = instance.get_latest_materialization_event(AssetKey("simab_report")).asset_materialization
    stored = report.metadata["summary"].value
    roles = registry_roles(Verdict.from_dict(stored))
    assert roles["control"] == stored["control"] == "pop"
    assert roles["winner"] in ("random", "pop")
    assert report.metadata["registry aliases"].value == {
        alias: f"models:/simab-{arm}@{alias}" for alias, arm in roles.items()
    }

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    try:
        client = mlflow.MlflowClient()
        for alias, arm in roles.items():
            version = client.get_model_version_by_alias(f"simab-{arm}", alias)
            # The version the alias names was trained as that arm, in this lifecycle.
            assert client.get_run(version.run_id).data.tags["arm"] == arm
            assert version.tags[f"simab_{alias}"]
        others = {"random", "pop"} - {roles["winner"]}
        for arm in others:
            assert "winner" not in client.get_registered_model(f"simab-{arm}").aliases
        winner = mlflow.pyfunc.load_model(f"models:/simab-{roles['winner']}@winner")
        scores = np.asarray(winner.predict(pd.DataFrame({"user_id": [1, 1, 2], "item_id": [1, 2, 3]})))
        assert scores.shape == (3,) and np.isfinite(scores).all()
        # The offline test metrics of every arm are linked to its logged model (and the test split).
        from ops.arms.model_registry import model_id_of

        for arm in ("random", "pop"):
            version = client.get_model_version_by_alias(f"simab-{arm}", "control") if arm == "pop" else None
            name = f"simab-{arm}"
            latest = version or max(client.search_model_versions(f"name = '{name}'"), key=lambda v: int(v.version))
            metrics = {m.key: m for m in mlflow.get_logged_model(model_id_of(name, latest.version)).metrics}
            assert {"recall_at_k", "ndcg_at_k"} <= set(metrics), sorted(metrics)
            assert metrics["ndcg_at_k"].dataset_name == "test_ratings"
    finally:
        mlflow.set_tracking_uri(previous)

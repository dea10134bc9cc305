"""One parent MLflow run per Dagster run; each asset a child run under it."""

from types import SimpleNamespace

import polars as pl

from resources.mlflow_tracking import MlflowTracking


def _context(run_id: str, asset: str):
    key = SimpleNamespace(to_user_string=lambda: asset)
    return SimpleNamespace(run=SimpleNamespace(run_id=run_id, job_name="simab_lifecycle"), asset_key=key, has_partition_key=False)


def test_children_share_one_parent_per_dagster_run(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMAB_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tracking = MlflowTracking()
    assert tracking.resolved_uri() == f"sqlite:///{tmp_path / 'mlflow.db'}"
    import mlflow

    df = pl.DataFrame({"a": [1, 2, 3]})
    with tracking.asset_run(_context("run-a", "users"), params={"source": "synthetic"}):
        digest = tracking.log_frame(df, "users")
        mlflow.log_metric("rows", 3)
    with tracking.asset_run(_context("run-a", "ratings")):
        mlflow.log_metric("rows", 5)
    with tracking.asset_run(_context("run-b", "users")):
        pass
    client = tracking.client()
    exp = tracking.experiment_id()
    parents = client.search_runs([exp], "tags.simab_role = 'dagster_run'")
    assert sorted(p.data.tags["dagster_run_id"] for p in parents) == ["run-a", "run-b"]
    parent_a = next(p for p in parents if p.data.tags["dagster_run_id"] == "run-a")
    children = client.search_runs([exp], f"tags.mlflow.parentRunId = '{parent_a.info.run_id}'")
    assert sorted(c.data.tags["dagster_asset"] for c in children) == ["ratings", "users"]
    users_run = next(c for c in children if c.data.tags["dagster_asset"] == "users")
    assert users_run.data.params["source"] == "synthetic"
    assert users_run.data.metrics["rows"] == 3
    assert [d.dataset.digest for d in users_run.inputs.dataset_inputs] == [digest]
    assert parent_a.data.tags["code_version"]


def test_environment_overrides_store(monkeypatch, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'other.db'}")
    assert MlflowTracking().resolved_uri().endswith("other.db")
    assert MlflowTracking(tracking_uri="http://mlflow:5000").resolved_uri() == "http://mlflow:5000"

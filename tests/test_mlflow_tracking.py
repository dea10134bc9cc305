"""One parent MLflow run per Dagster run; each asset a child run under it."""

from types import SimpleNamespace

import polars as pl

from resources.mlflow_tracking import MlflowTracking


def _context(run_id: str, asset: str):
    key = SimpleNamespace(to_user_string=lambda: asset)
    return SimpleNamespace(
        run=SimpleNamespace(run_id=run_id, job_name="simab_lifecycle"), asset_key=key, has_partition_key=False
    )


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


# -- the parent's status follows the Dagster run ---------------------------------------------------


def _parent(tracking, run_id: str):
    client = tracking.client()
    query = f"tags.dagster_run_id = '{run_id}' and tags.simab_role = 'dagster_run'"
    (parent,) = client.search_runs([tracking.experiment_id()], query)
    return parent


def test_a_failed_step_fails_the_parent_and_a_later_step_does_not_hide_it(tmp_path, monkeypatch):
    import pytest

    monkeypatch.setenv("SIMAB_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tracking = MlflowTracking()
    with tracking.asset_run(_context("run-a", "users")):
        assert _parent(tracking, "run-a").info.status == "RUNNING"  # while a step runs
    assert _parent(tracking, "run-a").info.status == "FINISHED"
    with pytest.raises(RuntimeError), tracking.asset_run(_context("run-a", "taste_alignment")):
        raise RuntimeError("the step failed")
    with tracking.asset_run(_context("run-a", "simab_report")):  # another branch of the run goes on
        pass
    assert _parent(tracking, "run-a").info.status == "FAILED"


def test_the_parent_finishes_only_when_no_other_step_is_running(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMAB_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tracking = MlflowTracking()
    parent = tracking.parent_run_id("run-b", "simab_arm")
    client = tracking.client()
    # A step running in another process (the multiprocess executor): its child is RUNNING.
    tags = {"mlflow.parentRunId": parent, "dagster_run_id": "run-b"}
    sibling = client.create_run(tracking.experiment_id(), tags=tags)
    with tracking.asset_run(_context("run-b", "top20_lists")):
        pass
    assert _parent(tracking, "run-b").info.status == "RUNNING"
    client.set_terminated(sibling.info.run_id, "FINISHED")
    with tracking.asset_run(_context("run-b", "offline_metrics")):
        pass
    assert _parent(tracking, "run-b").info.status == "FINISHED"


def test_a_step_that_fails_before_its_child_run_fails_the_parent(tmp_path, monkeypatch):
    """An input that cannot be loaded fails the step before any child run: the parent of a run
    whose earlier step finished still ends FAILED (torn down with the run)."""
    from dagster import AssetExecutionContext, AssetIn, asset, materialize

    from resources.storage import SimabIOManager

    monkeypatch.setenv("SIMAB_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    @asset
    def users(context: AssetExecutionContext, mlflow: MlflowTracking) -> pl.DataFrame:
        with mlflow.asset_run(context):
            return pl.DataFrame({"user_id": [1, 2]})

    @asset(ins={"users": AssetIn()})
    def ratings(mlflow: MlflowTracking, users: pl.DataFrame) -> pl.DataFrame:
        raise ValueError("stored users are damaged")  # as a failed load_input would, before any child run

    tracking = MlflowTracking()
    resources = {"mlflow": tracking, "io_manager": SimabIOManager(root=str(tmp_path))}
    result = materialize([users, ratings], resources=resources, raise_on_error=False)
    assert not result.success
    assert _parent(tracking, result.run_id).info.status == "FAILED"


def test_a_damaged_tracking_store_is_named_with_what_to_do(tmp_path, monkeypatch):
    import pytest

    from resources.mlflow_tracking import TrackingStoreError

    monkeypatch.setenv("SIMAB_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "mlflow.db").write_bytes(b"not a database at all " * 300)
    expected = rf"MLflow tracking store {tmp_path / 'mlflow.db'} cannot be used: file is not a database\. Move it aside"
    with pytest.raises(TrackingStoreError, match=expected):
        with MlflowTracking().asset_run(_context("run-c", "users")):
            pass

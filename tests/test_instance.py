"""The instance config simab writes, runs of dead runners marked failed, and when
`--resume` refuses (fast: no job runs; the whole kill-and-resume is in test_faults_storage)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from dagster._core.test_utils import create_run_for_test

from pipelines.instance import RUNNER_TAG, instance_config, mark_dead_runs_failed, runner_lock, write_instance_config
from pipelines.plan import PLAN_TAG, STEP_TAG, Step
from pipelines.resume import resume_point
from resources.llm import LIFECYCLE_TAG


def test_the_written_config_turns_telemetry_off_and_run_monitoring_on(tmp_path):
    assert write_instance_config(tmp_path / "home")
    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        assert instance.telemetry_enabled is False
        assert instance.run_monitoring_enabled is True
        assert instance.run_monitoring_max_resume_run_attempts == 0
        assert instance.run_monitoring_start_timeout_seconds == 180


def test_the_written_config_caps_concurrent_runs_and_the_arm_pool(tmp_path):
    """A backfill of every arm from the UI queues its runs and their arm steps: at most
    $SIMAB_MAX_CONCURRENT_RUNS runs and $SIMAB_ARM_POOL_LIMIT arm steps at once."""
    from assets.partitions import ARM_POOL
    from ops.settings import load
    from pipelines.definitions import build_definitions

    settings = load({"SIMAB_MAX_CONCURRENT_RUNS": "3", "SIMAB_ARM_POOL_LIMIT": "1"})
    assert write_instance_config(tmp_path / "home", settings)
    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        config = instance.get_concurrency_config()
        assert config.run_queue_config.max_concurrent_runs == 3
        assert config.pool_config.default_pool_limit == 1
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] == 60
    assert "max_concurrent_runs: 2" in instance_config(load({}))  # the defaults: two cores
    graph = build_definitions(environ={}).resolve_asset_graph()
    pooled = {k.to_user_string() for k in graph.get_all_asset_keys() if ARM_POOL in graph.get(k).pools}
    assert {"recommender_arm", "arm_rankings", "simulation_events", "augmentation_metrics"} <= pooled
    assert "simab_report" not in pooled


def test_an_empty_file_is_filled_and_a_users_own_file_is_left_alone(tmp_path):
    (tmp_path / "dagster.yaml").write_text("")
    assert write_instance_config(tmp_path) and (tmp_path / "dagster.yaml").read_text() == instance_config()
    own = "telemetry:\n  enabled: true\n"
    (tmp_path / "dagster.yaml").write_text(own)
    assert not write_instance_config(tmp_path)
    assert (tmp_path / "dagster.yaml").read_text() == own


def test_only_runs_of_dead_runners_are_marked_failed(tmp_path):
    home = tmp_path / "home"
    write_instance_config(home)
    with DagsterInstance.from_config(str(home)) as instance, runner_lock(home) as alive:
        dead = _dead_runner(home)
        running = create_run_for_test(instance, status=DagsterRunStatus.STARTED, tags={RUNNER_TAG: alive})
        orphan = create_run_for_test(instance, status=DagsterRunStatus.STARTED, tags={RUNNER_TAG: dead})
        gone = create_run_for_test(instance, status=DagsterRunStatus.STARTED, tags={RUNNER_TAG: "never-existed"})
        foreign = create_run_for_test(
            instance, status=DagsterRunStatus.STARTED
        )  # launched by the UI: Dagster's business
        # The orphan's arm step held a pool slot when its process died; the live run holds one too.
        storage = instance.event_log_storage
        storage.set_concurrency_slots("simab_arms", 2)
        storage.claim_concurrency_slot("simab_arms", orphan.run_id, "recommender_arm")
        storage.claim_concurrency_slot("simab_arms", running.run_id, "recommender_arm")
        assert sorted(mark_dead_runs_failed(instance, home)) == sorted([orphan.run_id, gone.run_id])
        # The dead run's slot is back in the pool; the live run keeps its own.
        assert storage.get_concurrency_info("simab_arms").active_run_ids == {running.run_id}
        status = {
            r: instance.get_run_by_id(r).status for r in (running.run_id, orphan.run_id, gone.run_id, foreign.run_id)
        }
        assert status == {
            running.run_id: DagsterRunStatus.STARTED,
            orphan.run_id: DagsterRunStatus.FAILURE,
            gone.run_id: DagsterRunStatus.FAILURE,
            foreign.run_id: DagsterRunStatus.STARTED,
        }
        assert mark_dead_runs_failed(instance, home) == []  # marked once


def test_the_command_make_ui_runs_writes_the_config_and_fails_dead_runs(tmp_path, monkeypatch, capsys):
    from pipelines.instance import main

    home = tmp_path / "home"
    write_instance_config(home)
    with DagsterInstance.from_config(str(home)) as instance:
        orphan = create_run_for_test(instance, status=DagsterRunStatus.STARTED, tags={RUNNER_TAG: _dead_runner(home)})
    (home / "dagster.yaml").write_text("")  # e.g. touched by an older Makefile
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    assert main([]) == 0
    assert (home / "dagster.yaml").read_text() == instance_config()
    assert f"run {orphan.run_id}: its process is gone; marked failed" in capsys.readouterr().out
    monkeypatch.delenv("DAGSTER_HOME")
    with pytest.raises(SystemExit, match="usage"):
        main([])


PLAN = [Step("simab_prepare"), Step("simab_arm", "pop"), Step("simab_readout")]


def _lifecycle_run(instance, step: str, status, plan="p1", lifecycle="L1"):
    return create_run_for_test(instance, status=status, tags={LIFECYCLE_TAG: lifecycle, STEP_TAG: step, PLAN_TAG: plan})


def test_resume_skips_what_succeeded_and_starts_at_the_first_unfinished_step(tmp_path):
    with DagsterInstance.ephemeral() as instance:
        prepared = _lifecycle_run(instance, "simab_prepare", DagsterRunStatus.SUCCESS)
        failed = _lifecycle_run(instance, "simab_arm[pop]", DagsterRunStatus.FAILURE)
        lifecycle, done, left = resume_point(instance, PLAN, "p1")
        # The failed step is re-executed from its failure by Dagster (`ReexecutionOptions.from_failure`).
        assert (lifecycle, done, left) == ("L1", {"simab_prepare": prepared.run_id}, {"simab_arm[pop]": failed.run_id})


@pytest.mark.parametrize(
    "later, message",
    [
        (
            lambda i: _lifecycle_run(i, "simab_prepare", DagsterRunStatus.FAILURE, plan="p2", lifecycle="L2"),
            "ran with other arms or run config",
        ),
        (lambda i: create_run_for_test(i, status=DagsterRunStatus.SUCCESS), "was not started by the lifecycle runner"),
        (lambda i: _lifecycle_run(i, "simab_arm[pop]", DagsterRunStatus.STARTED), "still going"),
    ],
    ids=["other_settings", "a_run_from_the_ui_since", "still_running"],
)
def test_resume_refuses_what_it_cannot_continue_safely(later, message):
    with DagsterInstance.ephemeral() as instance:
        _lifecycle_run(instance, "simab_prepare", DagsterRunStatus.SUCCESS)
        later(instance)
        with pytest.raises(SystemExit, match=message):
            resume_point(instance, PLAN, "p1")


def _dead_runner(home) -> str:
    """The token of a runner that took its lock and was killed."""
    code = "import os, sys; from pipelines.instance import runner_lock\nwith runner_lock(sys.argv[1]) as t:\n    print(t, flush=True); os._exit(0)"
    # os._exit skips the context's clean-up, as SIGKILL would: the lock file stays, unlocked.
    out = subprocess.run(
        [sys.executable, "-c", code, str(home)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


# -- killed runs told apart, Dagster's storage named -----------------------------------------------

KILLED_MID_STEP = """
import os, signal, sys
from types import SimpleNamespace
from resources.mlflow_tracking import MlflowTracking

def context(asset):
    key = SimpleNamespace(to_user_string=lambda: asset)
    run = SimpleNamespace(run_id=sys.argv[1], job_name="simab_readout")
    return SimpleNamespace(run=run, asset_key=key, has_partition_key=False)

tracking = MlflowTracking()
with tracking.asset_run(context("ab_readout")):
    pass
with tracking.asset_run(context("simab_report")):
    os.kill(os.getpid(), signal.SIGKILL)  # killed in the read-out, no clean-up
"""


def test_the_mlflow_parent_of_a_killed_run_ends_killed_not_finished(tmp_path, monkeypatch):
    from resources.mlflow_tracking import MlflowTracking

    home = tmp_path / "home"
    write_instance_config(home)
    monkeypatch.setenv("SIMAB_HOME", str(tmp_path / "simab"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with DagsterInstance.from_config(str(home)) as instance:
        run = create_run_for_test(instance, status=DagsterRunStatus.STARTED, tags={RUNNER_TAG: _dead_runner(home)})
        killed = subprocess.run(
            [sys.executable, "-c", KILLED_MID_STEP, run.run_id],
            cwd=Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert killed.returncode == -9, killed.stderr[-2000:]
        tracking = MlflowTracking()
        client = tracking.client()

        def status(asset: str) -> str:
            query = f"tags.dagster_run_id = '{run.run_id}' and " + (
                "tags.simab_role = 'dagster_run'" if asset == "parent" else f"tags.dagster_asset = '{asset}'"
            )
            (found,) = client.search_runs([tracking.experiment_id()], query)
            return found.info.status

        assert status("parent") == "RUNNING"  # not FINISHED after the step before the kill
        assert mark_dead_runs_failed(instance, home, tracking) == [run.run_id]
        assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.FAILURE
        assert (status("parent"), status("ab_readout"), status("simab_report")) == ("KILLED", "FINISHED", "KILLED")


def test_a_run_started_outside_the_runner_whose_process_died_is_marked_failed(tmp_path):
    """`dagster asset materialize` killed: no runner tag, but the executor recorded its pid."""
    from dagster._core.events import EngineEventData

    code = "import os; print(os.getpid())"
    gone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dead_pid = int(gone.stdout)
    home = tmp_path / "home"
    write_instance_config(home)
    with DagsterInstance.from_config(str(home)) as instance:
        runs = {}
        for name, pid in (("dead", dead_pid), ("alive", os.getpid()), ("no_pid", None)):
            runs[name] = create_run_for_test(instance, status=DagsterRunStatus.STARTED)
            if pid is not None:
                data = EngineEventData.in_process(pid)
                message = f"Executing steps in process (pid: {pid})"
                instance.report_engine_event(message, runs[name], engine_event_data=data)
        assert mark_dead_runs_failed(instance, home) == [runs["dead"].run_id]
        status = {name: instance.get_run_by_id(run.run_id).status for name, run in runs.items()}
        started, failed = DagsterRunStatus.STARTED, DagsterRunStatus.FAILURE
        assert status == {"dead": failed, "alive": started, "no_pid": started}
        logs = instance.all_logs(runs["dead"].run_id)
        (failure,) = [e for e in logs if e.dagster_event and e.dagster_event.is_failure]
        assert f"(pid {dead_pid}) is gone" in failure.message


def test_damaged_dagster_storage_is_named_with_what_to_do(tmp_path, monkeypatch):
    from pipelines.instance import main

    home = tmp_path / "home"
    write_instance_config(home)
    with DagsterInstance.from_config(str(home)) as instance:
        create_run_for_test(instance, status=DagsterRunStatus.SUCCESS)
    runs_db = home / "history" / "runs.db"
    runs_db.write_bytes(b"garbled " * 2000)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    named = (
        rf"Dagster's run storage cannot be read: {runs_db} \(file is not a database\)\. "
        rf"Move the damaged file aside \(`mv {runs_db} {runs_db}\.damaged`\)"
    )
    with pytest.raises(SystemExit, match=named):
        main([])

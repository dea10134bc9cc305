"""The instance config simab writes, runs of dead runners marked failed, and when
`--resume` refuses (fast: no job runs; the whole kill-and-resume is in test_faults_storage)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from dagster._core.test_utils import create_run_for_test

from pipelines.instance import INSTANCE_CONFIG, RUNNER_TAG, mark_dead_runs_failed, runner_lock, write_instance_config
from pipelines.lifecycle import LIFECYCLE_TAG, PLAN_TAG, STEP_TAG, Step, resume_point


def test_the_written_config_turns_telemetry_off_and_run_monitoring_on(tmp_path):
    assert write_instance_config(tmp_path / "home")
    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        assert instance.telemetry_enabled is False
        assert instance.run_monitoring_enabled is True
        assert instance.run_monitoring_max_resume_run_attempts == 0
        assert instance.run_monitoring_start_timeout_seconds == 180


def test_an_empty_file_is_filled_and_a_users_own_file_is_left_alone(tmp_path):
    (tmp_path / "dagster.yaml").write_text("")
    assert write_instance_config(tmp_path) and (tmp_path / "dagster.yaml").read_text() == INSTANCE_CONFIG
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
        foreign = create_run_for_test(instance, status=DagsterRunStatus.STARTED)  # launched by the UI: Dagster's business
        assert sorted(mark_dead_runs_failed(instance, home)) == sorted([orphan.run_id, gone.run_id])
        status = {r: instance.get_run_by_id(r).status for r in (running.run_id, orphan.run_id, gone.run_id, foreign.run_id)}
        assert status == {running.run_id: DagsterRunStatus.STARTED, orphan.run_id: DagsterRunStatus.FAILURE,
                          gone.run_id: DagsterRunStatus.FAILURE, foreign.run_id: DagsterRunStatus.STARTED}
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
    assert (home / "dagster.yaml").read_text() == INSTANCE_CONFIG
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
        _lifecycle_run(instance, "simab_arm[pop]", DagsterRunStatus.FAILURE)
        lifecycle, done, left = resume_point(instance, None, PLAN, "p1")
        assert (lifecycle, done, left) == ("L1", {"simab_prepare": prepared.run_id}, {})


@pytest.mark.parametrize(
    "later, message",
    [
        (lambda i: _lifecycle_run(i, "simab_prepare", DagsterRunStatus.FAILURE, plan="p2", lifecycle="L2"), "ran with other arms or run config"),
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
            resume_point(instance, None, PLAN, "p1")


def _dead_runner(home) -> str:
    """The token of a runner that took its lock and was killed."""
    code = "import os, sys; from pipelines.instance import runner_lock\nwith runner_lock(sys.argv[1]) as t:\n    print(t, flush=True); os._exit(0)"
    # os._exit skips the context's clean-up, as SIGKILL would: the lock file stays, unlocked.
    out = subprocess.run([sys.executable, "-c", code, str(home)], cwd=Path(__file__).resolve().parents[1],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()

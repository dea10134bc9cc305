"""Nothing changed, nothing recomputed: the lifecycle runner asks Dagster's staleness (code
versions that cover each asset's source and settings, the inputs' data versions) before each
step, skips a step whose assets are all as stored and narrows one with some changed.

One small world (a copy of the session's planted lifecycle: an ML-1M folder of 40 users,
arms random and pop, 12 agents) is the start; each test first brings it to its own starting
settings (reused where they are those of the last test: the tests are in the order that
leaves least to redo), then changes one thing and checks which assets were computed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import socket_audit
from tests.conftest import PROJECT, copy_planted

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def world(tmp_path_factory, planted_lifecycle):
    """(run the lifecycle with extra settings and arguments -> (console text, the
    {(asset, partition)} it stored)), on a copy of the session's planted lifecycle (whose
    settings are these)."""
    from dagster import DagsterEventType, DagsterInstance, EventRecordsFilter

    from pipelines.lifecycle import main

    home, dagster_home = copy_planted(planted_lifecycle, tmp_path_factory.mktemp("reuse"))
    base = planted_lifecycle.environ(home, dagster_home)
    mp = pytest.MonkeyPatch()
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)

    def lifecycle(
        capfd, *args: str, audit: Path | None = None, **extra: str
    ) -> tuple[str, set[tuple[str, str | None]]]:
        with pytest.MonkeyPatch.context() as env:
            for name, value in {**base, **extra}.items():
                env.setenv(name, value)
            with DagsterInstance.from_config(base["DAGSTER_HOME"]) as instance:
                before = _last_event(instance)
            capfd.readouterr()
            if audit is None:
                assert main(["--verbose", *args]) == 0
                said = capfd.readouterr().out
            else:  # a process of its own, every socket beyond 127.0.0.1 refused and recorded in `audit`
                said = _audited(audit, "--verbose", *args)
            with DagsterInstance.from_config(base["DAGSTER_HOME"]) as instance:
                records = instance.get_event_records(
                    EventRecordsFilter(DagsterEventType.ASSET_MATERIALIZATION, after_cursor=before)
                )
                stored = {(r.asset_key.to_user_string(), r.event_log_entry.dagster_event.partition) for r in records}
        return said, stored

    yield lifecycle
    mp.undo()


def _audited(audit: Path, *args: str) -> str:
    """The lifecycle runner in a fresh interpreter under tests/socket_audit.py: what it printed."""
    command = socket_audit.command(audit, "pipelines.lifecycle")
    env = socket_audit.as_a_person_runs(dict(os.environ))
    out = subprocess.run([*command, *args], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def _last_event(instance) -> int | None:
    from dagster import DagsterEventType, EventRecordsFilter

    records = instance.get_event_records(
        EventRecordsFilter(DagsterEventType.ASSET_MATERIALIZATION), limit=1, ascending=False
    )
    return records[0].storage_id if records else None


def _assets(stored) -> set[str]:
    return {asset for asset, _ in stored}


def test_a_second_lifecycle_with_nothing_changed_computes_nothing(world, capfd):
    # The planted lifecycle was the first (in another process, in a home since copied).
    said, again = world(capfd)
    assert again == set(), again
    for step in ("prepare", "arm random", "arm pop", "read-out"):
        assert f"{step}: unchanged, reused" in said, said
    # The closing summary names the report stored by the run that computed it.
    assert said.count("(reused)") == 4


def test_force_recomputes_every_step(world, capfd):
    world(capfd)
    said, stored = world(capfd, "--force")
    assert "reused" not in said.split("simab lifecycle done")[0]
    assert {"users", "recommender_arm", "simulation_events", "ab_readout", "simab_report"} <= _assets(stored)
    assert {partition for _, partition in stored if partition} == {"random", "pop"}


def test_a_changed_report_setting_recomputes_the_report_only(world, capfd):
    world(capfd)
    said, stored = world(capfd, SIMAB_PRIMARY_METRIC="cvr")
    assert _assets(stored) == {"simab_report"}, stored
    assert "arm random: unchanged, reused" in said and "prepare: unchanged, reused" in said
    assert "simab_report: settings changed" in said, said
    # The stored version now carries the new value: the same settings again reuse it.
    assert world(capfd, SIMAB_PRIMARY_METRIC="cvr")[1] == set()


def test_a_new_arm_trains_only_that_arm_and_the_lifecycle_reaches_no_other_host(
    world, capfd, tmp_path, planted_lifecycle
):
    # The planted lifecycle's runners (prepare, random, pop, the read-out) tried no socket
    # beyond 127.0.0.1; nor does a fresh runner that trains fm, importing deepctr-torch, whose
    # version check asked PyPI, and tracks in MLflow, whose telemetry asked for its config (both
    # off: ops/environment.py; the runners run without the variables that say "a test or CI").
    assert planted_lifecycle.outbound.read_text() == ""
    world(capfd)
    audit = tmp_path / "outbound.txt"
    said, stored = world(capfd, audit=audit, SIMAB_ARMS="random,pop,fm")
    assert audit.read_text() == ""
    assert "check the latest version" not in said
    arms = {partition for _, partition in stored if partition is not None}
    assert arms == {"fm"}, stored
    assert {"recommender_arm", "simulation_events"} <= _assets(stored)
    assert "prepare: unchanged, reused" in said and "arm random: unchanged, reused" in said
    assert "arm pop: unchanged, reused" in said
    # The read-out reads every arm: it is computed again, from the new arm's input.
    assert "ab_readout" in _assets(stored)


def test_a_code_change_recomputes_the_assets_of_that_code_and_what_follows(world, capfd, monkeypatch):
    from pipelines import versions

    world(capfd)
    digest = versions.source_digest

    def changed(module, *args, **kwargs):
        # As if a line of the report's module had been edited.
        return digest(module, *args, **kwargs) + ("x" if module == "assets.report" else "")

    monkeypatch.setattr(versions, "source_digest", changed)
    said, stored = world(capfd)
    # Both assets of that module and the one that reads ab_readout; nothing before the read-out.
    assert _assets(stored) == {"ab_readout", "simab_report", "list_sensitivity"}, stored
    assert "simab_report: code changed" in said, said
    assert "arm pop: unchanged, reused" in said


def test_a_lifecycle_started_after_a_launch_that_has_not_started_leaves_the_home_to_it(
    tmp_path, capfd, planted_lifecycle
):
    # Issue 50: the UI's launch came first; its worker takes the home only once it starts.
    from dagster import DagsterInstance, job, op

    from pipelines.lifecycle import main

    @op
    def step():
        pass

    @job(name="simab_prepare")
    def launched():
        step()

    home, dagster_home = copy_planted(planted_lifecycle, tmp_path)
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        before = len(instance.get_runs())
        run = instance.create_run_for_job(launched, tags={"dagster/partition": "pop"})
    with pytest.MonkeyPatch.context() as env:
        for name, value in planted_lifecycle.environ(home, dagster_home).items():
            env.setenv(name, value)
        env.delenv("MLFLOW_TRACKING_URI", raising=False)
        with pytest.raises(SystemExit) as refused:
            main([])
    said = str(refused.value)
    assert said.startswith(f"simab: the home {home} is claimed: run {run.run_id} of simab_prepare[pop]"), said
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        assert len(instance.get_runs()) == before + 1  # the runner started no run of its own

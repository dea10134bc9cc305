"""`simab run` through the executor the settings name: each step a Dagster run through the
instance (`dagster.execute_job`), the arms side by side with an executor whose steps run in
processes of their own.

- The plan's lanes: prepare, then every arm's chain at once, then the read-out.
- With `SIMAB_EXECUTOR=multiprocess` (concurrency 2) on a copy of the session's planted world
  whose arms and read-out are forgotten (their runs deleted: the prepare step is reused), two
  arm steps of two arms' runs overlap in time (their step events in the instance say so), each
  arm's run executes its steps in one process of its own, and the verdict equals the one the
  in-process lifecycle of the same settings stored.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.plan import Step, lanes

PROJECT = Path(__file__).resolve().parents[1]


def test_the_arms_are_one_lane_of_independent_chains_between_prepare_and_the_readout():
    plan = [
        Step("simab_prepare"),
        Step("simab_arm", "pop"),
        Step("simab_simulate", "pop|0"),
        Step("simab_simulate", "pop|1"),
        Step("simab_combine", "pop"),
        Step("simab_arm", "fm"),
        Step("simab_readout"),
    ]
    assert lanes(plan) == [
        [[Step("simab_prepare")]],
        [plan[1:5], [Step("simab_arm", "fm")]],
        [[Step("simab_readout")]],
    ]
    assert lanes([Step("simab_prepare"), Step("simab_readout")]) == [
        [[Step("simab_prepare")]],
        [[Step("simab_readout")]],
    ]


@pytest.mark.e2e
@pytest.mark.slow
def test_multiprocess_runs_two_arms_at_once_and_gives_the_in_process_verdict(planted_lifecycle, tmp_path):
    from dagster import AssetKey, DagsterInstance, RunsFilter

    from bench.executors import overlapping_pairs, rounded, step_spans
    from pipelines.instance import run_pids
    from pipelines.versions import latest_materialization
    from tests.conftest import copy_planted

    home, dagster_home = copy_planted(planted_lifecycle, tmp_path)
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        for run in instance.get_runs():
            if run.job_name != "simab_prepare":
                instance.delete_run(run.run_id)
    env = {**os.environ, **planted_lifecycle.environ(home, dagster_home)}
    env.update(SIMAB_EXECUTOR="multiprocess", SIMAB_CONCURRENCY="2", PYTHONPATH=str(PROJECT))
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.lifecycle"], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "prepare: unchanged, reused" in done.stdout

    def verdict(folder: Path) -> dict:
        with DagsterInstance.from_config(str(folder)) as instance:
            stored = latest_materialization(instance, AssetKey("simab_report"), None)
            return stored.event_log_entry.asset_materialization.metadata["summary"].value

    # To 12 significant digits: a sum over other BLAS threads may differ in its last bits (1e-17).
    assert rounded(verdict(dagster_home)) == rounded(verdict(planted_lifecycle.dagster_home))

    with DagsterInstance.from_config(str(dagster_home)) as instance:
        arm_runs = instance.get_runs(filters=RunsFilter(job_name="simab_arm"))
        assert sorted(r.tags["dagster/partition"] for r in arm_runs) == ["pop", "random"]
        spans = step_spans(instance, arm_runs)  # (arm, step) -> (start, end) from the step events stored
        pids = [run_pids(instance, run.run_id) for run in arm_runs]
    assert all(start is not None and end is not None for start, end in spans.values()), spans
    overlapping = overlapping_pairs(spans)
    assert overlapping, spans
    # Each arm's run executed its steps in one process of its own, not a process per step.
    assert all(len(p) == 1 for p in pids) and len(set.union(*pids)) == 2, pids

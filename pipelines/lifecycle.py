"""Run the whole lifecycle from the command line: `python -m pipelines.lifecycle`.

It executes the same jobs the Dagster UI launches, against the persistent Dagster instance
($DAGSTER_HOME, whose `dagster.yaml` it writes: `pipelines.instance`), so `make ui` shows
the runs afterwards: `simab_prepare`, `simab_arm` once per arm ($SIMAB_ARMS),
`simab_readout`, each with the run config the environment asks for
(`pipelines.run_config`).  At the end it prints where the results are.

Killed and resumed.  The jobs run inside this process, where no Dagster daemon watches
them, so a killed runner would leave its run STARTED forever; at start the runner marks
the runs of dead runners failed (`pipelines.instance.mark_dead_runs_failed`).  Every run
carries the lifecycle's id and its step.  `--resume` continues the last lifecycle of this
$DAGSTER_HOME: steps that succeeded are skipped, an interrupted step re-runs only the
assets it had not stored (a multi-asset whole), the steps after it run as usual.  It
refuses when that lifecycle ran with other settings, when other runs came after it (they
may have replaced its assets), or when one of its runs is still going.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass

LIFECYCLE_TAG = "simab/lifecycle"  # one id per invocation of the runner (kept by --resume)
STEP_TAG = "simab/step"  # e.g. "simab_arm[fm]"
PLAN_TAG = "simab/plan"  # digest of the steps and their run config


@dataclass(frozen=True)
class Step:
    job: str
    partition: str | None = None

    @property
    def label(self) -> str:
        return self.job + (f"[{self.partition}]" if self.partition else "")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", help="comma-separated arms (default $SIMAB_ARMS or random,pop,fm,deepfm)")
    parser.add_argument("--resume", action="store_true", help="continue the last lifecycle of $DAGSTER_HOME after a kill or a failure")
    args = parser.parse_args(argv)
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from dagster import DagsterInstance

    from pipelines.definitions import build_definitions
    from pipelines.instance import RUNNER_TAG, mark_dead_runs_failed, runner_lock, write_instance_config
    from pipelines.run_config import run_config_for, settings_from_env, with_arms
    from resources.mlflow_tracking import MlflowTracking
    from resources.storage import data_root

    settings = settings_from_env(os.environ)
    if args.arms:
        settings = with_arms(settings, [a.strip() for a in args.arms.split(",") if a.strip()])
    defs = build_definitions(settings)

    home = os.environ.get("DAGSTER_HOME")
    if args.resume and not home:
        raise SystemExit("--resume needs $DAGSTER_HOME: without it runs go to a temporary instance and there is nothing to resume")
    if home:
        # A fresh $DAGSTER_HOME is created rather than refused: the runner is the first thing
        # people start, and Dagster insists the folder exists.
        write_instance_config(home)
    instance = DagsterInstance.get() if home else DagsterInstance.ephemeral()
    if home:
        for run_id in mark_dead_runs_failed(instance, home):
            print(f"run {run_id}: its process is gone (killed or crashed); marked failed", flush=True)

    plan = [Step("simab_prepare"), *(Step("simab_arm", arm) for arm in settings.arms), Step("simab_readout")]
    digest = _plan_digest(plan, {s.job: run_config_for(s.job, settings) for s in plan})
    lifecycle, done, left = resume_point(instance, defs, plan, digest) if args.resume else (uuid.uuid4().hex[:12], {}, {})
    started = time.time()
    runs = []

    def execute(step: Step, runner: str) -> None:
        label = step.label
        if label in done:
            print(f"==> {label}: done in run {done[label]}, skipped", flush=True)
            runs.append((label, done[label], True))
            return
        selection = left.get(label)
        note = f" (resuming: {', '.join(k.to_user_string() for k in sorted(selection))})" if selection else ""
        print(f"==> {label}{note}", flush=True)
        tags = {LIFECYCLE_TAG: lifecycle, STEP_TAG: label, PLAN_TAG: digest, **({RUNNER_TAG: runner} if runner else {})}
        result = defs.resolve_job_def(step.job).execute_in_process(
            instance=instance, partition_key=step.partition, run_config=run_config_for(step.job, settings), raise_on_error=False,
            tags=tags, asset_selection=sorted(selection) if selection else None,
        )
        runs.append((label, result.run_id, result.success))
        if not result.success:
            failed = [e for e in result.all_events if e.is_step_failure]
            for event in failed[:5]:
                print(f"    {event.step_key}: {_reason(event)}", file=sys.stderr)
            resume = " Fix the cause, then `python -m pipelines.lifecycle --resume` re-runs only what is left." if home else ""
            raise SystemExit(f"{label} failed (Dagster run {result.run_id}); see the Dagster UI (make ui) for the whole log.{resume}")

    with runner_lock(home) if home else nullcontext("") as runner:
        for step in plan:
            execute(step, runner)

    tracking = MlflowTracking()
    client = tracking.client()
    report_run = client.search_runs([tracking.experiment_id()], f"tags.dagster_run_id = '{runs[-1][1]}' and tags.dagster_asset = 'simab_report'", max_results=1)
    print()
    print(f"simab lifecycle done in {time.time() - started:.0f} s on arms {', '.join(settings.arms)}")
    print(f"  report:        {data_root() / 'reports' / runs[-1][1] / 'report.md'}")
    print(f"  MLflow store:  {tracking.resolved_uri()} (experiment '{tracking.experiment}')")
    if report_run:
        print(f"  MLflow run:    {report_run[0].info.run_id} (report); parent runs per Dagster run:")
    for label, run_id, _ in runs:
        print(f"    {label:22s} Dagster run {run_id}")
    print("  MLflow UI:     make mlflow-ui   → http://127.0.0.1:5000")
    print(f"  Dagster UI:    make ui          → http://127.0.0.1:3000 (DAGSTER_HOME={home or 'ephemeral'})")
    return 0


def resume_point(instance, defs, plan: list[Step], digest: str) -> tuple[str, dict, dict]:
    """Where the last lifecycle stopped: (its id, {step label: run id of the steps that
    succeeded}, {step label: the asset keys the interrupted step has still to store})."""
    from dagster import DagsterEventType, DagsterRunStatus, RunsFilter

    newest = instance.get_run_records(limit=1)
    if not newest:
        print("--resume: no run in this $DAGSTER_HOME yet; running the whole lifecycle", flush=True)
        return uuid.uuid4().hex[:12], {}, {}
    last = newest[0].dagster_run
    lifecycle = last.tags.get(LIFECYCLE_TAG)
    if lifecycle is None:
        raise SystemExit(
            f"--resume: the newest run ({last.job_name} {last.run_id}) was not started by the lifecycle runner and may have "
            "replaced assets of the last lifecycle; run without --resume"
        )
    if last.tags.get(PLAN_TAG) != digest:
        raise SystemExit(f"--resume: the last lifecycle ({lifecycle}) ran with other arms or run config; run without --resume, or with its settings")
    runs = [r.dagster_run for r in instance.get_run_records(filters=RunsFilter(tags={LIFECYCLE_TAG: lifecycle}))]
    going = [r.run_id for r in runs if not r.is_finished]
    if going:
        raise SystemExit(f"--resume: run(s) {', '.join(going)} of lifecycle {lifecycle} are still going; wait for them or stop them first")
    done, left = {}, {}
    for step in plan:
        attempts = [r for r in runs if r.tags.get(STEP_TAG) == step.label]
        succeeded = [r.run_id for r in attempts if r.status == DagsterRunStatus.SUCCESS]
        if succeeded:
            done[step.label] = succeeded[0]
            continue
        stored = {
            entry.asset_materialization.asset_key
            for r in attempts
            for entry in instance.all_logs(r.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
        }
        if stored:
            left[step.label] = _still_to_store(defs, step.job, stored)
        break  # the steps after the first unfinished one never ran in this lifecycle
    print(f"--resume: lifecycle {lifecycle}: {len(done)} of {len(plan)} steps done", flush=True)
    return lifecycle, done, left


def _still_to_store(defs, job: str, stored: set) -> set:
    """The job's asset keys not in `stored`, widened to whole multi-assets (they run as one op)."""
    keys = defs.resolve_job_def(job).asset_layer.selected_asset_keys
    graph = defs.resolve_asset_graph()
    missing = set()
    for key in keys - stored:
        missing |= set(graph.get(key).assets_def.keys) & keys
    return missing


def _reason(event) -> str:
    """Why a step failed, as its error says it (a broken contract lists every problem)."""
    data = event.step_failure_data
    if data.user_failure_data is not None and data.user_failure_data.description:
        return data.user_failure_data.description
    error = data.error
    while error is not None and error.cause is not None:  # Dagster wraps the user's exception
        error = error.cause
    return error.message.strip() if error is not None else event.message


def _plan_digest(plan: list[Step], configs: dict) -> str:
    text = json.dumps({"steps": [s.label for s in plan], "run_config": configs}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


if __name__ == "__main__":
    raise SystemExit(main())

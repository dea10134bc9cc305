"""Where `--resume` picks the last lifecycle up: the steps of it that succeeded (skipped), the
failed run of the interrupted step (re-executed from its failure by Dagster:
`ReexecutionOptions.from_failure`, which re-runs the steps that failed or never finished and
what follows them, reading the stored outputs of the rest), and the refusals when resuming
would be wrong (another run came after it, other settings, a run still going)."""

from __future__ import annotations

import uuid

from dagster import DagsterRunStatus, RunsFilter

from pipelines.plan import PLAN_TAG, STEP_TAG, Step
from resources.llm import LIFECYCLE_TAG

# The runs Dagster re-executes from failure (`KnownExecutionState.build_resume_retry_reexecution`).
REEXECUTABLE = (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)


def resume_point(instance, plan: list[Step], digest: str, say=print) -> tuple[str, dict, dict]:
    """Where the last lifecycle stopped: (its id, {step label: run id of the steps that
    succeeded}, {step label: the run id of the interrupted step's newest failed attempt})."""
    newest = instance.get_run_records(limit=1)
    if not newest:
        say("--resume: no run in this $DAGSTER_HOME yet; running the whole lifecycle")
        return uuid.uuid4().hex[:12], {}, {}
    last = newest[0].dagster_run
    lifecycle = last.tags.get(LIFECYCLE_TAG)
    if lifecycle is None:
        raise SystemExit(
            f"--resume: the newest run ({last.job_name} {last.run_id}) was not started by the lifecycle runner and may have "
            "replaced assets of the last lifecycle; run without --resume"
        )
    if last.tags.get(PLAN_TAG) != digest:
        raise SystemExit(
            f"--resume: the last lifecycle ({lifecycle}) ran with other arms or run config; run without --resume, or with its settings"
        )
    # Newest first (the instance's order): a step's newest failed attempt is the one to continue.
    runs = [r.dagster_run for r in instance.get_run_records(filters=RunsFilter(tags={LIFECYCLE_TAG: lifecycle}))]
    going = [r.run_id for r in runs if not r.is_finished]
    if going:
        raise SystemExit(
            f"--resume: run(s) {', '.join(going)} of lifecycle {lifecycle} are still going; wait for them or stop them first"
        )
    done, left = {}, {}
    for step in plan:
        attempts = [r for r in runs if r.tags.get(STEP_TAG) == step.label]
        succeeded = [r.run_id for r in attempts if r.status == DagsterRunStatus.SUCCESS]
        if succeeded:
            done[step.label] = succeeded[0]
            continue
        failed = [r.run_id for r in attempts if r.status in REEXECUTABLE]
        if failed:
            left[step.label] = failed[0]
    say(f"--resume: lifecycle {lifecycle}: {len(done)} of {len(plan)} steps done")
    return lifecycle, done, left

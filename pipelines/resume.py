"""Where `--resume` picks the last lifecycle up: the steps of it that succeeded (skipped),
the assets the interrupted step has still to store (run alone), and the refusals when
resuming would be wrong (another run came after it, other settings, a run still going)."""

from __future__ import annotations

import uuid

from dagster import DagsterEventType, DagsterRunStatus, RunsFilter

from pipelines.plan import PLAN_TAG, STEP_TAG, Step
from resources.llm import LIFECYCLE_TAG


def resume_point(instance, defs, plan: list[Step], digest: str, say=print) -> tuple[str, dict, dict]:
    """Where the last lifecycle stopped: (its id, {step label: run id of the steps that
    succeeded}, {step label: the asset keys the interrupted step has still to store})."""
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
        stored = {
            entry.asset_materialization.asset_key
            for r in attempts
            for entry in instance.all_logs(r.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
        }
        if stored:
            left[step.label] = _still_to_store(defs, step.job, stored)
        break  # the steps after the first unfinished one never ran in this lifecycle
    say(f"--resume: lifecycle {lifecycle}: {len(done)} of {len(plan)} steps done")
    return lifecycle, done, left


def _still_to_store(defs, job: str, stored: set) -> set:
    """The job's asset keys not in `stored`, widened to whole multi-assets (they run as one op)."""
    keys = defs.resolve_job_def(job).asset_layer.selected_asset_keys
    graph = defs.resolve_asset_graph()
    missing = set()
    for key in keys - stored:
        missing |= set(graph.get(key).assets_def.keys) & keys
    return missing

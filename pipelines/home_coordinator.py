"""The instance's run coordinator: Dagster's run queue (`QueuedRunCoordinator`, the one
`concurrency: runs:` configures), which first asks whether the home is free.

A run launched through the instance — the UI's Launch, a schedule tick, a sensor's or a
backfill's run — takes the home in its run worker (`pipelines.resources.home_locked`), but
a run worker starts only after the queue, the daemon and the seconds of loading the code
location (20-30 s on a loaded two-core machine, docs/findings/one_home.md).  So a run
submitted while a lifecycle or another run holds the home in a way it cannot share is failed
at submission, with the line the executor would have given (`ops.storage.home_lock`): the UI
shows it on the run's page at once.  With `$SIMAB_HOME_WAIT_S` > 0 the run is queued as usual
and waits for the home in its worker; a home taken after submission is still refused there.
"""

from __future__ import annotations

from dagster import QueuedRunCoordinator, SubmitRunContext


class HomeRunCoordinator(QueuedRunCoordinator):
    """`QueuedRunCoordinator`, refusing at submission a run the home would refuse (module docstring)."""

    def submit_run(self, context: SubmitRunContext):
        run = context.dagster_run
        refused = _refusal(run)
        if refused is None:
            return super().submit_run(context)
        self._instance.report_run_failed(run, message=f"run {run.run_id} of {run.job_name} not started: {refused}")
        return self._instance.get_run_by_id(run.run_id)


def _refusal(run) -> str | None:
    from ops.settings import current
    from ops.storage.home_lock import refusal_now
    from pipelines.resources import run_claim

    try:
        settings = current()
        if settings.home_wait_s > 0:
            return None  # it waits for the home in its worker
        return refusal_now(settings.home, run_claim(run))
    except (OSError, ValueError):
        return None  # no verdict here: the run worker's lock decides


# A run submitted this long ago that has not started yet still counts as first: run monitoring
# fails a run stuck STARTING after its start timeout (pipelines/instance.py, 180 s); a QUEUED run
# older than that waits on a daemon that is not running, and holds no one back.
LAUNCH_FIRST_S = 180.0


def launched_first(instance, now: float | None = None, before: float | None = None) -> str | None:
    """Why a lifecycle runner must not take the home now: a run launched through the instance
    (the UI, a schedule, a backfill) was submitted before it and does not hold the home yet —
    queued, starting, or started but still loading the code location in its worker, where the
    lock is taken seconds after RUN_START (docs/findings/one_home.md) — and would be refused by
    its own worker after the runner took it.  None when there is none.  The caller holds the
    home already, so no run counted here can be holding it.  The runner's own runs carry
    `RUNNER_TAG` and are not counted, nor runs submitted after `before` (when the caller took
    the home: those found it held, and wait for it or were refused)."""
    import time

    from dagster import DagsterRunStatus, RunsFilter

    from pipelines.instance import RUNNER_TAG, run_pids, worker_gone

    now = time.time() if now is None else now
    waiting = [
        DagsterRunStatus.QUEUED,
        DagsterRunStatus.NOT_STARTED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
    ]
    for record in instance.get_run_records(RunsFilter(statuses=waiting), limit=20):
        run = record.dagster_run
        submitted = record.create_timestamp.timestamp()
        if RUNNER_TAG in run.tags or now - submitted > LAUNCH_FIRST_S or (before is not None and submitted > before):
            continue
        if run.status == DagsterRunStatus.STARTED and worker_gone(record, run_pids(instance, run.run_id)):
            continue  # the runner marks it failed (`mark_dead_runs_failed`)
        where = f"[{run.tags['dagster/partition']}]" if "dagster/partition" in run.tags else ""
        return (
            f"run {run.run_id} of {run.job_name}{where} was launched through the Dagster instance "
            f"{now - submitted:.0f} s ago and is {run.status.value.lower().replace('_', ' ')}: it came first. "
            "Wait for it to finish (`simab ui` shows it) or cancel it there, then run again"
        )
    return None

"""The Dagster instance simab runs against: its `dagster.yaml`, and runs left STARTED by a
killed process.

`write_instance_config(home)` writes `$DAGSTER_HOME/dagster.yaml` for `make ui`, `make demo`
and `python -m pipelines.lifecycle`: telemetry off, run monitoring on, and the concurrency
limits of runs and of the arm pool (`instance_config`).  Run monitoring
is a loop of the Dagster daemon (`dagster dev` starts one) over runs launched through the
instance's run launcher: a run stuck STARTING or CANCELING past its timeout is marked
failed, and a run past `dagster/max_runtime` (a run tag) is stopped.  A run worker that dies
under `dagster dev` is also marked failed by the code server that started it.  Detecting a
dead worker of a STARTED run needs a launcher that can probe workers (Kubernetes, ECS,
Docker); the default launcher cannot, so `max_resume_run_attempts` is 0.

The lifecycle runner executes its runs itself (`dagster.execute_job`), not through a run
launcher, so no daemon watches them: killed, it leaves its run STARTED forever.  So each runner
holds an exclusive lock on a file of its own under `$DAGSTER_HOME/simab_runners/` while it
runs, and tags its runs with that file's name; the kernel drops the lock when the process
dies, however it dies.  `mark_dead_runs_failed` finds unfinished runs whose runner's lock
can be taken — their process is gone — and marks them failed.  The lifecycle runner does
that whenever it starts, and so does `python -m pipelines.instance` (what `make ui` runs).

A run started some other way (`dagster asset materialize`, a script's `materialize`) carries
no runner tag, but Dagster's executors record the id of the process executing the run in an
engine event ("Executing steps in process (pid: …)"): a STARTED run without a runner tag is
marked failed when every process it records is gone (no such process, or one started after
the run: its id was reused; psutil says which).  A run marked failed gives back the
concurrency-pool slots its steps held.  A run with no such event yet is left to Dagster's own run
monitoring.  Process ids are of this machine: the instance is a local one (SQLite).

An instance whose SQLite storage SQLite cannot read (runs.db, an event log, schedules.db)
fails with `file is not a database` or `database disk image is malformed`, naming no file;
`named_storage_errors` names the damaged files under $DAGSTER_HOME and what to do.

With an MLflow tracking resource given, the parent MLflow run of every run marked failed
ends KILLED (`resources.mlflow_tracking.MlflowTracking.end_parent`), not RUNNING or FINISHED.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MARKER = "# Written by simab (pipelines/instance.py)"


def instance_config(settings=None) -> str:
    """The `dagster.yaml` simab writes, from `settings` (default: the installed ones): telemetry
    off, run monitoring on, the run queue that refuses a run while the home is taken
    (`pipelines.home_coordinator`), and the instance's concurrency limits — runs started at once from
    the queue ($SIMAB_MAX_CONCURRENT_RUNS) and steps of the arm pool in progress at once
    ($SIMAB_ARM_POOL_LIMIT, `assets.partitions.ARM_POOL`), so that a backfill of every arm from
    the UI runs a few at a time on a small machine."""
    from ops.settings import current

    settings = settings or current()
    return f"""{MARKER}; delete this line to keep your own edits.
# Run monitoring: https://docs.dagster.io/deployment/run-monitoring
telemetry:
  enabled: false
run_monitoring:
  enabled: true
  # A run stuck STARTING (its worker never came up) or CANCELING is marked failed after this long.
  start_timeout_seconds: 180
  cancel_timeout_seconds: 180
  # The default run launcher (dagster dev) cannot restart a run worker: fail, do not resume.
  max_resume_run_attempts: 0
  poll_interval_seconds: 60
  # A finished run's concurrency-pool slots go back to the pool after this long.
  free_slots_after_run_end_seconds: 60
# The run queue, which fails at once a run submitted while the home is taken (the UI shows
# the holder on the run's page) rather than after its run worker has started: pipelines/home_coordinator.py
run_coordinator:
  module: pipelines.home_coordinator
  class: HomeRunCoordinator
# Concurrency: https://docs.dagster.io/guides/operate/managing-concurrency
concurrency:
  runs:
    # Runs the queue starts at once ($SIMAB_MAX_CONCURRENT_RUNS): a backfill of every arm queues the rest.
    max_concurrent_runs: {settings.max_concurrent_runs}
  pools:
    # Steps of one pool in progress at once across all runs ($SIMAB_ARM_POOL_LIMIT); the arm
    # assets' pool is simab_arms (training, ranking, simulation), the only pool simab declares.
    default_limit: {settings.arm_pool_limit}
"""


RUNNER_TAG = "simab/runner"  # the lock file name (without .lock) of the process executing the run


def write_instance_config(home: str | Path, settings=None) -> bool:
    """Write `dagster.yaml` (`instance_config(settings)`) into `home` (created) unless someone
    wrote their own there; True when written.  A file is ours when empty or starting with `MARKER`."""
    home = Path(home)
    config = instance_config(settings)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if text.strip() and not text.startswith(MARKER):
            return False
        if text == config:
            return True
    from ops.storage.atomic import atomic_write_bytes

    atomic_write_bytes(path, config.encode("utf-8"))
    return True


@contextmanager
def runner_lock(home: str | Path) -> Iterator[str]:
    """Hold this process's runner lock; yields the value of `RUNNER_TAG` for its runs."""
    from filelock import FileLock

    token = secrets.token_hex(8)
    path = _runners(home) / f"{token}.lock"
    # No soft-lock fallback: a soft lock (a file that exists) would outlive a killed process.
    lock = FileLock(path, fallback_to_soft=False)
    lock.acquire()
    try:
        yield token
    finally:
        lock.release()
        path.unlink(missing_ok=True)


def mark_dead_runs_failed(instance, home: str | Path, tracking=None) -> list[str]:
    """Mark failed every unfinished run whose process is gone (tagged by a runner whose lock is
    free, or untagged with every recorded process gone); returns their run ids.  `tracking`
    (an `MlflowTracking`): their MLflow parents end KILLED."""
    from dagster import DagsterRunStatus, RunsFilter

    unfinished = [
        DagsterRunStatus.NOT_STARTED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.CANCELING,
    ]
    dead = []
    for record in instance.get_run_records(filters=RunsFilter(statuses=unfinished)):
        run = record.dagster_run
        token = run.tags.get(RUNNER_TAG)
        if token:
            if _runner_alive(home, token):
                continue
            who = f"the process that executed this run (runner {token}) is gone (killed or crashed)"
            again = "`python -m pipelines.lifecycle --resume` re-runs what it did not finish."
        else:
            if run.status != DagsterRunStatus.STARTED:
                continue  # not started yet, or being cancelled: Dagster's run monitoring's business
            pids = run_pids(instance, run.run_id)
            if not worker_gone(record, pids):
                continue
            listed = ", ".join(map(str, sorted(pids)))
            who = f"the process that executed this run (pid {listed}) is gone (killed or crashed)"
            again = "Materialise what it did not finish again."
        message = f"Marked failed by simab: {who} and the run was left unfinished. {again}"
        instance.report_engine_event(message, run)
        instance.report_run_failed(run, message)
        # No daemon may be watching: the pool slots its steps held go back now.
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        dead.append(run.run_id)
    if tracking is not None:
        for run_id in dead:
            try:
                tracking.end_parent(run_id, "KILLED")
            except Exception as exc:  # the Dagster runs are marked; MLflow's record is secondary
                print(f"run {run_id}: its MLflow parent run could not be ended KILLED: {exc}", file=sys.stderr)
    return dead


class DagsterStorageError(RuntimeError):
    """The Dagster instance's SQLite storage cannot be read: names the files and what to do."""


@contextmanager
def named_storage_errors(home: str | Path | None) -> Iterator[None]:
    """An error SQLite raised while Dagster read its storage under `home` becomes one
    `DagsterStorageError` naming the damaged files; any other error passes unchanged."""
    try:
        yield
    except DagsterStorageError:
        raise
    except Exception as exc:
        from resources.mlflow_tracking import sqlite_cause

        cause = sqlite_cause(exc)
        damaged = damaged_sqlite_files(home) if cause is not None and home else []
        if not damaged:
            raise  # not Dagster's storage (another store names itself)
        listed = ", ".join(str(p) for p in damaged)
        raise DagsterStorageError(
            f"Dagster's run storage cannot be read: {listed} ({cause}). Move the damaged file aside "
            f"(`mv {damaged[0]} {damaged[0]}.damaged`), or all of {Path(home) / 'history'}, and run again: "
            "Dagster starts new ones; the runs recorded there are lost to the UI and to --resume, the stored assets "
            "are not affected"
        ) from exc


def damaged_sqlite_files(home: str | Path) -> list[Path]:
    """The SQLite files under `home` that SQLite cannot open or whose quick check fails."""
    import sqlite3

    damaged = []
    for path in sorted(Path(home).rglob("*.db")):
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                ok = db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            db.close()
        except sqlite3.DatabaseError:
            ok = False
        if not ok:
            damaged.append(path)
    return damaged


def worker_gone(record, pids: set[int]) -> bool:
    """Whether a started run's processes (`pids`, as `run_pids` reads them) are all gone; a run
    that recorded none yet is not gone (its worker may still be starting)."""
    return bool(pids) and not any(_process_alive(pid, record.start_time) for pid in pids)


def run_pids(instance, run_id: str) -> set[int]:
    """The process ids Dagster's executors recorded for a run (engine events with a `pid`)."""
    from dagster import DagsterEventType

    pids = set()
    for record in instance.get_records_for_run(run_id, of_type=DagsterEventType.ENGINE_EVENT).records:
        data = record.event_log_entry.dagster_event.event_specific_data
        value = getattr(getattr(data, "metadata", {}).get("pid"), "value", None)
        if value is not None and str(value).isdigit():
            pids.add(int(value))
    return pids


def _process_alive(pid: int, run_started: float | None) -> bool:
    """Whether process `pid` exists and is not a newer process that reused the id."""
    import psutil

    try:
        started = psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return False
    except (psutil.AccessDenied, OSError):  # exists, its start time not ours to read
        return True
    # A second of slack for clock granularity: a process older than the run may be executing it.
    return run_started is None or started <= run_started + 1.0


def _runner_alive(home: str | Path, token: str) -> bool:
    from filelock import FileLock, Timeout

    path = _runners(home) / f"{token}.lock"
    if not path.exists():  # a runner removes its file only after its runs have ended
        return False
    lock = FileLock(path, fallback_to_soft=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    path.unlink(missing_ok=True)
    return False


def _runners(home: str | Path) -> Path:
    folder = Path(home) / "simab_runners"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    """`python -m pipelines.instance [DAGSTER_HOME]`: write the config, mark dead runs failed."""
    args = sys.argv[1:] if argv is None else argv
    given = args[0] if args else os.environ.get("DAGSTER_HOME", "")
    if not given:
        raise SystemExit("usage: python -m pipelines.instance DAGSTER_HOME (or set $DAGSTER_HOME)")
    home = Path(given).expanduser()
    if not write_instance_config(home):
        print(f"{home / 'dagster.yaml'}: your own file, left as it is (simab's settings: pipelines/instance.py)")
    os.environ["DAGSTER_HOME"] = str(home.resolve())
    from dagster import DagsterInstance

    from resources.mlflow_tracking import MlflowTracking

    try:
        with named_storage_errors(home), DagsterInstance.get() as instance:
            for run_id in mark_dead_runs_failed(instance, home, MlflowTracking()):
                print(f"run {run_id}: its process is gone; marked failed")
    except DagsterStorageError as exc:
        raise SystemExit(str(exc)) from None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The Dagster instance simab runs against: its `dagster.yaml`, and runs left STARTED by a
killed process.

`write_instance_config(home)` writes `$DAGSTER_HOME/dagster.yaml` for `make ui`, `make demo`
and `python -m pipelines.lifecycle`: telemetry off, and run monitoring on.  Run monitoring
is a loop of the Dagster daemon (`dagster dev` starts one) over runs launched through the
instance's run launcher: a run stuck STARTING or CANCELING past its timeout is marked
failed, and a run past `dagster/max_runtime` (a run tag) is stopped.  A run worker that dies
under `dagster dev` is also marked failed by the code server that started it.  Detecting a
dead worker of a STARTED run needs a launcher that can probe workers (Kubernetes, ECS,
Docker); the default launcher cannot, so `max_resume_run_attempts` is 0.

The lifecycle runner executes its jobs in its own process (`execute_in_process`), which no
launcher and no daemon watches: killed, it leaves its run STARTED forever.  So each runner
holds an exclusive lock on a file of its own under `$DAGSTER_HOME/simab_runners/` while it
runs, and tags its runs with that file's name; the kernel drops the lock when the process
dies, however it dies.  `mark_dead_runs_failed` finds unfinished runs whose runner's lock
can be taken — their process is gone — and marks them failed.  The lifecycle runner does
that whenever it starts, and so does `python -m pipelines.instance` (what `make ui` runs).
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MARKER = "# Written by simab (pipelines/instance.py)"
INSTANCE_CONFIG = f"""{MARKER}; delete this line to keep your own edits.
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
"""
RUNNER_TAG = "simab/runner"  # the lock file name (without .lock) of the process executing the run


def write_instance_config(home: str | Path) -> bool:
    """Write `dagster.yaml` into `home` (created) unless someone wrote their own there;
    True when written.  A file is ours when empty or starting with `MARKER`."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if text.strip() and not text.startswith(MARKER):
            return False
        if text == INSTANCE_CONFIG:
            return True
    from ops.atomic import atomic_write_bytes

    atomic_write_bytes(path, INSTANCE_CONFIG.encode("utf-8"))
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


def mark_dead_runs_failed(instance, home: str | Path) -> list[str]:
    """Mark failed every unfinished run tagged by a runner whose process is gone; returns
    their run ids."""
    from dagster import DagsterRunStatus, RunsFilter

    unfinished = [DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
    dead = []
    for record in instance.get_run_records(filters=RunsFilter(statuses=unfinished)):
        run = record.dagster_run
        token = run.tags.get(RUNNER_TAG)
        if not token or _runner_alive(home, token):
            continue
        message = (
            f"Marked failed by simab: the process that executed this run (runner {token}) is gone (killed or crashed) "
            "and the run was left unfinished. `python -m pipelines.lifecycle --resume` re-runs what it did not finish."
        )
        instance.report_engine_event(message, run)
        instance.report_run_failed(run, message)
        dead.append(run.run_id)
    return dead


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
    import os

    args = sys.argv[1:] if argv is None else argv
    given = args[0] if args else os.environ.get("DAGSTER_HOME", "")
    if not given:
        raise SystemExit("usage: python -m pipelines.instance DAGSTER_HOME (or set $DAGSTER_HOME)")
    home = Path(given).expanduser()
    if not write_instance_config(home):
        print(f"{home / 'dagster.yaml'}: your own file, left as it is (simab's settings: pipelines/instance.py)")
    os.environ["DAGSTER_HOME"] = str(home.resolve())
    from dagster import DagsterInstance

    with DagsterInstance.get() as instance:
        for run_id in mark_dead_runs_failed(instance, home):
            print(f"run {run_id}: its process is gone; marked failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

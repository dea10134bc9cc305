"""A run launched from the Dagster UI's GraphQL (the launchpad's launchRun: queued, started by
`dagster dev`'s daemon through the instance's run launcher, in a run worker of its own) against
a `simab run` on the same home, both ways.  Run by `ui_trials.sh` (env.sh sourced)."""

import os
import subprocess
import sys
import time
from pathlib import Path

from dagster import DagsterInstance, DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient
from ui import wait_loaded  # this folder's, beside the script

ROOT = Path(__file__).resolve().parents[2]
SCRATCH = Path(os.environ.get("ONE_HOME", "/tmp/one_home"))
HOME = SCRATCH / "uihome"
PORT = 3150
out = open(str(SCRATCH / "ui_trials.out"), "w")


def say(*a):
    print(*a, file=out, flush=True)


env = {**os.environ, "SIMAB_HOME": str(HOME)}
env.pop("DAGSTER_HOME", None)
subprocess.run(["rm", "-rf", str(HOME)])
HOME.mkdir()
t = time.time()
ui = subprocess.Popen(
    [str(ROOT / ".venv/bin/simab"), "ui", "-p", str(PORT)],
    env=env,
    cwd=ROOT,
    stdout=open(str(SCRATCH / "ui.log"), "w"),
    stderr=subprocess.STDOUT,
)
client = DagsterGraphQLClient("127.0.0.1", port_number=PORT, timeout=120)


def submit(job):
    for _ in range(600):
        try:
            return client.submit_job_execution(job)
        except Exception as exc:  # not up yet, or the code location still loading
            last = exc
            time.sleep(1)
    raise last


def outcome(run_id, started, limit=600):
    """(seconds from submit to the run's end, status, its failure's first line)"""
    with DagsterInstance.from_config(str(HOME / "dagster_home")) as instance:
        while time.time() - started < limit:
            run = instance.get_run_by_id(run_id)
            if run and run.status in (DagsterRunStatus.FAILURE, DagsterRunStatus.SUCCESS, DagsterRunStatus.CANCELED):
                took = time.time() - started
                logs = instance.all_logs(run_id)
                text, starts = "", []
                for e in logs:
                    ev = e.dagster_event
                    if ev is None:
                        continue
                    if ev.event_type_value in ("RUN_START", "PIPELINE_START"):
                        starts.append(e.timestamp)
                    err = getattr(ev.event_specific_data, "error", None) if ev.event_specific_data else None
                    if ev.event_type_value in ("RUN_FAILURE", "PIPELINE_FAILURE") and err is not None:
                        text = err.message.strip().splitlines()[0]
                steps = [e for e in logs if e.dagster_event and e.dagster_event.is_step_start]
                after_start = (max(e.timestamp for e in logs) - starts[0]) if starts else float("nan")
                return took, run.status.value, text, after_start, len(steps)
            time.sleep(0.5)
    return float("nan"), "unfinished", "", float("nan"), 0


try:
    # Warm: the UI up and the code location loaded (a first submit of a job that is refused
    # by nothing would run; so wait with a GraphQL query instead).
    wait_loaded(PORT)
    say(f"UI up, code location loaded after {time.time() - t:.1f} s; {os.getloadavg()}")

    # A: `simab run` first; five UI launches of simab_prepare while it runs ($UI_TRIALS: which of
    # A and B to run, both unless set).
    trials = os.environ.get("UI_TRIALS", "AB")
    t0 = time.time()
    cli = subprocess.Popen(
        ["/usr/bin/time", "-f", "cli: %e s wall, %U+%S s CPU, exit %x", str(ROOT / ".venv/bin/simab"), "run"]
        if "A" in trials
        else ["true"],
        env=env,
        cwd=ROOT,
        stdout=open(str(SCRATCH / "ui_cli_first.out"), "w"),
        stderr=subprocess.STDOUT,
    )
    for k, at in enumerate([6, 8, 10, 25, 45] if "A" in trials else []):
        while time.time() - t0 < at:
            time.sleep(0.2)
        s = time.time()
        run_id = submit("simab_prepare")
        took, status, text, after_start, steps = outcome(run_id, s)
        say(
            f"A{k + 1}: launched {s - t0:.1f} s after `simab run`: {status} {took:.1f} s after submit "
            f"({after_start:.1f} s after its RUN_START), {steps} steps started; {os.getloadavg()}: {text}"
        )
    cli.wait()
    say(f"A: simab run exit {cli.returncode}, {time.time() - t0:.1f} s")

    # B: a UI launch first; `simab run` 8 s after it.
    for k in range(3 if "B" in trials else 0):
        s = time.time()
        run_id = submit("simab_prepare")
        while time.time() - s < 8:
            time.sleep(0.2)
        c = time.time()
        r = subprocess.run(
            ["/usr/bin/time", "-f", "%e s wall, %U+%S s CPU", str(ROOT / ".venv/bin/simab"), "run"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        cli_took = time.time() - c
        took, status, text, after_start, steps = outcome(run_id, s, limit=900)
        lines = [line for line in (r.stdout + r.stderr).splitlines() if line.strip()]
        say(
            f"B{k + 1}: UI run {status} after {took:.1f} s ({steps} steps); `simab run` 8 s after the launch: exit {r.returncode} "
            f"after {cli_took:.1f} s: {lines[0] if lines else ''} | {lines[-1] if lines else ''}; UI run's failure: {text}; {os.getloadavg()}"
        )
finally:
    sys.path.insert(0, str(ROOT))
    from pipelines.cli import _alive, _descendants

    tree = _descendants(ui.pid)
    s = time.time()
    ui.terminate()  # SIGTERM, as a service manager stops it: simab ui stops its tree
    try:
        ui.wait(90)
    except subprocess.TimeoutExpired:
        ui.kill()
    time.sleep(1)
    left = [p for p in tree if _alive(p)]
    say(
        f"simab ui SIGTERM: exit {ui.returncode} after {time.time() - s:.1f} s; {len(tree)} processes under it before, {len(left)} left: {left}"
    )
    for p in left:
        os.kill(p, 9)

"""The lifecycle's wall time and CPU under each executor, as ratios against in-process in the same run.

    .venv/bin/python -m bench.executors [--world tiny|demo] [--executors in_process,multiprocess,celery] [--kill]

Each executor runs `python -m pipelines.lifecycle` in a fresh home of its own under
bench/out/executors/ (`SIMAB_EXECUTOR`, `SIMAB_CONCURRENCY=2`), one after another on the same
world: `tiny` (default) the tests' planted ML-1M folder of 40 users, arms random and pop, 12
agents, one epoch, the trust protocols that ask the brain off; `demo` the demo's own settings
(the synthetic world, every default arm).  Wall: seconds from start to exit; CPU: user + system
seconds of the lifecycle and every process under it.  The verdict each stored is compared with
in-process's, every number to 12 significant digits (it must be the same for the same seed; a
sum in another process may differ in its last bits, 1e-17).  Celery: Debian's `redis-server` on a free
127.0.0.1 port as the broker and two workers (`--pool=solo`, one step each), started and ready
before the clock starts; their CPU, imports included, is counted.  Beside each executor's
figures: how many pairs of two arms' steps ran at once (their step events in the instance).

`--kill`: then, for each executor, a second lifecycle in a fresh home, killed (SIGKILL, the
runner alone, as a crash or the OOM killer would) once the first arm has stored its trained model
(`assets/recommender_arm/<arm>`) while another arm's steps are still to come or running, and then
`--resume`d: the steps the resume re-executed (its "resuming:" line), its wall time, and whether
its verdict is the uninterrupted run's.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import OUT, ROOT

TINY = {
    "SIMAB_SOURCE": "local",
    "SIMAB_ARMS": "random,pop",
    "SIMAB_AGENTS": "12",
    "SIMAB_TRUST_PROTOCOLS": "off",
    "SIMAB_MAX_EPOCHS": "1",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", choices=["tiny", "demo"], default="tiny")
    parser.add_argument("--executors", default="in_process,multiprocess")
    parser.add_argument("--kill", action="store_true", help="also kill each executor's run mid-arms and resume it")
    args = parser.parse_args(argv)
    executors = [e.strip() for e in args.executors.split(",") if e.strip()]
    if executors[0] != "in_process":
        executors = ["in_process", *[e for e in executors if e != "in_process"]]
    root = OUT / "executors"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    world = dict(TINY) if args.world == "tiny" else {}
    if args.world == "tiny":
        from fakes.planted_data import planted_movielens, write_ml1m

        users, movies, ratings = planted_movielens(seed=5, n_users=40, n_movies=50, ratings_per_user=15)
        write_ml1m(root / "ml-1m", users, movies, ratings)
        world["SIMAB_LOCAL_PATH"] = str(root / "ml-1m")
    print(f"world {args.world}; {os.cpu_count()} cores; load average before {os.getloadavg()[0]:.2f}", flush=True)
    figures = {}
    for executor in executors:
        home = root / executor
        env = _environ(world, home, executor)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        helpers = _celery(env, home) if executor == "celery" else []
        started = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "pipelines.lifecycle"], cwd=ROOT, env=env, capture_output=True, text=True
            )
            wall = time.perf_counter() - started
        finally:
            for process in reversed(helpers):
                process.terminate()
                process.wait(30)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
            raise SystemExit(f"{executor}: the lifecycle failed (exit {done.returncode})")
        verdict, overlaps = _stored(home / "dagster_home")
        figures[executor] = (wall, cpu, verdict)
        print(
            f"{executor:14s} wall {wall:7.1f} s   CPU {cpu:7.1f} s   {overlaps} pairs of two arms' steps at once",
            flush=True,
        )
    base_wall, base_cpu, base_verdict = figures["in_process"]
    print()
    print(f"{'executor':14s} {'wall':>8s} {'CPU':>8s}  verdict")
    for executor, (wall, cpu, verdict) in figures.items():
        same = "same" if rounded(verdict) == rounded(base_verdict) else "DIFFERS"
        print(f"{executor:14s} {wall / base_wall:7.2f}x {cpu / base_cpu:7.2f}x  {same} as in_process")
    print(f"(in_process: {base_wall:.0f} s wall, {base_cpu:.0f} s CPU; load average after {os.getloadavg()[0]:.2f})")
    if args.kill:
        print()
        for executor in executors:
            env = _environ(world, root / f"{executor}-killed", executor)
            helpers = _celery(env, root / f"{executor}-killed") if executor == "celery" else []
            try:
                killed_at, resumed, took, verdict = _kill_and_resume(env, root / f"{executor}-killed")
            finally:
                for process in reversed(helpers):
                    process.terminate()
                    process.wait(30)
            same = "same" if rounded(verdict) == rounded(figures[executor][2]) else "DIFFERS"
            print(f"{executor:14s} killed {killed_at:6.1f} s in; resume {took:6.1f} s, verdict {same} as uninterrupted")
            print(f"{'':14s} {resumed}", flush=True)
    return 0


def _environ(world: dict, home: Path, executor: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIMAB_", "DAGSTER_", "MLFLOW_"))}
    env.update(world, SIMAB_HOME=str(home), SIMAB_EXECUTOR=executor, SIMAB_CONCURRENCY="2")
    return env


def _kill_and_resume(env: dict, home: Path) -> tuple[float, str, float, dict]:
    """The lifecycle started in `home`, SIGKILLed once an arm's trained model is stored, then
    resumed: (seconds to the kill, the resume's "resuming" line, the resume's seconds, verdict)."""
    import signal

    home.mkdir(parents=True, exist_ok=True)
    log = open(home / "killed.log", "wb")  # noqa: SIM115 - closed below
    started = time.perf_counter()
    runner = subprocess.Popen([sys.executable, "-m", "pipelines.lifecycle"], cwd=ROOT, env=env, stdout=log, stderr=log)
    arms = home / "assets" / "recommender_arm"
    while not (arms.is_dir() and any(not p.name.startswith(".") for p in arms.iterdir())):
        if runner.poll() is not None:
            raise SystemExit(f"the lifecycle in {home} ended (exit {runner.returncode}) before an arm was stored")
        time.sleep(0.2)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    killed_at = time.perf_counter() - started
    log.close()
    time.sleep(2)  # the step processes follow their runner (PR_SET_PDEATHSIG, Dagster's own watch)
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.lifecycle", "--resume"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    took = time.perf_counter() - began
    (home / "resume.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"the resume in {home} failed (exit {done.returncode})")
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if "resum" in line]
    return killed_at, " | ".join(lines[:3]), took, _stored(home / "dagster_home")[0]


def _celery(env: dict, home: Path) -> list[subprocess.Popen]:
    """redis-server and two Celery workers for `env` (its broker set), once the workers answer."""
    from celery import Celery

    from fakes.redis_broker import free_port, redis_command

    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    env["SIMAB_CELERY_BROKER"] = broker
    home.mkdir(parents=True, exist_ok=True)
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("celery: redis-server is not installed (apt-get install redis-server)")
    processes = [subprocess.Popen(redis_command(server, port, home), stdout=subprocess.DEVNULL)]
    # deploy/dagster_celery_config.py gives the app its broker from $SIMAB_CELERY_BROKER.
    worker_env = {**env, "PYTHONPATH": os.pathsep.join([str(ROOT / "deploy"), str(ROOT)])}
    for name in ("w1", "w2"):
        worker = [sys.executable, "-m", "celery", "-A", "dagster_celery.app", "worker", "--pool=solo"]
        worker += ["--concurrency=1", "--prefetch-multiplier=1", "-n", f"{name}@%h", "--without-gossip"]
        worker += ["--without-mingle", "--without-heartbeat"]
        log = open(home / f"{name}.log", "wb")  # noqa: SIM115 - the worker's, closed with the process
        processes.append(subprocess.Popen(worker, cwd=ROOT, env=worker_env, stdout=log, stderr=subprocess.STDOUT))
    app = Celery(broker=broker, backend=broker)
    stop = time.monotonic() + 180
    while time.monotonic() < stop:
        try:
            if len(app.control.ping(timeout=1.0) or []) >= 2:
                return processes
        except Exception:  # the broker not up yet
            pass
        time.sleep(0.5)
    for process in processes:
        process.kill()
    raise SystemExit("celery: two workers did not answer within 180 s")


def rounded(value):
    """`value` with every float to 12 significant digits, in dicts and lists: verdicts computed in
    other processes compared (a sum over other BLAS threads may differ in its last bits).
    tests/test_executors.py compares with it too."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def step_spans(instance, runs) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    """(the run's partition, step) -> (start, end) of each step of `runs`, from the instance's
    STEP_START and STEP_SUCCESS or STEP_FAILURE events (None where there is none)."""
    from dagster import DagsterEventType

    spans: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    ends = (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE)
    for run in runs:
        partition = run.tags.get("dagster/partition", "")
        for kind in (DagsterEventType.STEP_START, *ends):
            for entry in instance.all_logs(run.run_id, of_type=kind):
                start, end = spans.get((partition, entry.step_key), (None, None))
                if kind == DagsterEventType.STEP_START:
                    start = entry.timestamp
                else:
                    end = entry.timestamp
                spans[(partition, entry.step_key)] = (start, end)
    return spans


def overlapping_pairs(spans: dict) -> list[tuple]:
    """The pairs of steps of two partitions (arms) whose spans overlap in time."""
    return [
        (a, b)
        for a, (a_start, a_end) in spans.items()
        for b, (b_start, b_end) in spans.items()
        if a[0] < b[0] and a_start < b_end and b_start < a_end
    ]


def _stored(dagster_home: Path) -> tuple[dict, int]:
    """The summary the read-out stored (`simab_report`) and how many pairs of two arms' steps
    ran at once (`simab_arm` runs), read in a process of its own."""
    import json

    code = (
        "import json, sys\n"
        "from dagster import AssetKey, DagsterInstance, RunsFilter\n"
        "from bench.executors import overlapping_pairs, step_spans\n"
        "from pipelines.versions import latest_materialization\n"
        "with DagsterInstance.from_config(sys.argv[1]) as i:\n"
        "    m = latest_materialization(i, AssetKey('simab_report'), None)\n"
        "    arms = i.get_runs(filters=RunsFilter(job_name='simab_arm'))\n"
        "    pairs = len(overlapping_pairs(step_spans(i, arms)))\n"
        "    print(json.dumps([m.event_log_entry.asset_materialization.metadata['summary'].value, pairs], sort_keys=True))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(dagster_home)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    verdict, pairs = json.loads(out.stdout.strip().splitlines()[-1])
    return verdict, pairs


if __name__ == "__main__":
    raise SystemExit(main())

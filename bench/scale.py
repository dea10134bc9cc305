"""The lifecycle on logs of growing size: each step's time, growth exponent and peak memory.

What a log of 10 M users x 1 M items would take follows from the measured exponents.

A seeded log in the `files` source shape (`fakes.scale_log`: lognormal user activity, Zipf
item popularity, ratings from latent tastes, two years of timestamps) is written for each
size, and the whole lifecycle runs on it in a home of its own (`python -m pipelines.lifecycle`,
or with `--celery` on the Celery executor with user shards: redis-server on a free 127.0.0.1
port, `--workers` Celery workers, the jobs launched as `dagster job execute`, the shards of
every arm at once).  From the Dagster event log: each step's seconds (start to success, one
row per asset step and partition); from the process tree, polled every half second: the peak
resident memory of all its processes together.  Each step's growth exponent k is the slope
of log(seconds) over log(users) across the sizes (time ∝ users^k; items and interactions
grow with the users here, so k says what a bigger log costs, not which of the three drives
it).  The estimate for 10 M users x 1 M items extends each step from the largest size with
its exponent: the sizes grow items as users^0.86, which reaches 1 M items at 10 M users.

    nice -n 5 .venv/bin/python -m bench.scale --sizes 5000x1250x250000 10000x2500x500000 20000x5000x1000000
    nice -n 5 .venv/bin/python -m bench.scale --settings defaults,tuned --sizes 20000x5000x1000000 100000x20000x5000000
    nice -n 5 .venv/bin/python -m bench.scale --sizes 20000x5000x1000000 50000x10000x2500000 100000x20000x5000000
    nice -n 5 .venv/bin/python -m bench.scale --celery --shards 2 --sizes 5000x1250x250000 10000x2500x500000
    SIMAB_SHARED_DATA=../shared/data nice -n 5 .venv/bin/python -m bench.scale --checks --threads 1 \
        --sizes 20000x5000x1000000 100000x20000x5000000
    .venv/bin/python -m bench.scale --batch-sizes 1024,4096,16384 --sizes 100000x20000x5000000

`--settings` says which settings each size runs with, one lifecycle each, in one run: `tuned`
(the default) sets `--eval-users` and `--threads`; `defaults` sets only what a team's first
run must say (the source and its folder, the arms, the agents, the epochs), every other
setting at its default.  With both, a last table sets them beside each other: per step its
seconds under each, and its growth with the log as ratios, the step's seconds at each size
over its seconds at the smallest, next to the log's own growth (interactions over the
smallest's).

`--checks` measures what the step times do not separate: an FM epoch's seconds per million
train rows on each log, a training batch with the lazy and the dense embedding updates on
the log's tables, the same 2,300 users ranked on each log, and FM and DeepFM trained with
both updates on ML-1M users 1-1999 (validation and test AUC).  `--batch-sizes` times FM's
training batch at several sizes on one thread, as rows a second and as ratios to the first.

Everything it writes goes under --out (default bench/out/scale): the logs (reused when
present), one home per size and executor, and `scale-<executor>.json` with the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fakes.redis_broker import free_port, redis_command

ROOT = Path(__file__).resolve().parents[1]
TARGET_USERS, TARGET_ITEMS = 10_000_000, 1_000_000
RESOLUTION_S = 5.0  # steps shorter than this at the largest size are not extended


@dataclass
class Run:
    """One lifecycle on one log: its size, wall seconds, peak memory and step seconds."""

    users: int
    items: int
    interactions: int
    seconds: float
    peak_mb: float
    steps: dict[str, float] = field(default_factory=dict)
    returncode: int = 0
    cpu_seconds: float = 0.0  # user + system time of every process of the run
    peak_step: str = ""  # the step (or steps) running when the memory peaked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["5000x1250x250000", "10000x2500x500000", "20000x5000x1000000"])
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed")
    parser.add_argument("--arms", default="random,pop,fm")
    parser.add_argument("--agents", type=int, default=300, help="SIMAB_AGENTS")
    parser.add_argument("--max-epochs", type=int, default=3, help="SIMAB_MAX_EPOCHS")
    parser.add_argument(
        "--eval-users", type=int, default=2000, help="SIMAB_EVAL_USERS, the same at every size (0: every test user)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch, BLAS and polars threads per process (0: their defaults); 1 on a machine shared with other work, "
        "where threads that wait for each other run several times slower",
    )
    parser.add_argument(
        "--settings",
        default="tuned",
        help="comma-separated, each a lifecycle per size: tuned (--eval-users, --threads set) | defaults (a team's "
        "first run: only source, arms, agents and epochs set)",
    )
    parser.add_argument("--celery", action="store_true", help="the Celery executor with user shards")
    parser.add_argument("--shards", type=int, default=2, help="SIMAB_SHARDS with --celery")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers with --celery")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "scale")
    parser.add_argument(
        "--checks",
        action="store_true",
        help="instead of the lifecycle: on each size's log, an FM epoch (seconds per million train rows) and a "
        "batch with lazy and dense embedding updates, the same 2,300 users ranked by random, pop and FM; then FM "
        "and DeepFM trained with both updates on ML-1M users 1-1999 ($SIMAB_SHARED_DATA), validation and test AUC",
    )
    parser.add_argument(
        "--batch-sizes",
        default="",
        help="instead of the lifecycle: on each size's log, FM's training batch at these sizes (e.g. 1024,4096,16384) "
        "on one thread, rows a second and as a ratio to the first",
    )
    parser.add_argument(
        "--reprint", action="store_true", help="print the figures of the last run from --out, run nothing"
    )
    args = parser.parse_args()

    executor = "celery" if args.celery else "multiprocess"
    labels = [label.strip() for label in args.settings.split(",") if label.strip()]
    unknown = sorted(set(labels) - set(SETTINGS))
    if unknown or not labels:
        parser.error(f"--settings: {','.join(unknown) or 'none given'}; choose among {', '.join(SETTINGS)}")
    if args.reprint:
        saved = json.loads((args.out / f"scale-{executor}.json").read_text())
        saved = {"tuned": saved} if isinstance(saved, list) else saved  # before --settings: tuned runs only
        reported = {label: [Run(**run) for run in runs] for label, runs in saved.items()}
        for label, runs in reported.items():
            report(runs, executor, args, label)
        compare(reported)
        return
    if args.checks:
        checks(args)
        return
    if args.batch_sizes:
        batch_sizes(args, [int(b) for b in args.batch_sizes.split(",") if b.strip()])
        return
    reported: dict[str, list[Run]] = {label: [] for label in labels}
    for size in args.sizes:
        users, items, interactions = (int(x) for x in size.lower().split("x"))
        folder = scale_log(users, items, interactions, args)
        for label in labels:
            suffix = "" if label == "tuned" else f"-{label}"
            home = args.out / f"home-{users}x{items}x{interactions}-{executor}{suffix}"
            shutil.rmtree(home, ignore_errors=True)
            env = settings_env(label, home, folder, args)
            cpu = _children_cpu()
            run = (celery_lifecycle if args.celery else lifecycle)(env, args)
            run.users, run.items, run.cpu_seconds = users, items, _children_cpu() - cpu
            run.interactions = _interactions(folder)
            reported[label].append(run)
            print(
                f"{label}: {users:,} users x {items:,} items x {run.interactions:,} interactions: {run.seconds:.0f} s "
                f"({run.cpu_seconds:.0f} CPU s), peak {run.peak_mb:,.0f} MB (in {run.peak_step or '?'}), "
                f"exit {run.returncode}",
                flush=True,
            )
    for label, runs in reported.items():
        report(runs, executor, args, label)
    compare(reported)
    args.out.mkdir(parents=True, exist_ok=True)
    saved = {label: [asdict(r) for r in runs] for label, runs in reported.items()}
    (args.out / f"scale-{executor}.json").write_text(json.dumps(saved, indent=1))


# What each label of --settings sets beyond the log and the run's shape.
SETTINGS = ("tuned", "defaults")


def settings_env(label: str, home: Path, folder: Path, args) -> dict[str, str]:
    """The environment of one lifecycle: what every run says (its home, the log, the arms,
    the agents, the epochs), and with `tuned` the evaluated test users and the threads."""
    env = {
        "SIMAB_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "SIMAB_SOURCE": "files",
        "SIMAB_FILES_PATH": str(folder),
        "SIMAB_ARMS": args.arms,
        "SIMAB_AGENTS": str(args.agents),
        "SIMAB_MAX_EPOCHS": str(args.max_epochs),
    }
    if label == "defaults":
        return env
    env["SIMAB_EVAL_USERS"] = str(args.eval_users)
    if args.threads:
        env |= {name: str(args.threads) for name in THREAD_VARIABLES}
    return env


def scale_log(users: int, items: int, interactions: int, args) -> Path:
    """The folder of the seeded log of this size, written unless it is there."""
    from fakes.scale_log import ScaleLogConfig, generate_scale_log

    folder = args.out / f"log-{users}x{items}x{interactions}-seed{args.seed}"
    if not (folder / "interactions.parquet").is_file():
        started = time.perf_counter()
        log = generate_scale_log(ScaleLogConfig(users, items, interactions, seed=args.seed), folder)
        print(f"log {folder.name}: {log.interactions:,} interactions in {time.perf_counter() - started:.1f} s")
    return folder


def log_tables(size: str, args):
    """The seeded log of `size` ("USERSxITEMSxINTERACTIONS", written unless there) read as the
    lifecycle reads it: (users, items, its tables, the chronological split, the catalogue)."""
    from ops.data.catalogue import build_catalogue
    from ops.data.domain import load_files
    from ops.data.split import chronological_split

    users, items, interactions = (int(x) for x in size.lower().split("x"))
    tables = load_files(scale_log(users, items, interactions, args))
    return users, items, tables, chronological_split(tables.ratings), build_catalogue(tables.movies, tables.metadata)


def checks(args) -> None:
    """The figures the lifecycle's step times do not separate (`--checks`)."""
    import numpy as np
    import polars as pl
    import torch

    from ops.arms.base import FitData
    from ops.arms.ranking import rank_once
    from ops.arms.recommenders import arm_config, trained_arm
    from ops.data.catalogue import build_catalogue
    from ops.data.split import chronological_split

    torch.set_num_threads(args.threads or torch.get_num_threads())
    print(
        "size | FM epoch: s, s per M train rows | ms a batch: lazy, dense | CPU s to rank 2,300 users: random, pop, fm"
    )
    for size in args.sizes:
        users, items, tables, split, catalogue = log_tables(size, args)
        valid = split.valid.sample(min(50_000, split.valid.height), seed=0)
        fm = trained_arm(arm_config("fm", max_epochs=1, device="cpu"))
        fm.fit(FitData(split.train, valid, tables.users, catalogue))
        epoch = fm.history[0]["epoch_seconds"]
        batch = {u: _batch_ms(fm, split.train, tables.users, catalogue, u) for u in ("lazy", "dense")}
        ranked = []
        for arm in (trained_arm(arm_config("random")), trained_arm(arm_config("pop")), fm):
            if arm is not fm:
                arm.fit(FitData(split.train, valid, tables.users, catalogue))
            started = time.process_time()
            rank_once(
                arm, split.train, split.test, catalogue.get_column("item_id").to_numpy(), users=np.arange(1, 2301)
            )
            ranked.append(time.process_time() - started)
        print(
            f"{users:,} x {items:,} x {tables.ratings.height:,} | {epoch:.1f}, {epoch / split.train.height * 1e6:.1f} | "
            f"{batch['lazy']:.1f}, {batch['dense']:.1f} | " + ", ".join(f"{r:.2f}" for r in ranked),
            flush=True,
        )
    from fakes.shared_data import SHARED_DATA
    from ops.arms.metrics import auc
    from ops.data.movielens import load_local

    if not (SHARED_DATA / "ml-1m").is_dir():
        print(f"no {SHARED_DATA / 'ml-1m'}: the AUC slice is left out")
        return
    tables = load_local(SHARED_DATA / "ml-1m")
    split = chronological_split(tables.ratings.filter(pl.col("user_id") < 2000))
    catalogue = build_catalogue(tables.movies)
    labels = (split.test["rating"].to_numpy() >= 4).astype(float)
    for name, epochs in (("fm", 20), ("deepfm", 6)):
        for updates in ("dense", "lazy"):
            started = time.process_time()
            config = arm_config(name, max_epochs=epochs, embedding_updates=updates, device="cpu")
            arm = trained_arm(config)
            arm.fit(FitData(split.train, split.valid, tables.users, catalogue))
            scores = arm.score(split.test["user_id"].to_numpy(), split.test["item_id"].to_numpy())
            print(
                f"ML-1M users 1-1999, {name} {updates}: best epoch {arm.best_epoch} of {len(arm.history)}, "
                f"validation AUC {max(h['val_auc'] for h in arm.history):.4f}, test AUC {auc(labels, scores):.4f}, "
                f"{(time.process_time() - started) / len(arm.history):.1f} CPU s an epoch",
                flush=True,
            )


def _batch_ms(trained, train, users, catalogue, updates: str, batches: int = 100, batch_size: int = 0) -> float:
    """CPU milliseconds of one training batch of FM on this log's tables, after a warm-up;
    batches of `batch_size` rows (0: the arm's own)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from ops.arms.deepctr import _optimiser, build_model

    config = trained.config.model_copy(
        update={"embedding_updates": updates, **({"batch_size": batch_size} if batch_size else {})}
    )
    model = build_model(type(trained), config, trained.encoder, "cpu")
    optimiser = _optimiser(model, config)
    rows = train.head((batches + 10) * config.batch_size)
    x = torch.from_numpy(trained.encoder.transform(rows["user_id"].to_numpy(), rows["item_id"].to_numpy()))
    y = torch.from_numpy((rows["rating"].to_numpy() >= 4).astype(np.float32))
    spent = 0.0
    for b in range(batches + 10):
        xb, yb = (
            x[b * config.batch_size : (b + 1) * config.batch_size],
            y[b * config.batch_size : (b + 1) * config.batch_size],
        )
        started = time.process_time()
        loss = F.binary_cross_entropy(model(xb).squeeze(-1), yb, reduction="sum")
        objective = loss + model.get_regularization_loss() + model.aux_loss + optimiser.regularization()
        optimiser.zero_grad()
        objective.backward()
        optimiser.step()
        spent += (time.process_time() - started) if b >= 10 else 0.0
    optimiser.close()
    return spent / batches * 1000


def batch_sizes(args, sizes: list[int], rows: int = 400_000) -> None:
    """FM's training batch at each of `sizes` on one thread (`--batch-sizes`): rows a second
    over `rows` of each log's train rows (a seeded sample), after a warm-up, and each as a ratio
    to the first size's, all measured in this run.  The encoder is the one a short fit on the
    log's first 200,000 train rows gives: the tables have the whole log's users and items."""
    import torch

    from ops.arms.base import FitData
    from ops.arms.recommenders import arm_config, trained_arm

    torch.set_num_threads(1)
    for size in args.sizes:
        users, items, tables, split, catalogue = log_tables(size, args)
        fm = trained_arm(arm_config("fm", max_epochs=1, device="cpu"))
        fm.fit(FitData(split.train.head(200_000), split.valid.head(20_000), tables.users, catalogue))
        sample = split.train.sample(min(rows, split.train.height), seed=args.seed)
        rates = []
        for batch in sizes:
            batches = max(3, sample.height // batch - 10)
            ms = _batch_ms(fm, sample, tables.users, catalogue, "lazy", batches=batches, batch_size=batch)
            rates.append(batch / ms * 1000)
        print(
            f"{users:,} x {items:,} x {tables.ratings.height:,}: FM training rows a second on one thread, "
            + ", ".join(f"batch {b:,} {r:,.0f} ({r / rates[0]:.2f}x)" for b, r in zip(sizes, rates)),
            flush=True,
        )


def lifecycle(env: dict[str, str], args) -> Run:
    """The whole lifecycle in its own process (the multiprocess executor)."""
    command = [sys.executable, "-m", "pipelines.lifecycle", "--arms", args.arms]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=_environment(env))
    watched: dict[str, float] = {}
    peak = _watch_all([process], [], watched)
    run = Run(0, 0, 0, time.perf_counter() - started, peak, step_seconds(env), process.returncode)
    run.peak_step = steps_at(env, watched.get("at", 0.0))
    return run


def celery_lifecycle(env: dict[str, str], args) -> Run:
    """The lifecycle's jobs on Celery workers (docs/deployment.md): prepare, every arm at
    once, every arm's shards at once, every arm's combination, the read-out."""
    server = shutil.which("redis-server")
    if server is None:
        sys.exit("--celery needs redis-server (Debian: apt-get install redis-server)")
    home = Path(env["SIMAB_HOME"])
    home.mkdir(parents=True)
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    env = {**env, "SIMAB_EXECUTOR": "celery", "SIMAB_SHARDS": str(args.shards), "SIMAB_CELERY_BROKER": broker}
    full = {**_environment(env), "PYTHONPATH": os.pathsep.join([str(ROOT / "deploy"), str(ROOT)])}
    full.pop("MLFLOW_TRACKING_URI", None)
    processes = [subprocess.Popen(redis_command(server, port, home), stdout=subprocess.DEVNULL)]
    worker = [sys.executable, "-m", "celery", "-A", "dagster_celery.app", "worker", "--pool=solo"]
    worker += ["--concurrency=1", "--prefetch-multiplier=1", "--without-gossip", "--without-mingle"]
    started = time.perf_counter()
    peak = 0.0
    try:
        for k in range(args.workers):
            log = open(home / f"worker{k}.log", "wb")  # noqa: SIM115 - closed with the process
            processes.append(
                subprocess.Popen([*worker, "-n", f"w{k}@%h"], cwd=ROOT, env=full, stdout=log, stderr=subprocess.STDOUT)
            )
        from pipelines.instance import write_instance_config

        write_instance_config(env["DAGSTER_HOME"])
        arms = args.arms.split(",")
        stages = [
            [("simab_prepare", None)],
            [("simab_arm", arm) for arm in arms],
            [("simab_simulate", f"{arm}|{k}") for arm in arms for k in range(args.shards)],
            [("simab_combine", arm) for arm in arms],
            [("simab_readout", None)],
        ]
        returncode = 0
        configs = _run_configs({job for stage in stages for job, _ in stage}, env, home)
        for stage in stages:
            launched = [_launch(job, partition, full, configs[job]) for job, partition in stage]
            peak = max(peak, _watch_all(launched, processes))
            failed = [p for p in launched if p.returncode]
            if failed:
                returncode = failed[0].returncode
                break
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in reversed(processes):
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
    return Run(0, 0, 0, time.perf_counter() - started, peak, step_seconds(env), returncode)


def _run_configs(jobs: set[str], env: dict[str, str], home: Path) -> dict[str, Path]:
    """Each job's run config from the settings, as the lifecycle runner gives it, written
    where `dagster job execute -c` reads it (the command line starts from no run config)."""
    from pipelines.jobs import run_config_for
    from pipelines.run_config import settings_from_env

    settings = settings_from_env({**os.environ, **env})
    paths = {}
    for job in jobs:
        paths[job] = home / f"run_config_{job}.json"
        paths[job].write_text(json.dumps(run_config_for(job, settings) or {}))
    return paths


def _launch(job: str, partition: str | None, env: dict[str, str], config: Path) -> subprocess.Popen:
    """`dagster job execute` of `job`, for `partition` (`arm` or `arm|shard`, whose dimensions
    Dagster reads from their own tags)."""
    tags: dict[str, str] = {"dagster/partition": partition} if partition else {}
    if partition and "|" in partition:
        arm, shard = partition.split("|")
        tags |= {"dagster/partition/arm": arm, "dagster/partition/shard": shard}
    tags = ["--tags", json.dumps(tags)] if tags else []
    command = [sys.executable, "-m", "dagster", "job", "execute", "-m", "pipelines.definitions", "-a", "defs"]
    return subprocess.Popen([*command, "-j", job, "-c", str(config), *tags], cwd=ROOT, env=env)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "POLARS_MAX_THREADS")


def _environment(env: dict[str, str]) -> dict[str, str]:
    """This process's environment without its `SIMAB_*` variables (the run says its own),
    nor the thread counts unless the run sets them: a `defaults` run has only what `env` says."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("SIMAB_") and k not in THREAD_VARIABLES}
    return {**kept, **env}


def _watch_all(waited: list[subprocess.Popen], also: list[subprocess.Popen], when: dict | None = None) -> float:
    """Wait for every process of `waited`; the peak resident memory (MB) of the trees of
    `waited` and `also` together, polled every half second (its time in `when["at"]`)."""
    import psutil

    peak = 0.0
    while any(p.poll() is None for p in waited):
        total = 0
        for root in [*waited, *also]:
            try:
                tree = psutil.Process(root.pid)
                for proc in [tree, *tree.children(recursive=True)]:
                    total += proc.memory_info().rss
            except psutil.Error:
                continue
        if total / 2**20 > peak and when is not None:
            when["at"] = time.time()
        peak = max(peak, total / 2**20)
        time.sleep(0.5)
    return peak


def step_seconds(env: dict[str, str]) -> dict[str, float]:
    """Seconds from start to success of every asset step of the home's runs, by
    `<step>` or `<step>[<partition>]`."""
    from dagster import DagsterEventType, DagsterInstance

    out: dict[str, float] = {}
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        for record in instance.get_run_records():
            run = record.dagster_run
            partition = run.tags.get("dagster/partition")
            began: dict[str, float] = {}
            for entry in instance.all_logs(run.run_id):
                event = entry.dagster_event
                if event is None or entry.step_key is None:
                    continue
                if event.event_type == DagsterEventType.STEP_START:
                    began[entry.step_key] = entry.timestamp
                elif event.event_type == DagsterEventType.STEP_SUCCESS and entry.step_key in began:
                    name = entry.step_key + (f"[{partition}]" if partition else "")
                    out[name] = out.get(name, 0.0) + entry.timestamp - began[entry.step_key]
    return out


def steps_at(env: dict[str, str], moment: float) -> str:
    """The asset steps of the home's runs that had started and not yet succeeded at `moment`
    (seconds since the epoch), comma-separated."""
    from dagster import DagsterEventType, DagsterInstance

    running = []
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        for record in instance.get_run_records():
            partition = record.dagster_run.tags.get("dagster/partition")
            began: dict[str, float] = {}
            for entry in instance.all_logs(record.dagster_run.run_id):
                event = entry.dagster_event
                if event is None or entry.step_key is None:
                    continue
                if event.event_type == DagsterEventType.STEP_START:
                    began[entry.step_key] = entry.timestamp
                elif event.is_step_success or event.is_step_failure:
                    start = began.pop(entry.step_key, None)
                    if start is not None and start <= moment <= entry.timestamp:
                        running.append(entry.step_key + (f"[{partition}]" if partition else ""))
    return ", ".join(running)


def exponent(users: list[int], seconds: list[float]) -> float | None:
    """The least-squares slope of log(seconds) on log(users); None with fewer than two sizes."""
    pairs = [(math.log(u), math.log(max(s, 1e-3))) for u, s in zip(users, seconds) if s is not None]
    if len(pairs) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx if sxx else None


def report(runs: list[Run], executor: str, args, label: str = "tuned") -> None:
    """Per step its seconds at each size, its exponent k and the 10 M x 1 M estimate."""
    users = [r.users for r in runs]
    steps = sorted({s for r in runs for s in r.steps})
    header = ["step", *(f"{r.users // 1000}k users" for r in runs), "k", "10M x 1M (est.)"]
    rows = []
    estimate_total = 0.0
    for step in steps:
        seconds = [r.steps.get(step) for r in runs]
        k = exponent(users, seconds) if all(s is not None for s in seconds) else None
        # A step of a few seconds at the largest size: its times are start-up and the machine's
        # other work, its slope noise; shown in brackets, kept out of the estimate.
        small = seconds[-1] is None or seconds[-1] < RESOLUTION_S
        estimate = seconds[-1] * (TARGET_USERS / users[-1]) ** k if k is not None and not small else None
        estimate_total += estimate or 0.0
        rows.append(
            [
                step,
                *("–" if s is None else f"{s:.1f}" for s in seconds),
                "–" if k is None else (f"({k:.2f})" if small else f"{k:.2f}"),
                "–" if estimate is None else _duration(estimate),
            ]
        )
    wall_k = exponent(users, [r.seconds for r in runs])
    rows.append(["whole run (wall)", *(f"{r.seconds:.0f}" for r in runs), f"{wall_k:.2f}" if wall_k else "–", ""])
    cpu_k = exponent(users, [r.cpu_seconds for r in runs])
    rows.append(["whole run (CPU)", *(f"{r.cpu_seconds:.0f}" for r in runs), f"{cpu_k:.2f}" if cpu_k else "–", ""])
    rows.append(["peak memory, MB", *(f"{r.peak_mb:,.0f}" for r in runs), "", ""])
    rows.append(
        [
            f"sum of the estimates (steps of {RESOLUTION_S:g} s or more)",
            *([""] * len(runs)),
            "",
            _duration(estimate_total),
        ]
    )
    if label == "defaults":
        tuned = "every other setting at its default"
    else:
        threads = f", {args.threads} thread(s) a process" if args.threads else ""
        tuned = f"{args.eval_users or 'every'} evaluated test users{threads}"
    print(
        f"\n{label}: executor {executor}, arms {args.arms}, {args.agents} agents, {args.max_epochs} epochs, "
        f"seed {args.seed}, {tuned}"
    )
    _print_table(header, rows)


def compare(reported: dict[str, list[Run]]) -> None:
    """With runs under two settings or more: per step its seconds under each at each size,
    and its growth with the log, seconds at each size over seconds at the smallest, beside
    the log's (interactions over the smallest's); the whole run's wall and CPU seconds and
    peak memory the same way."""
    if len(reported) < 2:
        return
    labels = list(reported)
    sizes = [(r.users, r.items, r.interactions) for r in reported[labels[0]]]
    if any([(r.users, r.items, r.interactions) for r in runs] != sizes for runs in reported.values()):
        print("\nthe settings ran on different logs: no comparison")
        return
    header = ["step"]
    for users, _, _ in sizes:
        header += [f"{label} {users // 1000}k" for label in labels]
    header += [f"{label} x" for label in labels] if len(sizes) > 1 else []
    log_growth = [n / sizes[0][2] for _, _, n in sizes]
    steps = sorted({s for runs in reported.values() for r in runs for s in r.steps})
    totals = {
        "whole run (wall)": lambda r: r.seconds,
        "whole run (CPU)": lambda r: r.cpu_seconds,
        "peak memory, MB": lambda r: r.peak_mb,
    }
    rows = []
    for name in [*steps, *totals]:
        read = totals.get(name, lambda r, name=name: r.steps.get(name))
        seconds = {label: [read(r) for r in runs] for label, runs in reported.items()}
        row = [name]
        for i in range(len(sizes)):
            row += ["–" if seconds[label][i] is None else f"{seconds[label][i]:,.1f}" for label in labels]
        if len(sizes) > 1:
            row += [_growth(seconds[label]) for label in labels]
        rows.append(row)
    if len(sizes) > 1:
        rows.append(
            ["the log (interactions)", *[""] * (len(sizes) * len(labels)), *[_ratios(log_growth)] * len(labels)]
        )
    print(f"\n{' beside '.join(labels)}: seconds at each size, and growth (x: seconds over the smallest size's)")
    _print_table(header, rows)


def _growth(seconds: list[float | None]) -> str:
    """Each size's seconds over the smallest's, "1.0 : 2.3 : 4.9"; "–" where a size lacks the step."""
    if any(s is None for s in seconds) or not seconds[0]:
        return "–"
    return _ratios([s / seconds[0] for s in seconds])


def _ratios(values: list[float]) -> str:
    return " : ".join(f"{v:.1f}" for v in values)


def _print_table(header: list[str], rows: list[list]) -> None:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))))


def _children_cpu() -> float:
    """User + system seconds of this process's finished children and their descendants."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _duration(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 3 * 86_400 else f"{seconds / 86_400:.1f} days"


def _interactions(folder: Path) -> int:
    import polars as pl

    return pl.scan_parquet(folder / "interactions.parquet").select(pl.len()).collect().item()


if __name__ == "__main__":
    main()

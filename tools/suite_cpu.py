"""Where `make test`'s time goes: the test suite run as `make test` runs it (two pytest-xdist
workers, whole files per worker), with the CPU seconds of every test recorded — the worker's
own and its finished subprocesses' (a lifecycle started with `simab run`, llama-server, the
Celery workers) — then printed per file, largest first, as seconds and as a share of the
whole suite's CPU, beside the suite's wall time and what two cores could do at best (half
its CPU).  CPU seconds, unlike wall seconds, hardly move with what else the machine runs.

    .venv/bin/python -m tools.suite_cpu [--top 25] [--tests 40] [pytest arguments, e.g. tests/test_reuse.py]

With the real-model test: `eval "$(.ci/llama_server.sh)"` first, and CI=1 to fail instead of
skipping what is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORDS = "SIMAB_SUITE_CPU_RECORDS"  # the folder each worker appends its records to


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class Recorder:
    """A pytest plug-in: one JSON line per test (setup, call and teardown together)."""

    def __init__(self, folder: Path) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.path = folder / f"{worker}.jsonl"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        own, children = _cpu()
        started = time.perf_counter()
        yield
        own2, children2 = _cpu()
        record = {"test": item.nodeid, "own": own2 - own, "children": children2 - children}
        record.update(wall=time.perf_counter() - started, worker=self.path.stem)
        with self.path.open("a") as out:
            out.write(json.dumps(record) + "\n")


def pytest_configure(config) -> None:
    """Loaded in each worker with `-p tools.suite_cpu`: records where $SIMAB_SUITE_CPU_RECORDS says."""
    if os.environ.get(RECORDS):
        config.pluginmanager.register(Recorder(Path(os.environ[RECORDS])), "suite-cpu-recorder")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=25, help="files to list (default 25)")
    parser.add_argument("--tests", type=int, default=0, help="the costliest tests to list too (default none)")
    args, pytest_args = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as folder:
        env = {
            **os.environ,
            RECORDS: folder,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            # pytest cuts its summary lines to the terminal's width (80 in a pipe): a failure's
            # whole first line, e.g. which step of a lifecycle failed, not "SystemExit: re…".
            "COLUMNS": "400",
        }
        command = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]
        command += ["-p", "tools.suite_cpu", "-p", "no:cacheprovider", *pytest_args]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        lines = done.stdout.strip().splitlines()
        # The failures' one-line summaries (pytest -q's "FAILED file::test - why"), then the count.
        print("\n".join(line for line in lines if line.startswith(("FAILED", "ERROR"))))
        print(lines[-1] if lines else done.stderr[-2000:])
        records = [json.loads(line) for path in Path(folder).glob("*.jsonl") for line in path.open()]
    per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for r in records:
        row = per_file[r["test"].split("::")[0]]
        row[0] += r["own"] + r["children"]
        row[1] += r["children"]
        row[2] += r["wall"]
        row[3] += 1
    total = sum(row[0] for row in per_file.values())
    print(f"suite: {len(records)} tests, wall {wall:.0f} s, CPU {total:.0f} s (two cores at best: {total / 2:.0f} s)")
    for worker in sorted({r["worker"] for r in records}):
        mine = [r for r in records if r["worker"] == worker]
        busy, cpu = sum(r["wall"] for r in mine), sum(r["own"] + r["children"] for r in mine)
        print(f"  worker {worker}: {len(mine)} tests, {busy:.0f} s in tests, {cpu:.0f} s CPU")
    print(f"{'CPU s':>7} {'share':>6} {'of it in subprocesses':>22} {'wall s':>7} {'tests':>6}  file")
    for name, (cpu, children, file_wall, n) in sorted(per_file.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"{cpu:7.1f} {cpu / total:6.1%} {children:22.1f} {file_wall:7.1f} {n:6d}  {name}")
    if args.tests:
        # A fixture's first user pays for it (a session's lifecycle): its CPU is that test's.
        print(f"{'CPU s':>7} {'of it in subprocesses':>22} {'wall s':>7}  test")
        for r in sorted(records, key=lambda r: -(r["own"] + r["children"]))[: args.tests]:
            print(f"{r['own'] + r['children']:7.1f} {r['children']:22.1f} {r['wall']:7.1f}  {r['test']}")
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()

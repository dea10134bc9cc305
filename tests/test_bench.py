"""The benchmarks are kept code: every one imports as a module of the `bench` package (no
`sys.path` edit), and a benchmark that runs the lifecycle resumes only its own unfinished run."""

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

import bench

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(p.stem for p in (ROOT / "bench").glob("[a-z]*.py"))


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_imports_as_a_module_and_says_what_it_measures(name):
    source = (ROOT / "bench" / f"{name}.py").read_text(encoding="utf-8")
    assert "sys.path" not in source, f"bench/{name}.py edits sys.path: run it as python -m bench.{name}"
    assert not re.search(r"python bench/\w+\.py", source), f"bench/{name}.py names a command without -m"
    module = importlib.import_module(f"bench.{name}")
    assert callable(module.main)
    assert ast.get_docstring(ast.parse(source)).splitlines()[0].endswith(".")  # `make bench` prints this line


def test_a_lifecycle_run_resumes_only_a_home_it_last_ran_with_the_same_arms_and_settings(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(bench.subprocess, "call", lambda command, cwd, env: calls.append((command, env)) or 0)
    home = tmp_path / "home"
    steam = {"SIMAB_SOURCE": "steam", "SIMAB_AGENTS": "300"}

    def resumed(arms: str, env: dict) -> bool:
        assert bench.run_lifecycle(home, env, arms) == 0
        command, sent = calls[-1]
        assert command[-2:] == ["--arms", arms] and sent["SIMAB_HOME"] == str(home)
        assert sent["DAGSTER_HOME"] == str(home / "dagster_home") and sent["SIMAB_SOURCE"] == env["SIMAB_SOURCE"]
        return "--resume" in command

    assert not resumed("random,pop", steam)  # a fresh home: a plain run
    (home / "dagster_home").mkdir()  # the run started, then was killed
    assert resumed("random,pop", steam)  # the same arms and settings: it goes on where it stopped
    assert not resumed("random,pop,als=lists:/tmp/als.parquet", steam)  # new arms: --resume would refuse
    assert not resumed("random,pop", steam)  # the home's last run had the other arms
    assert not resumed("random,pop", {**steam, "SIMAB_AGENTS": "600"})  # other settings
    assert json.loads((home / "bench_run.json").read_text())["SIMAB_AGENTS"] == "600"

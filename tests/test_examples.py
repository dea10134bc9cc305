"""The three "bring your own model" examples under examples/ run as a user runs them, each in
a home of its own, and none of them leans on the test doubles of fakes/.  The two that
simulate start from a copy of the session's prepared world, the data set their preparation
makes: each checks that it is unchanged and reuses it, as in a home where one ran before."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PREPARED_SYNTHETIC, copy_home

PROJECT = Path(__file__).resolve().parents[1]
EXAMPLES = PROJECT / "examples"


def _run(script: str, *args: str, extra_path: Path | None = None, timeout: int = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "MLFLOW_TRACKING_URI", "SIMAB_HOME")}
    env["PYTHONPATH"] = os.pathsep.join([*([str(extra_path)] if extra_path else []), str(PROJECT)])
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _prepared_home(world: Path, home: Path) -> Path:
    """A home holding a copy of the prepared world (its Dagster instance where an example looks
    for it, $SIMAB_HOME/dagster_home), its MLflow artefact locations moved to the copy."""
    return copy_home(world / "home", world / "dagster_home", home, home / "dagster_home")


def _reused_the_prepared_world(out: str) -> bool:
    return re.search(r"^prepare: unchanged, reused", out, re.M) is not None


def _ndcg(out: str) -> dict[str, float]:
    return {m[1]: float(m[2]) for m in re.finditer(r"^(\S+) +NDCG@20 ([0-9.]+)", out, re.M)}


def test_no_example_imports_fakes():
    for path in EXAMPLES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not [n for n in names if n.split(".")[0] == "fakes"], f"{path} imports {names}"


def test_the_examples_prepare_the_sessions_world():
    """The copy the simulating examples start from is their own preparation's data set."""
    spec = importlib.util.spec_from_file_location("examples_common", EXAMPLES / "_common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    assert common.PREPARE == {"ops": {"ingestion": {"config": PREPARED_SYNTHETIC}}}, (
        "examples/_common.py PREPARE and tests/conftest.py PREPARED_SYNTHETIC differ: "
        "the example tests would prepare their data set again"
    )


def test_the_entry_point_example_installs_with_pip_and_its_arm_ranks(tmp_path):
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools (the example package's build backend) is not installed")
    target, source = tmp_path / "site", tmp_path / "itemmean_arm"
    shutil.copytree(EXAMPLES / "itemmean_arm", source)  # setuptools builds in the source folder
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--target", str(target), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    assert list(target.glob("simab_itemmean_example-*.dist-info/entry_points.txt"))
    out = _run("entry_point_arm.py", extra_path=target)
    assert "'arm_kind': 'itemmean'" in out and "'shrinkage': 20.0" in out
    ndcg = float(re.search(r"ndcg_at_k=([0-9.]+)", out)[1])
    assert 0 < ndcg <= 1


@pytest.mark.slow
def test_the_lists_file_example_simulates_the_teams_lists_beside_random(prepared_world, tmp_path):
    out = _run("lists_file.py", "--home", str(_prepared_home(prepared_world, tmp_path / "home")))
    assert _reused_the_prepared_world(out), out[-2000:]
    ndcg = _ndcg(out)
    assert set(ndcg) == {"random", "ours"}
    assert ndcg["ours"] > ndcg["random"]  # most-watched lists beat random ones on the test window
    report = Path(re.search(r"^report: (.+)$", out, re.M)[1])
    assert report.is_file() and report.is_relative_to(tmp_path / "home")


@pytest.mark.slow
def test_the_mlflow_model_example_ranks_with_both_shapes_of_the_registered_model(prepared_world, tmp_path):
    out = _run("mlflow_model.py", "--home", str(_prepared_home(prepared_world, tmp_path / "home")))
    assert _reused_the_prepared_world(out), out[-2000:]
    ndcg = _ndcg(out)
    assert set(ndcg) == {"random", "prod", "cand"}
    # The same popularity model answering in two shapes ranks the same lists.
    assert ndcg["prod"] == pytest.approx(ndcg["cand"], abs=1e-6) and ndcg["prod"] > ndcg["random"]
    # Registered in the home's own MLflow store.
    with sqlite3.connect(tmp_path / "home" / "mlflow.db") as db:
        registered = {name for (name,) in db.execute("SELECT name FROM registered_models")}
    db.close()
    assert {"team-pop-score", "team-pop-topk"} <= registered

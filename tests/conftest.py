"""Shared fixtures: the reference data (located by `fakes.shared_data`), and a skip when it
is absent; the session's prepared synthetic world."""

from __future__ import annotations

import os

# Under pytest-xdist each worker gets one thread for torch's and polars' pools, and so does
# every subprocess a test starts (through the environment): `make test` runs one worker per
# core, and two-thread pools in each worker oversubscribed the cores, spinning threads
# nearly doubling the CPU time of the torch-heavy files (docs/development.md, "Test time").
# Set before torch and polars are first imported: both read it once.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "POLARS_MAX_THREADS"):
        os.environ.setdefault(_name, "1")

import json  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from filelock import FileLock  # noqa: E402

from fakes.shared_data import SHARED_DATA  # noqa: E402
from ops.environment import offline_defaults  # noqa: E402
from ops.settings import uninstall  # noqa: E402
from tests import socket_audit  # noqa: E402

offline_defaults()


def session_root(tmp_path_factory) -> Path:
    """The folder of this session's shared worlds: under pytest-xdist the workers' base
    folders share a parent of this session only; alone, the base folder itself (its parent
    holds earlier sessions' folders)."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


@pytest.fixture(scope="session", autouse=True)
def _one_embedding_cache(tmp_path_factory):
    """One catalogue-embedding cache for the session's homes, the workers' and their
    subprocesses' ($SIMAB_EMBEDDING_CACHE, inherited through the environment), as a team's
    homes may share one: a catalogue is embedded, and MiniLM loaded for it (10-15 CPU s a
    process), once, not in every home a test makes.  tests/test_embeddings.py checks the
    cache's misses, hits and repairs on caches of its own."""
    root = session_root(tmp_path_factory)
    before = os.environ.get("SIMAB_EMBEDDING_CACHE")
    os.environ.setdefault("SIMAB_EMBEDDING_CACHE", str(root / "embedding_cache"))
    yield
    if before is None:
        os.environ.pop("SIMAB_EMBEDDING_CACHE", None)


@pytest.fixture(autouse=True)
def _sigterm_as_a_shell_leaves_it():
    """Each test starts with SIGTERM delivered and acted on by default, as a person's shell
    leaves it.  In the whole suite something run earlier in a worker left it ignored (which
    test or library was not traced), and an ignored or blocked SIGTERM is inherited by every
    process a test starts: a `terminate()` the test then waits on took the child's whole
    life (60 s in a home-lock test, 25 s stopping `simab ui`) instead of an instant."""
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    yield


@pytest.fixture(autouse=True)
def _no_installed_settings():
    """Each test starts without the settings an earlier test's (or a module's) edge installed."""
    uninstall()
    yield
    uninstall()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"reference data not found at {SHARED_DATA} (set SIMAB_SHARED_DATA or put ../shared beside the checkout)"
        )
    return SHARED_DATA


def shared_path(*parts: str) -> Path:
    """A path under the reference data, or a skip naming what is missing."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference data {path} is absent")
    return path


# ---------------------------------------------------------------------------------------
# One prepared world per session: `simab_prepare` on the synthetic data set is the most
# expensive step of every lifecycle test (minutes on a loaded 2-core machine), and the tests
# that run arms on synthetic data need the same one.  Built once, under a file lock shared by
# the pytest-xdist workers of this session; each module gets its own copy of the home and of
# the Dagster instance, so what a module writes never reaches another.
# ---------------------------------------------------------------------------------------

PREPARED_SYNTHETIC = {"synthetic_users": 150, "synthetic_movies": 200, "seed": 3}
# A persistent instance (the prepare run and its materialisations travel with the copies),
# without the telemetry log an instance on disk keeps by default.
NO_TELEMETRY = {"telemetry": {"enabled": False}}


@dataclass(frozen=True)
class PreparedRun:
    """What the tests read of the shared `simab_prepare` run (its result object stays in the
    process that ran it): the run id, whether it succeeded, the assets it materialised and its
    asset checks."""

    run_id: str
    success: bool
    materialised: frozenset[str]
    checks: dict[str, bool]


def _lifecycle_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("SIMAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _build_prepared(folder: Path) -> None:
    from dagster import DagsterInstance

    from pipelines.definitions import build_definitions

    home, dagster_home = folder / "home", folder / "dagster_home"
    mp = pytest.MonkeyPatch()
    _lifecycle_env(mp, home)
    dagster_home.mkdir(parents=True)
    try:
        with DagsterInstance.local_temp(str(dagster_home), overrides=NO_TELEMETRY) as instance:
            result = (
                build_definitions(environ={"SIMAB_HOME": str(home)})
                .resolve_job_def("simab_prepare")
                .execute_in_process(
                    instance=instance, run_config={"ops": {"ingestion": {"config": PREPARED_SYNTHETIC}}}
                )
            )
        run = {
            "run_id": result.run_id,
            "success": result.success,
            "materialised": sorted(e.asset_key.to_user_string() for e in result.get_asset_materialization_events()),
            "checks": {c.check_name: c.passed for c in result.get_asset_check_evaluations()},
        }
    finally:
        mp.undo()
    (folder / "run.json").write_text(json.dumps(run))  # written last: its presence says the world is whole


@pytest.fixture(scope="session")
def prepared_world(tmp_path_factory) -> Path:
    """The folder of the session's prepared synthetic world (home/, dagster_home/, run.json)."""
    root = session_root(tmp_path_factory)
    folder = root / "prepared_synthetic"
    with FileLock(str(root / "prepared_synthetic.lock")):
        if not (folder / "run.json").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            _build_prepared(folder)
    return folder


def copy_home(home: Path, dagster_home: Path, target_home: Path, target_dagster_home: Path) -> Path:
    """A copy of a lifecycle's home and Dagster home, MLflow's artefact locations moved to the
    copy (what the home's files point at elsewhere, posters or a data folder, stays shared)."""
    shutil.copytree(home, target_home)
    shutil.copytree(dagster_home, target_dagster_home)
    old, new = home.as_uri(), target_home.as_uri()
    with sqlite3.connect(target_home / "mlflow.db") as db:
        db.execute("UPDATE experiments SET artifact_location = replace(artifact_location, ?, ?)", (old, new))
        db.execute("UPDATE runs SET artifact_uri = replace(artifact_uri, ?, ?)", (old, new))
    db.close()
    return target_home


@pytest.fixture(scope="module")
def prepared_copy(prepared_world, tmp_path_factory):
    """A module's own copy of the prepared world: (home, DagsterInstance, PreparedRun), with
    SIMAB_HOME set to the copy for the module.  MLflow's artefact locations are moved to the
    copy; the catalogue's poster paths still name the shared world's posters (read only)."""
    from dagster import DagsterInstance

    target = tmp_path_factory.mktemp("prepared")
    home = copy_home(prepared_world / "home", prepared_world / "dagster_home", target / "home", target / "dagster_home")
    run = json.loads((prepared_world / "run.json").read_text())
    prepared = PreparedRun(run["run_id"], run["success"], frozenset(run["materialised"]), run["checks"])
    mp = pytest.MonkeyPatch()
    _lifecycle_env(mp, home)
    with DagsterInstance.local_temp(str(target / "dagster_home"), overrides=NO_TELEMETRY) as instance:
        yield home, instance, prepared
    mp.undo()


# ---------------------------------------------------------------------------------------
# `make test` spreads whole files over two workers (--dist loadfile --no-loadscope-reorder):
# a file started last runs alone at the end, so the files that take minutes go first, the
# longest first, and the two workers do not both wait for the prepared world at the start
# (the second file does not need it).  The rest keep their collection order.
# ---------------------------------------------------------------------------------------

FIRST = (
    "test_end_to_end.py",  # the prepared world, four arms, the read-out and every experiment
    "test_real_llm.py",  # llama-server answering a short simulation (skipped without it)
    "test_faults_storage.py",  # the planted lifecycle (kill -9, --resume: subprocesses), arm fm on a copy
    "test_domain_lifecycle.py",  # two whole lifecycles (bookshop, Steam)
    "test_arms_e2e.py",
    "test_shards.py",
    "test_executors.py",  # a multiprocess lifecycle: every step in an interpreter of its own
    "test_recommenders_ml1m.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))  # stable: a file's own order stays


# ---------------------------------------------------------------------------------------
# One planted lifecycle per session: the 40-user planted ML-1M folder and a whole lifecycle on
# it (arms random and pop, 12 agents, one epoch, the trust protocols that ask the brain off),
# run as a user runs it — started, killed -9 in its prepare step and completed by `--resume`
# (`tests/test_faults_storage.py` asserts on that record).  Built once under a file lock
# shared by the pytest-xdist workers; a module that runs more jobs on it works on its own
# copy (`copy_planted`), whose settings are the same, so the runner reuses what is stored.
# ---------------------------------------------------------------------------------------

PLANTED_SETTINGS = {
    "SIMAB_SOURCE": "local",
    "SIMAB_ARMS": "random,pop",
    "SIMAB_AGENTS": "12",
    # The read-out's protocols that ask the brain are not what these modules are about
    # (tests/test_end_to_end.py runs them): reported as not measured, the rest stays.
    "SIMAB_TRUST_PROTOCOLS": "off",
    # One epoch: a trained arm on 40 users stops on its divergence guard after two.
    "SIMAB_MAX_EPOCHS": "1",
}


@dataclass(frozen=True)
class PlantedWorld:
    """The session's planted lifecycle under `root`: its ML-1M folder (read only), home and
    Dagster home, and `record` (what the kill and the resume left: `tests/test_faults_storage.py`)."""

    root: Path

    @property
    def folder(self) -> Path:
        return self.root / "ml-1m"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster_home"

    @property
    def outbound(self) -> Path:
        """The sockets beyond 127.0.0.1 its runner processes tried (refused: tests/socket_audit.py)."""
        return self.root / "outbound.txt"

    @property
    def record(self) -> dict:
        return json.loads((self.root / "record.json").read_text())

    def environ(self, home: Path, dagster_home: Path) -> dict[str, str]:
        """The lifecycle's settings, over `home` and `dagster_home` (the world's or a copy's)."""
        return {
            **PLANTED_SETTINGS,
            "SIMAB_LOCAL_PATH": str(self.folder),
            "SIMAB_HOME": str(home),
            "DAGSTER_HOME": str(dagster_home),
        }


@pytest.fixture(scope="session")
def planted_lifecycle(tmp_path_factory) -> PlantedWorld:
    from fakes.planted_data import planted_movielens, write_ml1m

    root = session_root(tmp_path_factory)
    world = PlantedWorld(root / "planted_lifecycle")
    with FileLock(str(root / "planted_lifecycle.lock")):
        if not (world.root / "record.json").is_file():
            shutil.rmtree(world.root, ignore_errors=True)
            users, movies, ratings = planted_movielens(seed=5, n_users=40, n_movies=50, ratings_per_user=15)
            write_ml1m(world.folder, users, movies, ratings)
            record = kill_and_resume(world.environ(world.home, world.dagster_home), audit=world.outbound)
            (world.root / "record.json").write_text(json.dumps(record))  # written last: the world is whole
    return world


def copy_planted(world: PlantedWorld, target: Path) -> tuple[Path, Path]:
    """A copy of the world's home and Dagster home under `target`: (home, dagster_home).
    MLflow's artefact locations are moved to the copy; the ML-1M folder stays shared (the
    settings name it, and its size and time are part of the stored versions)."""
    resumed = world.record["resume"]
    assert resumed["returncode"] == 0, resumed["stdout"][-3000:] + resumed["stderr"][-3000:]
    home, dagster_home = target / "home", target / "dagster_home"
    copy_home(world.home, world.dagster_home, home, dagster_home)
    return home, dagster_home


PROJECT = Path(__file__).resolve().parents[1]


def kill_and_resume(environ: dict[str, str], audit: Path | None = None) -> dict:
    """Start the lifecycle runner with the settings `environ` adds, kill it (-9) in the agents
    step of its prepare run, after the catalogue is stored, then run `--resume`: what the
    Dagster instance held after the kill ({"after_kill": [[run id, status], ...]}) and what
    the resume returned ({"resume": {"returncode", "stdout", "stderr"}}).  `audit`: both runners
    under tests/socket_audit.py, what they tried beyond 127.0.0.1 recorded there."""
    from dagster import DagsterInstance

    env = {**os.environ, **environ}
    env.pop("MLFLOW_TRACKING_URI", None)
    if audit is not None:
        env = socket_audit.as_a_person_runs(env)
    command = (
        [sys.executable, "-m", "pipelines.lifecycle"]
        if audit is None
        else socket_audit.command(audit, "pipelines.lifecycle")
    )
    runner = subprocess.Popen(command, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # Killed in the agents step, after the catalogue is stored (its event logged a moment later).
        wait_for_file(Path(environ["SIMAB_HOME"]) / "assets" / "catalogue.parquet", runner, deadline_s=240)
        time.sleep(1.0)
        runner.kill()  # SIGKILL: no handler, no clean-up
        runner.wait(30)
    finally:
        if runner.poll() is None:
            runner.kill()
    with DagsterInstance.from_config(environ["DAGSTER_HOME"]) as instance:
        after_kill = [[r.run_id, r.status.value] for r in instance.get_runs()]
    resumed = subprocess.run([*command, "--resume"], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=280)
    return {
        "after_kill": after_kill,
        "resume": {"returncode": resumed.returncode, "stdout": resumed.stdout, "stderr": resumed.stderr},
    }


def wait_for_file(path: Path, process, deadline_s: float) -> None:
    """Wait for `path` to appear while `process` runs (the instance's SQLite files are left
    alone: opening them while the runner creates them races its schema migration)."""
    stop = time.monotonic() + deadline_s
    while time.monotonic() < stop:
        if process.poll() is not None:
            raise AssertionError(
                f"the runner ended before it could be killed:\n{process.stdout.read().decode()[-3000:]}"
            )
        if path.exists():
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} did not appear within {deadline_s} s")

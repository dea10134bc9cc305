"""Faults against stored data, through the real asset graph.

- Bad inputs after a good run (a pair rated twice, a rating from 1970, a movie from 1700, a
  metadata file covering too few movies): the run fails, every file under
  `$SIMAB_HOME/assets` is byte-identical afterwards, and a re-simulation still works and
  gives the same events.
- No stored asset is a pickle, over a whole small lifecycle; a `.pkl` dropped into the asset
  folder is refused with a message naming it, and never unpickled.
- `kill -9` of the lifecycle runner mid-job leaves its run STARTED; the next runner marks it
  failed, and `--resume` completes the lifecycle re-running only what was not stored.  The
  session's planted lifecycle (tests/conftest.py) is built so (`kill_and_resume`); the other
  cases run on a copy of it.

Every case is bounded in time (SIGALRM), the subprocesses by their own timeouts.
"""

from __future__ import annotations

import hashlib
import pickle
import re
import shutil
import signal
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import copy_planted
from tests.storage_checks import Touch, contains_pickle

# Readouts here skip the papers' taste hold-out (an agent rebuild and a brain refit): tests/test_end_to_end.py checks it.
NO_PAPERS_HOLDOUT = {"ops": {"taste_alignment": {"config": {"papers_holdout": 0}}}}

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROJECT = Path(__file__).resolve().parents[1]
ARM_CONFIG = {
    "ops": {
        "recommender_arm": {"config": {"max_epochs": 1}},
        "simulation_events": {"config": {"n_agents": 12}},
        "augmentation_metrics": {"config": {"max_epochs": 1}},
    }
}


@pytest.fixture(autouse=True)
def bounded():
    """Each case gets a deadline: a hang fails the test instead of the suite."""
    deadline = 240

    def expired(*_):
        raise TimeoutError(f"fault case ran past its {deadline} s deadline")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(deadline)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def movielens_folder(planted_lifecycle) -> Path:
    return planted_lifecycle.folder


@pytest.fixture(scope="module")
def good_run(tmp_path_factory, planted_lifecycle):
    """A whole lifecycle on a small ML-1M-format folder: a copy of the session's planted one
    (prepare, arms random and pop, read-out) with arm fm added and the read-out run again, with
    the trust protocols on (the planted one has them off): what they store is covered too."""
    from dagster import DagsterInstance

    from pipelines.definitions import build_definitions

    home, _ = copy_planted(planted_lifecycle, tmp_path_factory.mktemp("good_run"))
    mp = pytest.MonkeyPatch()
    mp.setenv("SIMAB_HOME", str(home))
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    defs = build_definitions(environ={"SIMAB_HOME": str(home)})
    # The jobs here read what they need from the home's files: an instance in memory is enough
    # (and cheaper than one writing an SQLite event log per run).
    instance = DagsterInstance.ephemeral()
    results = {"fm": run(defs, instance, "simab_arm", ARM_CONFIG, "fm")}
    results["readout"] = run(
        defs,
        instance,
        "simab_readout",
        {"ops": {"ab_readout": {"config": {"n_bootstrap": 200}}, **NO_PAPERS_HOLDOUT["ops"]}},
    )
    assert all(r.success for r in results.values()), {k: r.success for k, r in results.items()}
    events = pl.read_parquet(home / "assets" / "simulation_events" / "random.parquet")
    yield home, defs, instance, events
    mp.undo()


def test_no_asset_of_a_whole_run_is_stored_as_pickle(good_run):
    home = good_run[0]
    stored = [p for p in (home / "assets").rglob("*") if p.is_file()]
    kinds = {p.suffix for p in stored}
    assert kinds == {".parquet", ".json", ".npz", ".safetensors", ".sha256"}, kinds
    assert not [p for p in stored if contains_pickle(p)]
    # Each non-frame asset is a pointer naming a folder of its own.
    assert {
        p.relative_to(home / "assets").as_posix()
        for p in stored
        if p.suffix == ".json" and p.parent.name in ("assets", "recommender_arm")
    } >= {
        "agents.json",
        "embedded_brain.json",
        "ab_readout.json",
        "simab_report.json",
        "recommender_arm/random.json",
        "recommender_arm/fm.json",
    }


BAD_INPUTS = {
    # (how the folder is spoiled, what the failure says)
    "pair_rated_twice": (
        lambda f: append(f / "ratings.dat", first_line(f / "ratings.dat").replace("::978", "::979")),
        r"ratings\.dat, line 601: user 1 rated movie \d+ twice \(first on line 1\)",
    ),
    "rating_from_1970": (
        lambda f: append(f / "ratings.dat", f"1::{unrated_movie(f, 1)}::4::100\n"),
        "ratings.timestamp: timestamp outside the plausible range",
    ),
    "movie_from_1700": (
        lambda f: (f / "movies.dat").write_text(
            (f / "movies.dat").read_text().replace("Movie 3 (1953)", "Movie 3 (1700)")
        ),
        "movies.year: release year out of range",
    ),
}


@pytest.mark.parametrize("case", [*BAD_INPUTS, "metadata_for_two_movies"])
def test_bad_input_stores_nothing_and_resimulation_still_works(good_run, movielens_folder, tmp_path, case):
    home, defs, instance, events = good_run
    before = digests(home / "assets")
    folder = copy_folder(movielens_folder, tmp_path / "ml-1m")
    config = prepare_config(folder)
    if case == "metadata_for_two_movies":
        (tmp_path / "meta.dat").write_text(
            "1::Movie 1::1951::PG::01 Jan 1951::Drama::A B::W::C D::plot one::N/A\n"
            "2::Movie 2::1952::PG::01 Jan 1952::Drama::A B::W::C D::plot two::N/A\n"
        )
        config["ops"]["movie_metadata"] = {"config": {"source": "local", "metadata_path": str(tmp_path / "meta.dat")}}
        expected = r"metadata\.overview: only 2 of 50 movies \(4\.0%\) have it"
    else:
        spoil, expected = BAD_INPUTS[case]
        spoil(folder)
    result = run(defs, instance, "simab_prepare", config)
    assert not result.success
    failures = [failure_text(e) for e in result.all_events if e.is_failure]
    assert any(re.search(expected, text) for text in failures), failures
    assert digests(home / "assets") == before
    # Downstream work goes on on the previous data: the nightly re-simulation of an arm.
    again = run(
        defs, instance, "simab_resimulate", {"ops": {"simulation_events": {"config": {"n_agents": 12}}}}, "random"
    )
    assert again.success
    fresh = pl.read_parquet(home / "assets" / "simulation_events" / "random.parquet")
    assert fresh.drop("run_id", "latency_s").equals(events.drop("run_id", "latency_s"))


def test_the_runner_says_why_a_bad_input_failed(movielens_folder, tmp_path, monkeypatch, capsys):
    from pipelines.lifecycle import main

    folder = copy_folder(movielens_folder, tmp_path / "ml-1m")
    BAD_INPUTS["pair_rated_twice"][0](folder)
    for name, value in {
        "SIMAB_HOME": str(tmp_path / "home"),
        "SIMAB_SOURCE": "local",
        "SIMAB_LOCAL_PATH": str(folder),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(SystemExit, match="simab_prepare failed") as failed:
        main(["--arms", "random"])
    # The exit message is what reaches the terminal, in the console mode and in --verbose.
    assert re.search(r"ingestion: .*ratings\.dat, line 601: user 1 rated movie \d+ twice", str(failed.value))


def test_a_pickle_dropped_into_the_asset_folder_is_refused_and_never_loaded(good_run):
    home, defs, instance, _ = good_run
    marker = home / "unpickled"
    dropped = home / "assets" / "agents.pkl"
    dropped.write_bytes(pickle.dumps(Touch(str(marker))))
    try:
        result = run(defs, instance, "simab_resimulate", {}, "random")
        assert not result.success
        messages = " ".join(failure_text(e) for e in result.all_events if e.is_failure)
        assert "agents.pkl is a pickle file. simab never loads pickle" in messages and "delete it" in messages
        assert not marker.exists()
    finally:
        dropped.unlink()


def test_kill_9_mid_run_is_marked_failed_and_resume_completes_it(tmp_path, planted_lifecycle):
    from dagster import DagsterInstance, DagsterRunStatus

    # The session's planted lifecycle is this scenario (`kill_and_resume`); its Dagster home
    # is read from a copy (other modules copy it too).
    record = planted_lifecycle.record
    ((killed, status),) = record["after_kill"]
    assert status == DagsterRunStatus.STARTED.value  # what a killed runner leaves
    shutil.copytree(planted_lifecycle.dagster_home, tmp_path / "dagster_home")
    with DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        stored_before = materialised(instance, killed)
    assert {
        "users",
        "movies",
        "ratings",
        "movie_metadata",
        "catalogue",
    } <= stored_before and "agents" not in stored_before

    resumed = record["resume"]
    assert resumed["returncode"] == 0, resumed["stdout"][-3000:] + resumed["stderr"][-3000:]
    assert f"run {killed}: its process is gone (killed or crashed); marked failed" in resumed["stdout"]
    with DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        assert instance.get_run_by_id(killed).status == DagsterRunStatus.FAILURE
        runs = {r.run_id: r for r in instance.get_runs()}
        steps = sorted((r.tags["simab/step"], r.status.value) for r in runs.values())
        assert steps == [
            ("simab_arm[pop]", "SUCCESS"),
            ("simab_arm[random]", "SUCCESS"),
            ("simab_prepare", "FAILURE"),
            ("simab_prepare", "SUCCESS"),
            ("simab_readout", "SUCCESS"),
        ]
        assert len({r.tags["simab/lifecycle"] for r in runs.values()}) == 1
        again = next(
            r for r in runs.values() if r.tags["simab/step"] == "simab_prepare" and r.status == DagsterRunStatus.SUCCESS
        )
        redone = materialised(instance, again.run_id)
        # Only what the killed run had not stored (the split, the agents and the brain), all of it.
        assert not redone & stored_before
        assert redone | stored_before == {
            "users",
            "movies",
            "ratings",
            "planted_tastes",
            "ground_truth",
            "synthetic_side_info",
            "movie_metadata",
            "catalogue",
            "train_ratings",
            "valid_ratings",
            "test_ratings",
            "agents",
            "embedded_brain",
        }
    assert (planted_lifecycle.home / "reports" / "latest.md").is_file()


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def run(defs, instance, job, config, partition=None):
    return defs.resolve_job_def(job).execute_in_process(
        instance=instance, run_config=config, partition_key=partition, raise_on_error=False
    )


def prepare_config(folder: Path) -> dict:
    return {"ops": {"ingestion": {"config": {"source": "local", "local_path": str(folder)}}}}


def copy_folder(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for path in source.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    return target


def append(path: Path, line: str) -> None:
    path.write_text(path.read_text() + line)


def unrated_movie(folder: Path, user: int) -> int:
    rated = {
        int(line.split("::")[1])
        for line in (folder / "ratings.dat").read_text().splitlines()
        if line.startswith(f"{user}::")
    }
    return min(set(range(1, 51)) - rated)


def first_line(path: Path) -> str:
    return path.read_text().split("\n", 1)[0] + "\n"


def digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def failure_text(event) -> str:
    data = getattr(event, "event_specific_data", None)
    error = getattr(data, "error", None)
    return (event.message or "") + (error.to_string() if error is not None else "")


def materialised(instance, run_id: str) -> set[str]:
    from dagster import DagsterEventType

    return {
        e.asset_materialization.asset_key.to_user_string()
        for e in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
    }

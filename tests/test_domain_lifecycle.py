"""The whole lifecycle on domains other than movies (docs/data_model.md): the bookshop
example through `source=files` (explicit ratings, a few covers, no user attributes) and a
tiny synthetic data set in Steam's schema through `source=steam` (implicit feedback, no
images, no user attributes).  Small on purpose: two arms without training, few agents."""

import json

import polars as pl
import pytest
from dagster import DagsterInstance

from fakes.steam_data import write_steam_fixture
from ops.settings import PROJECT_ROOT

# Readouts here skip the papers' taste hold-out (an agent rebuild and a brain refit) and draw
# 200 bootstrap replicates instead of 2,000: tests/test_end_to_end.py checks both at their defaults.
READOUT = {
    "ops": {
        "taste_alignment": {"config": {"papers_holdout": 0}},
        "ab_readout": {"config": {"n_bootstrap": 200}},
    }
}

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ARMS = ("random", "pop")


def _run(home, ingestion: dict, n_agents: int):
    mp = pytest.MonkeyPatch()
    mp.setenv("SIMAB_HOME", str(home))
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    try:
        from pipelines.definitions import build_definitions

        defs = build_definitions(environ={"SIMAB_HOME": str(home), "SIMAB_ARMS": ",".join(ARMS)})
        instance = DagsterInstance.ephemeral()
        results = {
            "prepare": defs.resolve_job_def("simab_prepare").execute_in_process(
                instance=instance, run_config={"ops": {"ingestion": {"config": ingestion}}}
            )
        }
        arm_config = {"ops": {"simulation_events": {"config": {"n_agents": n_agents}}}}
        for arm in ARMS:
            results[arm] = defs.resolve_job_def("simab_arm").execute_in_process(
                instance=instance, partition_key=arm, run_config=arm_config
            )
        # The papers' hold-out (an agent rebuild and a brain refit) is the end-to-end test's to check.
        results["readout"] = defs.resolve_job_def("simab_readout").execute_in_process(
            instance=instance, run_config=READOUT
        )
        return results
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def bookshop(tmp_path_factory):
    home = tmp_path_factory.mktemp("bookshop_home")
    folder = PROJECT_ROOT / "examples" / "bookshop"
    return home, _run(home, {"source": "files", "files_path": str(folder)}, n_agents=20)


@pytest.fixture(scope="module")
def steam(tmp_path_factory):
    home = tmp_path_factory.mktemp("steam_home")
    folder = write_steam_fixture(tmp_path_factory.mktemp("steam_files"))
    return home, _run(home, {"source": "steam", "steam_path": str(folder), "steam_min_interactions": 3}, n_agents=20)


def _check_lifecycle(home, results, noun: str, with_images: bool):
    assert all(r.success for r in results.values())
    checks = {c.check_name: c.passed for c in results["prepare"].get_asset_check_evaluations()}
    assert checks and all(checks.values()), checks
    catalogue = pl.read_parquet(home / "assets" / "catalogue.parquet")
    assert set(catalogue["item_noun"].drop_nulls()) == {noun}
    assert catalogue["poster_small"].is_not_null().any() == with_images
    users = pl.read_parquet(home / "assets" / "users.parquet")
    assert users["gender"].is_null().all() and users["age"].is_null().all()
    for arm in ARMS:
        events = pl.read_parquet(home / "assets" / "simulation_events" / f"{arm}.parquet")
        assert events["user_id"].n_unique() == 20
        assert events.filter(pl.col("action") == "click_movie").height > 0
    report = next((home / "reports").glob("*/report.md")).read_text()
    assert "Against the control pop" in report


def test_the_bookshop_example_runs_the_whole_lifecycle(bookshop):
    home, results = bookshop
    _check_lifecycle(home, results, "book", with_images=True)
    catalogue = pl.read_parquet(home / "assets" / "catalogue.parquet")
    first = catalogue.filter(pl.col("item_id") == 1).row(0, named=True)
    assert json.loads(first["attributes"])["author"] and first["meta_genres"] == ["Mystery"]
    # Books 7.. have no cover: no image, never a stand-in.
    assert catalogue.filter(pl.col("item_id") >= 7)["poster_small"].is_null().all()
    # The shop's random bucket is the run's judge, read by the report only.
    truth = pl.read_parquet(home / "assets" / "ground_truth.parquet")
    assert truth.height == 120 and set(truth["judge"]) == {"random_exposure"}
    report = next((home / "reports").glob("*/report.md")).read_text()
    assert "## Against the truth" in report and "a random-exposure sample" in report


def test_steam_without_images_or_user_attributes_runs_the_whole_lifecycle(steam):
    home, results = steam
    _check_lifecycle(home, results, "game", with_images=False)
    report = next((home / "reports").glob("*/report.md")).read_text()
    assert "## Against the truth\n\nNot measured: no truth" in report
    ratings = pl.read_parquet(home / "assets" / "ratings.parquet")
    assert set(ratings["rating"].unique()) == {1, 5}  # implicit: not recommended / recommended

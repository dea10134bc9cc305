"""Blocking contract checks stop the graph: corrupted tables never reach the split."""

import polars as pl
import pytest
from dagster import AssetOut, Output, materialize, multi_asset

from assets.split import chronological_split
from data_contracts.checks import movies_contract, ratings_contract, users_contract
from resources.mlflow_tracking import MlflowTracking
from resources.storage import SimabIOManager

USERS = pl.DataFrame(
    {
        "user_id": [1, 2],
        "gender": ["M", "F"],
        "age": [25, 35],
        "occupation": [1, 2],
        "zip": ["10001", "94110"],
        "has_ratings": [True, True],
    }
)
# Six movies keep the toy table under the contract's density ceiling (ratings / users×movies ≤ 0.5).
MOVIES = pl.DataFrame(
    {
        "item_id": [1, 2, 3, 4, 5, 6],
        "title": [f"M{i} (199{i})" for i in range(6)],
        "year": [1990 + i for i in range(6)],
        "genres": [["Drama"]] * 6,
    }
)
RATINGS = pl.DataFrame(
    {
        "user_id": [1, 1, 2, 2, 1],
        "item_id": [1, 2, 1, 3, 3],
        "rating": [4, 5, 3, 2, 1],
        "timestamp": [978300760 + i for i in range(5)],
    }
)


def _source(users: pl.DataFrame, movies: pl.DataFrame, ratings: pl.DataFrame):
    @multi_asset(outs={"users": AssetOut(), "movies": AssetOut(), "ratings": AssetOut()}, name="ingestion")
    def ingestion():
        yield Output(users, "users")
        yield Output(movies, "movies")
        yield Output(ratings, "ratings")

    return ingestion


def _run(tmp_path, monkeypatch, users=USERS, movies=MOVIES, ratings=RATINGS):
    monkeypatch.setenv("SIMAB_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return materialize(
        [_source(users, movies, ratings), chronological_split, users_contract, movies_contract, ratings_contract],
        resources={"io_manager": SimabIOManager(), "mlflow_tracking": MlflowTracking()},
        raise_on_error=False,
    )


def _checks(result):
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def _materialised(result):
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def test_clean_tables_flow_to_the_split(tmp_path, monkeypatch):
    result = _run(tmp_path, monkeypatch)
    assert all(c.passed for c in _checks(result).values())
    assert {"train_ratings", "valid_ratings", "test_ratings"} <= _materialised(result)


@pytest.mark.parametrize(
    "corrupt, problem",
    [
        (
            lambda r: r.with_columns(
                pl.when(pl.col("item_id") == 2).then(7).otherwise(pl.col("rating")).alias("rating")
            ),
            "rating outside 1..5",
        ),
        (lambda r: pl.concat([r, r.head(1)]), "rated twice"),
        (
            lambda r: pl.concat(
                [r, pl.DataFrame({"user_id": [9], "item_id": [1], "rating": [4], "timestamp": [978300800]})]
            ),
            "user missing from the users table",
        ),
    ],
    ids=["rating_of_7", "duplicate_key", "unknown_user"],
)
def test_corrupted_ratings_fail_the_blocking_check_and_stop_downstream(tmp_path, monkeypatch, corrupt, problem):
    result = _run(tmp_path, monkeypatch, ratings=corrupt(RATINGS))
    check = _checks(result)["ratings_contract"]
    assert not check.passed
    assert problem in check.description
    assert not ({"train_ratings", "valid_ratings", "test_ratings"} & _materialised(result))
    assert not (tmp_path / "assets" / "train_ratings.parquet").exists()

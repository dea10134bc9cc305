"""The contracts catch what they promise to catch, with messages that name the problem."""

import polars as pl
import pytest

from data_contracts.suites import (
    ContractConfig,
    coverage_problems,
    metadata_frame_for_contract,
    metadata_suite,
    movies_suite,
    ratings_suite,
    users_suite,
)
from data_contracts.validate import validate_frame


@pytest.fixture(scope="module")
def tables():
    users = pl.DataFrame(
        {
            "user_id": [1, 2, 3],
            "gender": ["M", "F", "M"],
            "age": [1, 25, 56],
            "occupation": [0, 12, 20],
            "zip": ["1", "2", "3"],
            "has_ratings": [True, True, False],
        }
    )
    movies = pl.DataFrame(
        {
            "item_id": [10, 11],
            "title": ["A (1990)", "B (1995)"],
            "year": [1990, 1995],
            "genres": [["Drama"], ["Comedy"]],
        }
    )
    ratings = pl.DataFrame(
        {
            "user_id": [1, 1, 2],
            "item_id": [10, 11, 10],
            "rating": [4, 5, 1],
            "timestamp": [978300760, 978300761, 978300762],
        }
    )
    return users, movies, ratings


def _ratings_report(ratings, users, movies):
    return validate_frame(
        ratings,
        ratings_suite(users["user_id"].to_list(), movies["item_id"].to_list(), ContractConfig(max_density=1.0)),
    )


def test_clean_tables_pass(tables):
    users, movies, ratings = tables
    assert validate_frame(users, users_suite()).passed
    assert validate_frame(movies, movies_suite()).passed
    assert _ratings_report(ratings, users, movies).passed


def test_rating_of_seven_is_named(tables):
    users, movies, ratings = tables
    bad = ratings.with_columns(pl.when(pl.col("item_id") == 11).then(7).otherwise(pl.col("rating")).alias("rating"))
    report = _ratings_report(bad, users, movies)
    assert not report.passed
    assert any(f.column == "rating" and 7 in f.examples for f in report.findings)
    assert "rating outside 1..5" in report.summary()


def test_duplicate_key_is_named(tables):
    users, movies, ratings = tables
    report = _ratings_report(pl.concat([ratings, ratings.head(1)]), users, movies)
    assert [f.column for f in report.findings] == ["user_id,item_id"]
    assert "rated twice" in report.summary()
    dup_users = pl.concat([users, users.head(1)])
    assert "user ids must be unique" in validate_frame(dup_users, users_suite()).summary()


def test_rating_of_unknown_user_and_movie_is_named(tables):
    users, movies, ratings = tables
    bad = pl.concat(
        [ratings, pl.DataFrame({"user_id": [99], "item_id": [12], "rating": [3], "timestamp": [978300763]})]
    )
    summary = _ratings_report(bad, users, movies).summary()
    assert "user missing from the users table" in summary and "99" in summary
    assert "movie missing from the movies table" in summary and "12" in summary


def test_demographics_outside_code_sets(tables):
    users, _, _ = tables
    bad = users.with_columns(pl.Series("age", [1, 30, 56]), pl.Series("occupation", [0, 21, 3]))
    summary = validate_frame(bad, users_suite()).summary()
    assert "age outside" in summary and "30" in summary
    assert "occupation outside" in summary and "21" in summary


def test_timestamps_out_of_range(tables):
    users, movies, ratings = tables
    bad = ratings.with_columns(pl.Series("timestamp", [0, 978300761, 978300762]))
    assert "timestamp outside" in _ratings_report(bad, users, movies).summary()


def test_metadata_ranges_and_coverage():
    import datetime as dt

    md = pl.DataFrame(
        {
            "item_id": [1, 2, 3],
            "vote_average": [7.5, 11.0, None],
            "vote_count": [10, -1, 0],
            "release_date": [dt.date(1995, 1, 1), None, dt.date(1990, 5, 5)],
            "overview": [None, None, "x"],
            "poster_small": [None, None, None],
        }
    )
    report = validate_frame(metadata_frame_for_contract(md), metadata_suite([1, 2, 3], ContractConfig()))
    whys = " | ".join(f.why for f in report.findings)
    assert "vote average outside 0..10" in whys
    assert "negative vote count" in whys


def test_coverage_floor_is_over_all_movies_and_skips_votes_for_local_sources():
    from ops.schema import METADATA

    rows = [
        {**{k: None for k in METADATA}, "item_id": i, "overview": "x", "metadata_source": "local:movies.dat"}
        for i in range(3)
    ]
    md = pl.DataFrame(rows, schema=METADATA)
    problems = coverage_problems(md, n_movies=4, floor=0.5)
    assert not any("overview" in p for p in problems)  # 3 of 4 movies
    assert any(p.startswith("metadata.poster_small: only 0 of 4") for p in problems)
    assert not any("vote" in p for p in problems)  # OMDb-style files carry no votes
    assert any("overview" in p for p in coverage_problems(md, n_movies=10, floor=0.5))  # 3 of 10 movies
    tmdb = md.with_columns(pl.lit("tmdb").alias("metadata_source"))
    assert any(p.startswith("metadata.vote_average") for p in coverage_problems(tmdb, n_movies=4, floor=0.5))


def test_a_verdict_is_reached_once_per_content(tables, tmp_path, monkeypatch):
    """The asset check after a producing step reads the step's verdict on the same frames;
    other frames, or a poster file changed since, are validated afresh."""
    import data_contracts.checks as checks
    from ops.schema import METADATA

    calls = []
    monkeypatch.setattr(
        checks, "validate_frame", lambda frame, suite: calls.append(frame) or validate_frame(frame, suite)
    )
    monkeypatch.setattr(checks, "_VERDICTS", {})
    users, movies, ratings = tables
    first = checks.ratings_verdict(ratings, users, movies)
    assert checks.ratings_verdict(ratings, users, movies) is first and len(calls) == 1
    changed = ratings.with_columns(pl.Series("rating", [4, 5, 7]))
    assert not checks.ratings_verdict(changed, users, movies).passed and len(calls) == 2

    poster = tmp_path / "p.jpg"
    poster.write_bytes(b"not an image")
    row = {**{k: None for k in METADATA}, "item_id": 10, "poster_small": str(poster), "metadata_source": "local:x"}
    metadata = pl.DataFrame([row], schema=METADATA)
    broken = checks.metadata_verdict(metadata, movies)
    assert any("does not decode" in p for p in broken.problems)
    assert checks.metadata_verdict(metadata, movies) is broken
    from PIL import Image

    Image.new("RGB", (40, 60)).save(poster, format="JPEG")
    assert not any("does not decode" in p for p in checks.metadata_verdict(metadata, movies).problems)

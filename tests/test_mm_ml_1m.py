"""MM-ML-1M: the join of movies and metadata, and its Table-1 coverage."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from ops.data.catalogue import COVERAGE, MM_ML_1M, build_catalogue, coverage_table
from ops.data.local_metadata import LocalMetadataConfig, load_local_metadata
from ops.schema import METADATA
from tests.conftest import shared_path
from tests.test_metadata_local import _ml1m_movies

MOVIES = pl.DataFrame(
    {
        "item_id": [1, 2, 3],
        "title": ["American President, The (1995)", "M (1931)", "Unmatched Film (1990)"],
        "year": [1995, 1931, 1990],
        "genres": [["Comedy"], ["Crime"], ["Drama"]],
    }
)


def metadata(rows: list[dict]) -> pl.DataFrame:
    full = [{**{k: None for k in METADATA}, **r} for r in rows]
    return pl.DataFrame(full, schema=METADATA)


META = metadata(
    [
        {
            "item_id": 1,
            "tmdb_id": 9087,
            "overview": "A widowed U.S. president.",
            "vote_average": 6.8,
            "vote_count": 1200,
            "release_date": dt.date(1995, 11, 17),
            "meta_genres": ["Comedy", "Drama", "Romance"],
            "directors": ["Rob Reiner"],
            "actors": ["Michael Douglas", "Annette Bening"],
            "poster_small": "/p/s1.jpg",
            "poster_large": "/p/l1.jpg",
            "metadata_source": "tmdb",
        },
        {
            "item_id": 2,
            "tmdb_id": 832,
            "overview": None,
            "vote_average": 0.0,
            "vote_count": 0,
            "release_date": dt.date(1931, 5, 11),
            "meta_genres": [],
            "directors": ["Fritz Lang"],
            "actors": None,
            "poster_small": "/p/s2.jpg",
            "poster_large": None,
            "metadata_source": "tmdb",
        },
    ]
)


def test_join_keeps_every_movie_and_adds_metadata_columns():
    mm = build_catalogue(MOVIES, META)
    assert mm.schema == pl.Schema(MM_ML_1M)
    assert mm["item_id"].to_list() == [1, 2, 3]
    assert mm["tmdb_id"].to_list() == [9087, 832, None]
    assert mm.filter(pl.col("item_id") == 1)["actors"].to_list() == [["Michael Douglas", "Annette Bening"]]


def test_join_rejects_duplicate_and_unknown_item_ids():
    with pytest.raises(ValueError, match=r"several rows for movie ids \[1\]"):
        build_catalogue(MOVIES, pl.concat([META, META.head(1)]))
    with pytest.raises(ValueError, match=r"1 movie ids not in the movies table, e.g. \[99\]"):
        build_catalogue(MOVIES, pl.concat([META, metadata([{"item_id": 99}])]))


def test_coverage_table_counts_and_ranges_like_table_1():
    ratings = pl.DataFrame({"user_id": [1, 1, 2], "item_id": [1, 2, 1], "rating": [4, 5, 3], "timestamp": [0, 1, 2]})
    cov = coverage_table(build_catalogue(MOVIES, META), ratings=ratings)
    assert cov.schema == pl.Schema(COVERAGE)
    rows = {r["feature"]: r for r in cov.iter_rows(named=True)}
    assert list(rows)[:9] == [
        "Title",
        "Overview",
        "Genres",
        "Rating",
        "Vote Count",
        "Release Date",
        "Directors",
        "Actors",
        "Poster",
    ]
    # Title: the two matched movies, article restored, year dropped: "The American President" (22), "M" (1).
    assert (rows["Title"]["count"], rows["Title"]["range"]) == (2, "[1, 22]")
    assert (rows["Overview"]["count"], rows["Overview"]["min_value"]) == (1, 25.0)
    # Genres as text: "Comedy, Drama, Romance" is 22 characters; the empty list does not count.
    assert (rows["Genres"]["count"], rows["Genres"]["range"]) == (1, "[22, 22]")
    assert (rows["Rating"]["count"], rows["Rating"]["min_value"], rows["Rating"]["max_value"]) == (2, 0.0, 6.8)
    assert rows["Vote Count"]["range"] == "[0, 1,200]"
    assert rows["Release Date"]["range"] == "[1931-05-11, 1995-11-17]" and rows["Release Date"]["count"] == 2
    assert (rows["Directors"]["count"], rows["Directors"]["range"]) == (2, "[10, 10]")
    assert (rows["Actors"]["count"], rows["Actors"]["range"]) == (1, "[31, 31]")
    assert rows["Poster"]["count"] == 1  # movie 2 lacks its large poster
    assert rows["User Count"]["count"] == 2 and rows["Movie Count"]["count"] == 3
    assert rows["Sparsity"]["max_value"] == pytest.approx(3 / 6)


def test_coverage_of_an_empty_metadata_table_is_zero_not_an_error():
    cov = coverage_table(build_catalogue(MOVIES, metadata([])))
    assert cov["count"].to_list() == [0] * 9
    assert set(cov["range"]) == {"-"}


def test_shared_ml1m_with_local_metadata_has_real_coverage(tmp_path):
    movies = _ml1m_movies(shared_path("ml-1m", "movies.dat"))
    config = LocalMetadataConfig(metadata_path=shared_path("ml-1m-metadata", "movies_extrainfos.dat"), progress=False)
    mm = build_catalogue(movies, load_local_metadata(movies, tmp_path, config).metadata)
    rows = {r["feature"]: r for r in coverage_table(mm).iter_rows(named=True)}
    assert mm.height == 3883
    assert rows["Title"]["count"] == 3881 and rows["Overview"]["count"] == 3845
    assert rows["Directors"]["count"] == 3869 and rows["Actors"]["count"] == 3874
    assert rows["Release Date"]["count"] == 3839 and rows["Genres"]["count"] == 3876
    assert rows["Rating"]["count"] == 0 and rows["Vote Count"]["count"] == 0  # OMDb has no TMDB votes
    assert rows["Release Date"]["min"] >= "1900-01-01"

"""Encoders: fitted on train only, unseen values to the reserved index, deepctr layout."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest

from ops.arms.features import GENRE_PADDING, GENRE_UNSEEN, UNSEEN, FeatureConfig, FeatureEncoder, fit_encoder
from ops.data.catalogue import build_catalogue
from ops.schema import METADATA, MOVIES, RATINGS, USERS, conform


@pytest.fixture
def tables():
    users = conform(
        pl.DataFrame(
            {
                "user_id": [1, 2, 3],
                "gender": ["M", "F", "F"],
                "age": [25, 35, 56],
                "occupation": [4, 4, 13],
                "zip": ["10001", "94110", "60601"],  # user 3 never rates in train
                "has_ratings": [True, True, True],
            }
        ),
        USERS,
        "users",
    )
    movies = conform(
        pl.DataFrame(
            {
                "item_id": [10, 20, 30],
                "title": ["A (1990)", "B (1995)", "C (2000)"],
                "year": [1990, 1995, 2000],
                "genres": [["Drama"], ["Comedy", "Romance"], ["Horror", "Drama", "Sci-Fi"]],
            }
        ),
        MOVIES,
        "movies",
    )
    train = conform(
        pl.DataFrame({"user_id": [1, 2, 1], "item_id": [10, 20, 20], "rating": [5, 3, 4], "timestamp": [1, 2, 3]}),
        RATINGS,
        "ratings",
    )
    metadata = pl.DataFrame(
        {
            "item_id": [10, 20, 30],
            "vote_average": [8.0, 6.0, None],
            "vote_count": [999, 9, 99],
            "release_date": [dt.date(1990, 5, 1), None, dt.date(2000, 1, 1)],
        }
    )
    metadata = metadata.with_columns(
        *[pl.lit(None, dtype=t).alias(c) for c, t in METADATA.items() if c not in metadata.columns]
    )
    return users, movies, train, conform(metadata, METADATA, "metadata")


def _catalogue(movies: pl.DataFrame, metadata: pl.DataFrame) -> pl.DataFrame:
    """MM-ML-1M as FitData hands it to an arm (item_id)."""
    return build_catalogue(movies, metadata)


def test_vocabularies_come_from_train_only(tables):
    users, movies, train, metadata = tables
    enc = fit_encoder(FeatureConfig(), train, users, _catalogue(movies, metadata))
    x = enc.transform(np.array([1, 3, 3]), np.array([10, 30, 20]))
    cols = enc.user_columns + enc.movie_columns
    assert cols[:5] == ["user_id", "gender", "age", "occupation", "zip"]
    # User 3 and movie 30 are not in train: their ids take the reserved index.
    assert x[1, 0] == UNSEEN and x[0, 0] != UNSEEN
    assert x[1, 5] == UNSEEN and x[2, 5] != UNSEEN
    # User 3's gender F was seen in train (user 2), but occupation 13, age 56 and the zip were not.
    assert x[1, 1] == x[2, 1] == enc.vocabularies["gender"].index("F") + 1
    assert x[1, 2] == x[1, 3] == x[1, 4] == UNSEEN
    assert enc.vocabularies["zip"] == ["10001", "94110"]
    # A raw id missing from the users / movies tables gets the all-unseen row.
    assert np.all(enc.transform(np.array([999]), np.array([999])) == 0)


def test_genres_multi_hot_padding_and_unseen(tables):
    users, movies, train, metadata = tables
    enc = fit_encoder(FeatureConfig(use_metadata=False), train, users, _catalogue(movies, metadata))
    assert enc.genres_maxlen == 3
    assert enc.genre_vocabulary == ["Comedy", "Drama", "Romance"]  # genres of train movies 10 and 20
    x = enc.transform(np.array([1, 1, 1]), np.array([10, 20, 30]))
    genres = x[:, 6:9]
    code = {g: i + 2 for i, g in enumerate(enc.genre_vocabulary)}
    assert genres[0].tolist() == [code["Drama"], GENRE_PADDING, GENRE_PADDING]
    assert genres[1].tolist() == [code["Comedy"], code["Romance"], GENRE_PADDING]
    # Horror and Sci-Fi occur only outside train.
    assert genres[2].tolist() == [GENRE_UNSEEN, code["Drama"], GENRE_UNSEEN]
    assert x.shape[1] == enc.width == 9  # no dense columns without metadata


def test_dense_fields_standardised_on_train_movies(tables):
    users, movies, train, metadata = tables
    enc = fit_encoder(FeatureConfig(), train, users, _catalogue(movies, metadata))
    assert enc.movie_columns[-3:] == ["vote_average", "log_vote_count", "release_year"]
    x = enc.transform(np.array([1, 1, 1]), np.array([10, 20, 30]))
    mean, std = enc.dense_stats["vote_average"]
    assert (mean, std) == pytest.approx((7.0, np.std([8.0, 6.0], ddof=1)))
    assert x[0, -3] == pytest.approx((8.0 - mean) / std)
    assert x[2, -3] == 0.0  # missing vote average -> train mean
    # Movie 20 has no release date: the title's year stands in. Stats use train movies 10 and 20.
    y_mean, y_std = enc.dense_stats["release_year"]
    assert y_mean == pytest.approx(1992.5)
    assert x[1, -1] == pytest.approx((1995 - y_mean) / y_std)
    assert x[0, -2] == pytest.approx(
        (np.log(1000) - enc.dense_stats["log_vote_count"][0]) / enc.dense_stats["log_vote_count"][1]
    )


@pytest.mark.parametrize(
    "feature_set, user_cols, movie_cols",
    [
        (
            "all",
            ["user_id", "gender", "age", "occupation", "zip"],
            ["movie_id", "genres", "vote_average", "log_vote_count", "release_year"],
        ),
        ("user_id_only", ["user_id"], ["movie_id", "genres", "vote_average", "log_vote_count", "release_year"]),
        ("movie_id_only", ["user_id", "gender", "age", "occupation", "zip"], ["movie_id"]),
    ],
)
def test_feature_sets_of_table_4(tables, feature_set, user_cols, movie_cols):
    users, movies, train, metadata = tables
    enc = fit_encoder(FeatureConfig(feature_set=feature_set), train, users, _catalogue(movies, metadata))
    assert enc.user_columns == user_cols and enc.movie_columns == movie_cols


def test_layout_matches_deepctr_feature_index_and_round_trips(tables):
    from deepctr_torch.inputs import build_input_features

    users, movies, train, metadata = tables
    enc = fit_encoder(FeatureConfig(), train, users, _catalogue(movies, metadata))
    index = build_input_features(enc.feature_columns(embedding_dim=8))
    assert list(index) == enc.user_columns + enc.movie_columns
    assert max(end for _, end in index.values()) == enc.width
    assert index["genres"] == (6, 9)
    again = FeatureEncoder.from_saved(enc.to_json(), enc.arrays())
    u, m = np.array([1, 2, 3, 4]), np.array([10, 20, 30, 40])
    assert np.array_equal(again.transform(u, m), enc.transform(u, m))


def test_bad_input_names_the_table(tables):
    users, movies, train, metadata = tables
    with pytest.raises(ValueError, match="'users' lacks column"):
        fit_encoder(FeatureConfig(), train, users.drop("zip"), _catalogue(movies, metadata))
    with pytest.raises(ValueError, match="train split is empty"):
        fit_encoder(FeatureConfig(), train.clear(), users, _catalogue(movies, metadata))

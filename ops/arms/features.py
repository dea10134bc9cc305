"""Model inputs for the DeepCTR arms (A/B Agent §3.1, Appendix B; docs/definitions.md#lifecycle, step 5).

Features: user id, movie id, gender, age, occupation, zip, genres (multi-hot, pooled as a
variable-length sparse feature) and, when MM-ML-1M metadata is present, vote average,
log vote count and release year.  Table 4's ablations drop the user-side features
("user-id only") or the item-side ones ("movie-id only").

Every vocabulary and every dense statistic is fitted on the train split only, so that
nothing from validation or test leaks into the model.  Index 0 of every sparse feature is
the reserved "unseen" index: an id or a value absent from train maps there.  Genres use
0 as padding (masked by deepctr's pooling) and 1 for a genre unseen in train.

The encoder keeps one encoded row per user and one per movie; encoding a batch of
(user, movie) pairs is then two gathers and a concatenation, with no Python loop per pair.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import polars as pl
from pydantic import BaseModel

from ops.arms.base import ITEM
from ops.data.catalogue import has_metadata
from ops.environment import offline_defaults

FeatureSet = Literal["all", "user_id_only", "movie_id_only"]

# The item's DeepCTR feature (embedding) keeps its first name, MovieLens's: stored arms'
# weights (`embedding_dict.movie_id`), encoder.json vocabularies and encoder.npz arrays
# (`movie_ids`, `movie_rows`) are keyed by it, in homes and in registered models, so renaming
# it would orphan them.  The item column read from FitData is `item_id` (ops.arms.base.ITEM).
ITEM_FEATURE = "movie_id"

UNSEEN = 0  # reserved index of every sparse feature: a value absent from train
GENRE_PADDING = 0  # masked out by deepctr's mean pooling
GENRE_UNSEEN = 1  # a genre that no train movie carries


class FeatureConfig(BaseModel):
    """Which inputs a model sees (A/B Agent §3.2.3 and Table 4)."""

    # Table 4: "all"; "user_id_only" removes the user-side features (gender, age,
    # occupation, zip); "movie_id_only" removes the item-side features (genres and, as they
    # are item-side too, the TMDB fields).
    feature_set: FeatureSet = "all"
    # The user side of MovieLens-1M (A/B Agent §2.2: "original user attributes").
    user_features: tuple[str, ...] = ("gender", "age", "occupation", "zip")
    # MM-ML-1M fields used as dense inputs when metadata is present (A/B Agent §2.2, Table 1).
    dense_features: tuple[str, ...] = ("vote_average", "log_vote_count", "release_year")
    use_metadata: bool = True


def fit_encoder(
    config: FeatureConfig,
    train: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
) -> FeatureEncoder:
    """Fit vocabularies and dense statistics on `train` and encode every user and movie.

    `train` is a RATINGS frame; `users` follows ops.schema.USERS and `catalogue` is MM-ML-1M
    (ops.schema.MM_ML_1M, the `catalogue` asset): its metadata columns give the dense inputs.  Users and
    movies outside `train` still get a row (their ids map to UNSEEN, their side features
    are encoded with the train vocabularies), so cold users keep their demographics.
    """
    for name, frame, columns in (
        ("train", train, ("user_id", ITEM)),
        ("users", users, ("user_id", *config.user_features)),
        ("catalogue", catalogue, (ITEM, "genres")),
    ):
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"fit_encoder: table {name!r} lacks column(s) {missing}")
    if train.height == 0:
        raise ValueError("fit_encoder: the train split is empty")

    train_users = train.get_column("user_id").unique()
    train_movies = train.get_column(ITEM).unique()
    users = users.unique("user_id", keep="first").sort("user_id")
    movies = catalogue.sort(ITEM)

    user_side = list(config.user_features) if config.feature_set != "user_id_only" else []
    item_side = config.feature_set != "movie_id_only"
    dense = list(config.dense_features) if (item_side and config.use_metadata and has_metadata(catalogue)) else []

    vocabularies: dict[str, list[str]] = {"user_id": _vocabulary(train_users)}
    for name in user_side:
        seen = users.filter(pl.col("user_id").is_in(train_users.implode())).get_column(name)
        vocabularies[name] = _vocabulary(seen)
    vocabularies[ITEM_FEATURE] = _vocabulary(train_movies)
    train_movie_rows = movies.filter(pl.col(ITEM).is_in(train_movies.implode()))
    genre_vocabulary = _vocabulary(train_movie_rows.get_column("genres").explode()) if item_side else []
    genres_maxlen = max(1, int(movies.get_column("genres").list.len().max() or 1)) if item_side else 0

    dense_values = _dense_values(movies, dense)
    dense_stats = {}
    for name in dense:
        values = dense_values.filter(pl.col(ITEM).is_in(train_movies.implode())).get_column(name).drop_nulls()
        mean = float(values.mean()) if values.len() else 0.0
        std = float(values.std()) if values.len() > 1 else 1.0
        dense_stats[name] = (mean, std if std and std > 0 else 1.0)

    encoder = FeatureEncoder(
        user_columns=["user_id", *user_side],
        movie_columns=[ITEM_FEATURE] + (["genres"] if item_side else []) + dense,
        vocabularies=vocabularies,
        genre_vocabulary=genre_vocabulary,
        genres_maxlen=genres_maxlen,
        dense_stats=dense_stats,
    )
    encoder.user_ids, encoder.user_rows = encoder._encode_users(users)
    encoder.item_ids, encoder.movie_rows = encoder._encode_movies(movies, dense_values)
    return encoder


@dataclass
class FeatureEncoder:
    """Train-fitted vocabularies plus one encoded row per known user and movie.

    Row 0 of `user_rows` / `movie_rows` is all-unseen: ids absent from the users / movies
    tables land there.  Columns follow deepctr's feature index: user columns, then movie
    columns (movie id, `genres_maxlen` genre slots, dense values).
    """

    user_columns: list[str]
    movie_columns: list[str]
    vocabularies: dict[str, list[str]]
    genre_vocabulary: list[str]
    genres_maxlen: int
    dense_stats: dict[str, tuple[float, float]]
    user_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    user_rows: np.ndarray = field(default_factory=lambda: np.zeros((1, 0), np.float32))
    item_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    movie_rows: np.ndarray = field(default_factory=lambda: np.zeros((1, 0), np.float32))

    def transform(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        """Model input X (float32, one row per pair) for aligned arrays of raw ids."""
        user_ids = np.asarray(user_ids, dtype=np.int64)
        item_ids = np.asarray(item_ids, dtype=np.int64)
        if user_ids.shape != item_ids.shape:
            raise ValueError(f"transform: {user_ids.shape[0]} user ids but {item_ids.shape[0]} item ids")
        return np.concatenate([self.encoded_users(user_ids), self.encoded_movies(item_ids)], axis=1)

    def encoded_users(self, user_ids: np.ndarray) -> np.ndarray:
        """The user columns of `transform`'s rows, one row per raw user id."""
        return self.user_rows[_row_of(self.user_ids, np.asarray(user_ids, dtype=np.int64))]

    def encoded_movies(self, item_ids: np.ndarray) -> np.ndarray:
        """The movie columns of `transform`'s rows, one row per raw movie id."""
        return self.movie_rows[_row_of(self.item_ids, np.asarray(item_ids, dtype=np.int64))]

    def feature_columns(self, embedding_dim: int) -> list:
        """deepctr-torch feature columns in the same order as `transform`'s columns."""
        offline_defaults()  # deepctr-torch's version check off before its first import (ops.environment)
        from deepctr_torch.inputs import DenseFeat, SparseFeat, VarLenSparseFeat

        columns = []
        for name in self.user_columns + self.movie_columns:
            if name == "genres":
                columns.append(
                    VarLenSparseFeat(
                        SparseFeat("genres", len(self.genre_vocabulary) + 2, embedding_dim=embedding_dim),
                        maxlen=self.genres_maxlen,
                        combiner="mean",
                    )
                )
            elif name in self.dense_stats:
                columns.append(DenseFeat(name, 1))
            else:
                columns.append(SparseFeat(name, len(self.vocabularies[name]) + 1, embedding_dim=embedding_dim))
        return columns

    @property
    def width(self) -> int:
        return self.user_rows.shape[1] + self.movie_rows.shape[1]

    # -- persistence: JSON for vocabularies, npz for the encoded rows -------------------
    def to_json(self) -> str:
        return json.dumps(
            {
                "user_columns": self.user_columns,
                "movie_columns": self.movie_columns,
                "vocabularies": self.vocabularies,
                "genre_vocabulary": self.genre_vocabulary,
                "genres_maxlen": self.genres_maxlen,
                "dense_stats": {k: list(v) for k, v in self.dense_stats.items()},
            }
        )

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "user_ids": self.user_ids,
            "user_rows": self.user_rows,
            "movie_ids": self.item_ids,  # the stored name (ITEM_FEATURE)
            "movie_rows": self.movie_rows,
        }

    @classmethod
    def from_saved(cls, text: str, arrays: dict[str, np.ndarray]) -> FeatureEncoder:
        data = json.loads(text)
        data["dense_stats"] = {k: (float(v[0]), float(v[1])) for k, v in data["dense_stats"].items()}
        stored = {"user_ids": "user_ids", "user_rows": "user_rows", "item_ids": "movie_ids", "movie_rows": "movie_rows"}
        return cls(**data, **{k: np.asarray(arrays[name]) for k, name in stored.items()})

    # -- encoding of the side tables ------------------------------------------------------
    def _encode_users(self, users: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        columns = [_index(users.get_column(name), self.vocabularies[name]) for name in self.user_columns]
        return _with_unseen_row(users.get_column("user_id").to_numpy(), np.stack(columns, axis=1))

    def _encode_movies(self, movies: pl.DataFrame, dense_values: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        blocks = [_index(movies.get_column(ITEM), self.vocabularies[ITEM_FEATURE])[:, None]]
        if "genres" in self.movie_columns:
            blocks.append(self._encode_genres(movies.get_column("genres")))
        values = movies.select(ITEM).join(dense_values, on=ITEM, how="left")
        for name in self.movie_columns:
            if name in self.dense_stats:
                mean, std = self.dense_stats[name]
                # A missing value becomes the train mean, i.e. 0 after standardising.
                column = ((values.get_column(name).cast(pl.Float64) - mean) / std).fill_null(0.0).fill_nan(0.0)
                blocks.append(column.to_numpy()[:, None])
        return _with_unseen_row(movies.get_column(ITEM).to_numpy(), np.concatenate(blocks, axis=1))

    def _encode_genres(self, genres: pl.Series) -> np.ndarray:
        mapping = {g: i + 2 for i, g in enumerate(self.genre_vocabulary)}
        lengths = genres.list.len().fill_null(0).to_numpy().astype(np.int64)
        flat = genres.explode().drop_nulls() if genres.len() else genres.explode()
        codes = flat.replace_strict(mapping, default=GENRE_UNSEEN, return_dtype=pl.Int64).to_numpy()
        out = np.full((genres.len(), self.genres_maxlen), GENRE_PADDING, dtype=np.int64)
        rows = np.repeat(np.arange(genres.len()), lengths)
        slots = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        keep = slots < self.genres_maxlen
        out[rows[keep], slots[keep]] = codes[keep]
        return out


def _vocabulary(values: pl.Series) -> list[str]:
    """Sorted distinct non-null values as strings: index i + 1 in the model."""
    return sorted(values.drop_nulls().cast(pl.Utf8).unique().to_list())


def _index(values: pl.Series, vocabulary: list[str]) -> np.ndarray:
    mapping = {v: i + 1 for i, v in enumerate(vocabulary)}
    return values.cast(pl.Utf8).replace_strict(mapping, default=UNSEEN, return_dtype=pl.Int64).to_numpy()


def _with_unseen_row(ids: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    unseen = np.zeros((1, rows.shape[1]), dtype=np.float32)
    return ids.astype(np.int64), np.concatenate([unseen, rows.astype(np.float32)], axis=0)


def _row_of(known_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Row in the encoded table for each raw id (known_ids sorted); 0 when unknown."""
    if known_ids.size == 0:
        return np.zeros(ids.shape, dtype=np.int64)
    position = np.searchsorted(known_ids, ids)
    position = np.clip(position, 0, known_ids.size - 1)
    return np.where(known_ids[position] == ids, position + 1, 0)


def _dense_values(catalogue: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Raw dense values per movie: vote average, log(1 + vote count), release year."""
    if not names:
        return catalogue.select(ITEM)
    title_year = pl.col("year") if "year" in catalogue.columns else pl.lit(None, pl.Int64)
    missing = [c for c in (ITEM, "vote_average", "vote_count", "release_date") if c not in catalogue.columns]
    if missing:
        raise ValueError(f"the catalogue (MM-ML-1M's columns) lacks column(s) {missing}")
    frame = catalogue.select(
        ITEM,
        title_year.alias("title_year"),
        pl.col("vote_average").cast(pl.Float64),
        (pl.col("vote_count").cast(pl.Float64) + 1.0).log().alias("log_vote_count"),
        pl.col("release_date").dt.year().cast(pl.Float64).alias("release_year"),
    ).with_columns(
        # The title's year stands in when the metadata source has no release date.
        pl.coalesce("release_year", pl.col("title_year").cast(pl.Float64)).alias("release_year")
    )
    return frame.select(ITEM, *names)

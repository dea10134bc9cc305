"""A tiny seeded MovieLens-shaped data set with planted tastes, for recommender tests.

Each user has a taste over the 18 genres; each movie has one to three genres, a quality
and a popularity.  A user rates movies drawn by popularity and taste; the rating rises
with taste match and quality.  So popularity carries signal (Pop beats Random) and the
user x genre interaction carries more (a factorisation model beats Pop).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from ops.schema import GENRES, MOVIES, RATINGS, USERS, conform


def planted_movielens(
    seed: int = 7, n_users: int = 300, n_movies: int = 240, ratings_per_user: int = 60
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(users, movies, ratings) frames in the ops.schema layouts."""
    rng = np.random.default_rng(seed)
    n_genres = len(GENRES)
    taste = rng.dirichlet(np.full(n_genres, 0.3), size=n_users)
    movie_genres = [rng.choice(n_genres, size=rng.integers(1, 4), replace=False) for _ in range(n_movies)]
    membership = np.zeros((n_movies, n_genres))
    for m, gs in enumerate(movie_genres):
        membership[m, gs] = 1.0 / len(gs)
    quality = rng.normal(0.0, 0.5, n_movies)
    # Good movies are watched more, as on MovieLens, but far from perfectly.
    popularity = np.exp(1.5 * quality + rng.normal(0.0, 0.7, n_movies))

    affinity = taste @ membership.T  # users x movies, in [0, 1]
    affinity = (affinity - affinity.mean(axis=1, keepdims=True)) / (affinity.std(axis=1, keepdims=True) + 1e-9)
    weights = popularity[None, :] * np.exp(1.2 * affinity)
    rows = []
    for u in range(n_users):
        p = weights[u] / weights[u].sum()
        chosen = rng.choice(n_movies, size=ratings_per_user, replace=False, p=p)
        raw = 3.2 + 1.1 * affinity[u, chosen] + quality[chosen] + rng.normal(0, 0.6, chosen.size)
        stars = np.clip(np.rint(raw), 1, 5).astype(int)
        times = rng.integers(978_300_000, 978_300_000 + 10_000_000, chosen.size)
        rows.extend(zip([u + 1] * chosen.size, (chosen + 1).tolist(), stars.tolist(), times.tolist()))

    users = pl.DataFrame(
        {
            "user_id": np.arange(1, n_users + 1),
            "gender": rng.choice(["M", "F"], n_users),
            "age": rng.choice([1, 18, 25, 35, 45, 50, 56], n_users),
            "occupation": rng.integers(0, 21, n_users),
            "zip": [f"{z:05d}" for z in rng.integers(0, 99_999, n_users)],
            "has_ratings": np.ones(n_users, dtype=bool),
        }
    )
    movies = pl.DataFrame(
        {
            "item_id": np.arange(1, n_movies + 1),
            "title": [f"Movie {m} (19{50 + m % 50})" for m in range(1, n_movies + 1)],
            "year": [1950 + m % 50 for m in range(1, n_movies + 1)],
            "genres": [[GENRES[g] for g in sorted(gs)] for gs in movie_genres],
        }
    )
    ratings = pl.DataFrame(rows, schema=["user_id", "item_id", "rating", "timestamp"], orient="row")
    return conform(users, USERS, "users"), conform(movies, MOVIES, "movies"), conform(ratings, RATINGS, "ratings")


def planted_metadata(movies: pl.DataFrame, seed: int = 7) -> pl.DataFrame:
    """A METADATA frame for `movies` with vote average, vote count and release date, a few
    values missing, so that the dense inputs are exercised."""
    import datetime as dt

    from ops.schema import METADATA

    rng = np.random.default_rng(seed)
    n = movies.height
    vote_average = rng.uniform(3, 9, n).round(1).tolist()
    vote_average[0] = None
    years = movies.get_column("year").to_list()
    frame = pl.DataFrame(
        {
            "item_id": movies.get_column("item_id"),
            "vote_average": vote_average,
            "vote_count": rng.integers(0, 5000, n),
            "release_date": [None if i == 1 else dt.date(y, 1 + i % 12, 1) for i, y in enumerate(years)],
            "metadata_source": ["synthetic"] * n,
        }
    )
    frame = frame.with_columns(*[pl.lit(None, dtype=t).alias(c) for c, t in METADATA.items() if c not in frame.columns])
    return conform(frame, METADATA, "metadata")


def write_ml1m(folder: Path, users: pl.DataFrame, movies: pl.DataFrame, ratings: pl.DataFrame) -> Path:
    """The planted tables as an ML-1M folder (users.dat, movies.dat, ratings.dat); `folder`."""
    folder.mkdir(parents=True)
    (folder / "users.dat").write_text("".join(f"{u}::{g}::{a}::{o}::{z}\n" for u, g, a, o, z, _ in users.iter_rows()))
    (folder / "movies.dat").write_text("".join(f"{m}::{t}::{'|'.join(gs)}\n" for m, t, _, gs in movies.iter_rows()))
    (folder / "ratings.dat").write_text("".join(f"{u}::{m}::{r}::{t}\n" for u, m, r, t in ratings.iter_rows()))
    return folder

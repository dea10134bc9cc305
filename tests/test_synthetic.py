"""The synthetic source: schemas, determinism, MovieLens-like marginals, and the planted
structure that later stages must recover (ops/synthetic.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ops.data.synthetic import SyntheticConfig, SyntheticData, generate
from ops.data.synthetic_posters import PosterConfig
from ops.schema import GENRES, HIDDEN_TASTES, METADATA, MOVIES, RATINGS, USERS

# Smaller than the default so the file stays fast on shared cores, large enough for the
# statistics below to be stable (about 40,000 ratings).
SMALL = dict(n_users=500, n_movies=800, mean_ratings_per_user=80.0)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> SyntheticData:
    return generate(SyntheticConfig(seed=0, **SMALL), tmp_path_factory.mktemp("posters"))


def test_tables_conform_to_the_shared_schemas(data: SyntheticData) -> None:
    for frame, schema in (
        (data.users, USERS),
        (data.movies, MOVIES),
        (data.ratings, RATINGS),
        (data.metadata, METADATA),
        (data.hidden_tastes, HIDDEN_TASTES),
    ):
        assert frame.schema == pl.Schema(schema)
    assert data.users.height == SMALL["n_users"] and data.movies.height == SMALL["n_movies"]
    assert data.users["user_id"].is_unique().all() and data.movies["item_id"].is_unique().all()
    assert data.metadata["item_id"].to_list() == data.movies["item_id"].to_list()
    assert data.metadata["tmdb_id"].is_unique().all()
    assert set(data.metadata["metadata_source"].unique()) == {"synthetic"}
    assert data.ratings.select("user_id", "item_id").is_unique().all(), "a (user, movie) pair is rated twice"
    assert set(data.ratings["user_id"].unique()) <= set(data.users["user_id"])
    assert set(data.ratings["item_id"].unique()) <= set(data.movies["item_id"])


def test_users_and_movies_use_movielens_code_sets_and_title_format(data: SyntheticData) -> None:
    users = data.users
    assert set(users["gender"].unique()) == {"M", "F"}
    assert set(users["age"].unique()) <= {1, 18, 25, 35, 45, 50, 56}
    assert users["occupation"].is_between(0, 20).all()
    assert users["zip"].str.contains(r"^\d{5}$").all()
    assert users["has_ratings"].all()
    movies = data.movies
    assert movies["title"].str.contains(r"^.+ \((19[3-9]\d|2000)\)$").all()
    assert (movies["title"].str.extract(r"\((\d{4})\)$").cast(pl.Int64) == movies["year"]).all()
    assert movies["title"].str.contains(r", (The|A|An) \(\d{4}\)$").any(), "no title with the article moved to the end"
    assert movies["title"].is_unique().all()
    assert movies["genres"].list.len().is_between(1, 3).all()
    assert set(movies["genres"].explode().unique()) <= set(GENRES)
    # More recent movies are more common, as in ML-1M.
    assert (movies["year"] >= 1990).mean() > 0.4 and (movies["year"] < 1960).mean() < 0.1


def test_metadata_ranges_and_dates(data: SyntheticData) -> None:
    meta = data.metadata
    assert meta["vote_average"].is_between(0, 10).all()
    assert 5.5 < meta["vote_average"].mean() < 7.5
    assert (meta["vote_count"] >= 0).all()
    counts = meta["vote_count"].sort(descending=True).to_numpy()
    assert counts[: len(counts) // 10].sum() > 0.35 * counts.sum(), "vote counts are not long-tailed"
    assert (meta["release_date"].dt.year() == data.movies["year"]).all()
    assert meta["overview"].str.len_chars().min() > 40
    assert meta["directors"].list.len().min() >= 1 and meta["actors"].list.len().min() >= 3


def test_same_seed_gives_identical_frames_and_poster_bytes(tmp_path: Path) -> None:
    config = SyntheticConfig(seed=3, n_users=60, n_movies=80, mean_ratings_per_user=30.0)
    first = generate(config, tmp_path / "a")
    second = generate(config, tmp_path / "b")
    other = generate(config.model_copy(update={"seed": 4}), tmp_path / "c")
    for name in ("users", "movies", "ratings", "hidden_tastes"):
        assert getattr(first, name).equals(getattr(second, name)), name
        assert not getattr(first, name).equals(getattr(other, name)), name
    strip = pl.exclude("poster_small", "poster_large")
    assert first.metadata.select(strip).equals(second.metadata.select(strip))
    for column in ("poster_small", "poster_large"):
        for a, b in zip(first.metadata[column], second.metadata[column], strict=True):
            assert a != b and Path(a).read_bytes() == Path(b).read_bytes()
    # A re-run into the same folder rewrites nothing (the bytes are already there).
    mtimes = [Path(p).stat().st_mtime_ns for p in first.metadata["poster_large"]]
    generate(config, tmp_path / "a")
    assert [Path(p).stat().st_mtime_ns for p in first.metadata["poster_large"]] == mtimes


def test_rating_distribution_is_movielens_like(data: SyntheticData) -> None:
    shares = data.ratings["rating"].value_counts(normalize=True).sort("rating")["proportion"].to_list()
    target = (0.06, 0.11, 0.26, 0.35, 0.22)
    assert len(shares) == 5 and int(np.argmax(shares)) == 3, f"the peak is not at 4: {shares}"
    for got, want in zip(shares, target, strict=True):
        assert abs(got - want) < 0.02, f"rating shares {shares} are not within 0.02 of {target}"


def test_activity_and_popularity_are_long_tailed(data: SyntheticData) -> None:
    per_user = data.ratings.group_by("user_id").len()["len"]
    assert per_user.min() >= 20, "a user has fewer than 20 ratings (ML-1M guarantees 20)"
    assert per_user.max() > 4 * per_user.median() and per_user.mean() > 1.2 * per_user.median()
    assert 70 < per_user.mean() < 90
    per_movie = data.ratings.group_by("item_id").len()["len"].sort(descending=True).to_numpy()
    top_tenth = per_movie[: SMALL["n_movies"] // 10].sum() / per_movie.sum()
    assert top_tenth > 0.4, f"top 10 % of movies get only {top_tenth:.2f} of the ratings"
    assert _gini(per_movie) > 0.5


def test_timestamps_lie_in_range_and_users_span_the_chronological_split(data: SyntheticData) -> None:
    config = SyntheticConfig()
    start = dt.datetime.combine(config.start_date, dt.time(), tzinfo=dt.UTC).timestamp()
    end = dt.datetime.combine(config.end_date, dt.time(23, 59, 59), tzinfo=dt.UTC).timestamp()
    ts = data.ratings["timestamp"]
    assert ts.min() >= start and ts.max() <= end
    assert ts.max() - ts.min() > 2 * 365 * 86400, "ratings do not spread over several years"
    ordered = data.ratings.sort("timestamp", "user_id", "item_id")
    n = ordered.height
    train, test = ordered[: int(0.7 * n)], ordered[int(0.9 * n) :]
    known = test["user_id"].is_in(train["user_id"].unique().implode())
    # ML-1M users 1-1999: 78 % of test users also rate in the train window.
    assert known.mean() > 0.6, f"only {known.mean():.2f} of the test ratings come from users seen in train"
    # Each user's ratings cluster in an activity window that opens with a first-day burst
    # (ML-1M users 1-1999: 82 % of a user's ratings fall on the first day, on average).
    per_user = data.ratings.group_by("user_id").agg(
        first_day=((pl.col("timestamp") - pl.col("timestamp").min()) < 86400).mean(),
        span=pl.col("timestamp").max() - pl.col("timestamp").min(),
    )
    assert per_user["first_day"].mean() > 0.3
    assert per_user["span"].median() < 0.5 * (ts.max() - ts.min())


def test_hidden_tastes_are_complete_and_consistent(data: SyntheticData) -> None:
    tastes = data.hidden_tastes
    assert tastes["user_id"].to_list() == data.users["user_id"].to_list()
    weights = np.array(tastes["genre_weights"].to_list())
    assert weights.shape == (SMALL["n_users"], len(GENRES))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-9)
    favourite_mass = []
    for row, favourites in zip(weights, tastes["favourite_genres"], strict=True):
        assert 2 <= len(favourites) <= 3
        assert [GENRES[i] for i in np.argsort(-row, kind="stable")[: len(favourites)]] == list(favourites)
        favourite_mass.append(row[[GENRES.index(g) for g in favourites]].sum())
    # 2-3 of 18 genres hold most of the weight (uniform weights would give them 11-17 %).
    assert np.mean(favourite_mass) > 0.7 and np.min(favourite_mass) > 0.35, (
        "taste is not concentrated on the favourites"
    )
    assert set(tastes["palette_preference"].unique()) <= {"warm", "cool", "dark", "bright"}
    assert (tastes["preferred_era"] % 10 == 0).all() and tastes["preferred_era"].is_between(1930, 2000).all()
    directors = set(data.metadata["directors"].explode())
    assert set(tastes["favourite_directors"].explode()) <= directors


def test_demographics_shift_tastes(data: SyntheticData) -> None:
    """User-side features must inform a CTR model (A/B Agent Table 4)."""
    joined = data.users.join(data.hidden_tastes, on="user_id")
    romance = GENRES.index("Romance")
    by_gender = joined.group_by("gender").agg(pl.col("genre_weights").list.get(romance).mean().alias("w"))
    weight = dict(by_gender.iter_rows())
    assert weight["F"] > weight["M"] + 0.05, f"Romance weight F {weight['F']:.3f} vs M {weight['M']:.3f}"
    eras = dict(joined.group_by(pl.col("age") >= 45).agg(pl.col("preferred_era").mean()).iter_rows())
    assert eras[False] - eras[True] > 10, f"older users do not prefer older films: {eras}"


def test_users_rate_their_favourite_genres_higher(data: SyntheticData) -> None:
    rated = (
        data.ratings.join(data.movies.select("item_id", "genres"), on="item_id")
        .join(data.hidden_tastes.select("user_id", "favourite_genres"), on="user_id")
        .with_columns(favourite=pl.col("genres").list.set_intersection("favourite_genres").list.len() > 0)
    )
    means = dict(rated.group_by("favourite").agg(pl.col("rating").mean()).iter_rows())
    assert means[True] - means[False] > 0.75, f"favourite-genre mean {means[True]:.2f} vs others {means[False]:.2f}"


def test_poster_palettes_follow_the_genre(data: SyntheticData) -> None:
    from PIL import Image

    config = PosterConfig()
    main = data.movies.with_columns(single=pl.col("genres").list.len() == 1, genre=pl.col("genres").list.first())
    meta = data.metadata.join(main.select("item_id", "single", "genre"), on="item_id")
    brightness: dict[str, list[float]] = {}
    for row in meta.iter_rows(named=True):
        small, large = Image.open(row["poster_small"]), Image.open(row["poster_large"])
        small.load(), large.load()
        assert small.size == config.small_size and large.size == config.large_size
        if row["single"] and row["genre"] in ("Horror", "Comedy", "Sci-Fi", "Romance"):
            pixels = np.asarray(large.convert("RGB"), dtype=float)
            brightness.setdefault(row["genre"], []).append(pixels.mean())
            if row["genre"] == "Sci-Fi":  # cool: blue above red
                assert pixels[..., 2].mean() > pixels[..., 0].mean()
            if row["genre"] == "Romance":  # pink / red: red above blue and green
                assert pixels[..., 0].mean() > max(pixels[..., 1].mean(), pixels[..., 2].mean())
    assert min(len(v) for v in brightness.values()) >= 3, {k: len(v) for k, v in brightness.items()}
    horror, comedy = np.mean(brightness["Horror"]), np.mean(brightness["Comedy"])
    assert comedy - horror > 80, f"Horror posters ({horror:.0f}) are not clearly darker than Comedy ({comedy:.0f})"


def test_planted_genre_taste_predicts_held_out_likes(data: SyntheticData) -> None:
    """Recoverability: a per-user genre affinity from the first 70 % (by time) of ratings
    ranks the held-out ratings >= 4 above the others (AUC > 0.6; chance is 0.5)."""
    ordered = data.ratings.sort("timestamp", "user_id", "item_id")
    cut = int(0.7 * ordered.height)
    genres = data.movies.select("item_id", "genres")
    train = ordered[:cut].join(genres, on="item_id")
    held_out = ordered[cut:].join(genres, on="item_id")
    user_mean = train.group_by("user_id").agg(pl.col("rating").mean().alias("user_mean"))
    prior = 5.0  # shrink a genre mean seen few times towards the user's mean
    affinity = (
        train.explode("genres")
        .group_by("user_id", "genres")
        .agg(pl.col("rating").sum().alias("s"), pl.len().alias("n"))
        .join(user_mean, on="user_id")
        .with_columns(genre_mean=(pl.col("s") + prior * pl.col("user_mean")) / (pl.col("n") + prior))
    )
    scored = (
        held_out.with_row_index("row")
        .explode("genres")
        .join(affinity.select("user_id", "genres", "genre_mean"), on=["user_id", "genres"], how="left")
        .join(user_mean, on="user_id", how="left")
        .group_by("row")
        .agg(pl.col("rating").first(), pl.col("genre_mean").fill_null(pl.col("user_mean")).mean().alias("score"))
        .drop_nulls("score")
    )
    auc = _auc(scored["score"].to_numpy(), (scored["rating"] >= 4).to_numpy())
    assert scored.height > 0.5 * held_out.height
    assert auc > 0.6, f"genre affinity AUC {auc:.3f}"


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="rating_shares"):
        SyntheticConfig(rating_shares=(0.2, 0.2, 0.2, 0.2, 0.3))
    with pytest.raises(ValueError, match="start_date"):
        SyntheticConfig(start_date=dt.date(2003, 1, 1), end_date=dt.date(2000, 1, 1))
    with pytest.raises(ValueError, match="palettes"):
        PosterConfig(palettes={})


def _gini(values: np.ndarray) -> float:
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    return float((2 * np.arange(1, n + 1) - n - 1) @ x / (n * x.sum()))


def _auc(score: np.ndarray, label: np.ndarray) -> float:
    """Mann-Whitney AUC with average ranks for ties."""
    from scipy.stats import rankdata

    ranks = rankdata(score)
    pos = label.astype(bool)
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))

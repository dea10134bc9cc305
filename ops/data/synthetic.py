"""The synthetic MovieLens source: users, movies, ratings and TMDB-like side information
with planted preferences (docs/definitions.md#embedded-defaults; lifecycle steps 1 and 2).

One concept, the planted world's generator (its truth is in `ops.data.synthetic_truth`, its
TMDB-like side information in `ops.data.synthetic_side_info`).

It stands in for ML-1M plus the TMDB crawl (A/B Agent §2.2, MM-ML-1M) when there is no
network, and it is what the tests of every later stage run on.  The point of it is the
*planted* structure, kept in `hidden_tastes` so that later stages can be checked against it:

- each user has a genre taste concentrated on 2-3 favourite genres, shifted by gender, age
  and occupation (so user-side features inform a CTR model, as in A/B Agent Table 4), a
  preferred release decade, a few favourite directors, a poster palette preference tied
  to the favourite genre, a taste strength and a rating bias (SimUSER's pickiness);
- each movie has genres, a year, a director, a latent quality (seen in vote_average) and a
  popularity (seen in vote_count), and a poster whose palette follows the main genre;
- who rates what follows popularity (long-tailed) times taste: the first session leans
  on popularity (MovieLens has a newcomer rate well-known films), later visits lean on
  taste; the rating follows taste, quality, the user's bias and noise, cut into 1..5 at
  the MovieLens-1M shares; each user's ratings fall in an activity window (a first-day
  burst, then returns), so a chronological 7:2:1 split keeps users on both sides and
  what a user rates in the test window is predictable from that user's train history.

Calibration (default config, seed 0, `python -m bench.sources synthetic --deepfm`): on a chronological
7:2:1 split, NDCG@20 is Random 0.013, Pop 0.092 (the A/B Agent paper: 0.088 on ML-1M),
the project's DeepFM arm 0.257, a logistic regression on likes with user x genre crosses
0.167, and the hidden tastes themselves 0.279.  The tests pin the marginals and the
planted effects.

`generate(config, poster_dir)` returns the five tables, conformed to `ops.schema`.
Everything is drawn from one seed: the same config gives identical frames and identical
poster bytes."""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from pydantic import BaseModel, Field, model_validator

from ops.data import synthetic_vocabulary as vocab
from ops.data.synthetic_posters import PALETTE_FAMILIES, PosterConfig, palette_family, write_posters
from ops.data.synthetic_priors import (
    AGE_GENRE_SHIFT,
    ERA_CENTRE_BY_AGE,
    GENDER_GENRE_SHIFT,
    GENRE_COMPANIONS,
    ML1M_AGE_COUNTS,
    ML1M_GENRE_COUNTS,
    ML1M_OCCUPATION_COUNTS,
    ML1M_RATING_SHARES,
    ML1M_ZIP_FIRST_DIGIT_COUNTS,
    OCCUPATION_AGE_BOOST,
    OCCUPATION_GENRE_SHIFT,
)
from ops.data.synthetic_side_info import side_information
from ops.data.synthetic_text import titles_of
from ops.data.synthetic_truth import ground_truth
from ops.schema import (
    AGE_CODES,
    GENRES,
    GROUND_TRUTH,
    HIDDEN_TASTES,
    METADATA,
    MOVIES,
    OCCUPATIONS,
    RATINGS,
    USERS,
    conform,
)


class SyntheticConfig(BaseModel):
    """What the generator plants.  Defaults give a catalogue the whole graph (DeepFM on the
    train split, agents browsing) runs through in minutes on 2 cores."""

    seed: int = 0
    # Size: about 1/6 of ML-1M users and 1/3 of its movies, 80 ratings per user.
    n_users: int = Field(1000, ge=10)
    n_movies: int = Field(1200, ge=50)
    mean_ratings_per_user: float = Field(80.0, gt=0)
    min_ratings_per_user: int = Field(20, ge=1)  # ML-1M README: "Each user has at least 20 ratings"
    max_ratings_share: float = Field(0.5, gt=0, le=1)  # the heaviest user rates at most this share of movies
    activity_sigma: float = Field(1.0, gt=0)  # log-normal spread of ratings per user (long tail)
    # Time span of ML-1M ratings (README: 2000-04-25 .. 2003-02-28).
    start_date: dt.date = dt.date(2000, 4, 25)
    end_date: dt.date = dt.date(2003, 2, 28)

    # Catalogue.
    first_year: int = 1930
    last_year: int = 2000  # ML-1M's last release year
    year_recency_scale: float = Field(14.0, gt=0)  # P(year) ∝ exp((year - last_year) / scale)
    genre_count_probs: tuple[float, ...] = (0.5, 0.35, 0.15)  # 1, 2 or 3 genres per movie
    genre_counts: dict[str, int] = Field(default_factory=lambda: dict(ML1M_GENRE_COUNTS))
    genre_companions: dict[str, tuple[str, ...]] = Field(default_factory=lambda: dict(GENRE_COMPANIONS))
    companion_share: float = Field(0.75, ge=0, le=1)  # extra genres drawn from the companions
    article_share: float = Field(0.3, ge=0, le=1)  # titles with "The"/"A"/"An", moved to the end
    n_directors: int = Field(220, ge=5)
    director_genre_counts: tuple[int, int] = (1, 2)  # typical genres per director
    director_productivity_zipf: float = Field(0.8, ge=0)  # some directors make many films
    director_genre_fidelity: float = Field(0.85, ge=0, le=1)  # movies made in a typical genre of the director
    n_actors: int = Field(700, ge=5)
    actors_per_movie: tuple[int, int] = (3, 5)
    actor_fame_zipf: float = Field(0.9, ge=0)
    # Popularity: log-normal, log weight = scale x (a latent that mixes quality and hype,
    # minus age).  Tying it to quality makes popular movies better liked, as in ML-1M
    # (users 1-1999: the top 10 % of movies by count have 65 % ratings >= 4, the bottom
    # half 39 %; here about 68 % and 36 %), and lets a CTR model trained on likes rank
    # what users will watch.  Scale 2.8 gives the top 10 % of movies ~44 % of ratings
    # (ML-1M: 43 %).
    popularity_log_scale: float = Field(2.8, ge=0)
    popularity_quality_corr: float = Field(0.8, ge=-1, le=1)
    popularity_recency_per_decade: float = Field(0.25, ge=0)  # older movies less watched
    # TMDB-like vote fields (TMDB vote averages of ML-1M movies: mean ≈ 6.4, sd ≈ 0.8).
    vote_average_mean: float = 6.4
    vote_average_quality_scale: float = 0.75
    vote_average_noise: float = 0.3
    vote_count_log_mean: float = 5.0
    vote_count_log_popularity_scale: float = 1.3
    vote_count_log_noise: float = 0.5

    # Users (ML-1M code-set frequencies).
    female_share: float = Field(1709 / 6040, ge=0, le=1)
    age_counts: dict[int, int] = Field(default_factory=lambda: dict(ML1M_AGE_COUNTS))
    occupation_counts: tuple[int, ...] = ML1M_OCCUPATION_COUNTS
    occupation_age_boost: dict[int, dict[int, float]] = Field(default_factory=lambda: dict(OCCUPATION_AGE_BOOST))
    zip_first_digit_counts: tuple[int, ...] = ML1M_ZIP_FIRST_DIGIT_COUNTS
    # Hidden tastes.
    favourite_genre_counts: tuple[int, ...] = (2, 3)
    favourite_prior_power: float = Field(0.5, ge=0)  # flattens the catalogue genre frequencies
    # Scales the demographic genre shifts.  At 2.5 gender, age and occupation carry enough
    # of a user's taste that a CTR model learns it from shared feature embeddings, not only
    # from a user id seen ~56 times (A/B Agent Table 4: user-side features matter most).
    # Measured with the project's DeepFM arm on the default config: NDCG@20 0.04 at 1.0 and
    # 0.26 at 2.5, Pop 0.08-0.09 (python -m bench.sources synthetic --deepfm).
    demographic_strength: float = Field(2.5, ge=0)
    gender_genre_shift: dict[str, dict[str, float]] = Field(default_factory=lambda: dict(GENDER_GENRE_SHIFT))
    age_genre_shift: dict[int, dict[str, float]] = Field(default_factory=lambda: dict(AGE_GENRE_SHIFT))
    occupation_genre_shift: dict[int, dict[str, float]] = Field(default_factory=lambda: dict(OCCUPATION_GENRE_SHIFT))
    favourite_concentration: float = Field(6.0, gt=0)  # Dirichlet mass on each favourite genre
    other_concentration: float = Field(0.25, gt=0)  # ... and on each other genre
    era_centre_by_age: dict[int, int] = Field(default_factory=lambda: dict(ERA_CENTRE_BY_AGE))
    era_sd_years: float = Field(9.0, ge=0)
    era_width_years: float = Field(10.0, gt=0)  # how fast era affinity falls off the decade's centre
    n_favourite_directors: int = Field(3, ge=0)
    palette_follows_taste: float = Field(0.7, ge=0, le=1)  # palette preference = top genre's family
    taste_strength_range: tuple[float, float] = (0.6, 1.4)
    rating_bias_sd: float = Field(0.3, ge=0)  # pickiness (SimUSER)

    # Affinity of a user for a movie: weights of its parts.
    genre_weight: float = 2.2
    era_weight: float = 0.5
    director_weight: float = 0.8
    palette_weight: float = 0.5
    # Who rates what: log-weight = a x log popularity + b x affinity, per phase; the first
    # session follows popularity, returns follow taste (see _who_rates_what).
    first_session_popularity: float = Field(1.0, ge=0)
    first_session_taste: float = Field(1.6, ge=0)
    return_popularity: float = Field(0.7, ge=0)
    return_taste: float = Field(2.5, ge=0)
    # The rating: taste + quality + bias + noise, cut at the ML-1M shares.
    rating_taste: float = Field(1.0, ge=0)
    rating_quality: float = Field(1.0, ge=0)
    rating_noise_sd: float = Field(0.55, ge=0)
    rating_shares: tuple[float, float, float, float, float] = ML1M_RATING_SHARES

    # The logging policy (docs/definitions.md#the-truth): how strongly the log's production
    # system led with the popular; it scales the popularity terms of who rates what (0 none,
    # 1 the default world above, 2.5 strong).
    exposure_bias: float = Field(1.0, ge=0)
    # The planted uptake: P(click | shown) = sigmoid(click_taste x affinity + click_quality x
    # quality + c), c such that a uniformly random item is clicked at click_base_rate.
    click_taste: float = Field(2.5, ge=0)  # the return visits' taste weight (return_taste)
    click_quality: float = Field(0.5, ge=0)  # the vote average is on the card
    click_base_rate: float = Field(0.1, gt=0, lt=1)
    # The random bucket: this share of users shown this many unrated items, judged only.
    random_exposure_share: float = Field(0.3, ge=0, le=1)
    random_exposure_items: int = Field(10, ge=0)

    # Activity windows: arrival over the span (Beta), a first-day burst, then returns.
    arrival_beta: tuple[float, float] = (0.7, 6.0)
    burst_share_beta: tuple[float, float] = (2.0, 3.0)  # share of a user's ratings in the first session
    burst_hours: float = Field(3.0, gt=0)
    return_days_median: float = Field(500.0, gt=0)  # log-normal length of the returning window
    return_days_sigma: float = Field(0.7, ge=0)

    posters: PosterConfig = Field(default_factory=PosterConfig)

    @model_validator(mode="after")
    def _check(self) -> SyntheticConfig:
        if self.start_date >= self.end_date:
            raise ValueError(f"SyntheticConfig: start_date {self.start_date} must be before end_date {self.end_date}")
        if self.first_year >= self.last_year:
            raise ValueError(f"SyntheticConfig: first_year {self.first_year} must be before last_year {self.last_year}")
        if abs(sum(self.rating_shares) - 1) > 1e-6 or min(self.rating_shares) <= 0:
            raise ValueError(f"SyntheticConfig.rating_shares must be positive and sum to 1, got {self.rating_shares}")
        unknown = sorted(set(self.genre_counts) - set(GENRES))
        if unknown or set(self.genre_counts) != set(GENRES):
            raise ValueError(f"SyntheticConfig.genre_counts must give every genre of GENRES once; unknown {unknown}")
        if len(self.occupation_counts) != len(OCCUPATIONS):
            raise ValueError(
                f"SyntheticConfig.occupation_counts needs {len(OCCUPATIONS)} entries, got {len(self.occupation_counts)}"
            )
        if set(self.age_counts) != set(AGE_CODES):
            raise ValueError(f"SyntheticConfig.age_counts must cover the ML-1M age codes {AGE_CODES}")
        if self.min_ratings_per_user > self.max_ratings_share * self.n_movies:
            raise ValueError("SyntheticConfig: min_ratings_per_user exceeds max_ratings_share * n_movies")
        if self.mean_ratings_per_user < self.min_ratings_per_user:
            raise ValueError("SyntheticConfig: mean_ratings_per_user is below min_ratings_per_user")
        return self


@dataclass(frozen=True)
class SyntheticData:
    """The generator's tables, each conformed to its `ops.schema` schema."""

    users: pl.DataFrame  # USERS
    movies: pl.DataFrame  # MOVIES
    ratings: pl.DataFrame  # RATINGS
    metadata: pl.DataFrame  # METADATA, metadata_source = "synthetic"
    hidden_tastes: pl.DataFrame  # HIDDEN_TASTES, one row per user
    # GROUND_TRUTH: every user's exact P(click | shown) and P(like | shown) for every movie
    # (judge "planted"), then the random bucket's reactions (judge "random_exposure").
    truth: pl.DataFrame


def generate(config: SyntheticConfig, poster_dir: Path) -> SyntheticData:
    """Draw the whole synthetic data set and write its posters under `poster_dir`."""
    # Spawned children depend on their index only: the ninth stream (the random bucket) leaves
    # the first eight, and so every frame of a world without it, as they were.
    streams = np.random.SeedSequence(config.seed).spawn(9)
    rng_people, rng_movies, rng_users, rng_tastes, rng_pick, rng_rate, rng_time, rng_text, rng_bucket = (
        np.random.default_rng(s) for s in streams
    )

    directors, director_genres, director_weight = _directors(config, rng_people)
    actors, actor_weight = _actors(config, rng_people)
    catalogue = _catalogue(config, rng_movies, directors, director_genres, director_weight, actors, actor_weight)
    users = _users(config, rng_users)
    films_per_director = np.bincount(catalogue.director, minlength=len(directors))
    tastes = _hidden_tastes(config, rng_tastes, users, directors, director_genres, films_per_director)
    affinity = _affinity(config, tastes, catalogue)
    # The rating scale is the users' own: cut on the default world's log whatever the strength.
    default = config.model_copy(update={"exposure_bias": 1.0})
    reference = (
        None
        if config.exposure_bias == 1.0
        else _who_rates_what(default, copy.deepcopy(rng_pick), catalogue, affinity)[0]
    )
    picks, n_first_session = _who_rates_what(config, rng_pick, catalogue, affinity)
    ratings, cuts = _ratings(config, rng_rate, rng_time, picks, n_first_session, catalogue, tastes, affinity, reference)
    truth = ground_truth(config, rng_bucket, catalogue, tastes, affinity, cuts, picks)

    item_ids = np.arange(1, config.n_movies + 1)
    ordered_genres = [[g for g in GENRES if g in gs] for gs in catalogue.genres]
    titles = [f"{t} ({y})" for t, y in zip(catalogue.titles, catalogue.years, strict=True)]
    small, large = write_posters(
        item_ids, catalogue.titles, catalogue.years, catalogue.genres, poster_dir, config.posters, config.seed
    )
    movies = pl.DataFrame({"item_id": item_ids, "title": titles, "year": catalogue.years, "genres": ordered_genres})
    metadata = side_information(config, rng_text, catalogue, item_ids, small, large)
    return SyntheticData(
        users=conform(users.frame, USERS, "users"),
        movies=conform(movies, MOVIES, "movies"),
        ratings=conform(ratings, RATINGS, "ratings"),
        metadata=conform(metadata, METADATA, "metadata"),
        hidden_tastes=conform(tastes.frame, HIDDEN_TASTES, "hidden_tastes"),
        truth=conform(truth, GROUND_TRUTH, "ground_truth"),
    )


# --- people -----------------------------------------------------------------------------


def _unique_names(rng: np.random.Generator, n: int, taken: set[str]) -> list[str]:
    capacity = len(vocab.FIRST_NAMES) * len(vocab.LAST_NAMES)
    if n + len(taken) > capacity:
        raise ValueError(f"cannot make {n} distinct names from {capacity} first x last name pairs")
    names: list[str] = []
    while len(names) < n:
        name = f"{rng.choice(vocab.FIRST_NAMES)} {rng.choice(vocab.LAST_NAMES)}"
        if name not in taken:
            taken.add(name)
            names.append(name)
    return names


def _zipf_weights(rng: np.random.Generator, n: int, exponent: float) -> np.ndarray:
    """Weights (rank)^-exponent over a random order, normalised."""
    ranks = rng.permutation(n) + 1
    w = ranks.astype(float) ** -exponent
    return w / w.sum()


def _directors(
    config: SyntheticConfig, rng: np.random.Generator
) -> tuple[list[str], list[tuple[str, ...]], np.ndarray]:
    """Director names, each with 1-2 typical genres and a productivity weight."""
    names = _unique_names(rng, config.n_directors, set())
    prior = _genre_prior(config)
    lo, hi = config.director_genre_counts
    genres = []
    for _ in names:
        k = int(rng.integers(lo, hi + 1))
        genres.append(tuple(GENRES[i] for i in rng.choice(len(GENRES), size=k, replace=False, p=prior)))
    return names, genres, _zipf_weights(rng, config.n_directors, config.director_productivity_zipf)


def _actors(config: SyntheticConfig, rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    names = _unique_names(rng, config.n_actors, set())
    return names, _zipf_weights(rng, config.n_actors, config.actor_fame_zipf)


def _genre_prior(config: SyntheticConfig) -> np.ndarray:
    counts = np.array([config.genre_counts[g] for g in GENRES], dtype=float)
    return counts / counts.sum()


# --- catalogue --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Catalogue:
    titles: list[str]  # without the year
    years: np.ndarray
    genres: list[list[str]]  # main genre first
    multi_hot: np.ndarray  # (movies, genres)
    main_family: np.ndarray  # index into PALETTE_FAMILIES
    director: np.ndarray  # index into the director list
    director_names: list[str]
    actors: list[list[str]]
    quality: np.ndarray  # standard normal
    popularity: np.ndarray  # selection weight, sums to 1
    popularity_z: np.ndarray  # standardised log popularity


def _catalogue(
    config: SyntheticConfig,
    rng: np.random.Generator,
    directors: list[str],
    director_genres: list[tuple[str, ...]],
    director_weight: np.ndarray,
    actors: list[str],
    actor_weight: np.ndarray,
) -> _Catalogue:
    n = config.n_movies
    years_range = np.arange(config.first_year, config.last_year + 1)
    year_p = np.exp((years_range - config.last_year) / config.year_recency_scale)
    years = rng.choice(years_range, size=n, p=year_p / year_p.sum())

    prior = _genre_prior(config)
    count_p = np.array(config.genre_count_probs) / sum(config.genre_count_probs)
    genres: list[list[str]] = []
    for _ in range(n):
        main = GENRES[int(rng.choice(len(GENRES), p=prior))]
        chosen = [main]
        for _ in range(int(rng.choice(len(count_p), p=count_p))):
            companions = [g for g in config.genre_companions.get(main, ()) if g not in chosen]
            if companions and rng.random() < config.companion_share:
                chosen.append(str(rng.choice(companions)))
            else:
                free = [i for i, g in enumerate(GENRES) if g not in chosen]
                p = prior[free] / prior[free].sum()
                chosen.append(GENRES[int(rng.choice(free, p=p))])
        genres.append(chosen)
    multi_hot = np.array([[g in gs for g in GENRES] for gs in genres], dtype=float)
    main_family = np.array([PALETTE_FAMILIES.index(palette_family(gs[0], config.posters)) for gs in genres])

    # A movie goes to a director for whom its main genre is typical, weighted by productivity.
    director = np.empty(n, dtype=int)
    by_genre = {g: np.array([i for i, gs in enumerate(director_genres) if g in gs], dtype=int) for g in GENRES}
    for j, gs in enumerate(genres):
        pool = by_genre[gs[0]]
        if len(pool) == 0 or rng.random() > config.director_genre_fidelity:
            pool = np.arange(len(directors))
        w = director_weight[pool] / director_weight[pool].sum()
        director[j] = int(rng.choice(pool, p=w))

    lo, hi = config.actors_per_movie
    cast = [
        [actors[i] for i in rng.choice(len(actors), size=int(rng.integers(lo, hi + 1)), replace=False, p=actor_weight)]
        for _ in range(n)
    ]

    quality = rng.standard_normal(n)
    rho = config.popularity_quality_corr
    latent = rho * quality + np.sqrt(1 - rho**2) * rng.standard_normal(n)
    latent -= config.popularity_recency_per_decade * (config.last_year - years) / 10
    log_pop = config.popularity_log_scale * latent
    popularity = np.exp(log_pop - log_pop.max())
    popularity /= popularity.sum()
    popularity_z = (latent - latent.mean()) / latent.std()

    titles = titles_of(config.article_share, rng, genres, years)
    return _Catalogue(
        titles, years, genres, multi_hot, main_family, director, directors, cast, quality, popularity, popularity_z
    )


# --- users and their hidden tastes --------------------------------------------------------


@dataclass(frozen=True)
class _Users:
    frame: pl.DataFrame
    gender: np.ndarray
    age: np.ndarray
    occupation: np.ndarray


def _users(config: SyntheticConfig, rng: np.random.Generator) -> _Users:
    n = config.n_users
    gender = np.where(rng.random(n) < config.female_share, "F", "M")
    age_codes = np.array(AGE_CODES)
    age_p = np.array([config.age_counts[a] for a in AGE_CODES], dtype=float)
    age = rng.choice(age_codes, size=n, p=age_p / age_p.sum())
    base = np.array(config.occupation_counts, dtype=float)
    occupation = np.empty(n, dtype=int)
    for i, a in enumerate(age):
        w = base.copy()
        for occ, factor in config.occupation_age_boost.get(int(a), {}).items():
            w[occ] *= factor
        occupation[i] = int(rng.choice(len(w), p=w / w.sum()))
    digit_p = np.array(config.zip_first_digit_counts, dtype=float)
    first = rng.choice(10, size=n, p=digit_p / digit_p.sum())
    rest = rng.integers(0, 10_000, size=n)
    zips = [f"{d}{r:04d}" for d, r in zip(first, rest, strict=True)]
    frame = pl.DataFrame(
        {
            "user_id": np.arange(1, n + 1),
            "gender": gender,
            "age": age,
            "occupation": occupation,
            "zip": zips,
            "has_ratings": np.ones(n, dtype=bool),  # every user gets >= min_ratings_per_user
        }
    )
    return _Users(frame, gender, age, occupation)


@dataclass(frozen=True)
class _Tastes:
    frame: pl.DataFrame
    genre_weights: np.ndarray  # (users, genres), rows sum to 1
    era: np.ndarray  # preferred decade
    favourite_directors: np.ndarray  # (users, directors) bool
    palette: np.ndarray  # index into PALETTE_FAMILIES
    strength: np.ndarray
    bias: np.ndarray


def _hidden_tastes(
    config: SyntheticConfig,
    rng: np.random.Generator,
    users: _Users,
    directors: list[str],
    director_genres: list[tuple[str, ...]],
    films_per_director: np.ndarray,
) -> _Tastes:
    n, n_genres = config.n_users, len(GENRES)
    log_prior = config.favourite_prior_power * np.log(_genre_prior(config))
    weights = np.empty((n, n_genres))
    favourites: list[list[str]] = []
    for i in range(n):
        shift = np.zeros(n_genres)
        for table, key in (
            (config.gender_genre_shift, str(users.gender[i])),
            (config.age_genre_shift, int(users.age[i])),
            (config.occupation_genre_shift, int(users.occupation[i])),
        ):
            for genre, value in table.get(key, {}).items():  # type: ignore[attr-defined]
                shift[GENRES.index(genre)] += value
        logits = log_prior + config.demographic_strength * shift
        k = int(rng.choice(config.favourite_genre_counts))
        chosen = np.argsort(-(logits + rng.gumbel(size=n_genres)), kind="stable")[
            :k
        ]  # Gumbel top-k: sampling without replacement
        alpha = np.full(n_genres, config.other_concentration)
        alpha[chosen] = config.favourite_concentration
        weights[i] = rng.dirichlet(alpha)
        top = np.argsort(-weights[i], kind="stable")[:k]
        favourites.append([GENRES[g] for g in top])

    era_centre = np.array([config.era_centre_by_age[int(a)] for a in users.age], dtype=float)
    era = era_centre + config.era_sd_years * rng.standard_normal(n)
    last_decade = config.last_year // 10 * 10
    era = np.clip(np.round(era / 10) * 10, config.first_year // 10 * 10, last_decade).astype(int)

    # Favourite directors work in the user's favourite genres and have films in the
    # catalogue (a taste for a director without films could never be recovered).
    favourite_directors = np.zeros((n, len(directors)), dtype=bool)
    director_names: list[list[str]] = []
    active = np.flatnonzero(films_per_director > 0)
    for i in range(n):
        fav = set(favourites[i])
        pool = np.array([d for d in active if fav & set(director_genres[d])], dtype=int)
        if len(pool) == 0:
            pool = active
        size = min(config.n_favourite_directors, len(pool))
        weight = films_per_director[pool].astype(float)
        picked = rng.choice(pool, size=size, replace=False, p=weight / weight.sum())
        favourite_directors[i, picked] = True
        director_names.append([directors[d] for d in picked])

    top_family = np.array([PALETTE_FAMILIES.index(palette_family(f[0], config.posters)) for f in favourites])
    palette = np.where(
        rng.random(n) < config.palette_follows_taste, top_family, rng.integers(0, len(PALETTE_FAMILIES), n)
    )
    lo, hi = config.taste_strength_range
    strength = rng.uniform(lo, hi, n)
    bias = config.rating_bias_sd * rng.standard_normal(n)
    frame = pl.DataFrame(
        {
            "user_id": np.arange(1, n + 1),
            "genre_weights": [list(map(float, w)) for w in weights],
            "favourite_genres": favourites,
            "preferred_era": era,
            "favourite_directors": director_names,
            "palette_preference": [PALETTE_FAMILIES[p] for p in palette],
            "taste_strength": strength,
            "rating_bias": bias,
        },
        schema_overrides={"favourite_directors": pl.List(pl.Utf8), "favourite_genres": pl.List(pl.Utf8)},
    )
    return _Tastes(frame, weights, era, favourite_directors, palette, strength, bias)


# --- ratings ----------------------------------------------------------------------------


def _affinity(config: SyntheticConfig, tastes: _Tastes, catalogue: _Catalogue) -> np.ndarray:
    """Taste affinity of every user for every movie, (users, movies), scaled by taste strength.

    Genres: a mix of the best-liked and the mean liked genre of the movie (weights scaled
    so that the user's top genre is 1); era: a Gaussian bump around the preferred decade;
    directors and palette: 1 when the movie's director is a favourite / its poster family
    is the preferred one.
    """
    w = tastes.genre_weights / tastes.genre_weights.max(axis=1, keepdims=True)
    g_mean = (w @ catalogue.multi_hot.T) / catalogue.multi_hot.sum(axis=1)
    g_max = np.zeros_like(g_mean)
    for g in range(len(GENRES)):
        has = catalogue.multi_hot[:, g] > 0
        g_max[:, has] = np.maximum(g_max[:, has], w[:, [g]])
    genre = 0.6 * g_max + 0.4 * g_mean
    era = np.exp(-0.5 * ((catalogue.years[None, :] - (tastes.era[:, None] + 5)) / config.era_width_years) ** 2)
    director = tastes.favourite_directors[:, catalogue.director].astype(float)
    palette = (tastes.palette[:, None] == catalogue.main_family[None, :]).astype(float)
    taste = (
        config.genre_weight * genre
        + config.era_weight * era
        + config.director_weight * director
        + config.palette_weight * palette
    )
    return tastes.strength[:, None] * taste


def _who_rates_what(
    config: SyntheticConfig, rng: np.random.Generator, catalogue: _Catalogue, affinity: np.ndarray
) -> tuple[list[np.ndarray], np.ndarray]:
    """For each user, the movies rated, first-session ones first, and how many of those.

    Both phases sample without replacement (Gumbel top-k) with log-weight a x log
    popularity + b x affinity.  The first session leans on popularity (MovieLens asks a
    newcomer to rate well-known films), later visits lean on taste (the user explores
    the catalogue, helped by recommendations).  So what a returning user rates next is
    predictable from that user's history, not only from popularity.
    """
    n_users, n_movies = affinity.shape
    cap = int(config.max_ratings_share * n_movies)
    extra_mean = config.mean_ratings_per_user - config.min_ratings_per_user
    mu = np.log(max(extra_mean, 1e-9)) - config.activity_sigma**2 / 2  # log-normal with mean extra_mean
    counts = config.min_ratings_per_user + np.round(rng.lognormal(mu, config.activity_sigma, n_users)).astype(int)
    counts = np.minimum(counts, cap)
    n_first = np.clip(np.round(rng.beta(*config.burst_share_beta, n_users) * counts), 1, counts).astype(int)
    log_pop = config.exposure_bias * np.log(catalogue.popularity)[None, :]
    first = (
        config.first_session_popularity * log_pop
        + config.first_session_taste * affinity
        + rng.gumbel(size=affinity.shape)
    )
    later = config.return_popularity * log_pop + config.return_taste * affinity + rng.gumbel(size=affinity.shape)
    picks = []
    for i in range(n_users):
        in_first = np.argsort(-first[i], kind="stable")[: n_first[i]]
        later[i, in_first] = -np.inf
        returns = np.argsort(-later[i], kind="stable")[: counts[i] - n_first[i]]
        picks.append(np.concatenate([in_first, returns]))
    return picks, n_first


def _ratings(
    config: SyntheticConfig,
    rng_rate: np.random.Generator,
    rng_time: np.random.Generator,
    picks: list[np.ndarray],
    n_first_session: np.ndarray,
    catalogue: _Catalogue,
    tastes: _Tastes,
    affinity: np.ndarray,
    reference: list[np.ndarray] | None = None,
) -> tuple[pl.DataFrame, np.ndarray]:
    """The log's ratings, and the cut points on the rating latent that made its stars; with
    `reference` (the default world's picks) the cuts are set on those picks' latent."""
    users = np.concatenate([np.full(len(p), i) for i, p in enumerate(picks)])
    movies = np.concatenate(picks)
    # The default world's noise, for its cut points: the same stream, before it draws this log's.
    reference_rng = copy.deepcopy(rng_rate)
    noise = config.rating_noise_sd * rng_rate.standard_normal(len(users))
    latent = (
        config.rating_taste * affinity[users, movies]
        + config.rating_quality * catalogue.quality[movies]
        + tastes.bias[users]
        + noise
    )
    # Cut points at the quantiles of the target shares, so the 1..5 distribution is ML-1M's.
    on = latent
    if reference is not None:
        ru = np.concatenate([np.full(len(p), i) for i, p in enumerate(reference)])
        rm = np.concatenate(reference)
        on = config.rating_taste * affinity[ru, rm] + config.rating_quality * catalogue.quality[rm] + tastes.bias[ru]
        on = on + config.rating_noise_sd * reference_rng.standard_normal(len(ru))
    cuts = np.quantile(on, np.cumsum(config.rating_shares)[:-1])
    rating = np.searchsorted(cuts, latent, side="right") + 1

    timestamps = _timestamps(config, rng_time, [len(p) for p in picks], n_first_session)
    frame = pl.DataFrame({"user_id": users + 1, "item_id": movies + 1, "rating": rating, "timestamp": timestamps})
    return frame.sort(["user_id", "timestamp", "item_id"]), cuts


def _timestamps(config, rng: np.random.Generator, counts: list[int], n_first_session: np.ndarray) -> np.ndarray:
    """Each user arrives once, rates a burst in the first session, then returns now and then.

    Times follow the order of `_who_rates_what`: a user's first `n_first_session` movies
    get first-session times, the others times in the returning window.
    """
    start = int(dt.datetime.combine(config.start_date, dt.time(), tzinfo=dt.UTC).timestamp())
    end = int(dt.datetime.combine(config.end_date, dt.time(23, 59, 59), tzinfo=dt.UTC).timestamp())
    span = end - start
    burst = config.burst_hours * 3600
    out = []
    for n, n_burst in zip(counts, n_first_session, strict=True):
        arrival = start + rng.beta(*config.arrival_beta) * (span - burst)
        window = min(rng.lognormal(np.log(config.return_days_median * 86400), config.return_days_sigma), end - arrival)
        # Returns start after the first session, so the two phases keep their order in time.
        times = np.concatenate(
            [
                arrival + rng.uniform(0, burst, n_burst),
                arrival + burst + rng.uniform(0, max(window - burst, 0.0), n - n_burst),
            ]
        )
        out.append(np.clip(times, start, end))
    return np.concatenate(out).astype(np.int64)

"""The agent's profile (A/B Agent §2.4.1; Agent4Rec §2.1.1; SimUSER §3.2.1).

One `AgentProfile` per user, from the TRAIN split only:
- user profile: gender, age, occupation, zip (MovieLens demographics);
- social traits (Agent4Rec §2.1.1, docs/definitions.md#social-traits): activity = number of train
  ratings; conformity = mean squared gap between the user's rating and the movie's mean
  train rating (so a SMALL value means the user agrees with the crowd); diversity = number
  of distinct genres rated.  Each is cut into three tiers at percentiles of all users
  (`ProfileConfig.tier_percentiles`).  The conformity tier is named for the behaviour:
  "high" conformity = the smallest gaps;
- pickiness (SimUSER §3.2.1): from the mean train rating, thresholds in configuration;
- persona (SimUSER §3.1): Big Five, background, hobbies, derived deterministically from the
  traits and preferences (`ops.agents.persona` says how);
- preferences (A/B Agent §2.4.1, fine-grained per page): home page — genres, poster look,
  vote average; detail page — directors, actors, era, plot themes; and a one-paragraph
  summary.  The paper has an LLM summarise the history; here they are statistics of the
  history (`history_stats`) written out in words for people to read in the Dagster UI and
  the logs.  The embedded brain uses the same statistics, not the words.

One concept, the agent's profile: the traits, pickiness, persona and preferences of one user,
and the history statistics they are computed from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.agents.embeddings import POSTER_LOOKS
from ops.agents.memory import LongTermMemory
from ops.agents.movie_facts import MovieFacts, build_movie_facts
from ops.agents.persona import trait_persona
from ops.schema import AGE_LABELS, OCCUPATIONS, RATINGS, USERS, conform

TIERS = ("low", "medium", "high")
PICKINESS = ("not picky", "moderately picky", "extremely picky")  # SimUSER §3.2.1
# Decade buckets used for the era preference: 1900s .. 2020s.
DECADES = tuple(range(1900, 2030, 10))


class ProfileConfig(BaseModel):
    # Agent4Rec §2.1.1 cuts each trait into "three uneven tiers"; users' activity is
    # long-tailed, so the default tiers hold 60 % / 30 % / 10 % of the users.
    tier_percentiles: tuple[float, float] = (0.6, 0.9)
    # SimUSER §3.2.1: pickiness from the average rating.  Mean < 3.3 -> extremely picky,
    # < 3.9 -> moderately picky, else not picky (ML-1M user means centre near 3.7).
    pickiness_thresholds: tuple[float, float] = (3.3, 3.9)
    # A/B Agent / SimUSER call a rating >= 4 "liked", < 3 "disliked" (SimUSER §3.1).
    like_threshold: int = 4
    dislike_threshold: int = 3
    # Smoothing of genre and era shares (pseudo-ratings at the population share) and of
    # per-genre rating deviations (pseudo-ratings at the user's mean).
    share_prior: float = Field(5.0, ge=0)
    deviation_prior: float = Field(3.0, ge=0)
    # How many genres / eras / people / themes the texts name.
    top_genres: int = 3
    top_eras: int = 2
    top_people: int = 3
    top_themes: int = 4
    # A person (director, actor) or a theme counts when it recurs in this many liked movies.
    min_people_count: int = 2
    # Actors considered per movie: the top of the billing (A/B Agent shows the cast list).
    actors_per_movie: int = 3
    # A disliked genre: rated this far below the user's own mean, over >= min_genre_count.
    dislike_gap: float = 0.4
    min_genre_count: int = 3
    # Vote-average preference: liked movies' mean vote this far above / below the mean of
    # everything the user rated.
    vote_gap: float = 0.25
    # Poster look preferred when liked movies show it this much more than all movies do.
    look_lift: float = 1.15
    # Keywords per overview kept as candidate plot themes (TF-IDF over the catalogue).
    keywords_per_movie: int = 5
    min_train_ratings: int = Field(1, ge=1)
    # Persona (SimUSER §3.1, `ops.agents.persona`): neuroticism moderate / high from these
    # standard deviations of the user's own ratings (ML-1M users' spread centres near 1.0).
    persona_spread_cuts: tuple[float, float] = (0.9, 1.2)
    persona_hobbies: int = Field(2, ge=0)


@dataclass(frozen=True)
class AgentProfile:
    user_id: int
    gender: str
    age: int
    age_label: str
    occupation: int
    occupation_label: str
    zip: str
    # Social traits (Agent4Rec §2.1.1) with their tiers.
    activity: int
    activity_tier: str
    conformity: float  # mean squared gap to the movies' mean ratings; small = conforming
    conformity_tier: str  # "high" = the smallest gaps
    conformity_score: float  # percentile of closeness to the crowd in [0, 1] (1 = most conforming)
    diversity: int
    diversity_tier: str
    # SimUSER pickiness.
    mean_rating: float
    pickiness: str
    # Fine-grained preferences (A/B Agent §2.4.1).
    liked_genres: tuple[str, ...]
    disliked_genres: tuple[str, ...]
    poster_looks: tuple[str, ...]
    vote_preference: str  # "acclaimed" / "indifferent" / "offbeat"
    eras: tuple[int, ...]  # preferred release decades
    directors: tuple[str, ...]
    actors: tuple[str, ...]
    plot_themes: tuple[str, ...]
    home_page_preferences: str
    detail_page_preferences: str
    summary: str
    # Persona (SimUSER §3.1): Big Five 1..3 (low, moderate, high), background, hobbies and
    # the whole in words, derived from the traits above (`ops.agents.persona`).
    openness: int
    conscientiousness: int
    extraversion: int
    agreeableness: int
    neuroticism: int
    background: str
    hobbies: tuple[str, ...]
    persona: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PopulationStats:
    """What a user's history is compared with: shares over all train ratings."""

    genre_share: np.ndarray  # (len(GENRES),) share of train ratings touching each genre
    decade_share: np.ndarray  # (len(DECADES),)
    look_share: np.ndarray  # (len(POSTER_LOOKS),) share of rated movies' posters per look


@dataclass(frozen=True, eq=False)
class Credits:
    """Sparse incidence of the catalogue's people and plot keywords (rows = facts rows)."""

    directors: tuple[str, ...]
    director_matrix: object  # scipy csr (movies x directors)
    actors: tuple[str, ...]
    actor_matrix: object  # scipy csr (movies x actors), top of the billing only
    keywords: tuple[str, ...]
    keyword_matrix: object  # scipy csr (movies x keywords)
    looks: np.ndarray  # (movies, len(POSTER_LOOKS)) one-hot poster look, zeros without poster


@dataclass(frozen=True, eq=False)
class HistoryStats:
    """Statistics of many users' train histories, row i = `user_ids[i]`.

    The profile writes them out in words; the embedded brain reads them as features.
    """

    user_ids: np.ndarray
    n: np.ndarray  # ratings per user
    mean_rating: np.ndarray
    genre_count: np.ndarray  # (U, G) ratings touching each genre
    genre_lift: np.ndarray  # (U, G) log of smoothed share / population share
    genre_deviation: np.ndarray  # (U, G) shrunk mean of (rating - user mean) per genre
    decade_lift: np.ndarray  # (U, len(DECADES)) log lift of release decades
    vote_mean_all: np.ndarray  # mean vote average of rated movies (NaN: none known)
    vote_mean_liked: np.ndarray
    liked_directors: object  # scipy csr (U, directors): liked movies per director
    disliked_directors: object
    liked_actors: object
    liked_keywords: object
    liked_looks: np.ndarray  # (U, len(POSTER_LOOKS))

    def row(self, user_id: int) -> int:
        i = int(np.searchsorted(self.user_ids, user_id))
        if i >= len(self.user_ids) or self.user_ids[i] != user_id:
            raise KeyError(f"no history statistics for user {user_id}")
        return i


def build_profiles(
    train: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    config: ProfileConfig | None = None,
    *,
    facts: MovieFacts | None = None,
    poster_looks: Mapping[int, str] | None = None,
    user_ids: np.ndarray | None = None,
    traits: pl.DataFrame | None = None,
) -> dict[int, AgentProfile]:
    """One profile per user with at least `min_train_ratings` train ratings (of `user_ids`
    only, when given: the traits' tiers are still cut over every user); `catalogue` is
    MM-ML-1M (the `catalogue` asset).  `traits`: `social_traits` of `train`, when computed
    already.

    `poster_looks` maps movie id -> "warm" / "cool" / "dark" / "bright" (from
    `MovieVectors.poster_look`); without it the profile names no poster look.
    Raises ValueError naming the user ids of `train` that are missing from `users`.
    """
    config = config or ProfileConfig()
    train = conform(train, RATINGS, "train")
    users = conform(users, USERS, "users")
    facts = facts or build_movie_facts(catalogue, train)
    missing = sorted(set(train.get_column("user_id").unique().to_list()) - set(users.get_column("user_id").to_list()))
    if missing:
        raise ValueError(f"train has ratings of user ids absent from the users table: {missing[:10]}")

    if traits is None:
        traits = social_traits(train, facts, config).filter(pl.col("activity") >= config.min_train_ratings)
    if user_ids is not None:
        traits = traits.filter(pl.col("user_id").is_in(pl.Series(np.asarray(user_ids), dtype=pl.Int64).implode()))
    credits = movie_credits(facts, config, poster_looks)
    population = population_stats(train, facts, credits.looks)
    ordered = train.join(traits.select("user_id"), on="user_id").sort(["user_id", "timestamp", "item_id"])
    user_ids = traits.get_column("user_id").to_numpy()
    user_index = np.searchsorted(user_ids, ordered.get_column("user_id").to_numpy())
    stats = history_stats(
        user_ids,
        user_index,
        _rows_of(facts, ordered.get_column("item_id").to_numpy()),
        ordered.get_column("rating").to_numpy(),
        facts,
        population,
        credits,
        config,
    )
    demo = {r["user_id"]: r for r in users.iter_rows(named=True)}
    return {
        row["user_id"]: _profile(demo[row["user_id"]], row, stats, i, credits, population, config, facts)
        for i, row in enumerate(traits.iter_rows(named=True))
    }


def population_ids(train: pl.DataFrame, config: ProfileConfig | None = None) -> np.ndarray:
    """The users who can be agents, sorted: `min_train_ratings` train ratings or more (the
    users `social_traits` keeps for a profile), found without the catalogue."""
    config = config or ProfileConfig()
    counts = train.group_by("user_id").len().filter(pl.col("len") >= config.min_train_ratings)
    return np.sort(counts.get_column("user_id").to_numpy().astype(np.int64))


def profiles_frame(profiles: Mapping[int, AgentProfile]) -> pl.DataFrame:
    """The profiles as a table, one row per agent, for the Dagster UI and logs."""
    rows = [p.to_dict() for p in profiles.values()]
    if not rows:
        return pl.DataFrame()
    return pl.DataFrame(rows).sort("user_id")


def profiles_table(profiles: Mapping[int, AgentProfile]) -> pl.DataFrame:
    """The profiles exactly, for storage: one row per agent in the mapping's order, keyed by
    `agent_key`; tuples become lists.  `profiles_from_table` reads it back."""
    columns: dict[str, list] = {"agent_key": list(profiles)}
    for name in _PROFILE_SCHEMA:
        columns[name] = [getattr(p, name) for p in profiles.values()]
    return pl.DataFrame(columns, schema={"agent_key": pl.Int64, **_PROFILE_SCHEMA})


def profiles_from_table(table: pl.DataFrame) -> dict[int, AgentProfile]:
    """The inverse of `profiles_table`."""
    tuples = [name for name, dtype in _PROFILE_SCHEMA.items() if isinstance(dtype, pl.List)]
    profiles = {}
    for key, *values in table.select("agent_key", *_PROFILE_SCHEMA).iter_rows():
        fields_ = dict(zip(_PROFILE_SCHEMA, values))
        profiles[key] = AgentProfile(**{**fields_, **{name: tuple(fields_[name]) for name in tuples}})
    return profiles


def social_traits(train: pl.DataFrame, facts: MovieFacts, config: ProfileConfig | None = None) -> pl.DataFrame:
    """Activity, conformity, diversity per user with tiers (docs/definitions.md#social-traits).

    Tiers are cut at `tier_percentiles` of the users in `train`; the conformity tier is
    cut on the NEGATIVE gap so that "high" conformity means the closest to the crowd.
    `conformity_score` is the share of users with a gap at least as large (1 = most
    conforming); the embedded brain weighs popularity and vote average by it.
    """
    config = config or ProfileConfig()
    movie_mean = train.group_by("item_id").agg(pl.col("rating").mean().alias("movie_mean"))
    per_user = (
        train.join(movie_mean, on="item_id")
        .group_by("user_id")
        .agg(
            pl.len().alias("activity"),
            ((pl.col("rating") - pl.col("movie_mean")) ** 2).mean().alias("conformity"),
            pl.col("rating").mean().alias("mean_rating"),
            pl.col("rating").std(ddof=0).fill_null(0.0).alias("rating_spread"),
        )
    )
    return (
        per_user.join(_diversity(train, facts), on="user_id", how="left")
        .with_columns(pl.col("diversity").fill_null(0))
        .with_columns(
            _tier(pl.col("activity").cast(pl.Float64), config).alias("activity_tier"),
            _tier(-pl.col("conformity"), config).alias("conformity_tier"),
            _tier(pl.col("diversity").cast(pl.Float64), config).alias("diversity_tier"),
            (1.0 - pl.col("conformity").rank("max") / pl.len() + 1.0 / pl.len()).alias("conformity_score"),
            _pickiness(pl.col("mean_rating"), config).alias("pickiness"),
        )
        .sort("user_id")
    )


def history_stats(
    user_ids: np.ndarray,
    user_index: np.ndarray,
    rows: np.ndarray,
    ratings: np.ndarray,
    facts: MovieFacts,
    population: PopulationStats,
    credits: Credits,
    config: ProfileConfig | None = None,
) -> HistoryStats:
    """Genre, era, vote, credit and look statistics for many users at once.

    Interaction j belongs to user `user_ids[user_index[j]]`, rated movie row `rows[j]` of
    `facts` with `ratings[j]`; everything is sparse matrix algebra, no loop over users.
    """
    from scipy import sparse

    config = config or ProfileConfig()
    n_users, n_movies = len(user_ids), len(facts.item_ids)
    ratings = np.asarray(ratings, dtype=np.float64)
    n = np.bincount(user_index, minlength=n_users).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(user_index, weights=ratings, minlength=n_users) / n
    centred = ratings - mean[user_index]
    liked = ratings >= config.like_threshold
    disliked = ratings < config.dislike_threshold

    def by_user(values: np.ndarray):
        return sparse.csr_matrix((values, (user_index, rows)), shape=(n_users, n_movies))

    seen, liked_m, disliked_m = by_user(np.ones(len(rows))), by_user(liked * 1.0), by_user(disliked * 1.0)
    genres = facts.genres.astype(np.float64)
    count = np.asarray(seen @ genres)
    a = config.share_prior
    share = (count + a * population.genre_share) / (n[:, None] + a)
    lift = np.log(share / population.genre_share)
    dev = np.asarray(by_user(centred) @ genres) / (count + config.deviation_prior)

    dec = decade_index(facts.year)
    dec_onehot = np.zeros((n_movies, len(DECADES)))
    dec_onehot[np.flatnonzero(dec >= 0), dec[dec >= 0]] = 1.0
    dcount = np.asarray(seen @ dec_onehot)
    dshare = (dcount + a * population.decade_share) / (dcount.sum(axis=1, keepdims=True) + a)
    dlift = np.log(dshare / population.decade_share)

    vote = facts.vote_average
    known = np.isfinite(vote)
    vote0 = np.where(known, vote, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        vote_all = (seen @ vote0) / (seen @ known.astype(float))
        vote_liked = (liked_m @ vote0) / (liked_m @ known.astype(float))
    return HistoryStats(
        user_ids=np.asarray(user_ids, dtype=np.int64),
        n=n,
        mean_rating=mean,
        genre_count=count,
        genre_lift=lift,
        genre_deviation=dev,
        decade_lift=dlift,
        vote_mean_all=np.asarray(vote_all).ravel(),
        vote_mean_liked=np.asarray(vote_liked).ravel(),
        liked_directors=(liked_m @ credits.director_matrix).tocsr(),
        disliked_directors=(disliked_m @ credits.director_matrix).tocsr(),
        liked_actors=(liked_m @ credits.actor_matrix).tocsr(),
        liked_keywords=(liked_m @ credits.keyword_matrix).tocsr(),
        liked_looks=np.asarray(liked_m @ credits.looks),
    )


def memories_history_stats(
    memories: Mapping[int, LongTermMemory],
    facts: MovieFacts,
    population: PopulationStats,
    credits: Credits,
    config: ProfileConfig | None = None,
) -> HistoryStats:
    """`history_stats` for agents' long-term memories (their rows index the same catalogue)."""
    user_ids = np.array(sorted(memories), dtype=np.int64)
    lengths = [len(memories[u]) for u in user_ids]
    rows = np.concatenate([memories[u].rows for u in user_ids]) if len(user_ids) else np.zeros(0, np.int64)
    ratings = np.concatenate([memories[u].ratings for u in user_ids]) if len(user_ids) else np.zeros(0)
    index = np.repeat(np.arange(len(user_ids)), lengths)
    return history_stats(user_ids, index, rows, ratings, facts, population, credits, config)


def population_stats(train: pl.DataFrame, facts: MovieFacts, looks: np.ndarray | None = None) -> PopulationStats:
    """Genre, decade and poster-look shares over all train ratings.

    `looks` is the catalogue's one-hot poster look (`Credits.looks`); None: no looks.
    """
    rows = _rows_of(facts, train.get_column("item_id").to_numpy())
    n = max(len(rows), 1)
    genre_share = facts.genres[rows].sum(axis=0).astype(np.float64) / n
    dec = decade_index(facts.year[rows])
    dec_counts = np.bincount(dec[dec >= 0], minlength=len(DECADES)).astype(np.float64)
    decade_share = dec_counts / max(dec_counts.sum(), 1.0)
    look_counts = looks[rows].sum(axis=0) if looks is not None and len(rows) else np.zeros(len(POSTER_LOOKS))
    look_share = look_counts / max(look_counts.sum(), 1.0)
    # A genre or decade nobody rated still gets a tiny share so that lifts stay finite.
    return PopulationStats(np.maximum(genre_share, 1e-4), np.maximum(decade_share, 1e-4), look_share)


def movie_credits(
    facts: MovieFacts,
    config: ProfileConfig | None = None,
    poster_looks: Mapping[int, str] | None = None,
    keywords: bool = True,
) -> Credits:
    """Director, top-actor, overview-keyword and poster-look incidence of the catalogue."""
    from scipy import sparse

    config = config or ProfileConfig()
    n = len(facts.item_ids)

    def incidence(lists: list[tuple[str, ...]]):
        names = sorted({x for xs in lists for x in xs if x})
        index = {x: j for j, x in enumerate(names)}
        r = [i for i, xs in enumerate(lists) for x in dict.fromkeys(xs) if x]
        c = [index[x] for xs in lists for x in dict.fromkeys(xs) if x]
        return tuple(names), sparse.csr_matrix((np.ones(len(r)), (r, c)), shape=(n, len(names)))

    directors, dm = incidence(facts.directors)
    actors, am = incidence([a[: config.actors_per_movie] for a in facts.actors])
    words, km = incidence(movie_keywords(facts, config) if keywords else [()] * n)
    looks = np.zeros((n, len(POSTER_LOOKS)))
    for i, m in enumerate(facts.item_ids.tolist()):
        look = (poster_looks or {}).get(m)
        if look in POSTER_LOOKS:
            looks[i, POSTER_LOOKS.index(look)] = 1.0
    return Credits(directors, dm, actors, am, words, km, looks)


def decade_index(years: np.ndarray) -> np.ndarray:
    """Index into DECADES per year, -1 when unknown or out of range."""
    years = np.asarray(years, dtype=np.float64)
    out = np.full(years.shape, -1, dtype=np.int64)
    ok = np.isfinite(years)
    idx = ((years[ok] - DECADES[0]) // 10).astype(np.int64)
    out[ok] = np.where((idx >= 0) & (idx < len(DECADES)), idx, -1)
    return out


def movie_keywords(facts: MovieFacts, config: ProfileConfig | None = None) -> list[tuple[str, ...]]:
    """The most distinctive overview words of each movie (TF-IDF over the catalogue)."""
    config = config or ProfileConfig()
    docs = [o or "" for o in facts.overview]
    if not any(docs):
        return [()] * len(docs)
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(stop_words="english", token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]{3,}\b", min_df=2, max_df=0.2)
    try:
        tfidf = vec.fit_transform(docs).tocsr()
    except ValueError:  # every word filtered out (tiny catalogues)
        return [()] * len(docs)
    vocab = np.asarray(vec.get_feature_names_out())
    out = []
    for i in range(tfidf.shape[0]):
        start, end = tfidf.indptr[i], tfidf.indptr[i + 1]
        idx, val = tfidf.indices[start:end], tfidf.data[start:end]
        top = idx[np.lexsort((idx, -val))[: config.keywords_per_movie]]
        out.append(tuple(vocab[top].tolist()))
    return out


# ---------------------------------------------------------------------------------------
# Writing the profile
# ---------------------------------------------------------------------------------------


def _profile(
    demo, traits, stats: HistoryStats, i: int, credits: Credits, population: PopulationStats, config, facts: MovieFacts
) -> AgentProfile:
    lift, dev, count = stats.genre_lift[i], stats.genre_deviation[i], stats.genre_count[i]
    score = lift + dev
    names, noun = facts.genre_names, facts.item_noun
    liked_genres = tuple(names[j] for j in np.argsort(-score, kind="stable") if count[j] >= 1 and score[j] > 0)[
        : config.top_genres
    ]
    disliked_genres = tuple(
        names[j]
        for j in np.argsort(dev, kind="stable")
        if count[j] >= config.min_genre_count and dev[j] <= -config.dislike_gap
    )[: config.top_genres]
    dlift = stats.decade_lift[i]
    eras = tuple(DECADES[j] for j in np.argsort(-dlift, kind="stable")[: config.top_eras] if dlift[j] > 0)
    vote_pref = "indifferent"
    vote_all, vote_liked = stats.vote_mean_all[i], stats.vote_mean_liked[i]
    if math.isfinite(vote_liked) and math.isfinite(vote_all):
        gap = vote_liked - vote_all
        vote_pref = "acclaimed" if gap >= config.vote_gap else "offbeat" if gap <= -config.vote_gap else "indifferent"
    looks: tuple[str, ...] = ()
    seen = stats.liked_looks[i]
    if seen.sum() > 0 and population.look_share.sum() > 0:
        with np.errstate(invalid="ignore", divide="ignore"):
            look_lift = (seen / seen.sum()) / population.look_share
        looks = tuple(
            POSTER_LOOKS[j] for j in np.argsort(-look_lift, kind="stable") if look_lift[j] >= config.look_lift
        )[:2]
    directors = _top(stats.liked_directors, i, credits.directors, config.min_people_count, config.top_people)
    actors = _top(stats.liked_actors, i, credits.actors, config.min_people_count, config.top_people)
    plot_themes = _top(stats.liked_keywords, i, credits.keywords, config.min_people_count, config.top_themes)

    home = _home_text(liked_genres, disliked_genres, looks, vote_pref, vote_liked, noun)
    detail = _detail_text(directors, actors, eras, plot_themes)
    # A domain without demographics (docs/data_model.md): traits from behaviour only.
    has_demographics = demo["gender"] is not None or demo["age"] is not None or demo["occupation"] is not None
    age_label = AGE_LABELS.get(demo["age"], str(demo["age"])) if demo["age"] is not None else ""
    occupation_label = (
        OCCUPATIONS.get(demo["occupation"], str(demo["occupation"])) if demo["occupation"] is not None else ""
    )
    who = f"A {age_label} {'man' if demo['gender'] == 'M' else 'woman' if demo['gender'] == 'F' else 'person'}"
    plural = "movies" if noun == "movie" else f"{noun}s"
    kind = "genre" if noun == "movie" else "category"
    summary = (
        (f"{who} ({occupation_label}, zip {demo['zip']})" if has_demographics else "A person")
        + f" who has rated {traits['activity']} {plural} "
        f"(activity {traits['activity_tier']}), averaging {traits['mean_rating']:.2f} stars ({traits['pickiness']}); "
        f"{traits['conformity_tier']} conformity with the crowd's ratings and {traits['diversity_tier']} {kind} "
        f"diversity ({traits['diversity']} {'genres' if noun == 'movie' else 'categories'}). {home} {detail}"
    )
    persona = trait_persona(
        age_label=age_label,
        gender=demo["gender"],
        occupation_label=occupation_label,
        zip_code=demo["zip"],
        activity_tier=traits["activity_tier"],
        conformity_tier=traits["conformity_tier"],
        diversity_tier=traits["diversity_tier"],
        pickiness=traits["pickiness"],
        vote_preference=vote_pref,
        rating_spread=float(traits["rating_spread"]),
        liked_genres=liked_genres,
        spread_cuts=config.persona_spread_cuts,
        max_hobbies=config.persona_hobbies,
    )
    return AgentProfile(
        user_id=int(demo["user_id"]),
        gender=demo["gender"],
        age=demo["age"],
        age_label=age_label,
        occupation=demo["occupation"],
        occupation_label=occupation_label,
        zip=demo["zip"],
        activity=int(traits["activity"]),
        activity_tier=traits["activity_tier"],
        conformity=float(traits["conformity"]),
        conformity_tier=traits["conformity_tier"],
        conformity_score=float(traits["conformity_score"]),
        diversity=int(traits["diversity"]),
        diversity_tier=traits["diversity_tier"],
        mean_rating=float(traits["mean_rating"]),
        pickiness=traits["pickiness"],
        liked_genres=liked_genres,
        disliked_genres=disliked_genres,
        poster_looks=looks,
        vote_preference=vote_pref,
        eras=eras,
        directors=directors,
        actors=actors,
        plot_themes=plot_themes,
        home_page_preferences=home,
        detail_page_preferences=detail,
        summary=summary,
        openness=persona.openness,
        conscientiousness=persona.conscientiousness,
        extraversion=persona.extraversion,
        agreeableness=persona.agreeableness,
        neuroticism=persona.neuroticism,
        background=persona.background,
        hobbies=persona.hobbies,
        persona=persona.text(),
    )


def _home_text(liked, disliked, looks, vote_pref, vote_liked: float, noun: str = "movie") -> str:
    parts = []
    if noun == "movie":
        parts.append(f"Enjoys {_join(liked)} movies" if liked else "Has no marked genre preference")
    else:
        parts.append(f"Enjoys {noun}s in {_join(liked)}" if liked else "Has no marked category preference")
    if disliked:
        parts[-1] += f" and rates {_join(disliked)} below average"
    if looks:
        parts.append(f"drawn to {_join(looks)} {'posters' if noun == 'movie' else 'images'}")
    if vote_pref == "acclaimed":
        parts.append(f"favours well-reviewed titles (liked ones average {vote_liked:.1f}/10)")
    elif vote_pref == "offbeat":
        parts.append("often likes titles the critics rate lower")
    return "Home page: " + "; ".join(parts) + "."


def _detail_text(directors, actors, eras, themes) -> str:
    parts = []
    if directors:
        parts.append(f"directors {_join(directors)}")
    if actors:
        parts.append(f"actors {_join(actors)}")
    if eras:
        parts.append("films from the " + _join([f"{d}s" for d in eras]))
    if themes:
        parts.append(f"stories about {_join(themes)}")
    return (
        "Detail page: likes " + "; ".join(parts) + "."
        if parts
        else "Detail page: no recurring directors, actors or themes."
    )


def _join(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _top(matrix, i: int, names: tuple[str, ...], min_count: int, limit: int) -> tuple[str, ...]:
    start, end = matrix.indptr[i], matrix.indptr[i + 1]
    cols, counts = matrix.indices[start:end], matrix.data[start:end]
    keep = counts >= min_count
    cols, counts = cols[keep], counts[keep]
    order = sorted(range(len(cols)), key=lambda j: (-counts[j], names[cols[j]]))
    return tuple(names[cols[j]] for j in order[:limit])


def _tier(value: pl.Expr, config: ProfileConfig) -> pl.Expr:
    lo, hi = config.tier_percentiles
    return (
        pl.when(value <= value.quantile(lo, "linear"))
        .then(pl.lit("low"))
        .when(value <= value.quantile(hi, "linear"))
        .then(pl.lit("medium"))
        .otherwise(pl.lit("high"))
    )


def _pickiness(mean: pl.Expr, config: ProfileConfig) -> pl.Expr:
    extreme, moderate = config.pickiness_thresholds
    return (
        pl.when(mean < extreme)
        .then(pl.lit(PICKINESS[2]))
        .when(mean < moderate)
        .then(pl.lit(PICKINESS[1]))
        .otherwise(pl.lit(PICKINESS[0]))
    )


def _diversity(train: pl.DataFrame, facts: MovieFacts) -> pl.DataFrame:
    genre_lists = [[facts.genre_names[j] for j in np.flatnonzero(row)] for row in facts.genres]
    genres = pl.DataFrame(
        {"item_id": facts.item_ids, "genre": genre_lists}, schema={"item_id": pl.Int64, "genre": pl.List(pl.Utf8)}
    )
    return (
        train.select("user_id", "item_id")
        .join(genres, on="item_id", how="left")
        .explode("genre")
        .group_by("user_id")
        .agg(pl.col("genre").drop_nulls().n_unique().alias("diversity"))
    )


def _rows_of(facts: MovieFacts, item_ids: np.ndarray) -> np.ndarray:
    ids = np.asarray(item_ids, dtype=np.int64)
    rows = np.minimum(np.searchsorted(facts.item_ids, ids), max(len(facts.item_ids) - 1, 0))
    bad = facts.item_ids[rows] != ids
    if np.any(bad):
        raise ValueError(f"ratings name movie ids absent from the movies table: {np.unique(ids[bad])[:10].tolist()}")
    return rows


def _column_type(name: str, annotation: str) -> pl.DataType:
    known = {
        "int": pl.Int64,
        "float": pl.Float64,
        "str": pl.Utf8,
        "tuple[str, ...]": pl.List(pl.Utf8),
        "tuple[int, ...]": pl.List(pl.Int64),
    }
    if annotation not in known:
        raise TypeError(f"AgentProfile.{name}: {annotation} has no Parquet column type in profiles_table; add one")
    return known[annotation]


# AgentProfile's fields as Parquet columns, in declaration order (`profiles_table`).
_PROFILE_SCHEMA = {f.name: _column_type(f.name, f.type) for f in fields(AgentProfile)}

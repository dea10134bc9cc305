"""The tables that flow between lifecycle stages, as Polars schemas.

One schema per table, shared by every loader (download, local, synthetic), the data
contracts and the later stages, so that "users", "movies" and "ratings" mean one thing
wherever they appear.  `conform(df, SCHEMA, name)` checks and casts a frame to its schema
and names the table and column when something is missing.

Demographics use the MovieLens-1M code sets (README of ML-1M): ML-100K ages and
occupation names are mapped onto them by the loader, keeping the raw value beside it.
"""

from __future__ import annotations

import polars as pl

# MovieLens-1M code sets (ml-1m/README, "USERS FILE DESCRIPTION").
GENDERS = ("M", "F")
AGE_CODES = (1, 18, 25, 35, 45, 50, 56)
AGE_LABELS = {1: "Under 18", 18: "18-24", 25: "25-34", 35: "35-44", 45: "45-49", 50: "50-55", 56: "56+"}
OCCUPATIONS = {
    0: "other or not specified",
    1: "academic/educator",
    2: "artist",
    3: "clerical/admin",
    4: "college/grad student",
    5: "customer service",
    6: "doctor/health care",
    7: "executive/managerial",
    8: "farmer",
    9: "homemaker",
    10: "K-12 student",
    11: "lawyer",
    12: "programmer",
    13: "retired",
    14: "sales/marketing",
    15: "scientist",
    16: "self-employed",
    17: "technician/engineer",
    18: "tradesman/craftsman",
    19: "unemployed",
    20: "writer",
}
# The 18 ML-1M genres (ML-100K adds "unknown").
GENRES = (
    "Action",
    "Adventure",
    "Animation",
    "Children's",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
)

USERS = {
    "user_id": pl.Int64,
    "gender": pl.Utf8,  # "M" / "F"
    "age": pl.Int64,  # ML-1M age code, AGE_CODES
    "occupation": pl.Int64,  # ML-1M occupation code, OCCUPATIONS
    "zip": pl.Utf8,
    "has_ratings": pl.Boolean,  # False: kept in the table but flagged (no ratings)
}

MOVIES = {
    "item_id": pl.Int64,
    "title": pl.Utf8,  # as MovieLens writes it: "American President, The (1995)"
    "year": pl.Int64,  # parsed from the title; null when the title has none
    "genres": pl.List(pl.Utf8),
}

RATINGS = {
    "user_id": pl.Int64,
    "item_id": pl.Int64,
    "rating": pl.Int64,  # 1..5
    "timestamp": pl.Int64,  # unix seconds, UTC
}

# MM-ML-1M side information per movie (A/B Agent §2.2, Table 1).  Every field but
# item_id may be null where the source has no value.
METADATA = {
    "item_id": pl.Int64,
    "tmdb_id": pl.Int64,
    "overview": pl.Utf8,
    "vote_average": pl.Float64,  # 0..10
    "vote_count": pl.Int64,  # >= 0
    "release_date": pl.Date,
    "meta_genres": pl.List(pl.Utf8),  # the metadata source's own genre names
    "directors": pl.List(pl.Utf8),
    "actors": pl.List(pl.Utf8),  # billing order
    "poster_small": pl.Utf8,  # absolute path of the home-page poster file
    "poster_large": pl.Utf8,  # absolute path of the detail-page poster file
    "metadata_source": pl.Utf8,  # "tmdb", "local:<file>", "synthetic", "files:<folder>", "steam:<folder>"
    # Any domain (docs/data_model.md): the item's further attributes as one JSON object
    # (e.g. {"author": ..., "price": ...}), and the domain's noun ("movie", "book", "game").
    "attributes": pl.Utf8,
    "item_noun": pl.Utf8,
}

# Columns added after tables were first stored: `conform` fills them with nulls where a
# frame (a stored asset, a loader written before them) lacks them.
OPTIONAL_COLUMNS = frozenset({"attributes", "item_noun", "slot"})

# Hidden tastes planted by the synthetic generator, one row per user, so that tests can
# check that later stages recover them.  Weights are over GENRES (same order).
HIDDEN_TASTES = {
    "user_id": pl.Int64,
    "genre_weights": pl.List(pl.Float64),  # len(GENRES), sums to 1
    "favourite_genres": pl.List(pl.Utf8),  # the top genres by weight
    "preferred_era": pl.Int64,  # preferred release decade, e.g. 1980
    "favourite_directors": pl.List(pl.Utf8),
    "palette_preference": pl.Utf8,  # "warm" / "cool" / "dark" / "bright"
    "taste_strength": pl.Float64,  # how strongly taste drives ratings
    "rating_bias": pl.Float64,  # user's offset on the rating scale (pickiness)
}

# What a judge of the verdict holds (docs/definitions.md#the-truth): users' reactions to items
# shown free of any production system's exposure.  Two judges share it:
# - "planted": a synthetic world's exact probabilities for every user and item, computed from
#   the generator's own model (`ops.data.synthetic`): P(click | shown), P(rating >= 4 | shown);
# - "random_exposure": a random bucket, users shown items drawn uniformly at random and their
#   reactions recorded (the synthetic generator's sample, or a team's random_exposure file):
#   `liked` 0/1, `rating` where recorded, `clicked` 0/1 where recorded.
# It is read only to measure the verdict, never by the agents or the arms; a random bucket's
# calibration half (`ops.data.random_exposure.calibration_users`) may calibrate the click
# decision, and is then judged by neither judge.
GROUND_TRUTH = {
    "user_id": pl.Int64,
    "item_id": pl.Int64,
    "judge": pl.Utf8,  # "planted" / "random_exposure"
    "clicked": pl.Float64,  # planted: a probability; random exposure: 0/1, null when not recorded
    "liked": pl.Float64,  # planted: a probability; random exposure: 0/1
    "rating": pl.Float64,  # random exposure: the rating given, null when only liked was recorded
}

# MM-ML-1M, the one catalogue every later stage reads (the `catalogue` asset): MOVIES
# columns followed by METADATA's (item_id once), null where a movie has no metadata.
MM_ML_1M = {**MOVIES, **{k: v for k, v in METADATA.items() if k != "item_id"}}

# The item's column in every table, on every domain (films, games, books).
ITEM = "item_id"

# One row per item of an arm's top-20 list for a user (docs/definitions.md#top-20-list).
TOP_K = {
    "arm": pl.Utf8,
    "user_id": pl.Int64,
    "rank": pl.Int64,  # 1..20
    "item_id": pl.Int64,
    "score": pl.Float64,
}


# The one event schema (docs/definitions.md#lifecycle): one row per step, plus the exit interview.
EVENTS: dict[str, pl.DataType] = {
    "run_id": pl.Utf8,
    "arm": pl.Utf8,
    "user_id": pl.Int64,
    # 0.. : the agent's independent repetition of the session on this arm (sessions per
    # agent, paired across arms); a single-session run has session 0 only.
    "session": pl.Int64,
    "step": pl.Int64,  # 1.. within the session; the exit interview row comes last
    "page_type": pl.Utf8,  # "home" / "detail": the page the action was taken on
    "page_number": pl.Int64,  # home page number 1..4 (a detail page keeps the page it came from)
    "action": pl.Utf8,  # an action of ops.simulation.observation.ACTIONS, or "exit_interview"
    "item_id": pl.Int64,  # click_movie, watch_and_rate, back: the movie concerned
    "position": pl.Int64,  # that movie's rank 1..20 in the arm's list
    # click_movie: the card's slot 1..5 on the page as the brain was shown it (the LLM
    # brain shows each page visit in an order shuffled per agent; otherwise the list's
    # order, so the slot is the card's place on the page).  Null elsewhere and in events
    # stored before it existed.
    "slot": pl.Int64,
    "shown": pl.List(pl.Int64),  # the movie ids on the page (home: its cards; detail: the movie)
    "caught_eye": pl.List(pl.Int64),  # what the brain says caught its eye (short-term memory)
    "interest": pl.Int64,  # 1..5 stated by the brain; null on forced exits and the interview
    "fatigue_before": pl.Float64,
    "fatigue_after": pl.Float64,
    "fatigue_budget": pl.Float64,
    "rating": pl.Int64,  # watch_and_rate: 1..5
    "satisfaction": pl.Int64,  # exit_interview: 1..10
    "forced": pl.Boolean,  # True: the session was ended by the fatigue budget or the step limit
    "reason": pl.Utf8,
    "brain": pl.Utf8,
    "latency_s": pl.Float64,  # as the brain reports it
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "cost_usd": pl.Float64,
    # True: the brain could not decide and a safe action was recorded instead (the LLM
    # brain after invalid answers or an endpoint that kept failing); the embedded brain
    # never falls back.
    "fallback": pl.Boolean,
    # Why, when `fallback`: "<kind>: <detail>", kind one of
    # ops.simulation.observation.FALLBACK_KINDS ("invalid_answer", "transport", "deadline").
    "fallback_reason": pl.Utf8,
}


# What an agent wrote to its long-term memory during simulated rounds (Agent4Rec §2.1.2
# memory writing): one row per watch_and_rate, the reason it gave kept as its feeling.
WRITTEN_MEMORIES = {
    "user_id": pl.Int64,
    "item_id": pl.Int64,
    "rating": pl.Int64,  # 1..5
    "timestamp": pl.Int64,  # on the simulation's clock: after the train window, in round and step order
    "feeling": pl.Utf8,
    "round": pl.Int64,  # 0.. the round the watch happened in
}


def conform(df: pl.DataFrame, schema: dict[str, pl.DataType], table: str) -> pl.DataFrame:
    """Return `df` with exactly the schema's columns, cast to the schema's types.

    Raises ValueError naming the table and the missing columns, or the column that
    cannot be cast.
    """
    fill = [c for c in schema if c not in df.columns and c in OPTIONAL_COLUMNS]
    if fill:
        df = df.with_columns([pl.lit(None, dtype=schema[c]).alias(c) for c in fill])
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise ValueError(f"table {table!r} lacks column(s) {missing}; it has {df.columns}")
    out = []
    for name, dtype in schema.items():
        try:
            out.append(df.get_column(name).cast(dtype, strict=True))
        except Exception as exc:  # polars raises several exception types for casts
            raise ValueError(f"table {table!r}: column {name!r} cannot be read as {dtype}: {exc}") from exc
    return pl.DataFrame(out)

"""The data contracts: one great-expectations suite per table (docs/definitions.md#lifecycle, step 3).

Each suite is built from the data it guards against (referential integrity needs the ids of
the users and movies tables), so the builders take those as arguments.  Every expectation
carries a `meta["why"]` sentence: that is what a person reads in the Dagster UI when a
check fails.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import polars as pl

from ops.environment import offline_defaults
from ops.schema import AGE_CODES, GENDERS, OCCUPATIONS


@dataclass(frozen=True)
class ContractConfig:
    """Limits the suites use; defaults cover every MovieLens release and the synthetic data."""

    min_users: int = 1
    min_movies: int = 1
    min_ratings: int = 1
    # MovieLens started in 1997 and ML-1M ends in 2003; later releases run to today.
    earliest_timestamp: int = int(dt.datetime(1995, 1, 1, tzinfo=dt.UTC).timestamp())
    latest_timestamp: int = field(default_factory=lambda: int(dt.datetime.now(dt.UTC).timestamp()) + 86_400)
    earliest_release_year: int = 1870
    latest_release_year: int = 2100
    # Sparsity: ratings / (users × movies).  ML-1M is 4.19 % dense (A/B Agent Table 1).
    max_density: float = 0.5
    # Share of movies that must have each metadata field: a file covering too few movies fails the run.
    metadata_coverage_floor: float = 0.5


def users_suite(config: ContractConfig = ContractConfig(), demographics: bool = True):
    """`demographics` False: a domain without MovieLens's user attributes (docs/data_model.md),
    where gender, age, occupation and zip are all null (the code checks ignore nulls)."""
    gx = _gx()
    e = gx.expectations
    return _suite(
        "users",
        [
            e.ExpectTableRowCountToBeBetween(min_value=config.min_users, meta={"why": "the users table is empty"}),
            e.ExpectColumnValuesToNotBeNull(column="user_id", meta={"why": "a user has no id"}),
            e.ExpectColumnValuesToBeUnique(column="user_id", meta={"why": "user ids must be unique"}),
            e.ExpectColumnValuesToBeInSet(
                column="gender", value_set=list(GENDERS), meta={"why": "gender outside the MovieLens codes M/F"}
            ),
            e.ExpectColumnValuesToBeInSet(
                column="age", value_set=list(AGE_CODES), meta={"why": "age outside the ML-1M age codes"}
            ),
            e.ExpectColumnValuesToBeInSet(
                column="occupation",
                value_set=list(OCCUPATIONS),
                meta={"why": "occupation outside the ML-1M codes 0-20"},
            ),
        ]
        + (
            [e.ExpectColumnValuesToNotBeNull(column="zip", meta={"why": "a user has no zip code"})]
            if demographics
            else []
        ),
    )


def movies_suite(config: ContractConfig = ContractConfig()):
    gx = _gx()
    e = gx.expectations
    return _suite(
        "movies",
        [
            e.ExpectTableRowCountToBeBetween(min_value=config.min_movies, meta={"why": "the movies table is empty"}),
            e.ExpectColumnValuesToNotBeNull(column="item_id", meta={"why": "a movie has no id"}),
            e.ExpectColumnValuesToBeUnique(column="item_id", meta={"why": "movie ids must be unique"}),
            e.ExpectColumnValuesToNotBeNull(column="title", meta={"why": "a movie has no title"}),
            e.ExpectColumnValuesToBeBetween(
                column="year",
                min_value=config.earliest_release_year,
                max_value=config.latest_release_year,
                meta={"why": "release year out of range"},
            ),
        ],
    )


def ratings_suite(user_ids, item_ids, config: ContractConfig = ContractConfig()):
    """`user_ids` and `item_ids`: the users and movies tables' ids (a sequence or a polars
    Series), which every rating must name (`References`: an anti-join, not a GX set)."""
    gx = _gx()
    e = gx.expectations
    max_rows = max(config.min_ratings, int(config.max_density * len(user_ids) * len(item_ids)))
    return _suite(
        "ratings",
        [
            e.ExpectTableRowCountToBeBetween(
                min_value=config.min_ratings,
                max_value=max_rows,
                meta={
                    "why": f"ratings count outside [{config.min_ratings}, {max_rows}] (density at most {config.max_density})"
                },
            ),
            e.ExpectCompoundColumnsToBeUnique(
                column_list=["user_id", "item_id"], meta={"why": "a (user, movie) pair is rated twice"}
            ),
            e.ExpectColumnValuesToBeBetween(
                column="rating", min_value=1, max_value=5, meta={"why": "rating outside 1..5"}
            ),
            e.ExpectColumnValuesToBeBetween(
                column="timestamp",
                min_value=config.earliest_timestamp,
                max_value=config.latest_timestamp,
                meta={"why": "timestamp outside the plausible range (1995 to tomorrow)"},
            ),
        ],
        [
            References("user_id", pl.Series(user_ids, dtype=pl.Int64), "rating by a user missing from the users table"),
            References(
                "item_id", pl.Series(item_ids, dtype=pl.Int64), "rating of a movie missing from the movies table"
            ),
        ],
    )


def metadata_suite(item_ids, config: ContractConfig = ContractConfig()):
    """MM-ML-1M side information (A/B Agent Table 1): value ranges, dates and coverage."""
    gx = _gx()
    e = gx.expectations
    return _suite(
        "metadata",
        [
            e.ExpectColumnValuesToBeUnique(column="item_id", meta={"why": "a movie has two metadata rows"}),
            e.ExpectColumnValuesToBeBetween(
                column="vote_average", min_value=0, max_value=10, meta={"why": "vote average outside 0..10"}
            ),
            e.ExpectColumnValuesToBeBetween(column="vote_count", min_value=0, meta={"why": "negative vote count"}),
            e.ExpectColumnValuesToBeBetween(
                column="release_year",
                min_value=config.earliest_release_year,
                max_value=config.latest_release_year,
                meta={"why": "release date does not parse to a plausible year"},
            ),
        ],
        [
            References(
                "item_id", pl.Series(item_ids, dtype=pl.Int64), "metadata for a movie missing from the movies table"
            )
        ],
    )


# Fields whose coverage the floor applies to; votes only where the source has votes
# (OMDb-style local files have none, and leave them null rather than invent them).
COVERED_FIELDS = ("overview", "release_date", "meta_genres", "directors", "actors", "poster_small")
VOTE_FIELDS = ("vote_average", "vote_count")


def coverage_problems(metadata: pl.DataFrame, n_movies: int, floor: float) -> list[str]:
    """Fields that fewer than `floor` of ALL movies have (metadata rows exist only for
    matched movies, so the share is taken over the movies table, not the metadata frame)."""
    sources = metadata.get_column("metadata_source").drop_nulls().unique().to_list()
    if sources and all(s.split(":")[0] in DOMAIN_SOURCES for s in sources):
        return domain_coverage_problems(metadata, n_movies, floor)
    fields = COVERED_FIELDS + (() if sources and all(s.startswith("local:") for s in sources) else VOTE_FIELDS)
    problems = []
    for name in fields:
        column = metadata.get_column(name)
        present = column.drop_nulls()
        if isinstance(column.dtype, pl.List):
            present = present.filter(present.list.len() > 0)
        share = present.len() / max(n_movies, 1)
        if share < floor:
            problems.append(
                f"metadata.{name}: only {present.len()} of {n_movies} movies ({share:.1%}) have it; the floor is {floor:.0%}"
            )
    return problems


# Sources of any domain (docs/data_model.md): no credits, votes or dates to expect; an item
# needs some text an agent can read beyond its title — a description or categories.
DOMAIN_SOURCES = ("files", "steam", "steam-download")


def domain_coverage_problems(metadata: pl.DataFrame, n_movies: int, floor: float) -> list[str]:
    text = metadata.filter(
        pl.col("overview").fill_null("").str.strip_chars().ne("") | pl.col("meta_genres").list.len().fill_null(0).gt(0)
    ).height
    share = text / max(n_movies, 1)
    if share < floor:
        return [
            f"items: only {text} of {n_movies} items ({share:.1%}) have a description or categories; the floor is {floor:.0%}"
        ]
    return []


def metadata_frame_for_contract(metadata: pl.DataFrame) -> pl.DataFrame:
    """The columns the metadata suite reads, derived from a METADATA frame."""
    return metadata.select(
        "item_id",
        "vote_average",
        "vote_count",
        pl.col("release_date").dt.year().alias("release_year"),
    )


@dataclass(frozen=True)
class References:
    """Referential integrity: every value of `column` is one of `ids` (another table's key).
    Checked by an anti-join over the whole column (`validate_frame`), reported as GX reports
    `expect_column_values_to_be_in_set`: GX copies a value set through pydantic several times
    per validation, which on a log of 100,000 users took 90 s of a 5 M-row table's 105 s."""

    column: str
    ids: pl.Series
    why: str


@dataclass(frozen=True)
class Contract:
    """A named list of expectations; `validate_frame` turns it into a GX suite inside its own
    context (GX binds a suite to a context when expectations are added).  `references`: the
    columns that must name another table's ids."""

    name: str
    expectations: list
    references: list[References] = field(default_factory=list)


def _suite(name: str, expectations: list, references: list[References] | None = None) -> Contract:
    return Contract(name, expectations, list(references or []))


def _gx():
    offline_defaults()
    import great_expectations as gx

    return gx

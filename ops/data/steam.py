"""Steam reviews of Australian users and the Steam game catalogue (UCSD McAuley lab): the
`steam` source, read into the data model of docs/data_model.md.

Files (the README of the reference copy gives them): `interactions.csv` (user_id, item_id,
recommend 1/0, sentiment, posted_raw, date, timestamp) and `items.jsonl` (one game per
line, "id" its item id; genres, tags, specs, developer, publisher, price, release date,
early access, store URL; no descriptions, no images).

Implicit feedback: "recommend 1" is a liked game (rating 5), "recommend 0" a disliked one
(rating 1) — `ops.data.domain.IMPLICIT_LIKED`.  The caveats a real source must handle, each
counted in `SteamTables.counts`:

- year-less dates ("Posted June 24."): Steam omits the year for reviews of the crawl year;
  every dated review is from 2015 or before, so they are dated in STEAM_CRAWL_YEAR;
- (user, game) pairs reviewed twice: the later review is kept;
- games without a metadata row: their reviews are dropped (an agent could not see them);
- sparse users: users with fewer than `min_interactions` reviews left are dropped, and the
  catalogue is the games the remaining users reviewed.

User ids are Steam names (text): they are numbered 1.. in sorted order.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import polars as pl

from ops.data.domain import (
    IMPLICIT_LIKED,
    IMPLICIT_NOT_LIKED,
    DataFileError,
    DatasetDescription,
    DomainTables,
    parse_date,
)
from ops.schema import METADATA, MOVIES, RATINGS, USERS, conform

# The year of the crawl (Kang & McAuley 2018 crawled in 2016; no dated review is later than 2015).
STEAM_CRAWL_YEAR = 2016
INTERACTION_COLUMNS = ("user_id", "item_id", "recommend", "posted_raw", "date", "timestamp")
ATTRIBUTES = ("tags", "specs", "developer", "publisher", "price", "early_access", "url")
_POSTED = re.compile(r"^Posted (\w+) (\d{1,2})(?:, (\d{4}))?\.?$")
_MONTHS = {
    m: i
    for i, m in enumerate(
        (
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ),
        start=1,
    )
}

DESCRIPTION = DatasetDescription(name="steam", item_noun="game", feedback="implicit")


def load_steam(folder: Path | str, min_interactions: int = 5) -> DomainTables:
    folder = Path(folder).expanduser()
    interactions, items_path = folder / "interactions.csv", folder / "items.jsonl"
    for path in (interactions, items_path):
        if not path.is_file():
            raise DataFileError(
                path, None, None, f"missing: the steam source reads interactions.csv and items.jsonl from {folder}"
            )
    counts: dict[str, int] = {}
    reviews = _read_reviews(interactions, counts)
    games = games_frame(_json_lines(items_path))
    return steam_tables(reviews, games, counts, interactions, f"steam:{folder}", min_interactions)


def steam_tables(
    reviews: pl.DataFrame,
    games: pl.DataFrame,
    counts: dict[str, int],
    reviews_path: Path,
    source: str,
    min_interactions: int,
) -> DomainTables:
    """The tables of the data model from the reviews (user_id, item_id, recommend, timestamp,
    line) and the games (`games_frame`): the caveats handled, whatever file they came from."""
    known = reviews.join(games.select(pl.col("item_id")), on="item_id", how="semi")
    counts["reviews_of_games_without_metadata"] = reviews.height - known.height
    # Duplicates: the later review of a (user, game) pair stands.
    deduped = known.sort("timestamp", "line").unique(["user_id", "item_id"], keep="last", maintain_order=True)
    counts["duplicate_pairs_dropped"] = known.height - deduped.height
    active = deduped.group_by("user_id").len().filter(pl.col("len") >= min_interactions).select("user_id")
    kept = deduped.join(active, on="user_id", how="semi")
    counts["users_below_min_interactions"] = deduped["user_id"].n_unique() - active.height
    if kept.height == 0:
        raise DataFileError(
            reviews_path,
            None,
            "user_id",
            f"no user has {min_interactions} or more reviews of games with metadata (SIMAB_STEAM_MIN_INTERACTIONS)",
        )
    names = sorted(kept["user_id"].unique().to_list())
    number = {name: i for i, name in enumerate(names, start=1)}
    ratings = conform(
        kept.select(
            pl.col("user_id").replace_strict(number, return_dtype=pl.Int64),
            pl.col("item_id").alias("item_id"),
            pl.when(pl.col("recommend") == 1).then(IMPLICIT_LIKED).otherwise(IMPLICIT_NOT_LIKED).alias("rating"),
            "timestamp",
        ).sort("timestamp", "user_id", "item_id"),
        RATINGS,
        "interactions",
    )
    games = games.join(kept.select("item_id").unique(), on="item_id", how="semi").sort("item_id")
    movies = conform(
        games.select(
            pl.col("item_id").alias("item_id"),
            "title",
            pl.col("release_date").dt.year().alias("year"),
            pl.col("genres"),
        ),
        MOVIES,
        "items",
    )
    metadata = games.select(
        pl.col("item_id").alias("item_id"),
        pl.lit(None, dtype=pl.Int64).alias("tmdb_id"),
        pl.lit(None, dtype=pl.Utf8).alias("overview"),
        pl.lit(None, dtype=pl.Float64).alias("vote_average"),
        pl.lit(None, dtype=pl.Int64).alias("vote_count"),
        "release_date",
        pl.col("genres").alias("meta_genres"),
        pl.lit(None, dtype=pl.List(pl.Utf8)).alias("directors"),
        pl.lit(None, dtype=pl.List(pl.Utf8)).alias("actors"),
        pl.lit(None, dtype=pl.Utf8).alias("poster_small"),
        pl.lit(None, dtype=pl.Utf8).alias("poster_large"),
        pl.lit(source).alias("metadata_source"),
        "attributes",
        pl.lit(DESCRIPTION.item_noun).alias("item_noun"),
    )
    users = pl.DataFrame({"user_id": list(range(1, len(names) + 1))}).with_columns(
        pl.lit(None, dtype=pl.Utf8).alias("gender"),
        pl.lit(None, dtype=pl.Int64).alias("age"),
        pl.lit(None, dtype=pl.Int64).alias("occupation"),
        pl.lit(None, dtype=pl.Utf8).alias("zip"),
        pl.lit(True).alias("has_ratings"),
    )
    counts.update(users=len(names), games=movies.height, interactions=ratings.height)
    return DomainTables(
        users=conform(users, USERS, "users"),
        movies=movies,
        ratings=ratings,
        metadata=conform(metadata, METADATA, "items"),
        description=DESCRIPTION,
        counts=counts,
    )


def _read_reviews(path: Path, counts: dict[str, int]) -> pl.DataFrame:
    try:
        frame = pl.read_csv(path, infer_schema=False, missing_utf8_is_empty_string=True)
    except Exception as exc:
        raise DataFileError(path, None, None, f"not a readable CSV file: {exc}") from exc
    for column in INTERACTION_COLUMNS:
        if column not in frame.columns:
            raise DataFileError(path, 1, column, f"missing column; the file has {frame.columns}")
    users, items, liked, stamps, lines = [], [], [], [], []
    yearless = 0
    for i, row in enumerate(frame.select(INTERACTION_COLUMNS).iter_rows()):
        line = i + 2
        user, item, recommend, posted, _date, stamp = (v.strip() for v in row)
        if not user:
            raise DataFileError(path, line, "user_id", "empty user id")
        if not item.isdigit():
            raise DataFileError(path, line, "item_id", f"{item!r} is not a Steam app id")
        if recommend not in ("0", "1"):
            raise DataFileError(path, line, "recommend", f"{recommend!r} is not 1/0")
        if re.fullmatch(r"\d+", stamp):
            seconds = int(stamp)
        else:
            if stamp:
                raise DataFileError(path, line, "timestamp", f"neither a unix time ({stamp!r}) nor empty")
            seconds, no_year = posted_timestamp(posted, path, line, "timestamp")
            yearless += no_year
        users.append(user)
        items.append(int(item))
        liked.append(int(recommend))
        stamps.append(seconds)
        lines.append(line)
    counts["reviews_read"] = len(users)
    counts["yearless_dates_assumed_crawl_year"] = yearless
    return reviews_frame(users, items, liked, stamps, lines)


def reviews_frame(users, items, liked, stamps, lines) -> pl.DataFrame:
    """The reviews as both Steam readers hand them on: `line` orders duplicate pairs (the later
    review stands) and names a row in errors."""
    return pl.DataFrame(
        {"user_id": users, "item_id": items, "recommend": liked, "timestamp": stamps, "line": lines},
        schema={
            "user_id": pl.Utf8,
            "item_id": pl.Int64,
            "recommend": pl.Int64,
            "timestamp": pl.Int64,
            "line": pl.Int64,
        },
    )


def posted_timestamp(posted: str, path: Path, line: int, field: str) -> tuple[int, bool]:
    """Unix seconds (UTC midnight) of a "Posted Month Day[, Year]." date, and whether the year
    was missing (then STEAM_CRAWL_YEAR)."""
    match = _POSTED.match(posted.strip())
    if not match or match.group(1) not in _MONTHS:
        raise DataFileError(path, line, field, f"not a 'Posted Month Day[, Year].' date: {posted!r}")
    year = int(match.group(3) or STEAM_CRAWL_YEAR)
    try:
        day = dt.datetime(year, _MONTHS[match.group(1)], int(match.group(2)), tzinfo=dt.UTC)
    except ValueError as exc:
        raise DataFileError(path, line, field, f"{posted!r}: {exc}") from exc
    return int(day.timestamp()), match.group(3) is None


def _json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    with path.open(encoding="utf-8") as handle:
        for line, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                yield line, json.loads(text)
            except json.JSONDecodeError as exc:
                raise DataFileError(path, line, None, f"not JSON: {exc.msg}") from exc


def games_frame(records: Iterable[tuple[int, dict]]) -> pl.DataFrame:
    """The catalogue from (line, game dict) pairs, as items.jsonl or steam_games.json.gz hold them."""
    rows = []
    seen: dict[int, int] = {}
    for line, game in records:
        raw_id = str(game.get("id") or "").strip()
        if not raw_id.isdigit():
            # A handful of catalogue rows have no id: no review can name them.
            continue
        item_id = int(raw_id)
        if item_id in seen:
            continue  # the catalogue repeats a few games; the first row stands
        seen[item_id] = line
        title = str(game.get("title") or game.get("app_name") or "").strip()
        if not title:
            continue
        genres = [str(g) for g in _listed(game.get("genres")) if g] or [
            str(t) for t in _listed(game.get("tags"))[:3] if t
        ]
        attributes = {k: game[k] for k in ATTRIBUTES if game.get(k) not in (None, "", [])}
        release = game.get("release_date")
        rows.append(
            {
                "item_id": item_id,
                "title": title,
                "genres": genres,
                "release_date": parse_date(release if isinstance(release, str) else None),
                # default=str: a Python literal may hold what JSON has no word for (a tuple, a set)
                "attributes": json.dumps(attributes, ensure_ascii=False, default=str),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "item_id": pl.Int64,
            "title": pl.Utf8,
            "genres": pl.List(pl.Utf8),
            "release_date": pl.Date,
            "attributes": pl.Utf8,
        },
    )


def _listed(value) -> list:
    """A list field as a list: a lone string is one value, not its characters."""
    if isinstance(value, str):
        return [value]
    return list(value) if isinstance(value, list | tuple) else []

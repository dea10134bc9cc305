"""A team's own catalogue and interaction log: the `files` source (docs/data_model.md).

`load_files(folder)` reads the domain-neutral data model — `interactions`, `items`, optional
`users` (CSV or Parquet), an optional `images/` folder and an optional `dataset.json`
(the domain's noun, the feedback kind) — into the tables every later stage reads
(`ops.schema`: USERS, MOVIES, RATINGS and the side information METADATA).  The internal
tables keep their historic MovieLens table names: an item of any domain is a row of
"movies", its id `item_id`.

Bad input stops with `DataFileError` (`ops.data.data_files`) naming the file, the line (CSV:
1-based line of the file, the header being line 1; Parquet: 1-based row) and the field,
before anything is stored.  `ops.data.steam` maps the Steam files onto the same tables.

One concept, the `files` source: reading a team's files into the internal tables, with every
check of their content.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ops.data.data_files import (
    DataFileError,
    DatasetDescription,
    Feedback,
    Table,
    check_pairs_once,
    column_text,
    find_file,
    parse_flags,
    parse_ids,
    parse_ratings,
    read_column,
    read_description,
    read_table,
    stop_at_first,
    table_header,
)
from ops.data.random_exposure import STEM as RANDOM_EXPOSURE
from ops.data.random_exposure import empty_truth, read_random_exposure
from ops.schema import AGE_CODES, GENDERS, GROUND_TRUTH, METADATA, MOVIES, OCCUPATIONS, RATINGS, USERS, conform

# Implicit feedback on the 1..5 scale every later stage reads: a liked item (recommend 1,
# liked 1) becomes 5 and a not-liked one 1, so "liked" (rating >= 4, Agent4Rec §3.3) and
# "disliked" (rating < 3) mean exactly the positive and the negative signal.
IMPLICIT_LIKED, IMPLICIT_NOT_LIKED = 5, 1


def feedback_of(ratings: pl.DataFrame) -> Feedback:
    """The feedback a ratings table (RATINGS) carries, as the later stages can tell it:
    "implicit" where every rating is IMPLICIT_LIKED or IMPLICIT_NOT_LIKED — what the implicit
    sources (`files` with `"feedback": "implicit"`, `steam`) write — else "explicit".  A log
    of nothing but 1- and 5-star ratings reads as implicit: it is a liked / not-liked log."""
    if ratings.height == 0 or "rating" not in ratings.columns:
        return "explicit"
    values = ratings.get_column("rating").unique().to_list()
    return "implicit" if set(values) <= {IMPLICIT_LIKED, IMPLICIT_NOT_LIKED} else "explicit"


# The item columns the data model names; every other column of the items file is an attribute.
ITEM_FIELDS = ("item_id", "title", "categories", "description", "image", "release_date")
USER_DEMOGRAPHICS = ("gender", "age", "occupation", "zip")
CATEGORY_SEPARATOR = "|"


@dataclass(frozen=True)
class DomainTables:
    users: pl.DataFrame  # USERS (demographics null where the domain has none)
    movies: pl.DataFrame  # MOVIES: one row per item
    ratings: pl.DataFrame  # RATINGS: 1..5 (implicit feedback mapped, IMPLICIT_LIKED)
    metadata: pl.DataFrame  # METADATA: description, categories, image, attributes, item_noun
    description: DatasetDescription
    counts: dict[str, int] = field(default_factory=dict)  # what was read, dropped, assumed
    # GROUND_TRUTH rows of judge "random_exposure": the optional random_exposure file (a
    # random bucket); read only to judge the verdict (ops.readout.truth).
    truth: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=GROUND_TRUTH))


def check_files_folder(folder: Path | str) -> None:
    """What `load_files` needs, checked without reading the rows: the folder, `dataset.json`
    when there is one, the items and interactions files and the columns of their headers
    (and of a users file); DataFileError on the first fault."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise DataFileError(folder, None, None, "not a folder (SIMAB_FILES_PATH)")
    description = read_description(folder)
    signal = "liked" if description.feedback == "implicit" else "rating"
    wanted = {"items": ("item_id", "title"), "interactions": ("user_id", "item_id", signal, "timestamp"), "users": ()}
    for stem, columns in wanted.items():
        path = find_file(folder, stem, required=stem != "users")
        if path is None:
            continue
        header = table_header(path)
        missing = [c for c in columns if c not in header]
        if missing:
            unit = "row" if path.suffix == ".parquet" else "line"
            raise DataFileError(path, 1, missing[0], f"missing column; the file has {header}", unit)


@dataclass(frozen=True)
class LogShape:
    """What an interactions log alone says of the lifecycle it can feed: its rows, users and
    distinct timestamps, and the users of the chronological split's windows."""

    path: Path
    rows: int
    users: int
    timestamps: int
    first_timestamp: int | None
    train_and_valid_users: int


def log_shape(folder: Path | str) -> LogShape:
    """The interactions file of a files folder read for its ids and timestamps (each checked,
    DataFileError naming file, line and field, as the ingestion step would: an item the items
    file lacks, a timestamp neither unix seconds nor a date, a user and item twice) and split
    by time 7:2:1 as the lifecycle splits it (`ops.data.split`), before anything else is read."""
    from ops.data.split import chronological_split

    folder = Path(folder).expanduser()
    path = find_file(folder, "interactions")
    table = read_table(path)
    table.require("user_id", "item_id", "timestamp")
    users = parse_ids(table, "user_id")
    items = parse_ids(table, "item_id")
    item_ids = parse_ids(read_column(find_file(folder, "items"), "item_id"), "item_id")
    stop_at_first(
        table, items.is_in(item_ids.implode()), "item_id", lambda value: f"item {int(value)} is not in the items file"
    )
    raw = table.frame.get_column("timestamp")
    stamps = raw.cast(pl.Int64) if raw.dtype.is_integer() else parse_timestamps(column_text(table, "timestamp"))
    stop_at_first(
        table,
        stamps.is_not_null(),
        "timestamp",
        lambda value: f"{value!r} is neither unix seconds nor an ISO date (YYYY-MM-DD[THH:MM:SS])",
    )
    frame = pl.DataFrame({"user_id": users, "item_id": items, "rating": 1, "timestamp": stamps})
    check_pairs_once(table, frame)
    split = chronological_split(frame)
    both = set(split.train.get_column("user_id").to_list()) & set(split.valid.get_column("user_id").to_list())
    return LogShape(
        path=path,
        rows=table.frame.height,
        users=users.n_unique(),
        timestamps=stamps.n_unique(),
        first_timestamp=int(stamps.min()) if stamps.len() else None,
        train_and_valid_users=len(both),
    )


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2})?)?(Z|[+-]\d{2}:?\d{2})?$")


def parse_timestamp(text: str | None) -> int | None:
    """Unix seconds, or an ISO date / date-time (UTC when no offset); None when neither."""
    text = (text or "").strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if not _DATE.match(text):
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp())


# An ISO date or date-time with its parts: date, then hour, minute, second, then the offset.
_ISO_PARTS = r"^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?(?:(Z)|([+-])(\d{2}):?(\d{2}))?$"


def parse_timestamps(text: pl.Series) -> pl.Series:
    """`parse_timestamp` of every value, as an Int64 series (null where neither), with polars
    expressions: unix seconds cast, ISO dates and date-times taken apart by one regular
    expression; the rare forms the expression does not settle (a date-only value with an
    offset, which Python's reader ignores) go through `parse_timestamp` itself."""
    frame = pl.DataFrame({"text": text.cast(pl.Utf8).fill_null("").str.strip_chars()})
    parts = ["date", "hour", "minute", "second", "z", "sign", "offset_hours", "offset_minutes"]
    iso = (
        frame.with_columns(pl.col("text").str.extract_groups(_ISO_PARTS).struct.rename_fields(parts).alias("p"))
        .unnest("p")
        .with_columns(
            pl.col("date").str.to_date("%Y-%m-%d", strict=False).alias("day"),
            pl.col("hour").is_not_null().alias("has_time"),
            *(pl.col(c).cast(pl.Int64, strict=False).fill_null(0) for c in parts[1:4] + parts[6:]),
        )
    )
    valid_time = (pl.col("hour") <= 23) & (pl.col("minute") <= 59) & (pl.col("second") <= 59)
    valid_offset = (pl.col("offset_hours") <= 23) & (pl.col("offset_minutes") <= 59)
    offset = pl.when(pl.col("sign") == "-").then(-1).otherwise(1) * (
        pl.col("offset_hours") * 3600 + pl.col("offset_minutes") * 60
    )
    # Python ignores an offset written after a bare date: left to it (below).
    settled = pl.col("date").is_not_null() & (pl.col("sign").is_null() | pl.col("has_time"))
    seconds = (
        pl.col("day").cast(pl.Datetime("ms")).dt.epoch("s")
        + pl.col("hour") * 3600
        + pl.col("minute") * 60
        + pl.col("second")
        - offset
    )
    out = iso.select(
        pl.when(pl.col("text").str.contains(r"^-?[0-9]+$"))
        .then(pl.col("text").cast(pl.Int64, strict=False))
        .when(settled & valid_time & valid_offset)
        .then(seconds)
        .alias("stamp"),
        (pl.col("date").is_not_null() & ~settled).alias("unsettled"),
    )
    stamps = out.get_column("stamp")
    unsettled = out.get_column("unsettled").arg_true()
    if unsettled.len():
        fixed = [parse_timestamp(v) for v in frame.get_column("text").gather(unsettled).to_list()]
        stamps = stamps.scatter(unsettled, pl.Series(fixed, dtype=pl.Int64))
    return stamps.rename(text.name)


def parse_date(text: str | None) -> dt.date | None:
    text = (text or "").strip()
    try:
        return dt.date.fromisoformat(text[:10]) if re.match(r"^\d{4}-\d{2}-\d{2}", text) else None
    except ValueError:
        return None


def load_files(folder: Path | str) -> DomainTables:
    """Read a folder in the data model of docs/data_model.md (an optional random_exposure
    file into `truth`: `ops.data.random_exposure`)."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise DataFileError(folder, None, None, "not a folder (SIMAB_FILES_PATH)")
    description = read_description(folder)
    items = _read_items(read_table(find_file(folder, "items")), folder / "images", description)
    ratings = _read_interactions(read_table(find_file(folder, "interactions")), items.movies["item_id"], description)
    users_path = find_file(folder, "users", required=False)
    users = _read_users(read_table(users_path) if users_path else None, ratings)
    exposure_path = find_file(folder, RANDOM_EXPOSURE, required=False)
    truth = (
        read_random_exposure(read_table(exposure_path), items.movies["item_id"], users["user_id"], description)
        if exposure_path
        else empty_truth()
    )
    counts = {"items": items.movies.height, "interactions": ratings.height, "users": users.height}
    if exposure_path:
        counts["random_exposure"] = truth.height
    return DomainTables(
        users=users,
        movies=items.movies,
        ratings=ratings,
        metadata=items.metadata,
        description=description,
        counts=counts,
        truth=truth,
    )


@dataclass(frozen=True)
class _Items:
    movies: pl.DataFrame
    metadata: pl.DataFrame


def _read_items(table: Table, images: Path, description: DatasetDescription) -> _Items:
    from ops.data.poster_store import verify_poster_file

    table.require("item_id", "title")
    frame = table.frame
    ids = parse_ids(table, "item_id")
    first = ids.is_first_distinct()
    if not first.all():
        i = int((~first).arg_true()[0])
        earlier = table.where(int((ids == ids[i]).arg_true()[0]))
        raise table.error(i, "item_id", f"duplicate item id {ids[i]} (first on {table.unit} {earlier})")
    titles = column_text(table, "title").str.strip_chars()
    stop_at_first(table, titles != "", "title", lambda value: "an item needs a title")
    n = frame.height
    categories = _categories(table)
    described = (
        column_text(table, "description").str.strip_chars().replace("", None)
        if "description" in frame.columns
        else pl.Series([None] * n, dtype=pl.Utf8)
    )
    if "release_date" in frame.columns:
        text = column_text(table, "release_date").str.strip_chars()
        dates = (
            pl.when(text.str.contains(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"))
            .then(text.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False))
            .alias("release_date")
        )
        dates = pl.select(dates).to_series() if text.len() else pl.Series("release_date", [], dtype=pl.Date)
        stop_at_first(
            table, (text == "") | dates.is_not_null(), "release_date", lambda v: f"{v!r} is not a date YYYY-MM-DD"
        )
    else:
        dates = pl.Series("release_date", [None] * n, dtype=pl.Date)
    image_paths: list[str | None] = []
    for i, name in enumerate(frame.get_column("image").to_list() if "image" in frame.columns else [None] * n):
        if not (name or "").strip():
            image_paths.append(None)
            continue
        path = (images / name.strip()).resolve()
        reason = verify_poster_file(str(path))
        if reason:
            raise table.error(i, "image", f"image does not decode: {reason}")
        image_paths.append(str(path))
    extra = [c for c in frame.columns if c not in ITEM_FIELDS]
    attributes = (
        [
            json.dumps({c: row[c] for c in extra if row[c] not in (None, "")}, ensure_ascii=False) if extra else None
            for row in frame.select(pl.col(extra).cast(pl.Utf8)).iter_rows(named=True)
        ]
        if extra
        else [None] * n
    )
    movies = pl.DataFrame(
        {"item_id": ids, "title": titles, "year": dates.dt.year().cast(pl.Int64), "genres": categories},
        schema=MOVIES,
    )
    metadata = pl.DataFrame(
        {
            "item_id": ids,
            "overview": described,
            "release_date": dates,
            "meta_genres": categories,
            "poster_small": image_paths,
            "poster_large": image_paths,
            "metadata_source": [f"files:{table.path.parent}"] * n,
            "attributes": attributes,
            "item_noun": [description.item_noun] * n,
        },
        schema_overrides={"release_date": pl.Date, "meta_genres": pl.List(pl.Utf8)},
    )
    absent = {name: pl.lit(None, dtype=dtype) for name, dtype in METADATA.items() if name not in metadata.columns}
    return _Items(movies, conform(metadata.with_columns(**absent), METADATA, "items"))


def _categories(table: Table) -> pl.Series:
    """Each item's categories: a list column as it is, text split at `|`; blanks dropped."""
    if "categories" not in table.frame.columns:
        return pl.Series("categories", [[]] * table.frame.height, dtype=pl.List(pl.Utf8))
    column = table.frame.get_column("categories")
    lists = (
        column.cast(pl.List(pl.Utf8))
        if isinstance(column.dtype, pl.List)
        else column_text(table, "categories").str.split(CATEGORY_SEPARATOR)
    )
    return lists.fill_null([]).list.eval(pl.element().str.strip_chars().filter(pl.element().str.strip_chars() != ""))


def _read_interactions(table: Table, item_ids: pl.Series, description: DatasetDescription) -> pl.DataFrame:
    """The interactions, checked with polars expressions over whole columns; the first bad
    row of a column stops the read, named (`stop_at_first`)."""
    implicit = description.feedback == "implicit"
    signal = "liked" if implicit else "rating"
    table.require("user_id", "item_id", signal, "timestamp")
    users = parse_ids(table, "user_id")
    items = parse_ids(table, "item_id")
    stop_at_first(
        table, items.is_in(item_ids.implode()), "item_id", lambda value: f"item {int(value)} is not in the items file"
    )
    if implicit:
        values = pl.Series(np.where(parse_flags(table, signal).to_numpy(), IMPLICIT_LIKED, IMPLICIT_NOT_LIKED))
    else:
        values = parse_ratings(table, signal)
    raw = table.frame.get_column("timestamp")
    stamps = raw.cast(pl.Int64) if raw.dtype.is_integer() else parse_timestamps(column_text(table, "timestamp"))
    stop_at_first(
        table,
        stamps.is_not_null(),
        "timestamp",
        lambda value: f"{value!r} is neither unix seconds nor an ISO date (YYYY-MM-DD[THH:MM:SS])",
    )
    ratings = pl.DataFrame({"user_id": users, "item_id": items, "rating": values, "timestamp": stamps})
    check_pairs_once(table, ratings)
    return conform(ratings, RATINGS, "interactions")


def _read_users(table: Table | None, ratings: pl.DataFrame) -> pl.DataFrame:
    """The users table: every user of the interactions, plus those of a users file; the
    MovieLens demographics only where the file has them in MovieLens's codes."""
    rated = ratings.select(pl.col("user_id").unique())
    if table is None:
        known = pl.DataFrame(schema={"user_id": pl.Int64})
    else:
        table.require("user_id")
        ids = parse_ids(table, "user_id")
        first = ids.is_first_distinct()
        if not first.all():
            i = int((~first).arg_true()[0])
            raise table.error(i, "user_id", f"duplicate user id {ids[i]}")
        known = pl.DataFrame({"user_id": ids, **_demographics(table)})
    users = (
        pl.concat([rated, known.select("user_id")])
        .unique()
        .join(known, on="user_id", how="left")
        .join(rated.with_columns(has_ratings=pl.lit(True)), on="user_id", how="left")
        .with_columns(pl.col("has_ratings").fill_null(False))
        .sort("user_id")
    )
    absent = {name: pl.lit(None, dtype=USERS[name]) for name in USER_DEMOGRAPHICS if name not in users.columns}
    return conform(users.with_columns(**absent), USERS, "users")


def _demographics(table: Table) -> dict[str, pl.Series]:
    """The MovieLens demographics of a users file, checked column by column (an empty value
    is no value); the first value outside MovieLens's codes stops the read, named."""
    frame, out = table.frame, {}
    if "gender" in frame.columns:
        gender = column_text(table, "gender").str.strip_chars()
        stop_at_first(
            table,
            (gender == "") | gender.is_in(list(GENDERS)),
            "gender",
            lambda v: f"{(v or '').strip()!r} is not one of {list(GENDERS)}",
        )
        out["gender"] = gender.replace("", None)
    for name, codes in (("age", AGE_CODES), ("occupation", tuple(OCCUPATIONS))):
        if name not in frame.columns:
            continue
        text = column_text(table, name).str.strip_chars()
        values = text.cast(pl.Int64, strict=False)
        ok = (text == "") | (text.str.contains(r"^[0-9]+$") & values.is_in(list(codes)))
        stop_at_first(
            table,
            ok,
            name,
            lambda v, n=name, c=codes: f"{(v or '').strip()!r} is not a MovieLens-1M {n} code {list(c)}",
        )
        out[name] = values
    if "zip" in frame.columns:
        out["zip"] = column_text(table, "zip").str.strip_chars().replace("", None)
    return {k: v.cast(USERS[k]) for k, v in out.items()}

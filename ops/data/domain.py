"""A team's own catalogue and interaction log: the `files` source (docs/data_model.md).

`load_files(folder)` reads the domain-neutral data model — `interactions`, `items`, optional
`users` (CSV or Parquet), an optional `images/` folder and an optional `dataset.json`
(the domain's noun, the feedback kind) — into the tables every later stage reads
(`ops.schema`: USERS, MOVIES, RATINGS and the side information METADATA).  The internal
tables keep their historic MovieLens names ("movies", `movie_id`): an item of any domain is
a row of "movies".

Bad input stops with `DataFileError` naming the file, the line (CSV: 1-based line of the
file, the header being line 1; Parquet: 1-based row) and the field, before anything is
stored.  `ops.data.steam` maps the Steam files onto the same tables.

One concept, the `files` source: reading a team's files into the internal tables, with every
check of their content.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl

from ops.schema import AGE_CODES, GENDERS, METADATA, MOVIES, OCCUPATIONS, RATINGS, USERS, conform

Feedback = Literal["explicit", "implicit"]

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


class DataFileError(ValueError):
    """A data file that cannot be read: names the file, the line (or row) and the field."""

    def __init__(self, path: Path | str, line: int | None, field: str | None, reason: str, unit: str = "line"):
        self.path, self.line, self.field, self.reason = Path(path), line, field, reason
        where = str(self.path)
        if line is not None:
            where += f", {unit} {line}"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True)
class DatasetDescription:
    """`dataset.json`: what the items are called and what the feedback means."""

    name: str = "items"
    item_noun: str = "item"  # "book", "game": the prompts and pages say it
    item_plural: str = ""  # default: the noun + "s"
    feedback: Feedback = "explicit"

    @property
    def plural(self) -> str:
        return self.item_plural or f"{self.item_noun}s"


@dataclass(frozen=True)
class DomainTables:
    users: pl.DataFrame  # USERS (demographics null where the domain has none)
    movies: pl.DataFrame  # MOVIES: one row per item
    ratings: pl.DataFrame  # RATINGS: 1..5 (implicit feedback mapped, IMPLICIT_LIKED)
    metadata: pl.DataFrame  # METADATA: description, categories, image, attributes, item_noun
    description: DatasetDescription
    counts: dict[str, int] = field(default_factory=dict)  # what was read, dropped, assumed


@dataclass
class _Table:
    """One file's rows as text (a Parquet file's whole-number columns as numbers), with where
    each row came from."""

    path: Path
    frame: pl.DataFrame
    unit: str  # "line" (CSV) or "row" (Parquet)

    def where(self, i: int) -> int:
        return i + 2 if self.unit == "line" else i + 1

    def error(self, i: int | None, column: str | None, reason: str) -> DataFileError:
        return DataFileError(self.path, None if i is None else self.where(i), column, reason, self.unit)

    def require(self, *columns: str) -> None:
        for c in columns:
            if c not in self.frame.columns:
                raise DataFileError(
                    self.path,
                    1 if self.unit == "line" else None,
                    c,
                    f"missing column; the file has {self.frame.columns}",
                )


def find_file(folder: Path, stem: str, required: bool = True) -> Path | None:
    """`<stem>.parquet` or `<stem>.csv` in `folder`."""
    for suffix in (".parquet", ".csv"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    if required:
        raise DataFileError(folder / f"{stem}.csv", None, None, f"no {stem}.csv or {stem}.parquet in {folder}")
    return None


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
    DataFileError naming file, line and field) and split by time 7:2:1 as the lifecycle
    splits it (`ops.data.split`), before anything else is read."""
    from ops.data.split import chronological_split

    folder = Path(folder).expanduser()
    path = find_file(folder, "interactions")
    table = read_table(path)
    table.require("user_id", "item_id", "timestamp")
    users = parse_ids(table, "user_id")
    items = parse_ids(table, "item_id")
    raw = table.frame.get_column("timestamp")
    stamps = raw.cast(pl.Int64) if raw.dtype.is_integer() else parse_timestamps(_text(table, "timestamp"))
    _stop_at_first(
        table,
        stamps.is_not_null(),
        "timestamp",
        lambda value: f"{value!r} is neither unix seconds nor an ISO date (YYYY-MM-DD[THH:MM:SS])",
    )
    frame = pl.DataFrame({"user_id": users, "movie_id": items, "rating": 1, "timestamp": stamps}).unique(
        ["user_id", "movie_id"], keep="first", maintain_order=True
    )
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


def table_header(path: Path) -> list[str]:
    """The column names of a CSV or Parquet file, reading no row; DataFileError when it
    cannot be read."""
    try:
        if path.suffix == ".parquet":
            return list(pl.read_parquet_schema(path))
        return pl.read_csv(path, n_rows=0, infer_schema=False).columns
    except Exception as exc:  # noqa: BLE001 - any reader fault is the file's; say which
        raise DataFileError(path, None, None, f"not readable: {str(exc).splitlines()[0]}") from None


def read_table(path: Path) -> _Table:
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
        # Validation parses text, so Parquet's typed columns become text too (lists stay
        # lists, whole numbers stay numbers: `_text` gives their text where it is read).
        frame = frame.with_columns(
            [pl.col(c).cast(pl.Utf8) for c, t in frame.schema.items() if not (isinstance(t, pl.List) or t.is_integer())]
        )
        return _Table(path, frame, "row")
    try:
        frame = pl.read_csv(path, infer_schema=False, missing_utf8_is_empty_string=True)
    except Exception as exc:  # polars' CSV errors carry the position in their text
        raise DataFileError(path, None, None, f"not a readable CSV file: {exc}") from exc
    return _Table(path, frame, "line")


def read_description(folder: Path) -> DatasetDescription:
    path = folder / "dataset.json"
    if not path.is_file():
        return DatasetDescription(name=folder.name)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFileError(path, exc.lineno, None, f"not JSON: {exc.msg}") from exc
    known = {"name", "item_noun", "item_plural", "feedback"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise DataFileError(path, None, unknown[0], f"unknown key; known: {sorted(known)}")
    if raw.get("feedback", "explicit") not in ("explicit", "implicit"):
        raise DataFileError(path, None, "feedback", f"{raw['feedback']!r} is not 'explicit' or 'implicit'")
    return DatasetDescription(**{"name": folder.name, **raw})


def parse_ids(table: _Table, column: str) -> pl.Series:
    """Positive integer ids (the later stages key everything on int64 ids), as an Int64
    series; the first row that is none names itself in a DataFileError."""
    column_values = table.frame.get_column(column)
    if column_values.dtype.is_integer():
        ids = column_values.cast(pl.Int64, strict=False)
        ok = ids >= 1
    else:
        text = _text(table, column).str.strip_chars()
        ids = text.cast(pl.Int64, strict=False)
        ok = text.str.contains(r"^[0-9]+$") & (ids >= 1)
    _stop_at_first(table, ok, column, lambda value: f"{value!r} is not a positive whole number")
    return ids


def _text(table: _Table, column: str) -> pl.Series:
    """A column as text, a missing value as the empty string."""
    return table.frame.get_column(column).cast(pl.Utf8).fill_null("")


def _stop_at_first(table: _Table, ok: pl.Series, column: str, reason: Callable[[object], str]) -> None:
    """DataFileError naming the first row where `ok` is not true (null counts as not),
    `reason(value)` saying what is wrong with that row's value of `column`."""
    bad = (~ok.fill_null(False)).arg_true()
    if bad.len():
        i = int(bad[0])
        raise table.error(i, column, reason(table.frame.get_column(column)[i]))


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
    """Read a folder in the data model of docs/data_model.md."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise DataFileError(folder, None, None, "not a folder (SIMAB_FILES_PATH)")
    description = read_description(folder)
    items = _read_items(read_table(find_file(folder, "items")), folder / "images", description)
    ratings = _read_interactions(read_table(find_file(folder, "interactions")), items.movies["movie_id"], description)
    users_path = find_file(folder, "users", required=False)
    users = _read_users(read_table(users_path) if users_path else None, ratings)
    return DomainTables(
        users=users,
        movies=items.movies,
        ratings=ratings,
        metadata=items.metadata,
        description=description,
        counts={"items": items.movies.height, "interactions": ratings.height, "users": users.height},
    )


@dataclass(frozen=True)
class _Items:
    movies: pl.DataFrame
    metadata: pl.DataFrame


def _read_items(table: _Table, images: Path, description: DatasetDescription) -> _Items:
    from ops.data.poster_store import verify_poster_file

    table.require("item_id", "title")
    frame = table.frame
    ids = parse_ids(table, "item_id")
    first = ids.is_first_distinct()
    if not first.all():
        i = int((~first).arg_true()[0])
        earlier = table.where(int((ids == ids[i]).arg_true()[0]))
        raise table.error(i, "item_id", f"duplicate item id {ids[i]} (first on {table.unit} {earlier})")
    titles = _text(table, "title").str.strip_chars()
    _stop_at_first(table, titles != "", "title", lambda value: "an item needs a title")
    n = frame.height
    categories = _categories(table)
    described = (
        _text(table, "description").str.strip_chars().replace("", None)
        if "description" in frame.columns
        else pl.Series([None] * n, dtype=pl.Utf8)
    )
    if "release_date" in frame.columns:
        text = _text(table, "release_date").str.strip_chars()
        dates = (
            pl.when(text.str.contains(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"))
            .then(text.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False))
            .alias("release_date")
        )
        dates = pl.select(dates).to_series() if text.len() else pl.Series("release_date", [], dtype=pl.Date)
        _stop_at_first(
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
        {"movie_id": ids, "title": titles, "year": dates.dt.year().cast(pl.Int64), "genres": categories},
        schema=MOVIES,
    )
    metadata = pl.DataFrame(
        {
            "movie_id": ids,
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


def _categories(table: _Table) -> pl.Series:
    """Each item's categories: a list column as it is, text split at `|`; blanks dropped."""
    if "categories" not in table.frame.columns:
        return pl.Series("categories", [[]] * table.frame.height, dtype=pl.List(pl.Utf8))
    column = table.frame.get_column("categories")
    lists = (
        column.cast(pl.List(pl.Utf8))
        if isinstance(column.dtype, pl.List)
        else _text(table, "categories").str.split(CATEGORY_SEPARATOR)
    )
    return lists.fill_null([]).list.eval(pl.element().str.strip_chars().filter(pl.element().str.strip_chars() != ""))


def _read_interactions(table: _Table, item_ids: pl.Series, description: DatasetDescription) -> pl.DataFrame:
    """The interactions, checked with polars expressions over whole columns; the first bad
    row of a column stops the read, named (`_stop_at_first`)."""
    implicit = description.feedback == "implicit"
    signal = "liked" if implicit else "rating"
    table.require("user_id", "item_id", signal, "timestamp")
    users = parse_ids(table, "user_id")
    items = parse_ids(table, "item_id")
    _stop_at_first(
        table, items.is_in(item_ids.implode()), "item_id", lambda value: f"item {int(value)} is not in the items file"
    )
    text = _text(table, signal).str.strip_chars().str.to_lowercase()
    if implicit:
        ok = text.is_in(["0", "1", "true", "false"])
        _stop_at_first(table, ok, signal, lambda value: f"{value!r} is not 1/0 (or true/false)")
        values = pl.Series(np.where(text.is_in(["1", "true"]).to_numpy(), IMPLICIT_LIKED, IMPLICIT_NOT_LIKED))
    else:
        values = text.cast(pl.Int64, strict=False)
        ok = text.str.contains(r"^[0-9]+$") & values.is_between(1, 5)
        _stop_at_first(table, ok, signal, lambda value: f"{value!r} is not a whole rating 1..5")
    raw = table.frame.get_column("timestamp")
    stamps = raw.cast(pl.Int64) if raw.dtype.is_integer() else parse_timestamps(_text(table, "timestamp"))
    _stop_at_first(
        table,
        stamps.is_not_null(),
        "timestamp",
        lambda value: f"{value!r} is neither unix seconds nor an ISO date (YYYY-MM-DD[THH:MM:SS])",
    )
    ratings = pl.DataFrame({"user_id": users, "movie_id": items, "rating": values, "timestamp": stamps})
    repeated = ratings.select("user_id", "movie_id").is_duplicated()
    if repeated.any():
        # The first row that repeats an earlier one, and that earlier one.
        pairs = ratings.with_row_index("row").filter(repeated)
        second = pairs.filter(pl.struct("user_id", "movie_id").is_first_distinct().not_()).row(0, named=True)
        user, item, i = second["user_id"], second["movie_id"], second["row"]
        earlier = pairs.filter((pl.col("user_id") == user) & (pl.col("movie_id") == item)).get_column("row")[0]
        where = table.where(int(earlier))
        raise table.error(i, "item_id", f"user {user} and item {item} appear twice (first on {table.unit} {where})")
    return conform(ratings, RATINGS, "interactions")


def _read_users(table: _Table | None, ratings: pl.DataFrame) -> pl.DataFrame:
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


def _demographics(table: _Table) -> dict[str, pl.Series]:
    """The MovieLens demographics of a users file, checked column by column (an empty value
    is no value); the first value outside MovieLens's codes stops the read, named."""
    frame, out = table.frame, {}
    if "gender" in frame.columns:
        gender = _text(table, "gender").str.strip_chars()
        _stop_at_first(
            table,
            (gender == "") | gender.is_in(list(GENDERS)),
            "gender",
            lambda v: f"{(v or '').strip()!r} is not one of {list(GENDERS)}",
        )
        out["gender"] = gender.replace("", None)
    for name, codes in (("age", AGE_CODES), ("occupation", tuple(OCCUPATIONS))):
        if name not in frame.columns:
            continue
        text = _text(table, name).str.strip_chars()
        values = text.cast(pl.Int64, strict=False)
        ok = (text == "") | (text.str.contains(r"^[0-9]+$") & values.is_in(list(codes)))
        _stop_at_first(
            table,
            ok,
            name,
            lambda v, n=name, c=codes: f"{(v or '').strip()!r} is not a MovieLens-1M {n} code {list(c)}",
        )
        out[name] = values
    if "zip" in frame.columns:
        out["zip"] = _text(table, "zip").str.strip_chars().replace("", None)
    return {k: v.cast(USERS[k]) for k, v in out.items()}

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
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

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
    """One file's rows as text, with where each row came from."""

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
        # Validation parses text, so Parquet's typed columns become text too (lists stay lists).
        frame = frame.with_columns(
            [pl.col(c).cast(pl.Utf8) for c, t in frame.schema.items() if not isinstance(t, pl.List)]
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


def parse_ids(table: _Table, column: str) -> list[int]:
    """Positive integer ids (the later stages key everything on int64 ids)."""
    out = []
    for i, value in enumerate(table.frame.get_column(column).to_list()):
        text = (value or "").strip()
        if not text.isdigit() or int(text) < 1:
            raise table.error(i, column, f"{value!r} is not a positive whole number")
        out.append(int(text))
    return out


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
    ratings = _read_interactions(
        read_table(find_file(folder, "interactions")), set(items.movies["movie_id"].to_list()), description
    )
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
    first_line: dict[int, int] = {}
    for i, item_id in enumerate(ids):
        if item_id in first_line:
            raise table.error(
                i, "item_id", f"duplicate item id {item_id} (first on {table.unit} {first_line[item_id]})"
            )
        first_line[item_id] = table.where(i)
    titles = frame.get_column("title").to_list()
    for i, title in enumerate(titles):
        if not (title or "").strip():
            raise table.error(i, "title", "an item needs a title")
    n = frame.height
    categories = _categories(table)
    described = frame.get_column("description").to_list() if "description" in frame.columns else [None] * n
    dates = []
    for i, value in enumerate(frame.get_column("release_date").to_list() if "release_date" in frame.columns else []):
        date = parse_date(value)
        if (value or "").strip() and date is None:
            raise table.error(i, "release_date", f"{value!r} is not a date YYYY-MM-DD")
        dates.append(date)
    dates = dates or [None] * n
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
            for row in frame.select(extra).iter_rows(named=True)
        ]
        if extra
        else [None] * n
    )
    movies = pl.DataFrame(
        {
            "movie_id": ids,
            "title": [t.strip() for t in titles],
            "year": [d.year if d else None for d in dates],
            "genres": categories,
        },
        schema=MOVIES,
    )
    metadata = pl.DataFrame(
        {
            "movie_id": ids,
            "overview": [(d or "").strip() or None for d in described],
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


def _categories(table: _Table) -> list[list[str]]:
    if "categories" not in table.frame.columns:
        return [[] for _ in range(table.frame.height)]
    column = table.frame.get_column("categories")
    if isinstance(column.dtype, pl.List):
        return [[c.strip() for c in (v or []) if c and c.strip()] for v in column.to_list()]
    return [[c.strip() for c in (v or "").split(CATEGORY_SEPARATOR) if c.strip()] for v in column.to_list()]


def _read_interactions(table: _Table, item_ids: set[int], description: DatasetDescription) -> pl.DataFrame:
    implicit = description.feedback == "implicit"
    signal = "liked" if implicit else "rating"
    table.require("user_id", "item_id", signal, "timestamp")
    users = parse_ids(table, "user_id")
    items = parse_ids(table, "item_id")
    for i, item in enumerate(items):
        if item not in item_ids:
            raise table.error(i, "item_id", f"item {item} is not in the items file")
    values = []
    for i, value in enumerate(table.frame.get_column(signal).to_list()):
        text = (value or "").strip().lower()
        if implicit:
            if text not in ("0", "1", "true", "false"):
                raise table.error(i, signal, f"{value!r} is not 1/0 (or true/false)")
            values.append(IMPLICIT_LIKED if text in ("1", "true") else IMPLICIT_NOT_LIKED)
        else:
            if not text.isdigit() or not 1 <= int(text) <= 5:
                raise table.error(i, signal, f"{value!r} is not a whole rating 1..5")
            values.append(int(text))
    stamps = []
    for i, value in enumerate(table.frame.get_column("timestamp").to_list()):
        stamp = parse_timestamp(value)
        if stamp is None:
            raise table.error(
                i, "timestamp", f"{value!r} is neither unix seconds nor an ISO date (YYYY-MM-DD[THH:MM:SS])"
            )
        stamps.append(stamp)
    seen: dict[tuple[int, int], int] = {}
    for i, pair in enumerate(zip(users, items, strict=True)):
        if pair in seen:
            raise table.error(
                i, "item_id", f"user {pair[0]} and item {pair[1]} appear twice (first on {table.unit} {seen[pair]})"
            )
        seen[pair] = table.where(i)
    ratings = pl.DataFrame({"user_id": users, "movie_id": items, "rating": values, "timestamp": stamps})
    return conform(ratings, RATINGS, "interactions")


def _read_users(table: _Table | None, ratings: pl.DataFrame) -> pl.DataFrame:
    """The users table: every user of the interactions, plus those of a users file; the
    MovieLens demographics only where the file has them in MovieLens's codes."""
    rated = sorted(set(ratings.get_column("user_id").to_list()))
    known: dict[int, dict] = {}
    if table is not None:
        table.require("user_id")
        ids = parse_ids(table, "user_id")
        rows = table.frame.to_dicts()
        for i, (uid, row) in enumerate(zip(ids, rows, strict=True)):
            if uid in known:
                raise table.error(i, "user_id", f"duplicate user id {uid}")
            known[uid] = _demographics(table, i, row)
    all_ids = sorted(set(rated) | set(known))
    rated_set = set(rated)
    empty = dict.fromkeys(USER_DEMOGRAPHICS)
    return pl.DataFrame(
        [{"user_id": u, **known.get(u, empty), "has_ratings": u in rated_set} for u in all_ids], schema=USERS
    )


def _demographics(table: _Table, i: int, row: dict) -> dict:
    out: dict = dict.fromkeys(USER_DEMOGRAPHICS)
    gender = (row.get("gender") or "").strip()
    if gender:
        if gender not in GENDERS:
            raise table.error(i, "gender", f"{gender!r} is not one of {list(GENDERS)}")
        out["gender"] = gender
    for name, codes in (("age", AGE_CODES), ("occupation", tuple(OCCUPATIONS))):
        text = (row.get(name) or "").strip()
        if text:
            if not text.isdigit() or int(text) not in codes:
                raise table.error(i, name, f"{text!r} is not a MovieLens-1M {name} code {list(codes)}")
            out[name] = int(text)
    out["zip"] = (row.get("zip") or "").strip() or None
    return out

"""A team's data files as simab reads them (docs/data_model.md): a CSV or Parquet file found
in its folder and read as text, `dataset.json`, the parsers of the fields the tables share
(ids, ratings, 1/0 flags, a pair once) and `DataFileError`, which names the file, the line
(CSV: 1-based line of the file, the header being line 1; Parquet: 1-based row) and the field.

`ops.data.domain` (the interactions, items and users) and `ops.data.random_exposure` (the
random bucket) read their files with these, so that every file is refused alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import polars as pl

Feedback = Literal["explicit", "implicit"]


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


@dataclass
class Table:
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


def table_header(path: Path) -> list[str]:
    """The column names of a CSV or Parquet file, reading no row; DataFileError when it
    cannot be read."""
    try:
        if path.suffix == ".parquet":
            return list(pl.read_parquet_schema(path))
        return pl.read_csv(path, n_rows=0, infer_schema=False).columns
    except Exception as exc:  # noqa: BLE001 - any reader fault is the file's; say which
        raise DataFileError(path, None, None, f"not readable: {str(exc).splitlines()[0]}") from None


def read_table(path: Path) -> Table:
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
        # Validation parses text, so Parquet's typed columns become text too (lists stay
        # lists, whole numbers stay numbers: `_text` gives their text where it is read).
        frame = frame.with_columns(
            [pl.col(c).cast(pl.Utf8) for c, t in frame.schema.items() if not (isinstance(t, pl.List) or t.is_integer())]
        )
        return Table(path, frame, "row")
    try:
        frame = pl.read_csv(path, infer_schema=False, missing_utf8_is_empty_string=True)
    except Exception as exc:  # polars' CSV errors carry the position in their text
        raise DataFileError(path, None, None, f"not a readable CSV file: {exc}") from exc
    return Table(path, frame, "line")


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


def parse_ids(table: Table, column: str) -> pl.Series:
    """Positive integer ids (the later stages key everything on int64 ids), as an Int64
    series; the first row that is none names itself in a DataFileError."""
    column_values = table.frame.get_column(column)
    if column_values.dtype.is_integer():
        ids = column_values.cast(pl.Int64, strict=False)
        ok = ids >= 1
    else:
        text = column_text(table, column).str.strip_chars()
        ids = text.cast(pl.Int64, strict=False)
        ok = text.str.contains(r"^[0-9]+$") & (ids >= 1)
    stop_at_first(table, ok, column, lambda value: f"{value!r} is not a positive whole number")
    return ids


def column_text(table: Table, column: str) -> pl.Series:
    """A column as text, a missing value as the empty string."""
    return table.frame.get_column(column).cast(pl.Utf8).fill_null("")


def stop_at_first(table: Table, ok: pl.Series, column: str, reason: Callable[[object], str]) -> None:
    """DataFileError naming the first row where `ok` is not true (null counts as not),
    `reason(value)` saying what is wrong with that row's value of `column`."""
    bad = (~ok.fill_null(False)).arg_true()
    if bad.len():
        i = int(bad[0])
        raise table.error(i, column, reason(table.frame.get_column(column)[i]))


def parse_flags(table: Table, column: str, empty_ok: bool = False) -> pl.Series:
    """1/0 (or true/false) as a Boolean series, an empty value null where `empty_ok` (not
    recorded); the first row that is neither names itself."""
    text = column_text(table, column).str.strip_chars().str.to_lowercase()
    ok = text.is_in(["0", "1", "true", "false"]) | ((text == "") & empty_ok)
    empty = ", nor empty" if empty_ok else ""
    stop_at_first(table, ok, column, lambda value: f"{value!r} is not 1/0 (or true/false){empty}")
    flags = text.is_in(["1", "true"])
    if empty_ok:
        flags = flags.zip_with(text != "", pl.Series([None] * len(text), dtype=pl.Boolean))
    return flags.rename(column)


def parse_ratings(table: Table, column: str) -> pl.Series:
    """Whole ratings 1..5 as an Int64 series; the first row that is none names itself."""
    text = column_text(table, column).str.strip_chars()
    values = text.cast(pl.Int64, strict=False)
    ok = text.str.contains(r"^[0-9]+$") & values.is_between(1, 5)
    stop_at_first(table, ok, column, lambda value: f"{value!r} is not a whole rating 1..5")
    return values.rename(column)


def check_pairs_once(table: Table, pairs: pl.DataFrame) -> None:
    """Each (user_id, item_id) of `pairs` (the file's rows, in order) once: the first row
    that repeats an earlier one names itself and that earlier one."""
    repeated = pairs.select("user_id", "item_id").is_duplicated()
    if not repeated.any():
        return
    twice = pairs.with_row_index("row").filter(repeated)
    second = twice.filter(pl.struct("user_id", "item_id").is_first_distinct().not_()).row(0, named=True)
    user, item, i = second["user_id"], second["item_id"], second["row"]
    earlier = twice.filter((pl.col("user_id") == user) & (pl.col("item_id") == item)).get_column("row")[0]
    where = table.where(int(earlier))
    raise table.error(i, "item_id", f"user {user} and item {item} appear twice (first on {table.unit} {where})")


def read_column(path: Path, column: str) -> Table:
    """One column of a CSV or Parquet file as `read_table` gives it, rows numbered alike,
    reading nothing else (what a check of another file's ids needs)."""
    unit = "row" if path.suffix == ".parquet" else "line"
    header = table_header(path)
    if column not in header:
        raise DataFileError(path, 1, column, f"missing column; the file has {header}", unit)
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path, columns=[column])
        if not frame.schema[column].is_integer():
            frame = frame.with_columns(pl.col(column).cast(pl.Utf8))
        return Table(path, frame, unit)
    try:
        frame = pl.read_csv(path, columns=[column], infer_schema=False, missing_utf8_is_empty_string=True)
    except Exception as exc:  # polars' CSV errors carry the position in their text
        raise DataFileError(path, None, None, f"not a readable CSV file: {exc}") from exc
    return Table(path, frame, unit)

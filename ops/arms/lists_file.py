"""A lists file: a team's own recommendations, the source of a lists arm
(`ops/arms/kinds/lists.py`, `name=lists:PATH`).

The file is what the team's system produced for simab's users: Parquet (`.parquet`, `.pq`)
or CSV (`.csv`, with a header) with one row per recommended item,

    user_id (integer), rank (integer, 1 = first), item_id (integer: an item of the catalogue)
    [, score (number: higher = better)]

every user simab ranks (the train and the test users) present, with at least 20 items once
the user's train items, which simab never recommends, are removed — unless the arm says what
a shorter list becomes (`FILLS`, `name=lists:PATH;fill=…`):

- `pop`: filled up to 20 with the most popular items of the train window (interactions per
  item, ties by item id: the order of the Pop arm, the default control) the user has neither
  rated in train nor been listed; the filled items carry no score.  A user the file leaves
  out (a cold user a model has nothing for) gets the popularity order whole;
- `none`: simulated as it is — a home page of fewer than 5 items, fewer than 4 pages
  (`ops.simulation.sandbox`); a user left with no item at all is still refused, since an
  agent with an empty home page could not be compared across arms.

`read_lists` validates the file whole before anything is kept and stops at the first fault
with one line naming the file, the row (1-based; CSV also the line) and the field: a
missing column, a value that is not a whole number / number, an empty value, a rank below
1, an unknown user or item, an item or a rank listed twice for a user, a list too short for
the arm's fill (the line names `;fill=pop` and `;fill=none`), a user missing (unless `;fill=pop`).
`check_lists_file` is what can be checked before the data is loaded (the preflight).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from ops.arms.base import ITEM, RANKING

MIN_ITEMS = 20
COLUMNS = ("user_id", "rank", "item_id")
# What a list shorter than MIN_ITEMS becomes (module docstring); None: it is refused.
FILLS = ("pop", "none")


class ListsFileError(ValueError):
    """A lists file that simab will not use; the message names file, row and field."""

    def __init__(self, path: Path | str, row: str, field: str, what: str):
        self.path, self.row, self.field, self.what = str(path), row, field, what
        super().__init__(f"{path}: {row}: field {field!r}: {what}")


def read_lists(
    path: Path | str,
    users_known: np.ndarray,
    items_known: np.ndarray,
    required_users: np.ndarray,
    train: pl.DataFrame | None = None,
    min_items: int = MIN_ITEMS,
    fill: str | None = None,
) -> tuple[pl.DataFrame, bool]:
    """The validated lists (user_id, rank 1.., item_id, score; train items removed, ranks
    closed up) and whether the file gave scores.  ListsFileError on the first fault, a list
    shorter than `min_items` among them unless `fill` says what it becomes (then it is
    returned as it is: `fill_from_popularity` fills it)."""
    frame, csv = _read(Path(path))
    return check_lists(frame, path, csv, users_known, items_known, required_users, train, min_items, fill)


def check_lists(
    frame: pl.DataFrame,
    path: Path | str,
    csv: bool,
    users_known: np.ndarray | None,
    items_known: np.ndarray | None,
    required_users: np.ndarray,
    train: pl.DataFrame | None = None,
    min_items: int = MIN_ITEMS,
    fill: str | None = None,
) -> tuple[pl.DataFrame, bool]:
    """`read_lists` of a frame already read (`path` names it in errors; `csv`: all text);
    `users_known` / `items_known` None: those are not checked (the preflight, before the data)."""
    if fill is not None and fill not in FILLS:
        raise ValueError(f"fill {fill!r}: one of {', '.join(FILLS)} (or no fill: a short list is refused)")

    def row_of(index: int) -> str:
        return f"row {index + 1} (line {index + 2})" if csv else f"row {index + 1}"

    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ListsFileError(
            path, "header", missing[0], f"column missing; the file has {frame.columns}, needs {list(COLUMNS)} [+ score]"
        )
    has_scores = "score" in frame.columns
    frame = frame.with_row_index("_row")
    parsed = {c: _whole_numbers(frame, c, path, row_of) for c in COLUMNS}
    score = (
        _numbers(frame, "score", path, row_of)
        if has_scores
        else pl.Series("score", [None] * frame.height, dtype=pl.Float64)
    )
    lists = pl.DataFrame(
        {
            "_row": frame["_row"],
            "user_id": parsed["user_id"],
            "rank": parsed["rank"],
            "item_id": parsed["item_id"],
            "score": score,
        }
    )
    if lists.height == 0:
        raise ListsFileError(path, "row 1", "user_id", "the file has no rows")

    def first(mask: pl.Series | pl.Expr, field: str, what) -> None:
        bad = lists.filter(mask)
        if bad.height:
            r = bad.row(0, named=True)
            raise ListsFileError(path, row_of(r["_row"]), field, what(r))

    first(pl.col("rank") < 1, "rank", lambda r: f"rank {r['rank']} < 1 (1 = the first item)")
    if users_known is not None:
        first(
            ~pl.col("user_id").is_in(pl.Series(np.asarray(users_known, dtype=np.int64)).implode()),
            "user_id",
            lambda r: f"unknown user {r['user_id']} (not among the data's users)",
        )
    if items_known is not None:
        first(
            ~pl.col("item_id").is_in(pl.Series(np.asarray(items_known, dtype=np.int64)).implode()),
            "item_id",
            lambda r: f"unknown item {r['item_id']} (not an item_id of the catalogue)",
        )
    first(
        pl.struct("user_id", "item_id").is_duplicated() & ~pl.struct("user_id", "item_id").is_first_distinct(),
        "item_id",
        lambda r: f"item {r['item_id']} listed twice for user {r['user_id']}",
    )
    first(
        pl.struct("user_id", "rank").is_duplicated() & ~pl.struct("user_id", "rank").is_first_distinct(),
        "rank",
        lambda r: f"rank {r['rank']} given twice for user {r['user_id']}",
    )

    if train is not None and train.height:
        seen = train.select(pl.col("user_id").cast(pl.Int64), pl.col("item_id").cast(pl.Int64)).unique()
        kept = lists.join(seen, on=["user_id", "item_id"], how="anti")
    else:
        kept = lists
    counts = (
        lists.group_by("user_id")
        .agg(pl.col("_row").min().alias("first_row"), pl.len().alias("listed"))
        .join(kept.group_by("user_id").agg(pl.len().alias("kept")), on="user_id", how="left")
        .with_columns(pl.col("kept").fill_null(0))
    )
    # The fewest items a list may keep: with fill=pop any (it is filled), with none one.
    floor = {None: min_items, "none": 1, "pop": 0}[fill]
    short = counts.filter(pl.col("kept") < floor).sort("first_row")
    if short.height:
        r = short.row(0, named=True)
        note = f" once its {r['listed'] - r['kept']} train item(s) are removed" if r["listed"] != r["kept"] else ""
        remedy = (
            "`;fill=pop` after the path fills it with the train window's most popular items"
            if fill == "none"
            else "say what a short list becomes after the path: `;fill=pop` (filled with the train window's most "
            "popular items) or `;fill=none` (simulated as it is)"
        )
        raise ListsFileError(
            path,
            row_of(r["first_row"]),
            "item_id",
            f"user {r['user_id']} has {r['kept']} items{note}, fewer than {floor} "
            f"({short.height} user(s) short); {remedy}",
        )
    required = np.unique(np.asarray(required_users, dtype=np.int64))
    absent = np.setdiff1d(required, counts.get_column("user_id").to_numpy())
    # A cold user with no list at all is the shortest list there is: the fill that takes any
    # length (floor 0, fill=pop) gives it the popularity order.
    if absent.size and floor > 0:
        raise ListsFileError(
            path,
            "no row",
            "user_id",
            f"user {int(absent[0])} has no list ({absent.size} of the {required.size} users simab ranks missing: "
            "every train and test user needs one, or `;fill=pop` after the path gives a missing user the train "
            "window's most popular items)",
        )
    kept = kept.sort("user_id", "rank").with_columns(pl.int_range(1, pl.len() + 1).over("user_id").alias("rank"))
    return kept.select("user_id", "rank", "item_id", "score"), has_scores


def fill_from_popularity(
    lists: pl.DataFrame, users: pl.Series, items_known: np.ndarray, train: pl.DataFrame | None, min_items: int
) -> pl.DataFrame:
    """`lists` (user_id, rank 1.., item_id, score) with each of `users`' lists shorter than
    `min_items` filled up to it, after its own items, from the popularity order of the train
    window (interactions per item, most first, ties by item id; items never interacted with
    last): the items the user has neither in train nor listed already.  Filled rows carry no
    score (they rank below every listed item, as an unlisted one does)."""
    train = train if train is not None else pl.DataFrame(schema={"user_id": pl.Int64, "item_id": pl.Int64})
    seen = train.select(pl.col("user_id").cast(pl.Int64), pl.col("item_id").cast(pl.Int64)).unique()
    listed = (
        pl.DataFrame({"user_id": users.cast(pl.Int64)})
        .unique()
        .join(lists.group_by("user_id").agg(pl.len().alias("listed")), on="user_id", how="left")
        .with_columns(pl.col("listed").fill_null(0).cast(pl.Int64))
    )
    short = listed.filter(pl.col("listed") < min_items)
    if short.height == 0:
        return lists
    counts = train.group_by(pl.col("item_id").cast(pl.Int64)).agg(pl.len().alias("n"))  # every row, as Pop counts
    order = (
        pl.DataFrame({"item_id": np.unique(np.asarray(items_known, dtype=np.int64))})
        .join(counts, on="item_id", how="left")
        .with_columns(pl.col("n").fill_null(0))
        .sort(["n", "item_id"], descending=[True, False])
        .with_row_index("order")
    )
    # The first (min_items + what a short user excludes) items of the order are enough for any of them.
    excluded = short.join(seen.group_by("user_id").agg(pl.len().alias("seen")), on="user_id", how="left")
    depth = int(excluded.select(pl.col("listed") + pl.col("seen").fill_null(0)).max().item()) + min_items
    filled = (
        short.join(order.head(depth), how="cross")
        .join(seen, on=["user_id", "item_id"], how="anti")
        .join(lists.select("user_id", "item_id"), on=["user_id", "item_id"], how="anti")
        .sort(["user_id", "order"])
        .with_columns(pl.int_range(1, pl.len() + 1).over("user_id").alias("added"))
        .filter(pl.col("added") <= min_items - pl.col("listed"))
        .select(
            "user_id",
            (pl.col("listed") + pl.col("added")).alias("rank"),
            "item_id",
            pl.lit(None, dtype=pl.Float64).alias("score"),
        )
    )
    return pl.concat([lists, filled.cast(lists.schema)]).sort("user_id", "rank")


def check_lists_file(path: Path | str) -> None:
    """Everything the lists file alone shows, before the data it refers to is read: its
    format, that it exists and is readable, its header, and every value — whole numbers,
    ranks ≥ 1, finite scores, no item or rank twice for a user (`check_lists` without the
    data's users and items); ListsFileError naming file, row and field."""
    frame, csv = _read(Path(path).expanduser())
    # fill="pop": a short or missing list is the data's business (the train items removed), not the file's.
    check_lists(frame, path, csv, None, None, np.array([], dtype=np.int64), None, fill="pop")


def _read(path: Path) -> tuple[pl.DataFrame, bool]:
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv"):
        raise ListsFileError(path, "file", "-", f"unknown format {suffix!r}: a lists file is .parquet, .pq or .csv")
    if not path.is_file():
        raise ListsFileError(path, "file", "-", "no such file")
    try:
        if suffix == ".csv":
            # All text, so that a bad value is reported with its row rather than guessed at.
            return pl.read_csv(path, infer_schema=False), True
        return pl.read_parquet(path), False
    except Exception as exc:  # noqa: BLE001 - any reader fault is the file's; say which
        raise ListsFileError(path, "file", "-", f"not readable as {suffix[1:]}: {str(exc).splitlines()[0]}") from None


def _whole_numbers(frame: pl.DataFrame, column: str, path: Path, row_of) -> pl.Series:
    values = frame.get_column(column)
    if values.dtype.is_integer():
        parsed = values.cast(pl.Int64)
    else:
        text = values.cast(pl.Utf8, strict=False).str.strip_chars()
        parsed = text.cast(pl.Int64, strict=False)
        bad = frame.filter(text.is_not_null() & (text != "") & parsed.is_null())
        if bad.height:
            r = bad.row(0, named=True)
            raise ListsFileError(path, row_of(r["_row"]), column, f"{r[column]!r} is not a whole number")
    empty = frame.filter(parsed.is_null())
    if empty.height:
        raise ListsFileError(path, row_of(empty.row(0, named=True)["_row"]), column, "empty")
    return parsed


def _numbers(frame: pl.DataFrame, column: str, path: Path, row_of) -> pl.Series:
    values = frame.get_column(column)
    text = values.cast(pl.Utf8, strict=False).str.strip_chars() if not values.dtype.is_numeric() else None
    parsed = values.cast(pl.Float64, strict=False) if text is None else text.cast(pl.Float64, strict=False)
    if text is not None:
        bad = frame.filter(text.is_not_null() & (text != "") & parsed.is_null())
        if bad.height:
            r = bad.row(0, named=True)
            raise ListsFileError(path, row_of(r["_row"]), column, f"{r[column]!r} is not a number")
    bad = frame.filter(parsed.is_null() | ~parsed.is_finite())
    if bad.height:
        r = bad.row(0, named=True)
        raise ListsFileError(
            path,
            row_of(r["_row"]),
            column,
            "empty" if r[column] in (None, "") else f"{r[column]!r} is not a finite number",
        )
    return parsed


def rank_stored(lists: pl.DataFrame, arm: str, user_ids, item_ids, exclude=None, k: int = 20) -> pl.DataFrame:
    """Stored lists (RANKING columns) as an arm's ranking: only the given users and items, the
    excluded pairs dropped and the ranks closed up, at most `k` per user."""
    lists = lists.filter(
        pl.col("user_id").is_in(pl.Series(np.asarray(user_ids, dtype=np.int64)).implode()),
        pl.col(ITEM).is_in(pl.Series(np.asarray(item_ids, dtype=np.int64)).implode()),
    )
    if exclude is not None and exclude.height:
        lists = lists.join(
            exclude.select(pl.col("user_id").cast(pl.Int64), pl.col(ITEM).cast(pl.Int64)),
            on=["user_id", ITEM],
            how="anti",
        )
    lists = lists.sort("user_id", "rank").with_columns(pl.int_range(1, pl.len() + 1).over("user_id").alias("rank"))
    return (
        lists.filter(pl.col("rank") <= k)
        .select(pl.lit(arm).alias("arm"), "user_id", "rank", ITEM, "score")
        .cast(RANKING)
    )

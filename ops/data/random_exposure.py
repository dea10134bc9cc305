"""A team's random bucket: the `files` source's optional `random_exposure` file
(docs/data_model.md#the-random-exposure-file).

Users shown items drawn uniformly at random, and what they did: `user_id`, `item_id`, the
reaction in the domain's feedback kind (`rating`, whole 1..5, on an explicit domain;
`liked`, 1/0, on an implicit one) and optionally `clicked` (1/0, empty where not recorded).
Its rows become GROUND_TRUTH rows of judge "random_exposure" (`DomainTables.truth`): read
only to judge the verdict (`ops.readout.truth`), never by the agents or the arms; with
`SIMAB_CLICK_CALIBRATION=random_exposure`, where it records clicks, a seeded half of its
users calibrates the click decision instead (`calibration_users`), and the judge reads only
the other half.

It is checked as the interactions are (`ops.data.data_files`' parsers: positive whole ids, a
pair once, every item in the items file, every user a user of the log or of the users file,
the reaction's range), a fault stopping with `DataFileError` naming the file, the line and
the field.  `check_random_exposure` runs the same checks before any work (the preflight of
`simab run`), reading that file whole and only the id columns of the others.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import polars as pl

from ops.data.data_files import (
    DatasetDescription,
    Table,
    check_pairs_once,
    find_file,
    parse_flags,
    parse_ids,
    parse_ratings,
    read_column,
    read_description,
    read_table,
    stop_at_first,
)
from ops.schema import GROUND_TRUTH, conform

STEM = "random_exposure"
JUDGE = "random_exposure"
LIKED_FROM = 4  # a rating >= 4 is liked (Agent4Rec §3.3), as everywhere else in simab


def empty_truth() -> pl.DataFrame:
    return pl.DataFrame(schema=GROUND_TRUTH)


def read_random_exposure(
    table: Table, item_ids: pl.Series, user_ids: pl.Series, description: DatasetDescription
) -> pl.DataFrame:
    """The file's rows as GROUND_TRUTH rows of judge "random_exposure", each field checked
    over its whole column; the first bad row of a column stops the read, named.
    `item_ids`: the items file's; `user_ids`: the users (of the log and of a users file)."""
    implicit = description.feedback == "implicit"
    signal = "liked" if implicit else "rating"
    table.require("user_id", "item_id", signal)
    users = parse_ids(table, "user_id")
    items = parse_ids(table, "item_id")
    stop_at_first(
        table, items.is_in(item_ids.implode()), "item_id", lambda value: f"item {int(value)} is not in the items file"
    )
    stop_at_first(
        table,
        users.is_in(user_ids.implode()),
        "user_id",
        lambda value: f"user {int(value)} is neither a user of the interactions nor of the users file",
    )
    check_pairs_once(table, pl.DataFrame({"user_id": users, "item_id": items}))
    if implicit:
        liked = parse_flags(table, "liked").cast(pl.Float64)
        rating = pl.Series([None] * table.frame.height, dtype=pl.Float64)
    else:
        stars = parse_ratings(table, "rating")
        liked = (stars >= LIKED_FROM).cast(pl.Float64)
        rating = stars.cast(pl.Float64)
    clicked = (
        parse_flags(table, "clicked", empty_ok=True).cast(pl.Float64)
        if "clicked" in table.frame.columns
        else pl.Series([None] * table.frame.height, dtype=pl.Float64)
    )
    truth = pl.DataFrame(
        {
            "user_id": users,
            "item_id": items,
            "judge": [JUDGE] * table.frame.height,
            "clicked": clicked,
            "liked": liked,
            "rating": rating,
        },
        schema=GROUND_TRUTH,
    )
    return conform(truth, GROUND_TRUTH, STEM)


def check_random_exposure(folder: Path | str) -> int:
    """The random-exposure file of a files-source folder, checked whole before any work (the
    preflight): the file read and every row checked as `load_files` checks it, against the
    item ids of the items file and the user ids of the interactions and the users file (their
    id columns only).  The number of its rows (0 when the folder has no such file);
    DataFileError on the first fault."""
    folder = Path(folder).expanduser()
    path = find_file(folder, STEM, required=False)
    if path is None:
        return 0
    description = read_description(folder)
    item_ids = parse_ids(read_column(find_file(folder, "items"), "item_id"), "item_id")
    users = [parse_ids(read_column(find_file(folder, "interactions"), "user_id"), "user_id")]
    users_path = find_file(folder, "users", required=False)
    if users_path is not None:
        users.append(parse_ids(read_column(users_path, "user_id"), "user_id"))
    user_ids = pl.concat(users).unique()
    return read_random_exposure(read_table(path), item_ids, user_ids, description).height


# The random bucket split by users in two (docs/definitions.md#the-truth): one part may
# calibrate the click decision (`ops.studies.alignment.exposure_calibration`), the other
# judges (`ops.readout.truth`).  Half each: the calibration fits two numbers, the judge
# reads every arm's lists, so neither part is starved at a few hundred users.
CALIBRATION_SHARE = 0.5
# A bucket whose clicks are fewer than this cannot set a click level (a binomial share of
# 20 clicks is known to about ±45 % of itself): it all judges, nothing calibrates.
MIN_CALIBRATION_CLICKS = 20


def calibration_users(truth: pl.DataFrame | None, seed: int = 0) -> frozenset[int]:
    """The users of the random bucket whose rows calibrate the click decision: a seeded half
    of the bucket's users with clicks recorded — none where the bucket records no clicks or
    too few (`MIN_CALIBRATION_CLICKS`) in that half.  A function of the sample alone, so the
    brain that calibrates and the judge that must not read those users agree on them."""
    if truth is None or truth.height == 0:
        return frozenset()
    bucket = truth.filter((pl.col("judge") == JUDGE) & pl.col("clicked").is_not_null())
    users = np.sort(bucket.get_column("user_id").unique().to_numpy())
    if users.size < 2:
        return frozenset()
    rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(b"exposure-calibration")]))
    chosen = frozenset(int(u) for u in rng.permutation(users)[: int(round(CALIBRATION_SHARE * users.size))])
    clicks = bucket.filter(pl.col("user_id").is_in(list(chosen))).get_column("clicked").sum()
    return chosen if clicks >= MIN_CALIBRATION_CLICKS else frozenset()


def calibration_rows(truth: pl.DataFrame | None, seed: int = 0) -> pl.DataFrame:
    """The calibration part's rows (user_id, item_id, clicked): the only rows of a judge any
    fit may read; empty where `calibration_users` is."""
    users = calibration_users(truth, seed)
    if not users:
        return pl.DataFrame(schema={"user_id": pl.Int64, "item_id": pl.Int64, "clicked": pl.Float64})
    return (
        truth.filter((pl.col("judge") == JUDGE) & pl.col("user_id").is_in(list(users)))
        .select("user_id", "item_id", "clicked")
        .sort("user_id", "item_id")
    )

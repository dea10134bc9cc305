"""Chronological 7:2:1 split (A/B Agent §3.1; docs/definitions.md#lifecycle, step 4).

All interactions are sorted by timestamp, ties broken by (user_id, item_id) so the split
is a pure function of the data; the first 70 % are train, the next 20 % validation, the
last 10 % test.  Sizes are exact to the row: the cut points are floor(n·0.7) and
floor(n·0.9), so the test split takes the rounding remainder.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ops.schema import RATINGS, conform

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class Split:
    train: pl.DataFrame
    valid: pl.DataFrame
    test: pl.DataFrame

    def frames(self) -> dict[str, pl.DataFrame]:
        return {"train": self.train, "valid": self.valid, "test": self.test}


def chronological_split(ratings: pl.DataFrame, fractions: tuple[float, float, float] = (0.7, 0.2, 0.1)) -> Split:
    """Cut the ratings by time into train / validation / test."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"split fractions must be three non-negative numbers summing to 1, got {fractions}")
    ordered = conform(ratings, RATINGS, "ratings").sort(["timestamp", "user_id", "item_id"])
    n = ordered.height
    # The epsilon keeps 0.7 + 0.2 = 0.8999… from losing a row to float rounding.
    cut_train = int(n * fractions[0] + 1e-9)
    cut_valid = int(n * (fractions[0] + fractions[1]) + 1e-9)
    return Split(
        train=ordered.slice(0, cut_train),
        valid=ordered.slice(cut_train, cut_valid - cut_train),
        test=ordered.slice(cut_valid, n - cut_valid),
    )


def split_statistics(split: Split) -> pl.DataFrame:
    """Rows, users, items per split and, for validation and test, the users and items
    never seen in train (cold) — the figures that explain offline metrics later."""
    train_users = set(split.train.get_column("user_id").unique().to_list())
    train_items = set(split.train.get_column("item_id").unique().to_list())
    rows = []
    for name, frame in split.frames().items():
        users = frame.get_column("user_id").unique()
        items = frame.get_column("item_id").unique()
        ts = frame.get_column("timestamp")
        cold = name != "train"
        rows.append(
            {
                "split": name,
                "rows": frame.height,
                "users": users.len(),
                "items": items.len(),
                "cold_users": sum(u not in train_users for u in users.to_list()) if cold else 0,
                "cold_items": sum(i not in train_items for i in items.to_list()) if cold else 0,
                "first_timestamp": ts.min() if frame.height else None,
                "last_timestamp": ts.max() if frame.height else None,
                "positive_share": float((frame.get_column("rating") >= 4).mean()) if frame.height else None,
            }
        )
    return pl.DataFrame(rows)

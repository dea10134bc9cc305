"""Bring your own model, 1: a lists file.

The team's system writes what it recommends — one row per (user, rank, item), Parquet or
CSV — and simab simulates users browsing those lists beside its own arms:

    .venv/bin/python examples/lists_file.py [--home data/examples]

Here the "team's system" recommends each user's 25 most-watched movies the user has not
seen, on a small synthetic data set prepared in the home (reused when the home already holds
it, prepared the same way); the arm spec is
`ours=lists:<path>`, exactly what `SIMAB_ARMS=random,ours=lists:/path/ours.parquet simab run`
takes.
"""

from __future__ import annotations

import polars as pl
from _common import home_from_args, instance, prepare, run_arms, summary

home = home_from_args(__doc__)
dagster = instance()
prepare(dagster)

train = pl.read_parquet(home / "assets" / "train_ratings.parquet")
test = pl.read_parquet(home / "assets" / "test_ratings.parquet")
counts = train.group_by("item_id").len("n")
users = pl.concat([train.select("user_id"), test.select("user_id")]).unique()
lists = (
    users.join(counts, how="cross")
    .join(train.select("user_id", "item_id"), on=["user_id", "item_id"], how="anti")  # never what they rated
    .sort(["user_id", "n", "item_id"], descending=[False, True, False])
    .group_by("user_id", maintain_order=True)
    .head(25)
    .with_columns(pl.int_range(1, pl.len() + 1).over("user_id").alias("rank"))
    .select("user_id", "rank", "item_id", pl.col("n").cast(pl.Float64).alias("score"))
)
path = home / "ours.parquet"
lists.write_parquet(path)

names = run_arms(dagster, ["random", f"ours=lists:{path}"], control="random")
print(summary(home, names))

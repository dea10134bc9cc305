"""A seeded interaction log of any size in the `files` source shape (docs/data_model.md),
for the scale benchmark (`bench/scale.py`) and the tests that need a log larger than the
synthetic MovieLens look-alike.

What it plants, so that the arms have something to learn and the agents something to read:

- **users** with lognormal activity: user u's share of the interactions is drawn from
  LogNormal(0, `activity_sigma`), every user at least `min_per_user` interactions (a long
  tail of light users and a few heavy ones, as in every real log);
- **items** with Zipf popularity: the item of popularity rank r is drawn with probability
  proportional to r^-`zipf_exponent` (ranks dealt to item ids at random);
- **tastes**: users and items have latent vectors (dimension `taste_dim`) and each item one
  to three of `n_categories` categories; a share `taste_share` of a user's interactions is
  drawn (by popularity) among the items of its favourite category, the rest by popularity
  alone; the rating is 3.3 + 1.2 x taste match (user . item, standardised) + the item's
  quality + noise, rounded into 1..5;
- **timestamps** over two years (`start` .. `start` + 730 days): a user joins at a uniform
  time in the first 80 % and interacts uniformly between joining and the end.

Every draw comes from one `numpy` generator seeded by `seed`, in a fixed order, so a seed
and a size give the same files byte for byte.  A (user, item) pair is kept once (twice as
many draws are made, and a user's repeated pairs dropped), so the log holds about as many
rows as asked (a heavy user whose draws repeat may keep fewer): `ScaleLog.interactions` says
how many.  Everything is vectorised: 5 M interactions take seconds.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

CATEGORY_WORDS = (
    "action",
    "comedy",
    "drama",
    "horror",
    "romance",
    "science",
    "history",
    "travel",
    "cooking",
    "music",
    "sport",
    "nature",
    "crime",
    "fantasy",
    "family",
    "business",
    "health",
    "design",
    "poetry",
    "games",
)
START = dt.datetime(2022, 1, 1, tzinfo=dt.UTC)
SPAN_DAYS = 730
OVERSAMPLE = 2.0


@dataclass(frozen=True)
class ScaleLogConfig:
    n_users: int = 20_000
    n_items: int = 5_000
    n_interactions: int = 1_000_000
    seed: int = 0
    activity_sigma: float = 1.0
    min_per_user: int = 3
    zipf_exponent: float = 0.9
    n_categories: int = 20
    taste_dim: int = 16
    taste_share: float = 0.5


@dataclass(frozen=True)
class ScaleLog:
    """The tables written (their sizes), and where."""

    folder: Path
    users: int
    items: int
    interactions: int


def generate_scale_log(config: ScaleLogConfig, folder: Path | str, file_format: str = "parquet") -> ScaleLog:
    """Write `interactions`, `items` and `dataset.json` into `folder` (created) as `files`
    source input: Parquet (the default) or CSV (`file_format="csv"`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    interactions, items = scale_log_frames(config)
    if file_format == "csv":
        interactions.write_csv(folder / "interactions.csv")
        items.with_columns(pl.col("categories").list.join("|")).write_csv(folder / "items.csv")
    elif file_format == "parquet":
        interactions.write_parquet(folder / "interactions.parquet")
        items.write_parquet(folder / "items.parquet")
    else:
        raise ValueError(f"file_format must be 'parquet' or 'csv', got {file_format!r}")
    (folder / "dataset.json").write_text(
        json.dumps({"name": f"scale-{config.n_users}x{config.n_items}", "item_noun": "item", "feedback": "explicit"})
    )
    users = interactions.get_column("user_id").n_unique()
    return ScaleLog(folder, users, items.height, interactions.height)


def scale_log_frames(config: ScaleLogConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(interactions, items) as the `files` source reads them (module docstring)."""
    c = config
    if c.n_users < 1 or c.n_items < 2 or c.n_interactions < c.n_users * c.min_per_user:
        raise ValueError(
            f"a log needs users >= 1, items >= 2 and interactions >= users x min_per_user, got {c.n_users} users, "
            f"{c.n_items} items, {c.n_interactions} interactions, min_per_user {c.min_per_user}"
        )
    rng = np.random.default_rng(c.seed)
    # Items: popularity (Zipf over a random order), categories, tastes, quality.
    popularity = np.empty(c.n_items)
    popularity[rng.permutation(c.n_items)] = np.arange(1, c.n_items + 1, dtype=np.float64) ** -c.zipf_exponent
    popularity /= popularity.sum()
    n_cats = rng.integers(1, 4, c.n_items)
    categories = [rng.choice(c.n_categories, size=k, replace=False) for k in n_cats.tolist()]
    main_category = np.array([cats[0] for cats in categories])
    item_taste = rng.normal(0.0, 1.0, (c.n_items, c.taste_dim))
    quality = rng.normal(0.0, 0.4, c.n_items)
    # Users: activity (lognormal shares, a floor per user), favourite category, tastes.
    share = rng.lognormal(0.0, c.activity_sigma, c.n_users)
    extra = c.n_interactions - c.n_users * c.min_per_user
    counts = c.min_per_user + np.floor(share / share.sum() * extra).astype(np.int64)
    counts = np.minimum(counts, c.n_items // 2)
    favourite = rng.integers(0, c.n_categories, c.n_users)
    user_taste = rng.normal(0.0, 1.0, (c.n_users, c.taste_dim))
    # Interactions: by popularity, a share among the favourite category's items; drawn twice
    # over, so that each user keeps its count of distinct items once the repeated
    # pairs are dropped.
    user_index = np.repeat(np.arange(c.n_users), (counts * OVERSAMPLE).astype(np.int64) + 1)
    n = user_index.size
    by_taste = rng.random(n) < c.taste_share
    item_index = _draw(rng, popularity, n)
    order = np.argsort(main_category, kind="stable")
    starts = np.searchsorted(main_category[order], np.arange(c.n_categories + 1))
    cumulative = np.cumsum(popularity[order])
    cat = favourite[user_index[by_taste]]
    low = np.where(starts[cat] > 0, cumulative[np.maximum(starts[cat] - 1, 0)], 0.0)
    high = cumulative[np.maximum(starts[cat + 1] - 1, 0)]
    empty = starts[cat + 1] == starts[cat]
    u = low + rng.random(cat.size) * (high - low)
    picked = order[np.minimum(np.searchsorted(cumulative, u, side="right"), c.n_items - 1)]
    item_index[by_taste] = np.where(empty, item_index[by_taste], picked)
    # Ratings from the tastes; timestamps over two years.
    match = np.einsum("ij,ij->i", user_taste[user_index], item_taste[item_index]) / np.sqrt(c.taste_dim)
    raw = 3.3 + 1.2 * match + quality[item_index] + rng.normal(0.0, 0.7, n)
    rating = np.clip(np.rint(raw), 1, 5).astype(np.int64)
    span = SPAN_DAYS * 86_400
    joined = rng.integers(0, int(0.8 * span), c.n_users)
    offset = joined[user_index] + (rng.random(n) * (span - joined[user_index])).astype(np.int64)
    timestamp = int(START.timestamp()) + offset
    interactions = (
        pl.DataFrame(
            {"user_id": user_index + 1, "item_id": item_index + 1, "rating": rating, "timestamp": timestamp},
            schema={"user_id": pl.Int64, "item_id": pl.Int64, "rating": pl.Int64, "timestamp": pl.Int64},
        )
        .unique(subset=["user_id", "item_id"], keep="first", maintain_order=True)
        .filter(pl.int_range(pl.len()).over("user_id") < pl.col("user_id").replace_strict(*_keys(counts)))
        .sort("timestamp", "user_id", "item_id")
    )
    released = START.date() - dt.timedelta(days=1)
    items = pl.DataFrame(
        {
            "item_id": np.arange(1, c.n_items + 1),
            "title": [f"Item {i}" for i in range(1, c.n_items + 1)],
            "categories": [[CATEGORY_WORDS[k % len(CATEGORY_WORDS)] for k in cats.tolist()] for cats in categories],
            "description": [
                f"A {CATEGORY_WORDS[cats[0] % len(CATEGORY_WORDS)]} item, number {i + 1}."
                for i, cats in enumerate(categories)
            ],
            "release_date": [
                (released - dt.timedelta(days=int(d))).isoformat() for d in rng.integers(0, 20 * 365, c.n_items)
            ],
        },
        schema_overrides={"item_id": pl.Int64, "categories": pl.List(pl.Utf8)},
    )
    return interactions, items


def _keys(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(user ids, interaction counts): the mapping a user's count is looked up in."""
    return np.arange(1, counts.size + 1), counts


def _draw(rng: np.random.Generator, p: np.ndarray, n: int) -> np.ndarray:
    """`n` indices drawn with probabilities `p` (inverse CDF: one sort-free pass)."""
    cumulative = np.cumsum(p)
    return np.minimum(np.searchsorted(cumulative, rng.random(n) * cumulative[-1], side="right"), p.size - 1)

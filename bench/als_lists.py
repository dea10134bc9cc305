"""An outside model's lists file: implicit's ALS (Hu, Koren & Volinsky 2008) trained on simab's
own train window, written as the `lists:FILE` arm reads it (`ops.arms.lists`).

What a team that brings its own recommender does: fit on the train window simab cuts, rank
the catalogue for every user, hand simab the file.  The model here is the one issue
reports tried — implicit's `AlternatingLeastSquares`, 64 factors, 15 iterations, positives
the train rows rated >= 4 (on implicit data: the liked interactions), 100 items per user —
with the package's other defaults (regularisation 0.01, alpha 1.0), a model nobody tuned.
A user without a train positive (first seen later) gets the train window's most popular
items, as simab's own factor arms do.

The windows are cut as the lifecycle cuts them: `--home` reads a run's stored
`train_ratings` / `ratings` assets (any source: ML-1M users 1-1999 after `make demo-ml1m`);
without it, the Steam reference copy is loaded and split chronologically here, which gives
the same train window (the split is a pure function of the data: the lists written both
ways from the reference copy are equal).

    pip install 'simab[als]'     # implicit 0.7.3
    .venv/bin/python bench/als_lists.py --source steam --out /tmp/als-steam.parquet
    .venv/bin/python bench/steam.py --arms random,pop,fm,deepfm,als=lists:/tmp/als-steam.parquet
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy import sparse
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fakes.shared_data import SHARED_DATA  # noqa: E402
from ops.data.split import chronological_split  # noqa: E402
from ops.data.steam import load_steam  # noqa: E402


def windows_from_source(source: str, data: Path, min_interactions: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(all ratings, train window) of a source, split as the lifecycle splits it."""
    if source != "steam":
        raise SystemExit(
            f"bench/als_lists.py: --source {source!r}: only steam is cut here; use --home for a run's windows"
        )
    ratings = load_steam(data, min_interactions).ratings
    return ratings, chronological_split(ratings).train


def als_lists(
    ratings: pl.DataFrame,
    train: pl.DataFrame,
    factors: int = 64,
    iterations: int = 15,
    n_items: int = 100,
    min_rating: int = 4,
    seed: int = 0,
) -> pl.DataFrame:
    """user_id, rank, item_id, score: ALS's top `n_items` unseen items for every user of
    `ratings`; popularity for users without a train positive."""
    # implicit is an optional extra (simab[als]): only this bench needs it.
    from implicit.als import AlternatingLeastSquares

    items = np.unique(ratings.get_column("movie_id").to_numpy())
    users = np.unique(ratings.get_column("user_id").to_numpy())
    positives = train.filter(pl.col("rating") >= min_rating).select("user_id", "movie_id").unique()
    u = np.searchsorted(users, positives.get_column("user_id").to_numpy())
    i = np.searchsorted(items, positives.get_column("movie_id").to_numpy())
    matrix = sparse.csr_matrix((np.ones(u.size, np.float32), (u, i)), shape=(users.size, items.size))
    model = AlternatingLeastSquares(factors=factors, iterations=iterations, random_state=seed, num_threads=1)
    with threadpool_limits(limits=1, user_api="blas"):  # implicit's own advice: its solver runs its own threads
        model.fit(matrix, show_progress=False)
    seen = train.select("user_id", "movie_id").unique()
    seen_matrix = sparse.csr_matrix(
        (
            np.ones(seen.height, np.float32),
            (
                np.searchsorted(users, seen.get_column("user_id").to_numpy()),
                np.searchsorted(items, seen.get_column("movie_id").to_numpy()),
            ),
        ),
        shape=matrix.shape,
    )
    warm = np.flatnonzero(np.asarray(matrix.sum(axis=1)).ravel() > 0)
    ids, scores = model.recommend(warm, seen_matrix[warm], N=n_items, filter_already_liked_items=True)
    frames = [
        pl.DataFrame(
            {
                "user_id": np.repeat(users[warm], n_items),
                "rank": np.tile(np.arange(1, n_items + 1), warm.size),
                "item_id": items[ids.ravel()],
                "score": scores.ravel().astype(np.float64),
            }
        ).filter(pl.col("score").is_finite())
    ]
    cold = np.setdiff1d(np.arange(users.size), warm)
    if cold.size:
        popular = train.group_by("movie_id").len().sort(["len", "movie_id"], descending=[True, False]).head(n_items)
        k = popular.height
        frames.append(
            pl.DataFrame(
                {
                    "user_id": np.repeat(users[cold], k),
                    "rank": np.tile(np.arange(1, k + 1), cold.size),
                    "item_id": np.tile(popular.get_column("movie_id").to_numpy(), cold.size),
                    "score": np.tile(-np.arange(k, dtype=np.float64), cold.size),
                }
            )
        )
    return pl.concat(frames).with_columns(pl.col("user_id").cast(pl.Int64), pl.col("item_id").cast(pl.Int64))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", default="steam", choices=("steam",))
    parser.add_argument("--data", type=Path, default=None, help="the source's folder (default: the reference copy)")
    parser.add_argument("--min-interactions", type=int, default=5, help="SIMAB_STEAM_MIN_INTERACTIONS")
    parser.add_argument("--home", type=Path, help="a run's $SIMAB_HOME: read its stored windows instead")
    parser.add_argument("--factors", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--items", type=int, default=100, help="items listed per user")
    parser.add_argument("--out", type=Path, required=True, help="the lists file to write (.parquet or .csv)")
    args = parser.parse_args()
    try:
        import implicit  # noqa: F401
    except ImportError:
        raise SystemExit("bench/als_lists.py needs the `implicit` package: pip install 'simab[als]'") from None
    started = time.perf_counter()
    if args.home is not None:
        assets = args.home / "assets"
        ratings = pl.read_parquet(assets / "ratings.parquet")
        train = pl.read_parquet(assets / "train_ratings.parquet")
    else:
        data = args.data or SHARED_DATA / "steam-australian"
        ratings, train = windows_from_source(args.source, data, args.min_interactions)
    lists = als_lists(ratings, train, args.factors, args.iterations, args.items)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.suffix == ".csv":
        lists.write_csv(args.out)
    else:
        lists.write_parquet(args.out)
    print(
        f"{args.out}: {lists.get_column('user_id').n_unique()} users x {args.items} items "
        f"(ALS {args.factors} factors, {args.iterations} iterations, train window {train.height} rows) "
        f"in {time.perf_counter() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Outside models' lists as arms: implicit's ALS, BPR and item-kNN on simab's own train window.

Written as a lists file (`als=lists:FILE`, `ops.arms.lists_file`), each a model simab has never
seen, brought in as a team would, from the `implicit` package (the optional extra `bench`:
`pip install -e '.[bench]'`):

- `als`: alternating least squares for implicit feedback (Hu, Koren & Volinsky 2008), 64
  factors, 15 iterations, confidence 1 + alpha x positive (without `implicit` a numpy ALS of
  the same objective runs);
- `bpr`: Bayesian personalised ranking (Rendle et al. 2009), 64 factors, 100 iterations;
- `itemknn`: an item-item neighbourhood (implicit's CosineRecommender, K = 50): a user's
  unseen items scored by their summed cosine to the user's positives.  It lists only the items
  some neighbour reaches, so thin users get short lists: bring it in with `;fill=pop` (Pop's
  order fills them) or `;fill=none` (docs/arms.md).

Positives = ratings >= 4 of the chronological 7:2:1 split's train window.  Every user simab
ranks (the train and the test users) gets its 100 best-scored items that are not among its
train items; a user the train window never saw gets the most popular positives (none for
item-kNN: nothing to start from).

    SIMAB_SHARED_DATA=/work/shared/data .venv/bin/python -m tools.outside_lists --out data/als_ml1m.parquet
    .venv/bin/python -m tools.outside_lists --model itemknn --data steam --out /tmp/knn-steam.parquet
    .venv/bin/python -m tools.outside_lists --home data/steam --out /tmp/als-steam.parquet   # a run's stored windows
    .venv/bin/python -m pipelines.lifecycle --arms random,pop,trending,fm,als=lists:data/als_ml1m.parquet,\
        "knn=lists:/tmp/knn.parquet;fill=pop"     # then as any arm (with the Makefile's ML1M_ENV for the data)

Prints the fit's seconds and which implementation ran.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy import sparse

from ops.arms.ranking import ranking_users

FACTORS, ITERATIONS, REGULARIZATION, ALPHA = 64, 15, 0.01, 1.0


def als_factors(
    matrix: sparse.csr_matrix, factors: int, iterations: int, seed: int
) -> tuple[np.ndarray, np.ndarray, str]:
    """(user factors, item factors, which implementation) of implicit ALS on a users x items
    confidence matrix (0 = unobserved)."""
    try:
        from implicit.cpu.als import AlternatingLeastSquares
    except ImportError:
        users, items = numpy_als(matrix, factors, iterations, REGULARIZATION, seed)
        return users, items, "numpy ALS (implicit not installed)"
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, "blas"):  # implicit's own threads; BLAS threads inside them only contend
        model = AlternatingLeastSquares(
            factors=factors, iterations=iterations, regularization=REGULARIZATION, random_state=seed
        )
        model.fit(matrix, show_progress=False)
    import implicit

    return np.asarray(model.user_factors), np.asarray(model.item_factors), f"implicit {implicit.__version__}"


def numpy_als(matrix: sparse.csr_matrix, factors: int, iterations: int, regularization: float, seed: int):
    """Hu et al.'s ALS, solved exactly per row: (YᵀY + Yᵀ(Cᵤ − I)Y + λI) xᵤ = YᵀCᵤp(u)."""
    rng = np.random.default_rng(seed)
    n_users, n_items = matrix.shape
    X = rng.normal(0, 0.01, (n_users, factors))
    Y = rng.normal(0, 0.01, (n_items, factors))
    by_user, by_item = matrix.tocsr(), matrix.T.tocsr()

    def solve(fixed: np.ndarray, rows: sparse.csr_matrix, out: np.ndarray) -> None:
        gram = fixed.T @ fixed + regularization * np.eye(factors)
        for r in range(rows.shape[0]):
            lo, hi = rows.indptr[r], rows.indptr[r + 1]
            idx, conf = rows.indices[lo:hi], rows.data[lo:hi]
            Yi = fixed[idx]
            out[r] = np.linalg.solve(gram + (Yi.T * (conf - 1.0)) @ Yi, Yi.T @ conf)

    for _ in range(iterations):
        solve(Y, by_user, X)
        solve(X, by_item, Y)
    return X, Y


def outside_lists(
    model: str,
    train: pl.DataFrame,
    rank_users: np.ndarray,
    item_ids: np.ndarray,
    per_user: int = 100,
    seed: int = 0,
) -> tuple[pl.DataFrame, str]:
    """user_id, rank, item_id, score: each of `rank_users`' `per_user` best items of `model`
    (als, bpr, itemknn; module docstring), its train items left out; and what ran."""
    positives = train.filter(pl.col("rating") >= 4).select("user_id", "item_id").unique()
    users = np.unique(positives.get_column("user_id").to_numpy())
    items = np.unique(np.asarray(item_ids, dtype=np.int64))
    u = np.searchsorted(users, positives.get_column("user_id").to_numpy())
    i = np.searchsorted(items, positives.get_column("item_id").to_numpy())
    binary = sparse.csr_matrix((np.ones(u.size, dtype=np.float32), (u, i)), shape=(users.size, items.size))
    popular = np.asarray(binary.sum(axis=0)).ravel().astype(np.float64)
    if model == "als":
        user_f, item_f, which = als_factors(binary * (1.0 + ALPHA), FACTORS, ITERATIONS, seed)

        def scores(at: int) -> np.ndarray:
            return item_f @ user_f[at]

    elif model == "bpr":
        from implicit.cpu.bpr import BayesianPersonalizedRanking

        bpr = BayesianPersonalizedRanking(factors=FACTORS, iterations=100, random_state=seed)
        bpr.fit(binary, show_progress=False)
        user_f, item_f = np.asarray(bpr.user_factors), np.asarray(bpr.item_factors)
        which = _implicit("BPR")

        def scores(at: int) -> np.ndarray:
            return item_f @ user_f[at]

    elif model == "itemknn":
        from implicit.nearest_neighbours import CosineRecommender

        knn = CosineRecommender(K=NEIGHBOURS)
        knn.fit(binary, show_progress=False)
        similarity = knn.similarity.tocsr()
        which = _implicit(f"CosineRecommender K={NEIGHBOURS}")

        def scores(at: int) -> np.ndarray:
            reached = np.asarray((binary[at] @ similarity).todense()).ravel().astype(np.float64)
            return np.where(reached > 0, reached, -np.inf)  # what no neighbour reaches is not listed

    else:
        raise ValueError(f"unknown outside model {model!r}: als, bpr or itemknn")
    seen = train.select("user_id", "item_id").unique()
    seen_rows = {
        int(k[0]): np.searchsorted(items, g.get_column("item_id").to_numpy())
        for k, g in seen.group_by("user_id", maintain_order=True)
    }
    frames = []
    for user in np.asarray(rank_users, dtype=np.int64):
        at = np.searchsorted(users, user)
        known = at < users.size and users[at] == user
        if known:
            row = scores(int(at)).astype(np.float64)
        elif model == "itemknn":
            continue
        else:
            row = popular.copy()
        row[seen_rows.get(int(user), np.zeros(0, np.int64))] = -np.inf
        best = np.argsort(-row, kind="stable")[:per_user]
        best = best[np.isfinite(row[best])]
        frames.append(
            pl.DataFrame(
                {
                    "user_id": np.full(best.size, user, dtype=np.int64),
                    "rank": np.arange(1, best.size + 1, dtype=np.int64),
                    "item_id": items[best],
                    "score": row[best],
                }
            )
        )
    return pl.concat(frames), which


NEIGHBOURS = 50


def _implicit(what: str) -> str:
    import implicit

    return f"implicit {implicit.__version__} {what}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("als", "bpr", "itemknn"), default="als")
    parser.add_argument("--data", choices=("ml1m", "synthetic", "steam"), default="ml1m")
    parser.add_argument(
        "--min-interactions", type=int, default=5, help="with --data steam: SIMAB_STEAM_MIN_INTERACTIONS"
    )
    parser.add_argument("--home", type=Path, help="a run's $SIMAB_HOME: its stored windows instead of --data")
    parser.add_argument("--out", type=Path, required=True, help="the lists file to write (.parquet or .csv)")
    parser.add_argument("--per-user", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from ops.data.split import chronological_split

    if args.home is not None:
        ratings = pl.read_parquet(args.home / "assets" / "ratings.parquet")
        split = chronological_split(ratings)
        item_ids = ratings.get_column("item_id").unique().to_numpy()
    elif args.data == "steam":
        from fakes.shared_data import SHARED_DATA
        from ops.data.steam import load_steam

        steam = load_steam(SHARED_DATA / "steam-australian", args.min_interactions)
        split = chronological_split(steam.ratings)
        item_ids = steam.ratings.get_column("item_id").unique().to_numpy()
    else:
        from bench import load

        _, movies, ratings, _, _ = load(args.data)
        split = chronological_split(ratings)
        item_ids = movies.get_column("item_id").to_numpy()
    started = time.perf_counter()
    lists, which = outside_lists(
        args.model, split.train, ranking_users(split.train, split.test), item_ids, args.per_user, seed=args.seed
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.suffix == ".csv":
        lists.write_csv(args.out)
    else:
        lists.write_parquet(args.out)
    per_user = lists.group_by("user_id").len().get_column("len")
    print(
        f"{which}: positives = ratings >= 4 of the train window ({split.train.height} rows); "
        f"{per_user.len()} users, {int((per_user < 20).sum())} of them with fewer than 20 items; at most "
        f"{args.per_user} items each -> {args.out} in {time.perf_counter() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

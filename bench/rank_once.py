"""Rank once: offline metrics + top-20 lists of one arm from one ranking pass,
against the two passes simab made before, timed in the same run on the same trained arm.

Before: `offline_metrics` ranked the catalogue for the test users with a relevant item
(`evaluate_arm`) and `top20_lists` ranked it again for every train user (`top_k`).  After:
`rank_once` ranks the train and test users together, the lists are its train users' rows and
the metrics are computed from it (`metrics_from_lists`).  Both give the same lists and
metrics (checked here); the script prints the seconds of each and their ratio.

On ../shared/data/ml-1m (users 1-1999), a slice of users 1..--users and --train-fraction of
the train rows, --max-epochs of training (the ranking cost does not depend on how well the
arm learnt):

    .venv/bin/python bench/rank_once.py --arm fm --users 600
    .venv/bin/python bench/rank_once.py --arm afn --users 300 --train-fraction 0.2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fakes.shared_data import SHARED_DATA  # noqa: E402
from ops.arms.base import FitData  # noqa: E402
from ops.arms.catalog import make_arm  # noqa: E402
from ops.arms.ranking import lists_for, metrics_from_lists, rank_once  # noqa: E402
from ops.arms.recommenders import evaluate_arm, top_k  # noqa: E402
from ops.data.mm_ml_1m import build_mm_ml_1m  # noqa: E402
from ops.data.movielens import load_local  # noqa: E402
from ops.data.split import chronological_split  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arm", default="fm")
    parser.add_argument("--data", default="ml-1m")
    parser.add_argument("--users", type=int, default=600, help="keep users 1..N")
    parser.add_argument("--train-fraction", type=float, default=1.0)
    parser.add_argument("--max-epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    folder = SHARED_DATA / args.data
    if not folder.is_dir():
        raise SystemExit(f"no MovieLens reference data at {folder} (set SIMAB_SHARED_DATA)")
    tables = load_local(folder)
    ratings = tables.ratings.filter(pl.col("user_id") <= args.users)
    split = chronological_split(ratings)
    catalogue_frame = build_mm_ml_1m(tables.movies)
    catalogue = catalogue_frame.get_column("movie_id").to_numpy()
    arm = make_arm(args.arm, max_epochs=args.max_epochs, train_fraction=args.train_fraction, device=args.device)
    started = time.perf_counter()
    arm.fit(FitData(split.train, split.valid, tables.users, catalogue_frame))
    print(
        f"{args.data} users 1..{args.users}: train/valid/test {split.train.height:,}/{split.valid.height:,}/"
        f"{split.test.height:,}; catalogue {catalogue.size:,}; {args.arm} trained in {time.perf_counter() - started:.1f} s "
        f"({args.max_epochs} epoch(s), {args.train_fraction:.0%} of train); torch threads {torch.get_num_threads()}"
    )

    train_users = split.train.get_column("user_id").unique().to_numpy()
    exclude = split.train.select("user_id", "movie_id")
    started = time.perf_counter()
    before_metrics = evaluate_arm(arm, split.train, split.test, catalogue)
    before_lists = top_k(arm, train_users, catalogue, exclude=exclude)
    before = time.perf_counter() - started

    started = time.perf_counter()
    ranking = rank_once(arm, split.train, split.test, catalogue)
    after_lists = lists_for(ranking, train_users)
    after_metrics = metrics_from_lists(arm, ranking, split.test)
    after = time.perf_counter() - started

    same_lists = after_lists.select("user_id", "rank", "movie_id").equals(
        before_lists.select("user_id", "rank", "movie_id")
    )
    deltas = {
        f: abs(getattr(after_metrics, f) - getattr(before_metrics, f)) for f in ("recall_at_k", "ndcg_at_k", "test_auc")
    }
    ranked_before = before_metrics.users_ranked + train_users.size
    ranked_after = ranking.get_column("user_id").n_unique()
    print(
        f"before (two passes: {before_metrics.users_ranked} test + {train_users.size} train users = {ranked_before} "
        f"user rankings): {before:.2f} s"
    )
    print(f"after  (one pass: {ranked_after} users): {after:.2f} s")
    print(
        f"ratio after/before: {after / before:.3f}; lists identical: {same_lists}; "
        f"largest metric difference: {max(deltas.values()):.2e} ({before_metrics.ndcg_at_k:.4f} NDCG@20)"
    )
    if not same_lists or max(deltas.values()) > 1e-9:
        raise SystemExit("the one pass does not reproduce the two")
    np.testing.assert_allclose(
        after_lists.get_column("score").to_numpy(), before_lists.get_column("score").to_numpy(), atol=1e-9
    )


if __name__ == "__main__":
    main()

"""The arms offline on Steam, without the simulation: can a learned arm beat Pop on this data?

The reference copy (`$SIMAB_SHARED_DATA/steam-australian`), or a seeded share of its users
(`--user-share`, to see the arms on a smaller implicit set), split chronologically 7:2:1 as
the lifecycle splits it; each arm fitted on train (early stopping on validation as in the
lifecycle) and ranked over the catalogue minus each user's train items; NDCG@20 and
Recall@20 over the train users with a liked test item, each with a 95 % bootstrap interval
over users (`ops.readout.fidelity.offline_intervals`), and per CTR arm its epochs and
validation AUCs.  Arms: any built-in or plug-in name (`mf`, `lightgcn`, `multvae` install the
Agent4Rec plug-in for the run, as the tests do), `ease` (Steck 2019, a closed-form item-item
model, L2 `--ease-l2`: the strong sparse-data baseline, here only as a yardstick), or
`NAME=lists:FILE` (an outside lists file, e.g. `bench/als_lists.py`'s).  A CTR arm's keyword
overrides follow a colon: `fm:validation_negatives=0`.

    .venv/bin/python bench/steam_arms.py --arms pop,fm,mf,lightgcn,ease,als=lists:/tmp/als-steam.parquet
    .venv/bin/python bench/steam_arms.py --user-share 0.25 --arms pop,fm,fm:validation_negatives=0
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fakes.arm_packages import install_agent4rec_plugin  # noqa: E402
from fakes.shared_data import SHARED_DATA  # noqa: E402
from ops.arms.base import FitData  # noqa: E402
from ops.arms.catalog import make_arm  # noqa: E402
from ops.arms.ranking import lists_for, rank_once, ranking_users  # noqa: E402
from ops.arms.recommenders import ArmDivergedError  # noqa: E402
from ops.data.mm_ml_1m import build_mm_ml_1m  # noqa: E402
from ops.data.split import chronological_split  # noqa: E402
from ops.data.steam import load_steam  # noqa: E402
from ops.readout.fidelity import offline_intervals, offline_per_user  # noqa: E402
from ops.schema import TOP_K  # noqa: E402


def ease_lists(train: pl.DataFrame, users: np.ndarray, items: np.ndarray, l2: float, k: int = 20) -> pl.DataFrame:
    """EASE's top-k unseen items per user of `users` (train interactions as a binary matrix)."""
    known = np.unique(np.r_[users, train.get_column("user_id").to_numpy()])
    x = np.zeros((known.size, items.size))
    x[np.searchsorted(known, train["user_id"].to_numpy()), np.searchsorted(items, train["movie_id"].to_numpy())] = 1
    p = np.linalg.inv(x.T @ x + l2 * np.eye(items.size))
    b = -p / np.diag(p)
    np.fill_diagonal(b, 0.0)
    rows = np.searchsorted(known, users)
    scores = np.where(x[rows] > 0, -np.inf, x[rows] @ b)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return pl.DataFrame(
        {
            "arm": "ease",
            "user_id": np.repeat(users, k),
            "rank": np.tile(np.arange(1, k + 1), users.size),
            "movie_id": items[top.ravel()],
            "score": np.take_along_axis(scores, top, axis=1).ravel(),
        }
    ).cast(TOP_K)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default="random,pop,fm,mf,ease")
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "steam-australian")
    parser.add_argument("--min-interactions", type=int, default=5)
    parser.add_argument("--user-share", type=float, default=1.0, help="a seeded share of the users (1: all)")
    parser.add_argument("--ease-l2", type=float, default=200.0)
    args = parser.parse_args()
    if any(a.split(":")[0] in ("mf", "lightgcn", "multvae") for a in args.arms.split(",")):
        install_agent4rec_plugin(Path(tempfile.mkdtemp()))
    tables = load_steam(args.data, args.min_interactions)
    ratings = tables.ratings
    if args.user_share < 1:
        ids = ratings.get_column("user_id").unique().sort().to_numpy()
        keep = ids[np.random.default_rng(3).random(ids.size) < args.user_share]
        ratings = ratings.filter(pl.col("user_id").is_in(keep.tolist()))
    split = chronological_split(ratings)
    catalogue = build_mm_ml_1m(tables.movies, tables.metadata)  # the catalogue as the lifecycle builds it
    items = np.sort(catalogue.get_column("movie_id").to_numpy())
    ranked = ranking_users(split.train, split.test)
    train_users = split.train.get_column("user_id").unique().to_numpy()
    print(
        f"steam: {ratings.get_column('user_id').n_unique()} users; train/valid/test "
        f"{split.train.height}/{split.valid.height}/{split.test.height}; catalogue {items.size}"
    )
    lists, notes = {}, {}
    for spec in args.arms.split(","):
        name, _, extra = spec.partition(":")
        started = time.perf_counter()
        if name == "ease":
            lists[name] = ease_lists(split.train, np.sort(train_users), items, args.ease_l2)
            notes[name] = f"L2 {args.ease_l2:g}"
        else:
            overrides = dict(kv.split("=") for kv in extra.split(";")) if extra and "=" in extra else {}
            overrides = {k: float(v) for k, v in overrides.items()}
            label = spec if overrides else name
            if "=" in name:  # NAME=lists:FILE
                label = name.split("=")[0]
                arm = make_arm(spec)
            else:
                arm = make_arm(name, device="cpu", **overrides)
            try:
                arm.fit(FitData(split.train, split.valid, tables.users, catalogue, rank_users=ranked))
            except ArmDivergedError as exc:
                print(f"| {label} | diverged: {exc} |")
                continue
            lists[label] = lists_for(rank_once(arm, split.train, split.test, items), train_users).with_columns(
                pl.lit(label).alias("arm")
            )
            history = getattr(arm, "history", None) or []
            notes[label] = (
                f"{len(history)} epochs, validation AUC " + " ".join(f"{h['val_auc']:.3f}" for h in history)
                if history
                else ""
            )
        notes[label if name != "ease" else name] += f" ({time.perf_counter() - started:.0f} s)"
    intervals = offline_intervals(offline_per_user(lists, split.test))
    print("| arm | users | NDCG@20 [95 %] | Recall@20 [95 %] | training |")
    print("| --- | ---: | --- | --- | --- |")
    for arm in lists:
        cells = {r["metric"]: r for r in intervals.filter(pl.col("arm") == arm).iter_rows(named=True)}
        n, r = cells["ndcg_at_k"], cells["recall_at_k"]
        print(
            f"| {arm} | {n['users']} | {n['mean']:.4f} [{n['ci_low']:.4f}, {n['ci_high']:.4f}] | "
            f"{r['mean']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}] | {notes[arm]} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

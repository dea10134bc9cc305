"""Where a DeepCTR arm's training epoch goes: seconds and CPU seconds per epoch, with
--profile the functions that took the CPU (cProfile on a process-time clock, so that other
work on a shared machine does not count), and the CPU seconds of one epoch's validation
scoring both ways: the model's forward on every encoded pair (as before) and the per-side
parts (`ops.arms.deepctr_parts`, as now), best of three.

On ../shared/data/ml-1m users 1..--users, chronological split, the arm's Appendix B
settings, --epochs epochs without early stopping; deepctr-torch and the optimiser are
imported before the first epoch (their one-off import is not an epoch's):

    .venv/bin/python -m bench.epoch --arm deepfm --users 1000 --epochs 2
    .venv/bin/python -m bench.epoch --arm deepfm --users 1000 --epochs 1 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import polars as pl

from fakes.shared_data import SHARED_DATA
from ops.arms.base import FitData
from ops.arms.recommenders import TrainedArm, arm_config
from ops.data.mm_ml_1m import build_mm_ml_1m
from ops.data.movielens import load_local
from ops.data.split import chronological_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arm", default="deepfm")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="print the 25 functions with the most CPU time")
    args = parser.parse_args()

    import deepctr_torch  # noqa: F401
    import torch

    torch.set_num_threads(args.threads)
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])  # imports torch._dynamo, once per process
    folder = SHARED_DATA / "ml-1m"
    if not folder.is_dir():
        raise SystemExit(f"bench/epoch.py: no MovieLens-1M data in {folder} (set SIMAB_SHARED_DATA)")
    tables = load_local(folder)
    split = chronological_split(tables.ratings.filter(pl.col("user_id") <= args.users))
    print(
        f"ml-1m users 1..{args.users}: {split.train.height:,} train rows, {split.valid.height:,} validation rows; "
        f"{args.arm}, torch threads {args.threads}",
        flush=True,
    )
    config = arm_config(
        args.arm, max_epochs=args.epochs, patience=args.epochs, device="cpu", divergence={"enabled": False}
    )
    arm = TrainedArm.of(config)
    last = [time.process_time()]

    def on_epoch(epoch: int, metrics: dict[str, float]) -> None:
        now = time.process_time()
        print(
            f"epoch {epoch}: {metrics['epoch_seconds']:.2f} s, {now - last[0]:.2f} CPU s; "
            f"validation AUC {metrics['val_auc']:.4f}",
            flush=True,
        )
        last[0] = now

    data = FitData(split.train, split.valid, tables.users, build_mm_ml_1m(tables.movies), on_epoch=on_epoch)
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    if profiler is not None:
        profiler.enable()
    arm.fit(data)
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    validation_scoring(arm, split.valid)


def validation_scoring(arm: TrainedArm, valid: pl.DataFrame) -> None:
    from ops.arms.deepctr import rows_per_forward
    from ops.arms.deepctr_parts import forward_scores

    users, movies = valid.get_column("user_id").to_numpy(), valid.get_column("movie_id").to_numpy()
    batch = rows_per_forward(arm.model, arm.config)
    best = {}
    for name, score in (
        ("forward", lambda: forward_scores(arm.model, arm.encoder, users, movies, batch)),
        ("parts", lambda: arm.score(users, movies)),
    ):
        times = []
        for _ in range(3):
            started = time.process_time()
            score()
            times.append(time.process_time() - started)
        best[name] = min(times)
    print(
        f"validation scoring, {users.size:,} pairs: forward {best['forward']:.2f} CPU s, parts {best['parts']:.2f} "
        f"CPU s ({best['forward'] / max(best['parts'], 1e-9):.1f}x)"
    )


if __name__ == "__main__":
    main()

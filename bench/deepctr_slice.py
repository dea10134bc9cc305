"""Every DeepCTR arm of the paper on the small real-MovieLens slice of
tests/test_recommenders_ml1m.py: validation AUC after one epoch, beside DeepFM's in the same
run (the paper's claim: every DeepCTR arm within 0.03 of DeepFM), and each arm's seconds
against DeepFM's.  The test checks DeepFM and the arms chosen there; this prints them all.

On ../shared/data/ml-1m (users 1-1999): chronological split, --train-fraction of the train
window (as many sampled negatives), one epoch at Appendix B's settings, validation AUC on
--valid-rows validation rows sampled with seed 0; torch on --threads threads:

    SIMAB_SHARED_DATA=/work/shared/data nice -n 5 .venv/bin/python -m bench.deepctr_slice
    .venv/bin/python -m bench.deepctr_slice --arms deepfm afn nfm
"""

from __future__ import annotations

import argparse
import sys
import time

from fakes.shared_data import SHARED_DATA
from ops.arms.recommenders import DEEPCTR_MODELS, arm_config, train_arm
from ops.data.mm_ml_1m import build_mm_ml_1m
from ops.data.movielens import load_local
from ops.data.split import chronological_split

WITHIN = 0.03


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", nargs="+", default=list(DEEPCTR_MODELS), choices=DEEPCTR_MODELS)
    parser.add_argument("--train-fraction", type=float, default=0.02)
    parser.add_argument("--valid-rows", type=int, default=5_000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import torch  # heavy: imported once the arguments are known

    torch.set_num_threads(args.threads)
    folder = SHARED_DATA / "ml-1m"
    if not folder.is_dir():
        sys.exit(f"reference data {folder} is absent (set SIMAB_SHARED_DATA)")
    tables = load_local(folder)
    split = chronological_split(tables.ratings)
    catalogue = build_mm_ml_1m(tables.movies)
    valid = split.valid.sample(args.valid_rows, seed=0)
    arms = ["deepfm", *[a for a in args.arms if a != "deepfm"]]  # the baseline first
    rows = {}
    for name in arms:
        config = arm_config(name, train_fraction=args.train_fraction, max_epochs=1)
        started = time.perf_counter()
        trained = train_arm(config, split.train, valid, tables.users, catalogue)
        rows[name] = (trained.history[0]["val_auc"], time.perf_counter() - started)
        print(f"  {name}: val AUC {rows[name][0]:.4f} in {rows[name][1]:.1f} s", flush=True)
    base_auc, base_s = rows["deepfm"]
    print(f"\n{split.train.height} train rows, fraction {args.train_fraction}, {args.valid_rows} valid rows")
    print(f"{'arm':<9} {'val AUC':>8} {'- DeepFM':>9} {'within':>7} {'seconds':>8} {'x DeepFM':>9}")
    for name, (auc, seconds) in rows.items():
        gap = auc - base_auc
        print(f"{name:<9} {auc:8.4f} {gap:+9.4f} {str(gap >= -WITHIN):>7} {seconds:8.1f} {seconds / base_s:9.2f}")


if __name__ == "__main__":
    main()

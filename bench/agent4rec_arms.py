"""Agent4Rec's arms through the plug-in beside simab's built-ins,.

On ../shared/data/ml-1m (users 1-1999), chronological 7:2:1 split, relevant = test items
rated >= 4, the catalogue minus each user's train items ranked once per arm: Recall@20,
NDCG@20 and test AUC of random, pop, fm and the plug-in's mf, multvae, lightgcn (installed
for this run only, as the tests install it), printed beside Agent4Rec's reported figures.

Protocol differences from Agent4Rec's (their Table: MF .148/.355, LightGCN .175/.393 Recall@20/
NDCG@20): they split each user's interactions at random 8:1:1 on all of ML-1M, so every
test user has train history, and their NDCG is over their own test sets; here the split is by
time over users 1-1999, so many test users are first seen in the test window (cold start: the
factor models fall back to popularity) and the test window is later than all training.

    .venv/bin/python -m bench.agent4rec_arms --epochs 1     # one epoch / BPR iteration each: a smoke run
    .venv/bin/python -m bench.agent4rec_arms --epochs 20
    # the whole lifecycle (simulation, A/B read-out, fidelity) on the same data with these arms
    .venv/bin/python -m bench.agent4rec_arms --simulate --epochs 5 --agents 600
    # each arm's default epochs (--epochs 0), LightGCN capped by its spec
    .venv/bin/python -m bench.agent4rec_arms --simulate --epochs 0 --agents 600 --home data/ml1m-a4r-default \
        --arms random pop fm mf multvae "lightgcn5=lightgcn;n_epochs=5"
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench import ROOT
from fakes.arm_packages import install_agent4rec_plugin
from fakes.shared_data import SHARED_DATA
from ops.arms.base import FitData
from ops.arms.catalog import make_arm
from ops.arms.ranking import metrics_from_lists, rank_once, ranking_users
from ops.data.mm_ml_1m import build_mm_ml_1m
from ops.data.movielens import load_local
from ops.data.split import chronological_split

AGENT4REC = {"mf": (0.148, 0.355), "lightgcn": (0.175, 0.393)}  # Recall@20, NDCG@20 as reported, their split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", nargs="+", default=["random", "pop", "fm", "mf", "multvae", "lightgcn"])
    parser.add_argument("--epochs", type=int, default=1, help="max epochs of every arm (BPR iterations for mf)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--simulate",
        action="store_true",
        help="run the lifecycle (python -m pipelines.lifecycle) with these arms instead: simulated CTR with "
        "intervals, tau and pair verdicts beside the offline metrics",
    )
    parser.add_argument("--agents", type=int, default=600, help="agents of the simulation (--simulate)")
    parser.add_argument("--home", type=Path, default=ROOT / "data" / "ml1m-agent4rec", help="SIMAB_HOME (--simulate)")
    args = parser.parse_args()
    if args.simulate:
        raise SystemExit(simulate(args))

    import torch

    torch.set_num_threads(args.threads)
    folder = SHARED_DATA / "ml-1m"
    if not folder.is_dir():
        raise SystemExit(f"no MovieLens reference data at {folder} (set SIMAB_SHARED_DATA)")
    install_agent4rec_plugin(Path(tempfile.mkdtemp()))
    tables = load_local(folder)
    split = chronological_split(tables.ratings)
    catalogue_frame = build_mm_ml_1m(tables.movies)
    items = catalogue_frame.get_column("movie_id").to_numpy()
    users = ranking_users(split.train, split.test)
    print(
        f"ml-1m users 1-1999: train/valid/test {split.train.height:,}/{split.valid.height:,}/{split.test.height:,}; "
        f"{users.size} users ranked; catalogue {items.size}; {args.epochs} epoch(s); torch threads {args.threads}"
    )
    print("| arm | Recall@20 | NDCG@20 | test AUC | fit s | rank s | Agent4Rec Recall@20 / NDCG@20 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.arms:
        arm = make_arm(name, max_epochs=args.epochs, device="cpu", seed=1024)
        started = time.perf_counter()
        arm.fit(FitData(split.train, split.valid, tables.users, catalogue_frame, rank_users=users))
        fitted = time.perf_counter() - started
        started = time.perf_counter()
        ranking = rank_once(arm, split.train, split.test, items)
        ranked = time.perf_counter() - started
        m = metrics_from_lists(arm, ranking, split.test)
        paper = "{:.3f} / {:.3f}".format(*AGENT4REC[name]) if name in AGENT4REC else "-"
        auc = f"{m.test_auc:.4f}" if m.test_auc is not None else "not available"
        print(
            f"| {name} | {m.recall_at_k:.4f} | {m.ndcg_at_k:.4f} | {auc} | {fitted:.1f} | {ranked:.1f} | {paper} |",
            flush=True,
        )


def simulate(args) -> int:
    """The lifecycle on ML-1M users 1-1999 with the plug-in importable in every process the
    run starts (PYTHONPATH: its dist-info for the entry points, its source)."""
    import os
    import subprocess

    from fakes.arm_packages import PLUGIN_SOURCE

    site = install_agent4rec_plugin(Path(tempfile.mkdtemp()))
    home = args.home.resolve()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(PLUGIN_SOURCE), str(ROOT)]),
        "SIMAB_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "SIMAB_SOURCE": "local",
        "SIMAB_LOCAL_PATH": str(SHARED_DATA / "ml-1m"),
        "SIMAB_METADATA_SOURCE": "local",
        "SIMAB_METADATA_PATH": str(SHARED_DATA / "ml-1m-metadata" / "movies_extrainfos.dat"),
        "SIMAB_POSTER_DIRS": os.pathsep.join(str(SHARED_DATA / d) for d in ("ml-1m-posters-tmdb", "ml-1m-posters")),
        "SIMAB_LINKS_PATH": str(SHARED_DATA / "ml-1m-links" / "ml1m_links.csv"),
        "SIMAB_AGENTS": str(args.agents),
        "SIMAB_CONTROL": "pop",
    }
    if args.epochs:  # 0: each arm's own default (FM 20 with early stopping, BPR 100 iterations, ...)
        env["SIMAB_MAX_EPOCHS"] = str(args.epochs)
    # A killed bench continues where it stopped (the lifecycle's own --resume).
    resume = ["--resume"] if (home / "dagster_home").is_dir() else []
    command = [sys.executable, "-m", "pipelines.lifecycle", *resume, "--arms", ",".join(args.arms)]
    print(f"SIMAB_HOME={home} {' '.join(command[1:])}", flush=True)
    return subprocess.call(command, cwd=ROOT, env=env)


if __name__ == "__main__":
    main()

"""The recommender arms on real MovieLens, beside the papers' tables.

Reference data, never shipped; baselines measured in the same run.  Four measures, one per
subcommand:

`table` — for each arm (all 11 of the paper by default), on ../shared/data/ml-1m (users
1-1999, with the local MM-ML-1M metadata as `make demo-ml1m` uses it; ml-100k with --data
ml-100k), chronological 7:2:1 split, label rating >= 4, Appendix B's hyper-parameters, early
stopping on validation AUC (<= 20 epochs):
- training: epochs run, best epoch, seconds per epoch on this machine's cores (torch
  threads = --threads), the best epoch's validation AUC and log loss; an arm stopped by the
  divergence guard is reported with its error and the run goes on;
- scoring: pairs per second of the vectorised `top_k` against a naive per-user loop
  (one deepctr `model.predict` call per user, then a sort) measured in the same run on
  the same users, with the lists checked equal;
- offline metrics: test AUC, log-loss, Recall@20, NDCG@20, printed beside the paper's
  Table 2 "Real-World" column (ML) and Table 5's "Original" AUC.
Results also go to bench/out/arms.json.

`slice` — every DeepCTR arm on the small slice of tests/test_recommenders_ml1m.py:
validation AUC after one epoch beside DeepFM's in the same run (the paper's claim: every
DeepCTR arm within 0.03 of DeepFM), and each arm's seconds against DeepFM's.  The test checks
DeepFM and the arms chosen there; this prints them all.  --train-fraction of the train window
(as many sampled negatives), one epoch at Appendix B's settings, validation AUC on
--valid-rows validation rows sampled with seed 0.

`epoch` — where one arm's training epoch goes: seconds and CPU seconds per epoch on users
1..--users, --epochs epochs without early stopping; with --profile the functions
that took the CPU (cProfile on a process-time clock, so that other work on a shared machine
does not count); and the CPU seconds of one epoch's validation scoring by the model's forward
on every encoded pair against the per-side parts (`ops.arms.deepctr_parts`), best of three.

`agent4rec` — Agent4Rec's arms through the plug-in (mf, multvae, lightgcn, installed for this
run only, as the tests install it) beside random, pop and fm: Recall@20, NDCG@20, test AUC,
fit and ranking seconds, beside Agent4Rec's reported figures (MF .148/.355, LightGCN
.175/.393 Recall@20/NDCG@20).  Their protocol differs: they split each user's interactions at
random 8:1:1 on all of ML-1M, so every test user has train history; here the split is by time
over users 1-1999, so many test users are first seen in the test window (the factor models
fall back to popularity) and the test window is later than all training.  --simulate runs the
whole lifecycle (simulation, A/B read-out, fidelity) on the same data with these arms instead.

    .venv/bin/python -m bench.arms table                       # all 11 arms (AFN alone is ~1 h on 2 CPU cores)
    .venv/bin/python -m bench.arms table --threads 1 --cap afn=4 xdeepfm=3   # one thread, slow arms capped
    .venv/bin/python -m bench.arms table --arms random pop fm deepfm afn   # Table 2 arms
    .venv/bin/python -m bench.arms table --arms deepfm --l2-on embedding   # Appendix B's L2 on embeddings
    .venv/bin/python -m bench.arms table --arms afn --max-epochs-afn 2     # AFN is ~14x DeepFM on CPU
    .venv/bin/python -m bench.arms table --data ml-100k
    SIMAB_SHARED_DATA=/work/shared/data nice -n 5 .venv/bin/python -m bench.arms slice
    .venv/bin/python -m bench.arms slice --arms deepfm afn nfm
    .venv/bin/python -m bench.arms epoch --arm deepfm --users 1000 --epochs 2
    .venv/bin/python -m bench.arms epoch --arm deepfm --users 1000 --epochs 1 --profile
    .venv/bin/python -m bench.arms agent4rec --epochs 1     # one epoch / BPR iteration each: a smoke run
    .venv/bin/python -m bench.arms agent4rec --simulate --epochs 5 --agents 600
    # each arm's default epochs (--epochs 0), LightGCN capped by its spec
    .venv/bin/python -m bench.arms agent4rec --simulate --epochs 0 --agents 600 --home data/ml1m-a4r-default \
        --arms random pop fm mf multvae "lightgcn5=lightgcn;n_epochs=5"

One concept, this benchmark: the arms measured on real MovieLens, one subcommand per measure.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from bench import ROOT, run_lifecycle
from fakes.arm_packages import PLUGIN_SOURCE, install_agent4rec_plugin
from fakes.shared_data import SHARED_DATA
from ops.arms.base import FitData
from ops.arms.deepctr import DeepCTRArm
from ops.arms.metrics import relevant_items
from ops.arms.ranking import metrics_from_lists, rank_once, ranking_users
from ops.arms.recommenders import (
    ArmDivergedError,
    TrainedArm,
    arm_config,
    evaluate_arm,
    top_k,
    train_arm,
    trained_arm,
    trained_kind_names,
)
from ops.arms.registry import kind_class, kind_names, make_arm
from ops.data.catalogue import build_catalogue
from ops.data.movielens import load_local
from ops.data.split import chronological_split
from ops.studies.experiments.papers import TABLE2, TABLE5, TABLE5_MODELS

# A/B Agent Table 2, MovieLens, "Real-World" column (Recall@20, NDCG@20), and Table 5,
# "Original" AUC, for comparison only: the paper trains on the full ML-1M.  Transcribed once,
# in ops.studies.experiments.papers.
PAPER_TABLE2 = {arm: (row["recall_at_k"], row["ndcg_at_k"]) for arm, row in TABLE2.items()}
PAPER_TABLE5_AUC = dict(zip(TABLE5_MODELS, TABLE5["original"]))
AGENT4REC = {"mf": (0.148, 0.355), "lightgcn": (0.175, 0.393)}  # Recall@20, NDCG@20 as reported, their split
WITHIN = 0.03  # the slice: every DeepCTR arm's validation AUC within this of DeepFM's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="measure", required=True)
    table_parser(sub.add_parser("table", help="every arm beside A/B Agent's Tables 2 and 5"))
    deepctr = [k for k in kind_names() if issubclass(kind_class(k), DeepCTRArm)]
    p = sub.add_parser("slice", help="every DeepCTR arm one epoch on a slice, beside DeepFM")
    p.add_argument("--arms", nargs="+", default=deepctr, choices=deepctr)
    p.add_argument("--train-fraction", type=float, default=0.02)
    p.add_argument("--valid-rows", type=int, default=5_000)
    p.add_argument("--threads", type=int, default=1)
    p = sub.add_parser("epoch", help="where one arm's training epoch goes")
    p.add_argument("--arm", default="deepfm")
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--profile", action="store_true", help="print the 25 functions with the most CPU time")
    p = sub.add_parser("agent4rec", help="the Agent4Rec plug-in's arms beside Agent4Rec's figures")
    p.add_argument("--arms", nargs="+", default=["random", "pop", "trending", "fm", "mf", "multvae", "lightgcn"])
    p.add_argument("--epochs", type=int, default=1, help="max epochs of every arm (BPR iterations for mf)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--simulate",
        action="store_true",
        help="run the lifecycle (python -m pipelines.lifecycle) with these arms instead: simulated CTR with "
        "intervals, tau and pair verdicts beside the offline metrics",
    )
    p.add_argument("--agents", type=int, default=600, help="agents of the simulation (--simulate)")
    p.add_argument("--home", type=Path, default=ROOT / "data" / "ml1m-agent4rec", help="SIMAB_HOME (--simulate)")
    args = parser.parse_args()
    import deepctr_torch  # noqa: F401  (heavy: imported once the arguments are known)
    import torch

    torch.set_num_threads(args.threads)
    # deepctr-torch's import and the first optimiser's (it imports torch._dynamo) happen once per
    # process: done here, they count in no arm's seconds.
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
    {"table": table, "slice": deepctr_slice, "epoch": epoch, "agent4rec": agent4rec}[args.measure](args)


def ml1m():
    """The reference ML-1M tables (users 1-1999), or a clear stop naming the folder."""
    folder = SHARED_DATA / "ml-1m"
    if not folder.is_dir():
        raise SystemExit(f"bench.arms: no MovieLens-1M data in {folder} (set SIMAB_SHARED_DATA)")
    return load_local(folder)


def table_parser(parser) -> None:
    parser.add_argument("--arms", nargs="+", default=trained_kind_names())
    parser.add_argument("--data", choices=("ml-1m", "ml-100k"), default="ml-1m")
    parser.add_argument("--no-metadata", action="store_true", help="ML-1M without the local MM-ML-1M metadata")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-epochs", type=int, default=20, help="Appendix B: at most 20")
    parser.add_argument("--max-epochs-afn", type=int, default=None, help="cap AFN's epochs (~14x DeepFM's time on CPU)")
    parser.add_argument(
        "--cap",
        nargs="*",
        default=[],
        metavar="ARM=EPOCHS",
        help="cap an arm's epochs below --max-epochs (early stopping still applies), e.g. xdeepfm=3",
    )
    parser.add_argument("--afn-train-fraction", type=float, default=1.0)
    parser.add_argument(
        "--l2-on",
        choices=("dnn", "embedding"),
        default="dnn",
        help="where Appendix B's 'L2 regularization of 0.003' goes",
    )
    parser.add_argument(
        "--sampled-negatives",
        type=float,
        default=None,
        help="unrated pairs per train row as negatives (default: the arm config's)",
    )
    parser.add_argument("--naive-users", type=int, default=40, help="users in the naive per-user loop")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "arms.json")
    parser.add_argument(
        "--save-arms",
        type=Path,
        default=None,
        help="pickle each trained arm to FOLDER/<arm>.pkl, as the IO manager stores recommender_arm",
    )


def table(args) -> None:
    import torch

    bench_started = time.perf_counter()
    tables, source, catalogue = _load(args.data, not args.no_metadata)
    split = chronological_split(tables.ratings)
    catalogue = tables.movies["item_id"].to_numpy()
    print(
        f"data: {source}; ratings {tables.ratings.height:,}; train/valid/test "
        f"{split.train.height:,}/{split.valid.height:,}/{split.test.height:,}; catalogue {catalogue.size:,}; "
        f"torch threads {torch.get_num_threads()}; cuda {torch.cuda.is_available()}"
    )
    ranked_users = relevant_items(split.test).get_column("user_id").unique().sort().to_numpy()
    naive_users = ranked_users[: args.naive_users]

    results = []
    for name in args.arms:
        overrides = {"max_epochs": args.max_epochs}
        if args.sampled_negatives is not None:
            overrides["sampled_negatives"] = args.sampled_negatives
        if args.l2_on == "embedding":
            overrides.update(l2_reg_embedding=0.003, l2_reg_dnn=0.0)
        note = ""
        caps = dict(c.split("=", 1) for c in args.cap)
        if name in caps:
            overrides["max_epochs"] = min(args.max_epochs, int(caps[name]))
            note = f"capped at {overrides['max_epochs']} epochs"
        if arm_config(name).model == "afn" and (args.max_epochs_afn or args.afn_train_fraction < 1):
            overrides.update(
                max_epochs=min(args.max_epochs, args.max_epochs_afn or args.max_epochs),
                train_fraction=args.afn_train_fraction,
            )
            note = f"AFN capped at {overrides['max_epochs']} epochs, {args.afn_train_fraction:.0%} of train"
        config = arm_config(name, settings=overrides)
        started = time.perf_counter()
        try:
            arm = train_arm(
                config,
                split.train,
                split.valid,
                tables.users,
                catalogue,
                on_epoch=lambda e, m, n=name: print(
                    f"  {n} epoch {e}: val_auc {m['val_auc']:.4f} val_log_loss "
                    f"{m['val_log_loss']:.4f} loss {m['train_loss']:.4f} "
                    f"{m['epoch_seconds']:.1f}s",
                    flush=True,
                ),
            )
        except ArmDivergedError as error:
            print(f"{name}: {error}", flush=True)
            results.append(
                {
                    "arm": name,
                    "diverged": str(error),
                    "epochs_run": error.epoch,
                    "train_seconds": time.perf_counter() - started,
                }
            )
            _write(args.out, {"source": source, "threads": args.threads, "results": results})
            continue
        train_seconds = time.perf_counter() - started
        if args.save_arms:
            import pickle

            args.save_arms.mkdir(parents=True, exist_ok=True)
            (args.save_arms / f"{name}.pkl").write_bytes(pickle.dumps(arm, protocol=pickle.HIGHEST_PROTOCOL))
        metrics = evaluate_arm(arm, split.train, split.test, catalogue, k=20)
        speed = _scoring_speed(arm, ranked_users, naive_users, catalogue, split.train)
        epochs = [h["epoch_seconds"] for h in arm.history]
        best = arm.history[arm.best_epoch - 1] if arm.best_epoch else {}
        row = {
            **metrics.model_dump(),
            "epochs_run": len(epochs),
            "best_epoch": arm.best_epoch,
            "val_auc": best.get("val_auc"),
            "val_log_loss": best.get("val_log_loss"),
            "epoch_seconds_mean": float(np.mean(epochs)) if epochs else None,
            "train_seconds": train_seconds,
            **speed,
            "note": note,
            "l2_on": args.l2_on,
            "sampled_negatives": config.sampled_negatives if config.model not in ("random", "pop") else None,
        }
        results.append(row)
        print(
            f"{name}: {json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})}",
            flush=True,
        )
        # Written after every arm, so a long run that is stopped keeps what it measured.
        _write(args.out, {"source": source, "threads": args.threads, "results": results})

    _print_table(results, source)
    print(f"\nwall time {time.perf_counter() - bench_started:.0f} s (torch threads {args.threads})")


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _load(data: str, with_metadata: bool):
    """The MovieLens tables, a description, and the MM-ML-1M catalogue (with the local
    OMDb-style metadata for ML-1M, as `make demo-ml1m` builds it, posters aside)."""
    folder = SHARED_DATA / data
    if not folder.is_dir():
        raise SystemExit(f"no MovieLens reference data at {folder} (set SIMAB_SHARED_DATA)")
    tables = load_local(folder)
    source = "ml-1m (ratings of users 1-1999)" if data == "ml-1m" else data
    metadata_file = SHARED_DATA / "ml-1m-metadata" / "movies_extrainfos.dat"
    if data == "ml-1m" and with_metadata and metadata_file.is_file():
        from ops.data.local_metadata import LocalMetadataConfig, load_local_metadata

        out = ROOT / "bench" / "out" / "arms_metadata"
        config = LocalMetadataConfig(metadata_path=metadata_file, progress=False)
        metadata = load_local_metadata(tables.movies, out, config).metadata
        return tables, f"{source}, metadata {metadata_file.name}", build_catalogue(tables.movies, metadata)
    return tables, source, build_catalogue(tables.movies)


def _scoring_speed(arm, ranked_users, naive_users, catalogue, train) -> dict[str, float]:
    """Pairs per second: vectorised top_k over all ranked users vs a per-user loop."""
    exclude = train.select("user_id", "item_id")
    started = time.perf_counter()
    fast = top_k(arm, ranked_users, catalogue, exclude=exclude, k=20)
    fast_seconds = time.perf_counter() - started
    started = time.perf_counter()
    slow = _naive_top_k(arm, naive_users, catalogue, exclude, k=20)
    slow_seconds = time.perf_counter() - started
    same = fast.filter(pl.col("user_id").is_in(naive_users.tolist())).sort("user_id", "rank")
    agree = (
        float(np.mean(same["item_id"].to_numpy() == slow["item_id"].to_numpy())) if same.height == slow.height else 0.0
    )
    fast_rate = ranked_users.size * catalogue.size / fast_seconds
    slow_rate = naive_users.size * catalogue.size / slow_seconds
    return {
        "pairs_per_s": fast_rate,
        "naive_pairs_per_s": slow_rate,
        "speedup": fast_rate / slow_rate,
        "naive_lists_agree": agree,
    }


def _naive_top_k(arm, users, catalogue, exclude, k):
    """The baseline: one scoring call per user (deepctr's own `predict` for DeepCTR arms,
    fed a per-feature dict as its docs show), then a full sort."""
    rows = []
    seen_by_user = {
        u: set(g["item_id"].to_list())
        for (u,), g in exclude.filter(pl.col("user_id").is_in(users.tolist())).group_by("user_id")
    }
    for user in users:
        user_ids = np.full(catalogue.size, user, dtype=np.int64)
        if arm.model is not None:
            x = arm.encoder.transform(user_ids, catalogue)
            index = arm.model.feature_index
            scores = arm.model.predict({name: x[:, a:b] for name, (a, b) in index.items()}, batch_size=256).ravel()
        else:
            scores = arm.score(user_ids, catalogue)
        seen = seen_by_user.get(user, set())
        mask = np.array([m in seen for m in catalogue])
        scores = np.where(mask, -np.inf, scores)
        order = np.lexsort((catalogue, -scores))[:k]
        rows += [(int(user), r + 1, int(catalogue[i])) for r, i in enumerate(order)]
    return pl.DataFrame(rows, schema=["user_id", "rank", "item_id"], orient="row")


def _print_table(results, source) -> None:
    print(
        f"\nOffline metrics on {source} vs A/B Agent Table 2 (ML, Real-World: T2) and Table 5 (Original AUC: T5);"
        " valAUC / valLL at the best epoch; the paper trains on all 6,040 ML-1M users"
    )
    head = (
        f"{'arm':<10}{'epochs':>7}{'best':>5}{'s/epoch':>9}{'valAUC':>8}{'valLL':>7}{'AUC':>8}{'T5':>8}{'logloss':>9}"
        f"{'R@20':>8}{'T2':>8}{'N@20':>8}{'T2':>8}{'pairs/s':>12}{'naive/s':>10}{'x':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        if "diverged" in r:
            print(f"{r['arm']:<10}{r['epochs_run']:>7}  DIVERGED: {r['diverged']}")
            continue
        model = arm_config(r["arm"]).model
        paper_recall, paper_ndcg = PAPER_TABLE2.get(r["arm"], (None, None))
        fmt = lambda v, w=8, p=4: f"{v:>{w}.{p}f}" if v is not None else f"{'-':>{w}}"  # noqa: E731
        print(
            f"{r['arm']:<10}{r['epochs_run']:>7}{r['best_epoch'] or '-':>5}{fmt(r['epoch_seconds_mean'], 9, 1)}"
            f"{fmt(r.get('val_auc'))}{fmt(r.get('val_log_loss'), 7, 3)}{fmt(r['test_auc'])}{fmt(PAPER_TABLE5_AUC.get(model))}"
            f"{fmt(r['test_log_loss'], 9)}{fmt(r['recall_at_k'])}{fmt(paper_recall)}{fmt(r['ndcg_at_k'])}{fmt(paper_ndcg)}"
            f"{r['pairs_per_s']:>12,.0f}{r['naive_pairs_per_s']:>10,.0f}{r['speedup']:>7.1f}"
        )
        if r["note"]:
            print(f"{'':<10}({r['note']})")


def deepctr_slice(args) -> None:
    tables = ml1m()
    split = chronological_split(tables.ratings)
    catalogue = build_catalogue(tables.movies)
    valid = split.valid.sample(args.valid_rows, seed=0)
    arms = ["deepfm", *[a for a in args.arms if a != "deepfm"]]  # the baseline first
    rows = {}
    for name in arms:
        config = arm_config(name, settings={"train_fraction": args.train_fraction, "max_epochs": 1})
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


def epoch(args) -> None:
    tables = ml1m()
    split = chronological_split(tables.ratings.filter(pl.col("user_id") <= args.users))
    print(
        f"ml-1m users 1..{args.users}: {split.train.height:,} train rows, {split.valid.height:,} validation rows; "
        f"{args.arm}, torch threads {args.threads}",
        flush=True,
    )
    config = arm_config(
        args.arm, max_epochs=args.epochs, patience=args.epochs, device="cpu", divergence={"enabled": False}
    )
    arm = trained_arm(config)
    last = [time.process_time()]

    def on_epoch(epoch: int, metrics: dict[str, float]) -> None:
        now = time.process_time()
        print(
            f"epoch {epoch}: {metrics['epoch_seconds']:.2f} s, {now - last[0]:.2f} CPU s; "
            f"validation AUC {metrics['val_auc']:.4f}",
            flush=True,
        )
        last[0] = now

    data = FitData(split.train, split.valid, tables.users, build_catalogue(tables.movies), on_epoch=on_epoch)
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

    users, movies = valid.get_column("user_id").to_numpy(), valid.get_column("item_id").to_numpy()
    batch = rows_per_forward(type(arm), arm.model, arm.config)
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


def agent4rec(args) -> None:
    if args.simulate:
        raise SystemExit(simulate_agent4rec(args))

    install_agent4rec_plugin(Path(tempfile.mkdtemp()))
    tables = ml1m()
    split = chronological_split(tables.ratings)
    catalogue_frame = build_catalogue(tables.movies)
    items = catalogue_frame.get_column("item_id").to_numpy()
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


def simulate_agent4rec(args) -> int:
    """The lifecycle on ML-1M users 1-1999 with the plug-in importable in every process the
    run starts (PYTHONPATH: its dist-info for the entry points, its source)."""
    site = install_agent4rec_plugin(Path(tempfile.mkdtemp()))
    env = {
        "PYTHONPATH": os.pathsep.join([str(site), str(PLUGIN_SOURCE), str(ROOT)]),
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
    # A killed benchmark goes on where it stopped; other arms or settings run afresh.
    return run_lifecycle(args.home.resolve(), env, ",".join(args.arms))


if __name__ == "__main__":
    main()

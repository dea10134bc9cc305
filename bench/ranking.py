"""Ranking speed per arm, against the previous path and this machine's limit.

The previous ranking path against the current one, beside the limit of this machine,
measured in one run on the same users.

Each arm is trained for --max-epochs on --train-fraction of the train window (how well it
learnt does not change what ranking it costs), then ranks the lifecycle's ranking users
(train and test users, `ops.arms.ranking.ranking_users`) against the whole catalogue without
their train items, 20 items each:

- before: the path simab ranked with until now, reproduced here: every (user, item) pair
  encoded and passed through the model's forward (`model(X)`, `torch.no_grad`), blocks of
  `score_batch_size` pairs, scores as float64, the top 20 from `np.partition` and a cumsum
  over the whole block for the ties;
- after: `arm.rank` — a matrix product of user and item factors where the arm has
  `factors` (Pop, FM), per-user and per-item parts computed once for the other DeepCTR
  models (`ops.arms.deepctr_parts`), the top 20 from a partial sort;
- the limit: a plain float32 matrix product of the same shape, users x items x
  `embedding_dim` factors, the least work that scoring every pair can take;
- for the DeepCTR arms other than FM, the floating-point work per pair of each path's matrix products
  (torch's FlopCounterMode on a block of users x the catalogue) and the pairs/s that work
  allows at this machine's float32 GEMM rate: what the layers that couple a user with an
  item cost, however they are computed.

Slow paths rank a seeded sample of users (the table says how many); pairs/s do not depend on
which users.  The top-20 lists of the two paths are compared on the users both ranked:
identical, or differing only where two items' scores are within float rounding (ties).

    .venv/bin/python -m bench.ranking                    # ML-1M users 1-1999 and Steam
    .venv/bin/python -m bench.ranking --data ml-1m --arms fm deepfm
    .venv/bin/python -m bench.ranking --sample afn=8 deepfm=64
"""

from __future__ import annotations

import os
import sys

# One thread for torch and for numpy's BLAS alike, set before either loads: a 2-core
# machine shared with other work times one thread most steadily (--threads changes it).
_THREADS = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = _THREADS

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from bench import ROOT  # noqa: E402
from fakes.shared_data import SHARED_DATA  # noqa: E402
from ops.arms.base import FitData  # noqa: E402
from ops.arms.deepctr import DeepCTRArm, rows_per_forward  # noqa: E402
from ops.arms.ranking import ranking_users  # noqa: E402
from ops.arms.recommenders import TrainedArm, arm_config, trained_arm  # noqa: E402
from ops.arms.top_k import excluded_cells  # noqa: E402
from ops.data.catalogue import build_catalogue  # noqa: E402
from ops.data.split import chronological_split  # noqa: E402
from ops.schema import TOP_K  # noqa: E402

ARMS = ("random", "pop", "fm", "deepfm", "nfm", "afn")
# Users a path ranks where all of them would take minutes (pairs/s do not depend on which).
BEFORE_USERS = {"fm": 200, "deepfm": 120, "nfm": 200, "afn": 6}
AFTER_USERS = {"afn": 24}
K = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="+", choices=("ml-1m", "steam"), default=["ml-1m", "steam"])
    parser.add_argument("--arms", nargs="+", default=list(ARMS))
    parser.add_argument("--max-epochs", type=int, default=1)
    parser.add_argument("--train-fraction", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=1, help="torch and BLAS threads (default 1)")
    parser.add_argument(
        "--sample",
        nargs="*",
        default=[],
        help="arm=N: users the previous path ranks (default "
        + ", ".join(f"{a}={n}" for a, n in BEFORE_USERS.items())
        + "; the others rank every user)",
    )
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    before_users = {**BEFORE_USERS, **{a: int(n) for a, n in (s.split("=") for s in args.sample)}}
    for data in args.data:
        run(data, args, before_users)


def run(data: str, args, before_users: dict[str, int]) -> None:
    tables, catalogue = load(data)
    split = chronological_split(tables.ratings)
    users = ranking_users(split.train, split.test)
    items = np.unique(catalogue.get_column("item_id").to_numpy())
    exclude = split.train.select("user_id", "item_id")  # the arm API's item_id
    limit = limit_pairs_per_second(users.size, items.size, 64)
    gemm = gemm_flops_per_second()
    print(
        f"\n{data}: {users.size:,} ranking users x {items.size:,} items = {users.size * items.size:,} pairs; "
        f"train {split.train.height:,} rows; arms trained {args.max_epochs} epoch(s) on {args.train_fraction:.0%} "
        f"of train; threads {args.threads}"
    )
    print(
        f"limit on this machine: float32 matrix product {users.size} x {items.size} x 64: {limit:,.0f} pairs/s; "
        f"float32 GEMM rate {gemm / 1e9:.1f} GFLOP/s"
    )
    header = (
        f"{'arm':8} {'users before':>12} {'before pairs/s':>15} {'users after':>11} {'after pairs/s':>14} "
        f"{'after/before':>12} {'after/limit':>11} {'kFLOP/pair before > after':>26} {'after/GEMM bound':>16}"
        "  top-20 lists (users ranked by both)"
    )
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    for name in args.arms:
        overrides = dict(max_epochs=args.max_epochs, device="cpu", divergence={"enabled": False})
        arm = trained_arm(arm_config(name, settings=overrides))
        if isinstance(arm, DeepCTRArm):
            arm = trained_arm(arm_config(name, **overrides, train_fraction=args.train_fraction))
        arm.fit(FitData(split.train, split.valid, tables.users, catalogue))
        sample_before = _sample(users, before_users.get(name), rng)
        sample_after = _sample(users, AFTER_USERS.get(name), rng)
        sample_after = np.union1d(sample_after, sample_before) if sample_after.size < users.size else users
        started = time.perf_counter()
        before = rank_before(arm, sample_before, items, exclude)
        before_rate = sample_before.size * items.size / (time.perf_counter() - started)
        started = time.perf_counter()
        after = arm.rank(sample_after, items, exclude, K)
        after_rate = sample_after.size * items.size / (time.perf_counter() - started)
        check = compare(before, after.filter(pl.col("user_id").is_in(pl.Series(sample_before).implode())))
        work, bound = "", ""
        if isinstance(arm, DeepCTRArm) and arm.factors(users[:1], items[:1]) is None:
            flops_before, flops_after = flops_per_pair(arm, users, items)
            work = f"{flops_before / 1e3:,.1f} > {flops_after / 1e3:,.1f}"
            bound = f"{after_rate / (gemm / flops_after):.2f}"
        print(
            f"{name:8} {sample_before.size:>12,} {before_rate:>15,.0f} {sample_after.size:>11,} {after_rate:>14,.0f} "
            f"{after_rate / before_rate:>11.1f}x {after_rate / limit:>11.3f} {work:>26} {bound:>16}  {check}",
            flush=True,
        )


def load(data: str):
    """The tables and the catalogue the lifecycle reads for `data` (MovieLens-1M users 1-1999
    with the local MM-ML-1M metadata, or the `steam` source)."""
    if data == "steam":
        from ops.data.steam import load_steam

        folder = SHARED_DATA / "steam-australian"
        if not (folder / "interactions.csv").is_file():
            raise SystemExit(f"bench.ranking: no Steam data in {folder} (set SIMAB_SHARED_DATA)")
        tables = load_steam(folder)
        return tables, build_catalogue(tables.movies, tables.metadata)
    from ops.data.local_metadata import LocalMetadataConfig, load_local_metadata
    from ops.data.movielens import load_local

    folder = SHARED_DATA / "ml-1m"
    if not folder.is_dir():
        raise SystemExit(f"bench.ranking: no MovieLens-1M data in {folder} (set SIMAB_SHARED_DATA)")
    tables = load_local(folder)
    metadata_file = SHARED_DATA / "ml-1m-metadata" / "movies_extrainfos.dat"
    if not metadata_file.is_file():
        return tables, build_catalogue(tables.movies)
    config = LocalMetadataConfig(metadata_path=metadata_file, progress=False)
    metadata = load_local_metadata(tables.movies, ROOT / "bench" / "out" / "ranking_metadata", config).metadata
    return tables, build_catalogue(tables.movies, metadata)


def _sample(users: np.ndarray, n: int | None, rng: np.random.Generator) -> np.ndarray:
    if n is None or n >= users.size:
        return users
    return np.sort(rng.choice(users, size=n, replace=False))


def limit_pairs_per_second(n_users: int, n_items: int, factors: int) -> float:
    """Pairs/s of a plain float32 (users x factors) @ (factors x items) product, best of 5."""
    rng = np.random.default_rng(1)
    left = rng.standard_normal((n_users, factors), dtype=np.float32)
    right = rng.standard_normal((factors, n_items), dtype=np.float32)
    best = np.inf
    for _ in range(5):
        started = time.perf_counter()
        left @ right
        best = min(best, time.perf_counter() - started)
    return n_users * n_items / best


def gemm_flops_per_second() -> float:
    """FLOP/s of a large float32 torch GEMM (2048 x 2048 x 2048), best of 3."""
    import torch

    generator = torch.Generator().manual_seed(2)
    a = torch.randn(2048, 2048, generator=generator)
    b = torch.randn(2048, 2048, generator=generator)
    best = np.inf
    for _ in range(3):
        started = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - started)
    return 2 * 2048**3 / best


def flops_per_pair(arm: TrainedArm, users: np.ndarray, items: np.ndarray) -> tuple[float, float]:
    """Matrix-product FLOPs per pair of the previous path and of the current one, counted by
    torch on 4 users x the catalogue (the current path's per-side work included)."""
    from torch.utils.flop_counter import FlopCounterMode

    block = users[:4]
    pairs = block.size * items.size
    with FlopCounterMode(display=False) as before:
        score_before(arm, np.repeat(block, items.size), np.tile(items, block.size))
    with FlopCounterMode(display=False) as after:
        arm.score_matrix(block, items)
    return before.get_total_flops() / pairs, after.get_total_flops() / pairs


# -- the previous path, as simab ranked before -------------------------------------------


def rank_before(arm: TrainedArm, user_ids: np.ndarray, item_ids: np.ndarray, exclude: pl.DataFrame) -> pl.DataFrame:
    """`top_k` as it was: users in blocks of `score_batch_size` pairs, every pair scored by
    `score_before`, the block's top 20 by `_top_before`."""
    user_ids = np.unique(user_ids)
    n_items = item_ids.size
    blocked_rows, blocked_cols = excluded_cells(exclude, user_ids, item_ids)
    block = max(1, arm.config.score_batch_size // n_items)
    parts = []
    for start in range(0, user_ids.size, block):
        users_block = user_ids[start : start + block]
        scores = score_before(arm, np.repeat(users_block, n_items), np.tile(item_ids, users_block.size))
        scores = scores.reshape(users_block.size, n_items).astype(np.float64)
        parts.append(_top_before(arm.name, users_block, item_ids, scores, blocked_rows, blocked_cols, start, K))
    return pl.concat(parts).filter(pl.col("score").is_finite())


def score_before(arm: TrainedArm, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
    """`TrainedArm.score` as it was: the DeepCTR models' forward on encoded pairs."""
    if not isinstance(arm, DeepCTRArm):
        return arm.score(user_ids, item_ids)  # Random's hash and Pop's lookup are unchanged
    import torch

    model, batch = arm.model, rows_per_forward(type(arm), arm.model, arm.config)
    model.eval()
    out = np.empty(len(user_ids), dtype=np.float64)
    with torch.no_grad():
        for start in range(0, len(user_ids), batch):
            x = torch.from_numpy(
                arm.encoder.transform(user_ids[start : start + batch], item_ids[start : start + batch])
            )
            out[start : start + batch] = model(x.to(model.device)).squeeze(-1).double().cpu().numpy()
    return out


def _top_before(name, users_block, item_ids, scores, blocked_rows, blocked_cols, start, k) -> pl.DataFrame:
    in_block = (blocked_rows >= start) & (blocked_rows < start + users_block.size)
    scores[blocked_rows[in_block] - start, blocked_cols[in_block]] = -np.inf
    scores[np.isnan(scores)] = -np.inf
    kk = min(k, item_ids.size)
    cut = -np.partition(-scores, kk - 1, axis=1)[:, kk - 1 : kk]
    above = scores > cut
    tied = scores == cut
    wanted = kk - above.sum(axis=1, keepdims=True)
    chosen = above | (tied & (np.cumsum(tied, axis=1) <= wanted))
    best = np.nonzero(chosen)[1].reshape(scores.shape[0], kk)
    best_scores = np.take_along_axis(scores, best, axis=1)
    order = np.lexsort((item_ids[best], -best_scores), axis=1)
    best = np.take_along_axis(best, order, axis=1)
    best_scores = np.take_along_axis(best_scores, order, axis=1)
    return pl.DataFrame(
        {
            "arm": name,
            "user_id": np.repeat(users_block, kk),
            "rank": np.tile(np.arange(1, kk + 1), users_block.size),
            "item_id": item_ids[best].ravel(),
            "score": best_scores.ravel(),
        },
        schema=TOP_K,
    )


def compare(before: pl.DataFrame, after: pl.DataFrame, tolerance: float = 1e-6) -> str:
    """Whether the two paths' lists agree: identical, or different only at ranks where the
    two scores agree within `tolerance` (two items tied up to float rounding)."""
    joined = before.join(after, on=["user_id", "rank"], how="full", suffix="_after", coalesce=True)
    differ = joined.filter(pl.col("item_id") != pl.col("item_id_after"))
    gap = (joined["score"] - joined["score_after"]).abs().max() or 0.0
    users = before["user_id"].n_unique()
    missing = joined.filter(pl.col("item_id").is_null() | pl.col("item_id_after").is_null()).height
    if missing:
        return f"DIFFERENT: {missing} ranks in one path only"
    if differ.height == 0:
        return f"identical ({users} users; largest score difference {gap:.1e})"
    unexplained = differ.filter((pl.col("score") - pl.col("score_after")).abs() > tolerance)
    verdict = "ties" if unexplained.height == 0 else f"{unexplained.height} NOT explained by ties"
    return (
        f"{differ['user_id'].n_unique()} of {users} users differ at {differ.height} ranks: {verdict} "
        f"(largest score difference {gap:.1e})"
    )


if __name__ == "__main__":
    main()

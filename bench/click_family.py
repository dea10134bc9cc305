"""Which model family should the embedded brain's click model draw its taste from?

The click model's collaborative score is, by default, PureSVD item factors of the train
window: a factor model, as FM and an outside ALS are.  Agents whose taste is a factor model
may favour a factor model's lists whatever those lists are worth.  For each click-model
variant this bench fits the brain (train + validation, calibrated to list quality on the
validation window as the `embedded_brain` asset does), ranks the mirror arm by it
(`ops/arms/kinds/mirror.py`), simulates every arm and the mirror on the same agents, and prints:
held-out click AUC; the ALS − Pop simulated CTR gap beside the offline NDCG@20 gap (both
with 95 % intervals); the mirror's excess CTR and ρ(residual, overlap with the mirror)
(`ops.readout.bias`); Kendall τ(CTR, NDCG@20) and the arm-pair verdicts over the candidate
arms (the mirror left out).

Data: ../shared/data/ml-1m users 1-1999 (local metadata, both poster folders), the
chronological 7:2:1 split; arms random, pop and the CTR arms (trained once, cached under
bench/out/alignment-arms-*.pkl, shared with bench/alignment.py) and implicit's ALS
(`bench/als_lists.py`, the optional extra `bench`).

    SIMAB_SHARED_DATA=/work/shared/data .venv/bin/python bench/click_family.py
    .venv/bin/python bench/click_family.py --variants none,puresvd --agents 600 --max-epochs 5

Variants: none (no collaborative score: the default), puresvd (PureSVD factors, the click
model keeping them where they raise its held-out AUC: the default before this bench), itemknn (item-item cosine
neighbourhood, no factorisation; its features kept whatever their AUC).  Results also go to bench/out/click_family.json.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import kendalltau

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import agents as bench_agents  # noqa: E402
from bench.als_lists import als_lists  # noqa: E402
from ops.agents.embeddings import MiniLMTextEmbedder  # noqa: E402
from ops.arms.base import arm_frame, internal_frame, rank_by_score  # noqa: E402
from ops.arms.recommenders import arm_config, top_k, train_arm  # noqa: E402
from ops.environment import offline_defaults  # noqa: E402
from ops.readout.ab_readout import per_agent_metrics  # noqa: E402
from ops.readout.bias import simulator_bias  # noqa: E402
from ops.readout.fidelity import agreement_summary, offline_per_user, pairwise_agreement  # noqa: E402
from ops.readout.statistics import difference_interval, named_rng  # noqa: E402
from ops.schema import TOP_K  # noqa: E402
from ops.simulation.brains.embedded import EmbeddedBrainConfig, fit_embedded_brain  # noqa: E402
from ops.simulation.catalogue import Catalogue  # noqa: E402
from ops.simulation.runner import SimulationConfig, simulate_arm  # noqa: E402
from ops.studies.alignment.calibration import CalibrationConfig, calibrate_list_response  # noqa: E402
from ops.studies.mirror import brain_scores  # noqa: E402

OUT = ROOT / "bench" / "out"
VARIANTS = {
    "none": {"click_collaborative": "none"},
    "puresvd": {"collab_family": "puresvd", "click_collaborative": "auto"},  # the default before docs/trust.md
    # Forced on: "auto" would keep the item-kNN features only where they raise the held-out
    # AUC (they do not on ML-1M), which would make this variant "none" again.
    "itemknn": {"collab_family": "itemknn", "click_collaborative": "collab+recent"},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arms", default="random,pop,fm,deepfm,nfm", help="built-in arms beside als")
    ap.add_argument("--variants", default="none,puresvd,itemknn")
    ap.add_argument("--max-epochs", type=int, default=20)
    ap.add_argument("--agents", type=int, default=0, help="agents simulated per arm, a seeded sample; 0 = all")
    ap.add_argument("--calibration-agents", type=int, default=300, help="as the embedded_brain asset's default")
    ap.add_argument(
        "--itemknn-arm",
        action="store_true",
        help="add an item-kNN recommender's lists as an arm (a family other than the factor models)",
    )
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    offline_defaults()
    import torch

    torch.set_num_threads(args.threads)
    clock = time.perf_counter()
    users, movies, ratings, split, frame, agents = bench_agents.prepare(
        "ml1m", MiniLMTextEmbedder(), OUT / "agents-cache-ml1m"
    )
    catalogue = Catalogue.from_frame(frame)
    agent_ids = np.array(sorted(agents.profiles))
    if args.agents and args.agents < agent_ids.size:
        agent_ids = np.sort(np.random.default_rng(args.seed).choice(agent_ids, args.agents, replace=False))
    sessions = agents.sessions(agent_ids)
    items = frame.get_column("movie_id").to_numpy()
    exclude = split.train.select("user_id", "movie_id")
    print(
        f"data and agents: {len(agents.profiles)} agents ({agent_ids.size} simulated), {time.perf_counter() - clock:.0f} s"
    )

    lists = {}
    for name in [a.strip() for a in args.arms.split(",") if a.strip()]:
        lists[name] = top_k(_arm(name, args, split, users, frame), agent_ids, items, exclude)
    if args.itemknn_arm:
        lists["itemknn"] = itemknn_lists(split.train, agent_ids, items)
    als, which = als_lists(split.train, agent_ids, items, per_user=20, seed=args.seed)
    lists["als"] = als.select(
        pl.lit("als").alias("arm"), "user_id", "rank", pl.col("item_id").alias("movie_id"), "score"
    ).cast(TOP_K)
    print(f"arms ready ({which} for als), {time.perf_counter() - clock:.0f} s")
    candidates = sorted(lists)

    results = []
    for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
        started = time.perf_counter()
        config = EmbeddedBrainConfig(**VARIANTS[variant])
        model = fit_embedded_brain(agents, split.train, split.valid, users, config)
        model = calibrate_list_response(
            model,
            agents.sessions(),
            split.train,
            split.valid,
            catalogue,
            CalibrationConfig(n_agents=args.calibration_agents, seed=args.seed, progress=False),
        )
        fitted = time.perf_counter()
        mirror = internal_frame(
            rank_by_score("mirror", brain_scores(model, agents), agent_ids, items, arm_frame(exclude), 20, 512.0)
        )
        scored = time.perf_counter()
        all_lists = {**lists, "mirror": mirror}
        top = pl.concat(list(all_lists.values()))
        events = pl.concat(
            [
                simulate_arm(
                    arm, top, sessions, catalogue, model.brain(), SimulationConfig(progress=False), seed=args.seed
                )
                for arm in all_lists
            ]
        )
        per_agent = per_agent_metrics(events)
        offline = offline_per_user(all_lists, split.test)
        cand_agent = per_agent.filter(pl.col("arm").is_in(candidates))
        cand_offline = offline.filter(pl.col("arm").is_in(candidates))
        pairs = pairwise_agreement(cand_agent, cand_offline, paired=True, n_bootstrap=args.n_bootstrap, seed=args.seed)
        summary = agreement_summary(pairs)
        ctr = dict(cand_agent.group_by("arm").agg(pl.col("ctr").mean()).iter_rows())
        ndcg = dict(cand_offline.group_by("arm").agg(pl.col("ndcg_at_k").mean()).iter_rows())
        tau = float(kendalltau([ctr[a] for a in candidates], [ndcg[a] for a in candidates]).statistic)
        bias = simulator_bias(per_agent, offline, all_lists, ["mirror"], n_bootstrap=args.n_bootstrap, seed=args.seed)
        p = model.params
        row = {
            "variant": variant,
            "click_variant": p.click_variant,
            "click_auc_holdout": p.click_auc_holdout,
            "click_scale": p.click_scale,
            "ctr": ctr | {"mirror": bias.arms.filter(pl.col("arm") == "mirror").get_column("ctr").item()},
            "ndcg": ndcg | {"mirror": bias.arms.filter(pl.col("arm") == "mirror").get_column("ndcg_at_k").item()},
            "als_minus_pop_ctr": _gap(per_agent, "ctr", args),
            "als_minus_pop_ndcg": _gap(offline, "ndcg_at_k", args),
            "mirror_excess": [bias.excess, bias.excess_ci_low, bias.excess_ci_high],
            "rho_residual_overlap": [bias.rho, bias.p_value],
            "overlap": dict(bias.arms.select("arm", "overlap_with_mirror").iter_rows()),
            "residual": dict(bias.arms.select("arm", "residual").iter_rows()),
            "tau": tau,
            "pairs": {k: v for k, v in summary.items()},
            "seconds": {
                "fit_and_calibration": fitted - started,
                "mirror": scored - fitted,
                "simulation": time.perf_counter() - scored,
            },
        }
        results.append(row)
        print(f"\n== variant {variant} ==")
        print(json.dumps(row, indent=1, default=float))
        print(bias.to_markdown())
        print(pairs.select("arm_a", "arm_b", "offline_difference", "simulated_difference", "verdict"))
    print("\n" + table(results))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "click_family.json").write_text(
        json.dumps({"args": vars(args), "results": results}, indent=1, default=float)
    )
    print(f"total {time.perf_counter() - clock:.0f} s")
    return 0


def itemknn_lists(train: pl.DataFrame, users: np.ndarray, item_ids: np.ndarray, neighbours: int = 50) -> pl.DataFrame:
    """An item-kNN recommender's top-20 (TOP_K, arm "itemknn"): cosine similarity of the
    movies' binary columns of positives (ratings >= 4) in the train window, each movie's
    `neighbours` most similar kept; a user's score of a movie = the sum of its similarities to
    the user's positives; train items left out.  A recommender of another family than the
    factor models (no factorisation)."""
    from scipy import sparse

    positives = train.filter(pl.col("rating") >= 4).select("user_id", "movie_id").unique()
    items = np.unique(np.asarray(item_ids, dtype=np.int64))
    known_users = np.unique(positives.get_column("user_id").to_numpy())
    u = np.searchsorted(known_users, positives.get_column("user_id").to_numpy())
    i = np.searchsorted(items, positives.get_column("movie_id").to_numpy())
    matrix = sparse.csr_matrix((np.ones(u.size), (u, i)), shape=(known_users.size, items.size))
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=0)).ravel())
    sim = (matrix.T @ matrix).toarray() / np.maximum(np.outer(norms, norms), 1e-12)
    np.fill_diagonal(sim, 0.0)
    cut = -np.partition(-sim, neighbours - 1, axis=1)[:, neighbours - 1 : neighbours]
    sim[sim < cut] = 0.0
    scores = matrix @ sim  # users x items
    popular = np.asarray(matrix.sum(axis=0)).ravel().astype(float)
    seen = {int(k[0]): g.get_column("movie_id").to_numpy() for k, g in train.group_by("user_id")}
    frames = []
    for user in np.asarray(users, dtype=np.int64):
        at = np.searchsorted(known_users, user)
        known = at < known_users.size and known_users[at] == user
        row = np.asarray(scores[at]).ravel().copy() if known else popular.copy()
        row[np.searchsorted(items, seen.get(int(user), np.zeros(0, np.int64)))] = -np.inf
        best = np.lexsort((items, -row))[:20]
        frames.append(
            pl.DataFrame(
                {
                    "arm": "itemknn",
                    "user_id": user,
                    "rank": np.arange(1, 21),
                    "movie_id": items[best],
                    "score": row[best],
                }
            )
        )
    return pl.concat(frames).cast(TOP_K)


def _gap(frame: pl.DataFrame, metric: str, args) -> list[float | None]:
    """ALS − Pop on `metric`, paired over the units both have, with its 95 % interval."""
    wide = (
        frame.filter(pl.col("arm").is_in(["als", "pop"])).pivot(on="arm", index="user_id", values=metric).drop_nulls()
    )
    differences = (wide.get_column("als") - wide.get_column("pop")).to_numpy()
    return list(difference_interval(differences, None, args.n_bootstrap, named_rng(args.seed, 7201)))


def table(results: list[dict]) -> str:
    head = (
        "| variant | click model kept | held-out click AUC | ALS − Pop CTR | ALS − Pop NDCG@20 | mirror CTR | "
        "mirror excess CTR | ρ(residual, overlap), p | τ(CTR, NDCG@20) | pairs agree / disagree / sim. tie / offline tie |\n"
        "| --- | --- | ---: | --- | --- | ---: | --- | --- | ---: | --- |"
    )
    lines = [head]
    for r in results:
        c, n, e, (rho, p) = (
            r["als_minus_pop_ctr"],
            r["als_minus_pop_ndcg"],
            r["mirror_excess"],
            r["rho_residual_overlap"],
        )
        s = r["pairs"]
        excess = f"{e[0]:+.3f} [{e[1]:+.3f}, {e[2]:+.3f}]" if e[0] is not None else "n/a"
        correlation = f"{rho:+.2f}, {p:.3f}" if rho is not None else "n/a"
        lines.append(
            f"| {r['variant']} | {r['click_variant']} | {r['click_auc_holdout']:.3f} | {c[0]:+.3f} [{c[1]:+.3f}, {c[2]:+.3f}] | "
            f"{n[0]:+.3f} [{n[1]:+.3f}, {n[2]:+.3f}] | {r['ctr']['mirror']:.3f} | {excess} | {correlation} | {r['tau']:.2f} | "
            f"{s['agree']} / {s['disagree']} / {s['missed']} / {s['offline tie']} |"
        )
    return "\n".join(lines)


def _arm(name: str, args, split, users, frame):
    path = OUT / f"alignment-arms-ml1m-{name}-e{args.max_epochs}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    started = time.perf_counter()
    trained = train_arm(arm_config(name, max_epochs=args.max_epochs), split.train, split.valid, users, frame)
    print(f"arm {name}: trained in {time.perf_counter() - started:.0f} s (best epoch {trained.best_epoch})")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(trained))
    return trained


if __name__ == "__main__":
    raise SystemExit(main())

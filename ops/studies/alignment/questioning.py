"""How a protocol puts its questions to the brain: each agent arriving afresh (`fresh_session`),
as many questions at once as the brain takes (`brain_workers`, `map_in_order`), and a result
refused when most of its answers were fallbacks rather than decisions (`check_fallbacks`,
`ProtocolFailed`)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from tqdm.auto import tqdm

from ops.agents.session import AgentSession
from ops.simulation.fatigue import FatigueConfig, fatigue_budget


def fresh_session(template: AgentSession, fatigue: FatigueConfig | None = None) -> AgentSession:
    """The agent arriving on the site: no fatigue spent, its tier's budget, empty short-term memory."""
    fatigue = fatigue or FatigueConfig()
    tier = getattr(template.profile, "activity_tier", None) or "medium"
    return AgentSession(
        template.user_id, template.profile, template.memory, 0.0, fatigue_budget(str(tier), fatigue), []
    )


def brain_workers(brain) -> int:
    """Questions a protocol may put to `brain` at once: its `concurrency` (the LLM brain: the
    requests its endpoint takes in parallel), else 1 — the embedded brain answers in this
    process, from state that is not shared across threads."""
    return max(1, int(getattr(brain, "concurrency", 1) or 1))


def map_in_order(fn, items: Sequence, workers: int = 1, desc: str = "", progress: bool = False) -> list:
    """`[fn(x) for x in items]`, on a pool of `workers` threads when more than one (every
    question has its own random stream, so the answers do not depend on the order they
    finish in); with `progress`, a tqdm bar named `desc` counts the results as they come."""

    def wrap(results):
        return tqdm(results, total=len(items), desc=desc, disable=not progress, mininterval=2.0)

    if workers <= 1 or len(items) <= 1:
        return list(wrap(fn(x) for x in items))
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="simab-protocol") as pool:
        return list(wrap(pool.map(fn, items)))


# A protocol whose questions the brain mostly could not answer (an LLM's invalid answers,
# a failing endpoint) would read out as an agent that picks or rates nothing — F1 0, no
# ratings — rather than as what it is.  Past this share it fails instead.
MAX_FALLBACK_SHARE = 0.5


class ProtocolFailed(RuntimeError):
    """Most of a protocol's questions ended in a fallback: the share and examples."""


def check_fallbacks(protocol: str, reasons: Sequence[str | None], max_share: float = MAX_FALLBACK_SHARE) -> None:
    """Raise ProtocolFailed when more than `max_share` of `reasons` (one per question asked:
    the decision's fallback reason, None when it was answered) are fallbacks."""
    failed = [r for r in reasons if r]
    if not reasons or len(failed) <= max_share * len(reasons):
        return
    examples = "; ".join(list(dict.fromkeys(r[:200] for r in failed))[:3])
    raise ProtocolFailed(
        f"{protocol}: {len(failed)} of {len(reasons)} questions ({len(failed) / len(reasons):.0%}) got no usable "
        f"answer from the brain (more than {max_share:.0%}); its result would describe the fallbacks, not the "
        f"agents. E.g. {examples}"
    )

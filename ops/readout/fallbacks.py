"""How often the brain fell back (the LLM brain recorded a safe action instead of a
decision: `fallback` and `fallback_reason` in the events), counted per arm: events, agents
with at least one, and failed agents (the endpoint kept failing or a deadline passed for
them).  They stay in the metrics: an arm with more than `max_failed_agents_share` failed
agents never reaches the read-out (the simulation fails), and below it the reader sees how
many there were, beside each arm in the read-out's table."""

from __future__ import annotations

import polars as pl

from ops.simulation.observation import AGENT_FAILURES

FALLBACKS = {
    "arm": pl.Utf8,
    "agents": pl.Int64,
    "fallback_events": pl.Int64,
    "fallback_agents": pl.Int64,
    "failed_agents": pl.Int64,
}


def fallback_counts(events: pl.DataFrame) -> dict[str, int]:
    """How often the brain fell back in these events: {"agents", "fallback_events",
    "fallback_agents" (agents with at least one), "failed_agents" (agents whose answers stayed
    invalid, whose endpoint kept failing or whose deadline passed: `observation.AGENT_FAILURES`)}.  Events written before
    the `fallback` column existed count as none."""
    agents = events.get_column("user_id").n_unique() if "user_id" in events.columns else 0
    if "fallback" not in events.columns or events.is_empty():
        return {"agents": agents, "fallback_events": 0, "fallback_agents": 0, "failed_agents": 0}
    fell = events.filter(pl.col("fallback").fill_null(False))
    kind = pl.col("fallback_reason").str.split(":").list.first().str.strip_chars()
    failed = fell.filter(kind.is_in(list(AGENT_FAILURES)))
    return {
        "agents": agents,
        "fallback_events": fell.height,
        "fallback_agents": fell.get_column("user_id").n_unique(),
        "failed_agents": failed.get_column("user_id").n_unique(),
    }

"""Which agents an arm's simulation runs, with what visits, and what it would cost: what the
`simulation_events` asset (and the papers' experiment partitions, the cost estimate) read from
its configuration, as plain functions of it (the asset's `AgentSampleConfig` or any object
with the same fields: `AgentSample`).

One concept, the agent sample of one arm's simulation.
"""

from __future__ import annotations

from typing import Protocol

import polars as pl

from ops.simulation.assignment import agents_of_arm
from ops.simulation.brains.llm.persona import apply_personas
from ops.simulation.cost import CostEstimateConfig
from ops.simulation.kinds.base import BrainKind, BrainSources
from ops.simulation.request import SimulationConfig, activity_tier_of
from ops.simulation.visits import mean_sessions, visits_config


class AgentSample(Protocol):
    """The fields of an agent sample's configuration (`assets.simulation.AgentSampleConfig`)."""

    n_agents: int
    design: str
    arms: list[str]
    seed: int
    sessions_per_agent: int
    activity_drives: str
    visits_per_tier: list[int]


def visits_of(config: AgentSample):
    """The visits per activity tier the configuration asks (`ops.simulation.visits`)."""
    return visits_config(config.activity_drives, config.visits_per_tier)


def agents_of(arm: str, config: AgentSample, top20_lists: pl.DataFrame, agents) -> list[int]:
    """The agents the arm simulates: sampled from the agents' population (every user who can
    be an agent, `Agents.population`: the sample the agents asset built and the arm ranked),
    those with a list on the arm."""
    listed = set(top20_lists.get_column("user_id").to_list())
    sampled = agents_of_arm(agents.population.tolist(), arm, config.n_agents, config.design, config.arms, config.seed)
    return [u for u in sampled if u in listed]


def simulation_cost(
    arm: str,
    config: AgentSample,
    top20_lists,
    agents,
    kind: BrainKind,
    sources: BrainSources,
    sample_agents: int | None = None,
):
    """What simulating `arm` with these settings would cost with the brain of `kind`
    (`kind.simulation_estimate`: for the LLM brain a dry run writing its prompts while the
    embedded brain decides), over every session; None: the brain is free."""
    chosen = agents_of(arm, config, top20_lists, agents)
    sim_config = SimulationConfig(visits=visits_of(config))
    estimate_config = CostEstimateConfig(
        seed=config.seed, **({"sample_agents": sample_agents} if sample_agents else {})
    )
    sessions = agents.sessions(chosen)
    estimate = kind.simulation_estimate(
        sources.replace(fatigue=sim_config.fatigue), arm, top20_lists, sessions, sim_config, chosen, estimate_config
    )
    if estimate is None:
        return None
    tiers = [activity_tier_of(a, None) for a in sessions]
    return estimate.over_sessions(mean_sessions(tiers, config.sessions_per_agent, sim_config.visits))


class MatchedPersonas:
    """The `agents` population as a simulation reads it, with SimUSER's matched personas in
    the session templates (`ops.simulation.brains.llm.persona.apply_personas`)."""

    def __init__(self, agents, personas: pl.DataFrame) -> None:
        self._agents, self._personas = agents, personas
        self.profiles, self.population = agents.profiles, agents.population

    def sessions(self, user_ids=None):
        return apply_personas(self._agents.sessions(user_ids), self._personas)

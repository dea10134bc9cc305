"""One partition of the lifecycle's simulation — `simulation_events` (an arm),
`simulation_shard` (an arm's user shard), the experiments' `experiment_simulation_events`
(an arm under a condition) — and its bill (`llm_cost_estimate`), as plain functions of the
asset's configuration (`assets.simulation.SimulationAssetConfig`, or any object with its
fields).

`simulate_partition` goes from what a partition is asked (`PartitionRequest`) to what its
asset records (`PartitionResult`) in one straight line: the agents chosen (`agents_of`, then
the shard's), the brain's kind, the visits (`visits_of`), the brain opened under the cost
guard (`simulation_cost`) and the partition's lock, every session simulated
(`ops.simulation.runner.simulate`).  What only the step can give — its log, its run id, the
LLM resource's sources and brain opener, the MLflow experiment the LLM brain traces into —
comes in as plain values and callables, so this module knows no Dagster.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from ops.simulation.assignment import agents_of_arm, agents_of_shard, combine_shards
from ops.simulation.brains.llm.persona import apply_personas
from ops.simulation.catalogue import Catalogue
from ops.simulation.cost import CostEstimateConfig
from ops.simulation.kinds import BrainKind, BrainSources, brain_kind
from ops.simulation.request import SimulationConfig, activity_tier_of
from ops.simulation.runner import simulate
from ops.simulation.visits import mean_sessions, visits_config
from ops.storage.checkpoint import partition_lock


class AgentSample(Protocol):
    """The fields of an agent sample's configuration (`assets.simulation.AgentSampleConfig`)."""

    n_agents: int
    design: str
    arms: list[str]
    seed: int
    sessions_per_agent: int
    activity_drives: str
    visits_per_tier: list[int]


class PartitionConfig(AgentSample, Protocol):
    """The simulation fields of the asset's configuration (`assets.simulation.SimulationAssetConfig`)."""

    brain: str
    vision: bool
    max_failed_agents_share: float

    def model_dump(self) -> dict: ...


@dataclass(frozen=True)
class PartitionRequest:
    """One partition's simulation: `agents` (the agents asset's population, or it with the
    matched personas) browse `lists` (the arm's top-20 table) on `arm` in `catalogue` as
    `config` says — the sample, the design, the sessions and visits, the brain; with `shard`
    (k, of N) only the sample's agents of user shard k.  `sources(catalogue=, fatigue=,
    trace_experiment_id=)` gives the brain's sources, `open_brain(kind, sources, estimate=)`
    the brain (a context manager that checks `estimate()`, the bill, before any paid call),
    `trace_experiment()` the MLflow experiment an LLM brain traces into; `checkpoint_dir`
    (None: none) is the arm's folder, a shard's its `shard-<k>-of-<N>` below it, locked as
    `partition` by `run_id`, which stamps the rows; `log` says which paid brain is asked."""

    arm: str
    config: PartitionConfig
    lists: pl.DataFrame
    agents: Any
    catalogue: Catalogue
    sources: Callable[..., BrainSources]
    open_brain: Callable[..., AbstractContextManager]
    trace_experiment: Callable[[], str]
    partition: str
    run_id: str = ""
    checkpoint_dir: Path | None = None
    shard: tuple[int, int] | None = None
    log: Callable[[str], None] = logging.getLogger(__name__).info


@dataclass(frozen=True)
class PartitionResult:
    """What the asset records of a partition: its `events`, the `agents` simulated, the
    MLflow `params`, `where` (the shard and shard count, or the shard count of combined
    shards), what the brain says of itself (`described`), its name, its spend (`usage`,
    None: it pays nothing) and its sampled sessions' traces."""

    arm: str
    events: pl.DataFrame
    agents: int
    params: dict
    where: dict = field(default_factory=dict)
    described: Mapping = field(default_factory=dict)
    brain: str | None = None
    usage: Any = None
    trace_ids: tuple = ()


def simulate_partition(request: PartitionRequest) -> PartitionResult:
    """Every session of the partition's agents on its arm, with the brain its config names."""
    arm, config = request.arm, request.config
    chosen = agents_of(arm, config, request.lists, request.agents)
    if request.shard is not None:
        chosen = agents_of_shard(chosen, *request.shard)
    kind = brain_kind(config.brain, vision=config.vision)
    sim_config = SimulationConfig(max_failed_agents_share=config.max_failed_agents_share, visits=visits_of(config))
    # The agent is told the fatigue costs it is really charged; an LLM brain traces into the run's experiment.
    traces_to = None if kind.decides_offline else request.trace_experiment()
    sources = request.sources(catalogue=request.catalogue, fatigue=sim_config.fatigue, trace_experiment_id=traces_to)
    described = kind.describe(sources)
    if not kind.decides_offline:
        request.log(f"{kind.name} brain: " + ", ".join(f"{k}={v}" for k, v in described.items() if k != "brain"))
    # One run of a partition at a time, across all its sessions: a second materialisation
    # (a nightly run and a manual re-execute) waits, then finds the agents done, or fails
    # naming the run that holds it ($SIMAB_PARTITION_LOCK_TIMEOUT_S).
    folder = request.checkpoint_dir
    if folder is not None and request.shard is not None:
        folder = folder / f"shard-{request.shard[0]}-of-{request.shard[1]}"
    lock = partition_lock(folder, request.partition, holder=request.run_id) if folder is not None else nullcontext()
    # The guard, whatever ran before: this very configuration's bill, checked before a call is made.
    estimate = functools.partial(simulation_cost, arm, config, request.lists, request.agents, kind, sources)
    with lock, request.open_brain(kind, sources, estimate=estimate) as brain:
        events = simulate(
            brain,
            request.agents.sessions(chosen),
            request.lists,
            request.catalogue,
            sim_config,
            arms=[arm],
            users=chosen,
            sessions_per_agent=config.sessions_per_agent,
            seed=config.seed,
            run_id=request.run_id,
            concurrency=kind.concurrency(sources),
            checkpoint_dir=folder,
        )
    where = {} if request.shard is None else {"shard": request.shard[0], "shards": request.shard[1]}
    params = {**config.model_dump(), **described, "brain_name": brain.name, "agents": len(chosen), **where}
    usage, traces = getattr(brain, "usage", None), tuple(getattr(brain, "trace_ids", None) or ())
    return PartitionResult(arm, events, len(chosen), params, where, described, brain.name, usage, traces)


def combined(arm: str, by_shard: Mapping[int, pl.DataFrame], shards: int) -> PartitionResult:
    """The arm's partition from its user shards' events (`assignment.combine_shards`), as
    one unsharded run writes them."""
    events = combine_shards(by_shard, shards)
    agents = events.get_column("user_id").n_unique()
    return PartitionResult(arm, events, agents, {"agents": agents, "shards": shards}, {"shards": shards})


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

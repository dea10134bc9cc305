"""Lifecycle step 8: the agents browse the sandbox, one partition per arm (A/B Agent §2.3–2.4).

By default every arm is shown to the same sampled agents (a paired design); `design: random`
assigns each agent to one arm at random instead.  Every step is an event row; the partition
is written whole by the IO manager (temporary file, then rename), so a re-run replaces it
and a killed run leaves the previous complete set in place.

Resuming: each finished agent is appended to a checkpoint under
`$SIMAB_HOME/checkpoints/simulation_events/<partition>/` as its session ends, keyed by every
input of the partition (`ops.simulation.checkpointing.checkpoint_key`).  A killed run materialised
again keeps the finished agents and simulates only the others (with the LLM brain, their
calls already answered come from the response cache).  A checkpoint is superseded — deleted —
when the partition runs with other inputs, and kept once complete, so a re-run with the same
inputs simulates nothing.  `checkpoint: false` turns it off.

User shards ($SIMAB_SHARDS = N > 1, `sharded_simulation_assets`): `simulation_shard`, one
partition per arm × shard, simulates the arm's sampled agents whose user id hashes to the
shard, checkpointed under `<arm>/shard-<k>-of-<N>/`; `simulation_events` then combines the
arm's shards, in the unsharded row order, so the read-out and everything after it see one
frame per arm, equal to one unsharded run's for the same seed.  With the LLM brain and a
cost limit, every shard checks the whole arm's bill against it (the limit is per arm).
"""

import functools
import os
import tempfile
from contextlib import nullcontext
from typing import Literal

import polars as pl
from dagster import (
    AssetDep,
    AssetExecutionContext,
    AssetIn,
    Config,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    MultiToSingleDimensionPartitionMapping,
    Output,
    ResourceParam,
    asset,
)
from pydantic import Field

from assets.partitions import (
    ARM_DIMENSION,
    ARM_POOL,
    DEFAULT_ARMS,
    SHARD_DIMENSION,
    arm_partitions,
    arm_shard_partitions,
)
from ops.figures import table_markdown
from ops.links import viewer_url
from ops.readout.fallbacks import fallback_counts
from ops.settings import ActivityDrives, Persona, config_default
from ops.simulation.agent_sample import MatchedPersonas, agents_of, simulation_cost, visits_of
from ops.simulation.assignment import agents_of_shard, combine_shards
from ops.simulation.catalogue import Catalogue
from ops.simulation.cost import CostLimitExceeded, check_cost_limit
from ops.simulation.kinds import DEFAULT_BRAIN, brain_kind
from ops.simulation.kinds.llm import LLM
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate
from ops.storage.checkpoint import partition_lock
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import SimabIOManager, data_root

GROUP = "simulation"


class AgentSampleConfig(Config):
    """Which agents browse the arm, and what they perceive: shared by the simulation and its cost estimate."""

    n_agents: int = Field(
        default=config_default("agents"),
        ge=0,
        description="agents sampled from users with a top-20 list; 0 = all ($SIMAB_AGENTS)",
    )
    design: Literal["paired", "random"] = Field(
        default="paired", description="paired: same agents in every arm; random: one arm per agent"
    )
    arms: list[str] = Field(
        default=list(DEFAULT_ARMS),
        description="the arms of the experiment: design=random deals the agents among them ($SIMAB_ARMS)",
    )
    seed: int = Field(default=0, description="seed of agent sampling and of every agent's decisions")
    sessions_per_agent: int = Field(
        default=config_default("sessions"),
        ge=1,
        description="independent sessions of every agent on the arm (the same in every arm, paired); the read-out averages them per agent; more sessions average away session noise, not how agents differ ($SIMAB_SESSIONS)",
    )
    activity_drives: ActivityDrives = Field(
        default=config_default("activity_drives"),
        description="what the activity tier changes: session_length (A/B Agent Table 8: the session's fatigue budget) or visits (every session the medium budget, the agent comes back visits_per_tier times, as real ML-1M users do) ($SIMAB_ACTIVITY_DRIVES)",
    )
    visits_per_tier: list[int] = Field(
        default=config_default("visits"),
        description="activity_drives=visits: sessions per agent and arm for the low, medium and high activity tiers, times sessions_per_agent ($SIMAB_VISITS)",
    )
    persona: Persona = Field(
        default=config_default("persona"),
        description="LLM brain: traits shows the persona derived from the agent's traits; matched the one SimUSER's consistency check kept (asset llm_personas, job simab_personas; agents it could not score keep theirs) ($SIMAB_PERSONA)",
    )
    vision: bool = Field(
        default=True,
        description="False: the A/B Agent Table 5 'w/o vision' ablation — the embedded brain ignores posters, the LLM brain gets palette captions instead of images; events name the brain ':no-vision'",
    )


class SimulationAssetConfig(AgentSampleConfig):
    brain: str = Field(
        default=DEFAULT_BRAIN,
        description="who decides, a brain of the registry (ops.simulation.kinds): embedded (offline default), llm "
        "(the `llm` resource's endpoint), uniform-random, or a plug-in's ($SIMAB_BRAIN)",
    )
    max_failed_agents_share: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="the arm fails once more than this share of agents failed (the LLM endpoint kept failing or a decision's deadline passed for them)",
    )
    checkpoint: bool = Field(
        default=True,
        description="keep finished agents in a checkpoint under $SIMAB_HOME/checkpoints so a killed run resumes",
    )


class CostEstimateAssetConfig(AgentSampleConfig):
    sample_agents: int = Field(
        default=50, ge=1, description="agents whose sessions are dry-run; the others are extrapolated from them"
    )


@asset(group_name="cost", partitions_def=arm_partitions, code_version="1", kinds={"python"})
def llm_cost_estimate(
    context: AssetExecutionContext,
    config: CostEstimateAssetConfig,
    top20_lists: pl.DataFrame,
    agents,
    embedded_brain,
    mm_ml_1m: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
    io_manager: ResourceParam[SimabIOManager],
) -> Output[pl.DataFrame]:
    """What simulating this arm with the LLM brain will cost: calls, tokens and dollars
    (expected, 95 % interval, ceiling), from a dry run that sends nothing.  Fails when the
    estimate is above the `llm` resource's max_cost_usd."""
    agents = _with_personas(agents, config, io_manager)
    kind = brain_kind(LLM(), vision=config.vision)
    sources = llm.sources(catalogue=Catalogue.from_frame(mm_ml_1m), embedded=embedded_brain)
    estimate = simulation_cost(context.partition_key, config, top20_lists, agents, kind, sources, config.sample_agents)
    context.log.info(f"LLM bill before the run: {estimate.describe()}")
    with mlflow_tracking.asset_run(
        context,
        params={**config.model_dump(), **llm.describe(), "max_cost_usd": llm.max_cost_usd or "none"},
        tags={"arm": context.partition_key},
    ):
        mlflow_tracking.log_metrics({k: v for k, v in estimate.as_dict().items() if isinstance(v, (int, float))})
    try:
        check_cost_limit(estimate, llm.max_cost_usd)
    except CostLimitExceeded as exc:
        raise Failure(
            description=str(exc), metadata={"estimate": MetadataValue.md(estimate.to_markdown())}, allow_retries=False
        ) from None
    return Output(
        pl.DataFrame([estimate.as_dict()]),
        metadata={
            "arm": estimate.arm,
            "model": estimate.model,
            "agents": estimate.agents,
            "calls": estimate.calls,
            "tokens": estimate.prompt_tokens + estimate.completion_tokens,
            "cost (USD)": round(estimate.cost_usd, 4),
            "ceiling (USD)": round(estimate.ceiling_cost_usd, 4),
            "max_cost_usd": llm.max_cost_usd or "no limit",
            "estimate": MetadataValue.md(estimate.to_markdown()),
        },
    )


@asset(
    group_name=GROUP,
    partitions_def=arm_partitions,
    code_version="2",
    kinds={"python"},
    deps=["llm_cost_estimate"],
    pool=ARM_POOL,
)
def simulation_events(
    context: AssetExecutionContext,
    config: SimulationAssetConfig,
    top20_lists: pl.DataFrame,
    agents,
    embedded_brain,
    mm_ml_1m: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
    io_manager: ResourceParam[SimabIOManager],
) -> MaterializeResult:
    """Every step of every agent's session on this arm's top-20 lists, with the exit interview."""
    arm = context.partition_key
    agents = _with_personas(agents, config, io_manager)
    chosen = agents_of(arm, config, top20_lists, agents)
    checkpoint_dir = data_root() / "checkpoints" / "simulation_events" / arm if config.checkpoint else None
    return simulate_partition(
        context,
        arm,
        chosen,
        config,
        top20_lists,
        agents,
        embedded_brain,
        mm_ml_1m,
        llm,
        mlflow_tracking,
        checkpoint_dir,
    )


def sharded_simulation_assets(shards: int) -> list:
    """The simulation as arm × user shard partitions (`$SIMAB_SHARDS` > 1): `simulation_shard`
    simulates one shard's agents, and `simulation_events` (still one partition per arm, so
    everything downstream reads what it always read) combines the arm's shards into the
    events one unsharded run gives for the same seed, rows in the same order."""
    per_arm = MultiToSingleDimensionPartitionMapping(partition_dimension_name=ARM_DIMENSION)

    @asset(
        name="simulation_shard",
        group_name=GROUP,
        partitions_def=arm_shard_partitions(shards),
        code_version="1",
        kinds={"python"},
        pool=ARM_POOL,
        ins={"top20_lists": AssetIn(partition_mapping=per_arm)},
        deps=[AssetDep("llm_cost_estimate", partition_mapping=per_arm)],
    )
    def simulation_shard(
        context: AssetExecutionContext,
        config: SimulationAssetConfig,
        top20_lists: pl.DataFrame,
        agents,
        embedded_brain,
        mm_ml_1m: pl.DataFrame,
        llm: LLMResource,
        mlflow_tracking: MlflowTracking,
        io_manager: ResourceParam[SimabIOManager],
    ) -> MaterializeResult:
        """One user shard of an arm: the arm's sampled agents whose user id hashes to this
        shard (`ops.simulation.assignment.user_shard`), each with the generator it has unsharded;
        a re-runnable partition with a checkpoint folder of its own."""
        keys = context.partition_key.keys_by_dimension
        arm, shard = keys[ARM_DIMENSION], int(keys[SHARD_DIMENSION])
        agents = _with_personas(agents, config, io_manager)
        chosen = agents_of_shard(agents_of(arm, config, top20_lists, agents), shard, shards)
        checkpoint_dir = (
            data_root() / "checkpoints" / "simulation_events" / arm / f"shard-{shard}-of-{shards}"
            if config.checkpoint
            else None
        )
        return simulate_partition(
            context,
            arm,
            chosen,
            config,
            top20_lists,
            agents,
            embedded_brain,
            mm_ml_1m,
            llm,
            mlflow_tracking,
            checkpoint_dir,
            shard=(shard, shards),
        )

    @asset(
        name="simulation_events",
        group_name=GROUP,
        partitions_def=arm_partitions,
        code_version="2",
        kinds={"polars"},
        ins={"simulation_shard": AssetIn(partition_mapping=per_arm)},
    )
    def combined_simulation_events(
        context: AssetExecutionContext, simulation_shard: dict, mlflow_tracking: MlflowTracking
    ) -> MaterializeResult:
        """The arm's events from all its user shards, as one unsharded run writes them."""
        arm = context.partition_key
        by_shard = {int(key.split("|")[1]): frame for key, frame in simulation_shard.items()}  # keys `arm|shard`
        missing = [k for k in range(shards) if k not in by_shard]
        if missing:
            raise Failure(
                description=f"simulation_events[{arm}]: shard(s) {missing} of {shards} not simulated yet; materialise "
                f"simulation_shard {', '.join(f'{arm}|{k}' for k in missing)} (job simab_simulate) first",
                allow_retries=False,
            )
        events = combine_shards(by_shard, shards)
        return _events_result(context, arm, events, {"shards": shards}, mlflow_tracking)

    return [simulation_shard, combined_simulation_events]


def simulate_partition(
    context,
    arm: str,
    chosen: list[int],
    config: SimulationAssetConfig,
    top20_lists,
    agents,
    embedded_brain,
    mm_ml_1m,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
    checkpoint_dir,
    shard: tuple[int, int] | None = None,
    dataset: str | None = None,
    tags: dict | None = None,
) -> MaterializeResult:
    """Simulate `chosen` on `arm` with the brain `config` names (every session), log the run
    to MLflow, and the asset's result: the simulation partitions of the lifecycle and of the
    papers' experiments (`dataset`: the events' MLflow dataset, `tags`: the run's and the
    metadata's, beside the arm)."""
    kind = brain_kind(config.brain, vision=config.vision)
    catalogue = Catalogue.from_frame(mm_ml_1m)
    sim_config = SimulationConfig(max_failed_agents_share=config.max_failed_agents_share, visits=visits_of(config))
    # The agent is told the fatigue costs it is really charged; an LLM brain traces into the run's experiment.
    traces_to = None if kind.decides_offline else mlflow_tracking.experiment_id()
    sources = llm.sources(context, catalogue, embedded_brain, fatigue=sim_config.fatigue, trace_experiment_id=traces_to)
    described = kind.describe(sources)
    if not kind.decides_offline:
        context.log.info(f"{kind.name} brain: " + ", ".join(f"{k}={v}" for k, v in described.items() if k != "brain"))
    # One run of a partition at a time, across all its sessions: a second materialisation
    # (a nightly run and a manual re-execute) waits, then finds the agents done, or fails
    # naming the run that holds it ($SIMAB_PARTITION_LOCK_TIMEOUT_S).
    partition = f"{context.asset_key.to_user_string()}[{context.partition_key}]"
    lock = (
        partition_lock(checkpoint_dir, partition, holder=context.run.run_id)
        if checkpoint_dir is not None
        else nullcontext()
    )
    # The guard, whatever ran before: this very configuration's bill, checked before a call is made.
    estimate = functools.partial(simulation_cost, arm, config, top20_lists, agents, kind, sources)
    with lock, llm.open_brain(context, kind, sources, estimate=estimate) as brain:
        events = simulate(
            brain,
            agents.sessions(chosen),
            top20_lists,
            catalogue,
            sim_config,
            arms=[arm],
            users=chosen,
            sessions_per_agent=config.sessions_per_agent,
            seed=config.seed,
            run_id=context.run.run_id,
            concurrency=kind.concurrency(sources),
            checkpoint_dir=checkpoint_dir,
        )
    extra = {} if shard is None else {"shard": shard[0], "shards": shard[1]}
    params = {**config.model_dump(), **described, "brain_name": brain.name, "agents": len(chosen), **extra}
    return _events_result(
        context,
        arm,
        events,
        extra,
        mlflow_tracking,
        params=params,
        described=described,
        agents=len(chosen),
        dataset=dataset,
        tags=tags,
        brain=brain,
    )


def _events_result(
    context,
    arm: str,
    events: pl.DataFrame,
    extra: dict,
    mlflow_tracking: MlflowTracking,
    params: dict | None = None,
    described: dict | None = None,
    sessions_per_agent: int | None = None,
    agents: int | None = None,
    dataset: str | None = None,
    tags: dict | None = None,
    brain=None,
) -> MaterializeResult:
    """MLflow (params, metrics, the events as dataset and artefact, the `brain`'s spend and
    traces) and the asset's metadata."""
    described, usage = described or {}, getattr(brain, "usage", None)
    agents = events.get_column("user_id").n_unique() if agents is None else agents
    if sessions_per_agent is None:  # the mean: with visits by activity, agents differ
        sessions_per_agent = events.select("user_id", "session").unique().height / max(agents, 1)
    fallbacks = fallback_counts(events)
    name = f"{arm}_shard{extra['shard']}" if "shard" in extra else arm
    viewer = viewer_url("/agents", arm=arm)
    with mlflow_tracking.asset_run(
        context,
        params=params if params is not None else {"agents": agents, **extra},
        tags={"arm": arm, "viewer_url": viewer, **(tags or {})},
    ):
        mlflow_tracking.log_metrics(
            {"events": events.height, "agents": agents, "sessions_per_agent": sessions_per_agent, **fallbacks}
        )
        if usage is not None:  # the LLM brain's real spend (cache hits cost nothing)
            mlflow_tracking.log_metrics({f"llm_{k}": v for k, v in usage.as_dict().items()})
            # What the endpoint was found to take (structured output mode, vision): tags.
            mlflow_tracking.set_tags({f"llm_{k}": v for k, v in usage.facts().items()})
        mlflow_tracking.link_traces(getattr(brain, "trace_ids", None) or [])  # the LLM brain's sampled sessions
        digest = mlflow_tracking.log_frame(events, dataset or f"simulation_events_{name}", role="output")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"events_{name}.parquet")
            events.write_parquet(path)
            mlflow_tracking.log_artifact(path, artifact_path="events")
    actions = events.group_by("action").len().sort("action")
    return MaterializeResult(
        value=events,
        data_version=DataVersion(digest),
        metadata={
            "arm": arm,
            **extra,
            **(tags or {}),
            **({"brain": brain.name} if brain is not None else {}),
            "agents": agents,
            "events": events.height,
            **fallbacks,
            **({"llm endpoint": described["llm_endpoint"]} if "llm_endpoint" in described else {}),
            **({f"llm {k}": v for k, v in usage.facts().items()} if usage is not None else {}),
            "actions": MetadataValue.md(table_markdown(actions)),
            "trajectory viewer": MetadataValue.url(viewer),
        },
    )


def _with_personas(agents, config: AgentSampleConfig, io_manager: SimabIOManager):
    """`agents`, or with `persona: matched` the agents with the personas `llm_personas` kept."""
    if config.persona == "traits":
        return agents
    brain = getattr(config, "brain", None)  # the cost estimate prices the LLM brain, which reads them
    if brain is not None and not brain_kind(brain).reads_personas:
        raise Failure(
            description=f"persona: matched is for a brain that reads SimUSER's matched personas (the LLM brain); "
            f"the {brain} brain decides from the traits",
            allow_retries=False,
        )
    if not io_manager.has_stored("llm_personas"):
        raise Failure(
            description="persona: matched, but llm_personas has not been materialised: run the job simab_personas first",
            allow_retries=False,
        )
    return MatchedPersonas(agents, io_manager.stored("llm_personas"))

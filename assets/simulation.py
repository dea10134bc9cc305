"""Lifecycle step 8: the agents browse the sandbox, one partition per arm (A/B Agent §2.3–2.4).

By default every arm is shown to the same sampled agents (a paired design); `design: random`
assigns each agent to one arm at random instead.  Every step is an event row; the partition
is written whole by the IO manager (temporary file, then rename), so a re-run replaces it
and a killed run leaves the previous complete set in place.  Each simulation asset asks
`ops.simulation.partition.simulate_partition` one request and records its result.

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
from ops.simulation.catalogue import Catalogue
from ops.simulation.cost import CostLimitExceeded, check_cost_limit
from ops.simulation.kinds import DEFAULT_BRAIN, brain_kind
from ops.simulation.kinds.llm import LLM
from ops.simulation.partition import MatchedPersonas, PartitionRequest, combined, simulate_partition, simulation_cost
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
    catalogue: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
    io_manager: ResourceParam[SimabIOManager],
) -> Output[pl.DataFrame]:
    """What simulating this arm with the LLM brain will cost: calls, tokens and dollars
    (expected, 95 % interval, ceiling), from a dry run that sends nothing.  Fails when the
    estimate is above the `llm` resource's max_cost_usd."""
    agents = _with_personas(agents, config, io_manager)
    kind = brain_kind(LLM(), vision=config.vision)
    sources = llm.sources(catalogue=Catalogue.from_frame(catalogue), embedded=embedded_brain)
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
    catalogue: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
    io_manager: ResourceParam[SimabIOManager],
) -> MaterializeResult:
    """Every step of every agent's session on this arm's top-20 lists, with the exit interview."""
    arm = context.partition_key
    folder = data_root() / "checkpoints" / "simulation_events" / arm if config.checkpoint else None
    agents = _with_personas(agents, config, io_manager)
    request = partition_request(
        context, llm, mlflow_tracking, arm, config, top20_lists, agents, embedded_brain, catalogue, folder
    )
    return partition_result(context, simulate_partition(request), mlflow_tracking)


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
        catalogue: pl.DataFrame,
        llm: LLMResource,
        mlflow_tracking: MlflowTracking,
        io_manager: ResourceParam[SimabIOManager],
    ) -> MaterializeResult:
        """One user shard of an arm: the arm's sampled agents whose user id hashes to this
        shard (`ops.simulation.assignment.user_shard`), each with the generator it has unsharded;
        a re-runnable partition with a checkpoint folder of its own."""
        keys = context.partition_key.keys_by_dimension
        arm, shard = keys[ARM_DIMENSION], (int(keys[SHARD_DIMENSION]), shards)
        folder = data_root() / "checkpoints" / "simulation_events" / arm if config.checkpoint else None
        agents = _with_personas(agents, config, io_manager)
        request = partition_request(
            context, llm, mlflow_tracking, arm, config, top20_lists, agents, embedded_brain, catalogue, folder, shard
        )
        return partition_result(context, simulate_partition(request), mlflow_tracking)

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
        return partition_result(context, combined(arm, by_shard, shards), mlflow_tracking)

    return [simulation_shard, combined_simulation_events]


def partition_request(
    context, llm, mlflow_tracking, arm, config, lists, agents, embedded_brain, catalogue, folder, shard=None
) -> PartitionRequest:
    """The `PartitionRequest` of the step `context` (the lifecycle's simulation partitions and
    the papers' experiments): the asset's inputs and config, its resources `llm` and
    `mlflow_tracking` as the callables the request names, its checkpoint `folder`."""
    return PartitionRequest(
        arm,
        config,
        lists,
        agents,
        Catalogue.from_frame(catalogue),
        sources=functools.partial(llm.sources, context, embedded=embedded_brain),
        open_brain=functools.partial(llm.open_brain, context),
        trace_experiment=mlflow_tracking.experiment_id,
        partition=f"{context.asset_key.to_user_string()}[{context.partition_key}]",
        run_id=context.run.run_id,
        checkpoint_dir=folder,
        shard=shard,
        log=context.log.info,
    )


def partition_result(
    context, result, mlflow_tracking: MlflowTracking, dataset: str | None = None, tags: dict | None = None
) -> MaterializeResult:
    """MLflow (params, metrics, the events as dataset and artefact, the brain's spend and
    traces) and the asset's metadata of a simulated partition's `result`
    (`ops.simulation.partition.PartitionResult`; `dataset`: the events' MLflow dataset,
    `tags`: the run's and the metadata's, beside the arm)."""
    arm, events, where, usage = result.arm, result.events, result.where, result.usage
    # The mean: with visits by activity, agents differ.
    sessions_per_agent = events.select("user_id", "session").unique().height / max(result.agents, 1)
    fallbacks = fallback_counts(events)
    name = f"{arm}_shard{where['shard']}" if "shard" in where else arm
    viewer = viewer_url("/agents", arm=arm)
    with mlflow_tracking.asset_run(
        context, params=result.params, tags={"arm": arm, "viewer_url": viewer, **(tags or {})}
    ):
        mlflow_tracking.log_metrics(
            {"events": events.height, "agents": result.agents, "sessions_per_agent": sessions_per_agent, **fallbacks}
        )
        if usage is not None:  # the LLM brain's real spend (cache hits cost nothing)
            mlflow_tracking.log_metrics({f"llm_{k}": v for k, v in usage.as_dict().items()})
            # What the endpoint was found to take (structured output mode, vision): tags.
            mlflow_tracking.set_tags({f"llm_{k}": v for k, v in usage.facts().items()})
        mlflow_tracking.link_traces(list(result.trace_ids))  # the LLM brain's sampled sessions
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
            **where,
            **(tags or {}),
            **({"brain": result.brain} if result.brain is not None else {}),
            "agents": result.agents,
            "events": events.height,
            **fallbacks,
            **({"llm endpoint": result.described["llm_endpoint"]} if "llm_endpoint" in result.described else {}),
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

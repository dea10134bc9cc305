"""Lifecycle step 8: the agents browse the sandbox, one partition per arm (A/B Agent §2.3–2.4).

By default every arm is shown to the same sampled agents (a paired design); `design: random`
assigns each agent to one arm at random instead.  Every step is an event row; the partition
is written whole by the IO manager (temporary file, then rename), so a re-run replaces it
and a killed run leaves the previous complete set in place.

Resuming: each finished agent is appended to a checkpoint under
`$SIMAB_HOME/checkpoints/simulation_events/<partition>/` as its session ends, keyed by every
input of the partition (`ops.simulation.runner.checkpoint_key`).  A killed run materialised
again keeps the finished agents and simulates only the others (with the LLM brain, their
calls already answered come from the response cache).  A checkpoint is superseded — deleted —
when the partition runs with other inputs, and kept once complete, so a re-run with the same
inputs simulates nothing.  `checkpoint: false` turns it off.
"""

import os
import tempfile
from typing import Literal

import polars as pl
from dagster import AssetExecutionContext, Config, DataVersion, MetadataValue, Output, asset
from pydantic import Field

from assets.partitions import DEFAULT_ARMS, arm_partitions
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root

GROUP = "simulation"


class SimulationAssetConfig(Config):
    n_agents: int = Field(default=0, description="agents sampled from users with a top-20 list; 0 = all ($SIMAB_AGENTS)")
    design: Literal["paired", "random"] = Field(default="paired", description="paired: same agents in every arm; random: one arm per agent")
    arms: list[str] = Field(default=list(DEFAULT_ARMS), description="the arms of the experiment: design=random deals the agents among them ($SIMAB_ARMS)")
    seed: int = Field(default=0, description="seed of agent sampling and of every agent's decisions")
    sessions_per_agent: int = Field(
        default=1, ge=1,
        description="independent sessions of every agent on the arm (the same in every arm, paired); the read-out averages them per agent; more sessions average away session noise, not how agents differ ($SIMAB_SESSIONS)",
    )
    brain: Literal["embedded", "llm"] = Field(default="embedded", description="embedded (offline default) | llm (the `llm` resource's endpoint) ($SIMAB_BRAIN)")
    max_failed_agents_share: float = Field(
        default=0.05, ge=0, le=1,
        description="the arm fails once more than this share of agents failed (the LLM endpoint kept failing or a decision's deadline passed for them)",
    )
    checkpoint: bool = Field(default=True, description="keep finished agents in a checkpoint under $SIMAB_HOME/checkpoints so a killed run resumes")
    vision: bool = Field(
        default=True,
        description="False: the A/B Agent Table 5 'w/o vision' ablation — the embedded brain ignores posters, the LLM brain gets palette captions instead of images; events name the brain ':no-vision'",
    )


@asset(group_name=GROUP, partitions_def=arm_partitions, code_version="2", compute_kind="python")
def simulation_events(
    context: AssetExecutionContext,
    config: SimulationAssetConfig,
    top20_lists: pl.DataFrame,
    agents,
    embedded_brain,
    mm_ml_1m: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
) -> Output[pl.DataFrame]:
    """Every step of every agent's session on this arm's top-20 lists, with the exit interview."""
    from ops.simulation.catalogue import Catalogue
    from ops.readout.ab_readout import fallback_counts
    from ops.simulation.runner import SimulationConfig, agents_of_arm, simulate_arm

    arm = context.partition_key
    candidates = sorted(set(top20_lists.get_column("user_id").to_list()) & set(agents.profiles))
    chosen = agents_of_arm(candidates, arm, config.n_agents, config.design, config.arms, config.seed)
    catalogue = Catalogue.from_frame(mm_ml_1m)
    sim_config = SimulationConfig(max_failed_agents_share=config.max_failed_agents_share)
    if config.brain == "llm":
        # The agent is told the fatigue costs it is really charged.
        brain = llm.brain(catalogue, fatigue=sim_config.fatigue, **({} if config.vision else {"vision": False}))
        concurrency, brain_params = llm.concurrency, llm.describe()
        context.log.info(f"LLM brain: {brain_params['llm_endpoint']} (from {brain_params['llm_endpoint_from']}), model {llm.model}, cache {llm.cache}")
    else:
        brain = embedded_brain.brain(None if config.vision else embedded_brain.config.model_copy(update={"use_posters": False}))
        concurrency, brain_params = 1, {}
    checkpoint_dir = data_root() / "checkpoints" / "simulation_events" / arm if config.checkpoint else None
    try:
        events = pl.concat([
            simulate_arm(
                arm, top20_lists, agents.sessions(chosen), catalogue, brain, sim_config,
                seed=config.seed, run_id=context.run.run_id, users=chosen, concurrency=concurrency,
                checkpoint_dir=checkpoint_dir, session=session,
            )
            for session in range(config.sessions_per_agent)
        ])
    finally:
        close = getattr(brain, "close", None)
        if close is not None:
            close()
    fallbacks = fallback_counts(events)
    params = {**config.model_dump(), **brain_params, "brain_name": brain.name, "agents": len(chosen)}
    with mlflow_tracking.asset_run(context, params=params, tags={"arm": arm}):
        mlflow_tracking.log_metrics({"events": events.height, "agents": len(chosen), "sessions_per_agent": config.sessions_per_agent, **fallbacks})
        usage = getattr(brain, "usage", None)
        if usage is not None:  # the LLM brain's real spend (cache hits cost nothing)
            mlflow_tracking.log_metrics({f"llm_{k}": v for k, v in usage.as_dict().items()})
        digest = mlflow_tracking.log_frame(events, f"simulation_events_{arm}", role="output")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"events_{arm}.parquet")
            events.write_parquet(path)
            mlflow_tracking.log_artifact(path, artifact_path="events")
    actions = events.group_by("action").len().sort("action")
    return Output(
        events,
        data_version=DataVersion(digest),
        metadata={
            "arm": arm, "agents": len(chosen), "events": events.height, **fallbacks,
            **({"llm endpoint": brain_params["llm_endpoint"]} if brain_params else {}),
            "actions": MetadataValue.md(actions.to_pandas().to_markdown(index=False)),
        },
    )

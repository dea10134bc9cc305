"""Lifecycle step 8: the agents browse the sandbox, one partition per arm (A/B Agent §2.3–2.4).

By default every arm is shown to the same sampled agents (a paired design); `design: random`
assigns each agent to one arm at random instead.  Every step is an event row; the partition
is written whole (temporary file, then rename), so a re-run replaces it and a killed run
leaves the previous complete set in place.
"""

import os
import tempfile
from typing import Literal

import polars as pl
from dagster import AssetExecutionContext, Config, DataVersion, MetadataValue, Output, asset
from pydantic import Field

from assets.recommenders import arm_partitions, configured_arms
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking

GROUP = "simulation"


class SimulationAssetConfig(Config):
    n_agents: int = Field(default=int(os.environ.get("SIMAB_AGENTS", "0")), description="agents sampled from users with a top-20 list; 0 = all")
    design: Literal["paired", "random"] = Field(default="paired", description="paired: same agents in every arm; random: one arm per agent")
    seed: int = Field(default=0, description="seed of agent sampling and of every agent's decisions")
    brain: Literal["embedded", "llm"] = Field(
        default=os.environ.get("SIMAB_BRAIN", "embedded"), description="embedded (offline default) | llm (the `llm` resource's endpoint)"
    )
    vision: bool = Field(
        default=True,
        description="False: the A/B Agent Table 5 'w/o vision' ablation — the embedded brain ignores posters, the LLM brain gets palette captions instead of images; events name the brain ':no-vision'",
    )


def sampled_agents(user_ids: list[int], n_agents: int, seed: int) -> list[int]:
    """The agents of a run: the same sample in every arm for a given seed."""
    import numpy as np

    ids = sorted(user_ids)
    if n_agents <= 0 or n_agents >= len(ids):
        return ids
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4242]))
    return sorted(int(u) for u in rng.choice(ids, size=n_agents, replace=False))


@asset(group_name=GROUP, partitions_def=arm_partitions, code_version="1", compute_kind="python")
def simulation_events(
    context: AssetExecutionContext,
    config: SimulationAssetConfig,
    top20_lists: pl.DataFrame,
    agents,
    movies: pl.DataFrame,
    movie_metadata: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
) -> Output[pl.DataFrame]:
    """Every step of every agent's session on this arm's top-20 lists, with the exit interview."""
    from ops.simulation.sandbox import Catalogue
    from ops.simulation.runner import SimulationConfig, assign_agents, simulate_arm

    arm = context.partition_key
    candidates = sorted(set(top20_lists.get_column("user_id").to_list()) & set(agents.profiles))
    chosen = sampled_agents(candidates, config.n_agents, config.seed)
    if config.design == "random":
        arms = configured_arms()
        if arm not in arms:
            arms = arms + [arm]
        chosen = assign_agents(chosen, arms, "random", config.seed)[arm]
    catalogue = Catalogue.from_frames(movies, movie_metadata if movie_metadata.height else None)
    sim_config = SimulationConfig()
    sessions = agents.sessions(chosen)
    if config.brain == "llm":
        from ops.simulation.brains.llm import simulate_arm_concurrently

        # The agent is told the fatigue costs it is really charged.
        brain = llm.brain(catalogue, fatigue=sim_config.fatigue, **({} if config.vision else {"vision": False}))
        events = simulate_arm_concurrently(
            arm, top20_lists, sessions, catalogue, brain, sim_config, seed=config.seed, run_id=context.run.run_id, users=chosen
        )
        brain_params = llm.describe()
    else:
        brain = agents.brain(None if config.vision else agents.config.brain.model_copy(update={"use_posters": False}))
        events = simulate_arm(arm, top20_lists, sessions, catalogue, brain, sim_config, seed=config.seed, run_id=context.run.run_id, users=chosen)
        brain_params = {}
    params = {**config.model_dump(), **brain_params, "brain_name": brain.name, "agents": len(chosen)}
    with mlflow_tracking.asset_run(context, params=params, tags={"arm": arm}):
        import mlflow

        mlflow.log_metrics({"events": float(events.height), "agents": float(len(chosen))})
        usage = getattr(brain, "usage", None)
        if usage is not None:  # the LLM brain's real spend (cache hits cost nothing)
            mlflow.log_metrics({f"llm_{k}": float(v) for k, v in usage.as_dict().items()})
        digest = mlflow_tracking.log_frame(events, f"simulation_events_{arm}", role="output")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"events_{arm}.parquet")
            events.write_parquet(path)
            mlflow.log_artifact(path, artifact_path="events")
    actions = events.group_by("action").len().sort("action")
    return Output(
        events,
        data_version=DataVersion(digest),
        metadata={"arm": arm, "agents": len(chosen), "events": events.height, "actions": MetadataValue.md(actions.to_pandas().to_markdown(index=False))},
    )

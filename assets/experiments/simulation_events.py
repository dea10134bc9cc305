"""The experiments' own simulations as an asset, partitioned by arm × condition (brain, with
or without vision), so the vision and no-vision runs of Table 5 and the embedded and LLM runs
of the brain comparison coexist and never touch the lifecycle's `simulation_events`."""

import polars as pl
from dagster import AssetExecutionContext, Config, MaterializeResult, asset
from pydantic import Field

from assets.experiments import GROUP
from assets.partitions import experiment_partitions
from assets.simulation import SimulationAssetConfig, partition_request, partition_result
from ops.settings import config_default
from ops.simulation.partition import simulate_partition
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root


class ExperimentSimulationConfig(Config):
    n_agents: int = Field(
        default=config_default("agents"),
        ge=0,
        description="agents sampled from users with a top-20 list (the same sample in every arm and condition); 0 = all ($SIMAB_AGENTS)",
    )
    seed: int = Field(default=0, description="seed of agent sampling and of every agent's decisions")
    max_failed_agents_share: float = Field(
        default=0.05, ge=0, le=1, description="the run fails once more than this share of agents failed (LLM brain)"
    )
    checkpoint: bool = Field(default=True, description="keep finished agents in a checkpoint so a killed run resumes")


@asset(group_name=GROUP, partitions_def=experiment_partitions, code_version="1", kinds={"python"})
def experiment_simulation_events(
    context: AssetExecutionContext,
    config: ExperimentSimulationConfig,
    top20_lists: pl.DataFrame,
    agents,
    embedded_brain,
    catalogue: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """An arm simulated under one condition — a brain of the registry, `embedded`,
    `embedded-no-vision`, `llm`, `llm-no-vision`, … — for the experiments (same agents and
    seed as `simulation_events`), through the lifecycle's simulation path."""
    keys = context.partition_key.keys_by_dimension
    arm, condition = keys["arm"], keys["condition"]
    sample = SimulationAssetConfig(
        brain=condition,
        n_agents=config.n_agents,
        seed=config.seed,
        arms=[arm],
        max_failed_agents_share=config.max_failed_agents_share,
    )
    folder = data_root() / "checkpoints" / "experiment_simulation_events" / arm / condition
    folder = folder if config.checkpoint else None
    request = partition_request(
        context, llm, mlflow_tracking, arm, sample, top20_lists, agents, embedded_brain, catalogue, folder
    )
    dataset = f"experiment_simulation_events_{arm}_{condition}"
    return partition_result(context, simulate_partition(request), mlflow_tracking, dataset, {"condition": condition})


def by_arm_and_condition(partitions: dict) -> dict[tuple[str, str], pl.DataFrame]:
    """{(arm, condition): events} from the multi-partition keys ("arm|condition")."""
    out = {}
    for key, frame in partitions.items():
        dims = getattr(key, "keys_by_dimension", None) or dict(zip(("arm", "condition"), str(key).split("|")))
        out[(dims["arm"], dims["condition"])] = frame
    return out

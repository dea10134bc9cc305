"""Simulation over rounds: living agents whose memories grow, and the filter
bubble experiment of Agent4Rec §4.1.  Group `rounds`; `ops.studies.rounds` says what a
round does.

- `agent_round` (a multi-asset), one partition per (arm, round): round r trains the arm on
  the train split plus the clicks and views of rounds < r, ranks the catalogue, lets the
  agents browse with the memories written up to round r − 1, and stores three tables —
  `round_events` (the round's events), `memory_after_round` (every watch written to memory
  up to round r: movie, rating, feeling) and `round_training_rows` (the simulated rows the
  next round trains on).  Round r reads round r − 1's two tables from the store (Dagster
  maps a partition onto an earlier one of the same asset only along time, so the round
  dimension is read, not mapped) and fails, naming it, when round r − 1 was never
  materialised.  Earlier rounds are only read: a round's partition is written once per
  materialisation and nothing else writes it.
- `filter_bubble`: the whole experiment in one step — an MF-style arm (FM), `rounds` rounds,
  up to 5 pages a session, the movie pool split in `rounds` equal parts — with the
  filter-bubble figures per round, their intervals and the plot, in MLflow.

How many rounds there are is the code location's setting (`$SIMAB_ROUNDS`, 4 by default:
Agent4Rec's four rounds), so the partitions are built by `build_round_assets`.
"""

import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetOut,
    Config,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    ResourceParam,
    StaticPartitionsDefinition,
    asset,
    multi_asset,
)
from pydantic import Field

from assets.partitions import ARM_POOL, arm_partitions
from ops.schema import RATINGS
from ops.settings import config_default
from ops.simulation.catalogue import Catalogue
from ops.simulation.kinds import DEFAULT_BRAIN, brain_kind
from ops.simulation.request import SimulationConfig
from ops.studies.filter_bubble import filter_bubble as run_filter_bubble
from ops.studies.filter_bubble import filter_bubble_figure
from ops.studies.rounds import RoundsConfig, empty_written_memories, play_round
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import SimabIOManager

GROUP = "rounds"
# Agent4Rec §4.1: four rounds.
DEFAULT_ROUNDS = 4
ROUND_OUTPUTS = ("round_events", "memory_after_round", "round_training_rows")


class RoundAssetConfig(Config):
    n_agents: int = Field(
        default=config_default("agents"),
        ge=0,
        description="agents sampled (the same in every round and arm); 0 = all ($SIMAB_AGENTS)",
    )
    seed: int = Field(default=0, description="seed of agent sampling, of the pool split and of every agent's decisions")
    pages: int = Field(default=5, ge=1, description="home pages per session, 5 movies each (Agent4Rec §4.1: up to 5)")
    split_pool: bool = Field(
        default=False, description="each round recommends from its own equal part of the catalogue (Agent4Rec §4.1)"
    )
    max_epochs: int = Field(
        default=0, description="the arm's epochs per round; 0 = Appendix B default ($SIMAB_MAX_EPOCHS)"
    )
    brain: str = Field(
        default=DEFAULT_BRAIN,
        description="who decides, a brain of the registry: embedded (offline default), llm, … ($SIMAB_BRAIN)",
    )


class FilterBubbleConfig(Config):
    arm: str = Field(default="fm", description="the MF-style arm retrained after each round (Agent4Rec: MF; here FM)")
    rounds: int = Field(default=DEFAULT_ROUNDS, ge=1, description="Agent4Rec §4.1: four rounds")
    pages: int = Field(default=5, ge=1, description="Agent4Rec §4.1: recommendations span up to 5 pages")
    split_pool: bool = Field(
        default=True, description="the movie pool split in `rounds` equal parts, one per round (Agent4Rec §4.1)"
    )
    n_agents: int = Field(default=config_default("agents"), ge=0, description="agents sampled; 0 = all ($SIMAB_AGENTS)")
    seed: int = 0
    max_epochs: int = Field(default=0, description="0 = Appendix B default ($SIMAB_MAX_EPOCHS)")
    n_bootstrap: int = Field(default=1000, ge=10)


def round_partitions(rounds: int) -> MultiPartitionsDefinition:
    """arm × round ("0" … "R−1")."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    return MultiPartitionsDefinition(
        {
            "arm": arm_partitions,  # the settings' arms in the code location (`with_arm_partitions`)
            "round": StaticPartitionsDefinition([str(r) for r in range(rounds)]),
        }
    )


def round_key(arm: str, round_index: int) -> str:
    """The stored name of an (arm, round) partition."""
    return str(MultiPartitionKey({"arm": arm, "round": str(round_index)}))


def _state_before(io_manager: SimabIOManager, arm: str, r: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The memories and training rows round `r` of `arm` starts from: round r − 1's, read
    from the store (round 0: empty), or a Failure naming the partition to materialise first."""
    if r == 0:
        return empty_written_memories(), pl.DataFrame(schema=RATINGS)
    before = round_key(arm, r - 1)
    if not all(io_manager.has_stored(name, before) for name in ("memory_after_round", "round_training_rows")):
        raise Failure(
            description=f"round {r} of arm {arm!r} needs round {r - 1}: materialise partition {before} first",
            allow_retries=False,
        )
    return io_manager.stored("memory_after_round", before), io_manager.stored("round_training_rows", before)


def build_round_assets(rounds: int = DEFAULT_ROUNDS) -> list:
    """The `rounds` group for R rounds: `agent_round` and `filter_bubble`."""
    partitions = round_partitions(rounds)

    @multi_asset(
        outs={
            "round_events": AssetOut(
                group_name=GROUP,
                code_version="1",
                kinds={"python"},
                description="every agent step of the round (EVENTS + round)",
            ),
            "memory_after_round": AssetOut(
                group_name=GROUP,
                code_version="1",
                kinds={"python"},
                description="the watches written to long-term memory up to this round, with the agent's feeling",
            ),
            "round_training_rows": AssetOut(
                group_name=GROUP,
                code_version="1",
                kinds={"python"},
                description="simulated clicks and views up to this round: the next round's extra training rows",
            ),
        },
        partitions_def=partitions,
        pool=ARM_POOL,
        name="agent_round",
    )
    def agent_round(
        context: AssetExecutionContext,
        config: RoundAssetConfig,
        train_ratings: pl.DataFrame,
        valid_ratings: pl.DataFrame,
        users: pl.DataFrame,
        catalogue: pl.DataFrame,
        agents,
        embedded_brain,
        io_manager: ResourceParam[SimabIOManager],
        llm: LLMResource,
        mlflow_tracking: MlflowTracking,
    ):
        """One round of one arm with the memories of the round before (module docstring)."""
        keys = context.partition_key.keys_by_dimension
        arm, r = keys["arm"], int(keys["round"])
        written, added = _state_before(io_manager, arm, r)
        kind = brain_kind(config.brain)
        # The agent is told the fatigue costs it is charged; an LLM brain's calls go on the run's bill.
        sources = llm.sources(context, Catalogue.from_frame(catalogue), embedded_brain, SimulationConfig().fatigue)
        rounds_config = RoundsConfig(rounds=rounds, pages=config.pages, split_pool=config.split_pool, seed=config.seed)
        played = play_round(
            arm,
            r,
            rounds_config,
            train_ratings,
            valid_ratings,
            users,
            catalogue,
            agents,
            kind,
            sources,
            written,
            added,
            n_agents=config.n_agents,
            max_epochs=config.max_epochs,
        )
        with mlflow_tracking.asset_run(
            context, params={**config.model_dump(), "rounds": rounds}, tags={"arm": arm, "round": str(r)}
        ):
            mlflow_tracking.log_metrics(played.summary, step=r)
            digests = {
                name: mlflow_tracking.log_frame(frame, f"{name}_{arm}_{r}", role="output")
                for name, frame in zip(ROUND_OUTPUTS, played.outputs)
            }
        metadata = {
            "arm": arm,
            "round": r,
            **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in played.summary.items() if v is not None},
        }
        for name, value in zip(ROUND_OUTPUTS, played.outputs):
            yield MaterializeResult(
                asset_key=name, value=value, data_version=DataVersion(digests[name]), metadata=metadata
            )

    @asset(group_name=GROUP, code_version="1", kinds={"python"})
    def filter_bubble(
        context: AssetExecutionContext,
        config: FilterBubbleConfig,
        train_ratings: pl.DataFrame,
        valid_ratings: pl.DataFrame,
        users: pl.DataFrame,
        catalogue: pl.DataFrame,
        agents,
        embedded_brain,
        mlflow_tracking: MlflowTracking,
    ) -> MaterializeResult:
        """Agent4Rec §4.1: the filter bubble over rounds of an MF-style arm, with intervals."""
        rounds_config = RoundsConfig(
            rounds=config.rounds,
            pages=config.pages,
            split_pool=config.split_pool,
            seed=config.seed,
            n_bootstrap=config.n_bootstrap,
        )
        bubble = run_filter_bubble(
            config.arm,
            rounds_config,
            train_ratings,
            valid_ratings,
            users,
            catalogue,
            agents,
            embedded_brain,
            n_agents=config.n_agents,
            max_epochs=config.max_epochs,
        )
        metrics = bubble.metrics
        with mlflow_tracking.asset_run(context, params=config.model_dump(), tags={"arm": config.arm}):
            for row in metrics.iter_rows(named=True):
                mlflow_tracking.log_metrics(
                    {
                        row["metric"]: row["mean"],
                        f"{row['metric']}_ci_low": row["ci_low"],
                        f"{row['metric']}_ci_high": row["ci_high"],
                    },
                    step=row["round"],
                )
            mlflow_tracking.log_metrics({"seconds": bubble.seconds, "agents": bubble.agents})
            mlflow_tracking.log_table(metrics, "filter_bubble")
            mlflow_tracking.log_figure(filter_bubble_figure(metrics), "plots/filter_bubble.png")
            digest = mlflow_tracking.log_frame(metrics, "filter_bubble", role="output")
        return MaterializeResult(
            value=metrics,
            data_version=DataVersion(digest),
            metadata={
                "arm": config.arm,
                "rounds": config.rounds,
                "agents": bubble.agents,
                "seconds": round(bubble.seconds, 1),
                "figures (mean [95 % interval]) by round": MetadataValue.md(bubble.table()),
            },
        )

    return [agent_round, filter_bubble]

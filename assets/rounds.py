"""Simulation over rounds (issue 12): living agents whose memories grow, and the filter
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

from assets.partitions import ARMS
from ops.settings import config_default
from ops.simulation.catalogue import Catalogue
from ops.simulation.kinds import DEFAULT_BRAIN, BrainFactory, brain_kind
from ops.simulation.runner import SimulationConfig
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
            "arm": StaticPartitionsDefinition(list(ARMS)),
            "round": StaticPartitionsDefinition([str(r) for r in range(rounds)]),
        }
    )


def round_key(arm: str, round_index: int) -> str:
    """The stored name of an (arm, round) partition."""
    return str(MultiPartitionKey({"arm": arm, "round": str(round_index)}))


def build_round_assets(rounds: int = DEFAULT_ROUNDS) -> list:
    """The `rounds` group for R rounds: `agent_round` and `filter_bubble`."""
    partitions = round_partitions(rounds)

    @multi_asset(
        outs={
            "round_events": AssetOut(
                group_name=GROUP, code_version="1", description="every agent step of the round (EVENTS + round)"
            ),
            "memory_after_round": AssetOut(
                group_name=GROUP,
                code_version="1",
                description="the watches written to long-term memory up to this round, with the agent's feeling",
            ),
            "round_training_rows": AssetOut(
                group_name=GROUP,
                code_version="1",
                description="simulated clicks and views up to this round: the next round's extra training rows",
            ),
        },
        partitions_def=partitions,
        compute_kind="python",
        name="agent_round",
    )
    def agent_round(
        context: AssetExecutionContext,
        config: RoundAssetConfig,
        train_ratings: pl.DataFrame,
        valid_ratings: pl.DataFrame,
        users: pl.DataFrame,
        mm_ml_1m: pl.DataFrame,
        agents,
        embedded_brain,
        io_manager: ResourceParam[SimabIOManager],
        llm: LLMResource,
        mlflow_tracking: MlflowTracking,
    ):
        """One round of one arm with the memories of the round before (module docstring)."""
        from ops.arms.recommenders import arm_config
        from ops.readout.ab_readout import per_agent_metrics
        from ops.schema import RATINGS
        from ops.simulation.runner import sample_agents
        from ops.studies.rounds import RoundsConfig, empty_written_memories, movie_pools, simulate_round

        keys = context.partition_key.keys_by_dimension
        arm, r = keys["arm"], int(keys["round"])
        if r == 0:
            written, added = empty_written_memories(), pl.DataFrame(schema=RATINGS)
        else:
            before = round_key(arm, r - 1)
            if not all(io_manager.has_stored(name, before) for name in ("memory_after_round", "round_training_rows")):
                raise Failure(
                    description=f"round {r} of arm {arm!r} needs round {r - 1}: materialise partition {before} first",
                    allow_retries=False,
                )
            written, added = (
                io_manager.stored("memory_after_round", before),
                io_manager.stored("round_training_rows", before),
            )
        rounds_config = RoundsConfig(rounds=rounds, pages=config.pages, split_pool=config.split_pool, seed=config.seed)
        pool = (
            movie_pools(mm_ml_1m.get_column("movie_id").to_numpy(), rounds, config.seed)[r]
            if config.split_pool
            else None
        )
        chosen = sample_agents(agents.profiles, config.n_agents, config.seed)
        overrides = {"max_epochs": config.max_epochs} if config.max_epochs else {}
        kind = brain_kind(config.brain)
        # The agent is told the fatigue costs it is charged; an LLM brain's calls go on the run's bill.
        sources = llm.sources(context, Catalogue.from_frame(mm_ml_1m), embedded_brain, SimulationConfig().fatigue)
        result = simulate_round(
            arm_config(arm, **overrides),
            r,
            train_ratings,
            valid_ratings,
            users,
            mm_ml_1m,
            agents,
            BrainFactory(kind, sources),
            written,
            added,
            rounds_config,
            chosen,
            pool,
            concurrency=kind.concurrency(sources),
        )
        events = result.events.with_columns(round=pl.lit(r, dtype=pl.Int64))
        per_agent = per_agent_metrics(result.events)
        summary = {
            "agents": per_agent.height,
            "events": events.height,
            "train_rows": result.train_rows,
            "memories_written": result.written.filter(pl.col("round") == r).height,
            "memories_total": result.written.height,
            "training_rows_added": result.added.height - added.height,
            **{m: per_agent.get_column(m).mean() for m in ("ctr", "cvr", "average_rating", "satisfaction")},
        }
        with mlflow_tracking.asset_run(
            context, params={**config.model_dump(), "rounds": rounds}, tags={"arm": arm, "round": str(r)}
        ):
            mlflow_tracking.log_metrics(summary, step=r)
            digests = {
                "round_events": mlflow_tracking.log_frame(events, f"round_events_{arm}_{r}", role="output"),
                "memory_after_round": mlflow_tracking.log_frame(
                    result.written, f"memory_after_round_{arm}_{r}", role="output"
                ),
                "round_training_rows": mlflow_tracking.log_frame(
                    result.added, f"round_training_rows_{arm}_{r}", role="output"
                ),
            }
        metadata = {
            "arm": arm,
            "round": r,
            **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary.items() if v is not None},
        }
        for name, value in zip(ROUND_OUTPUTS, (events, result.written, result.added)):
            yield MaterializeResult(
                asset_key=name, value=value, data_version=DataVersion(digests[name]), metadata=metadata
            )

    @asset(group_name=GROUP, code_version="1", compute_kind="python")
    def filter_bubble(
        context: AssetExecutionContext,
        config: FilterBubbleConfig,
        train_ratings: pl.DataFrame,
        valid_ratings: pl.DataFrame,
        users: pl.DataFrame,
        mm_ml_1m: pl.DataFrame,
        agents,
        embedded_brain,
        mlflow_tracking: MlflowTracking,
    ) -> MaterializeResult:
        """Agent4Rec §4.1: the filter bubble over rounds of an MF-style arm, with intervals."""
        import time

        from ops.arms.recommenders import arm_config
        from ops.simulation.runner import sample_agents
        from ops.studies.rounds import RoundsConfig, filter_bubble_figure, filter_bubble_metrics, simulate_rounds

        started = time.perf_counter()
        rounds_config = RoundsConfig(
            rounds=config.rounds,
            pages=config.pages,
            split_pool=config.split_pool,
            seed=config.seed,
            n_bootstrap=config.n_bootstrap,
        )
        overrides = {"max_epochs": config.max_epochs} if config.max_epochs else {}
        chosen = sample_agents(agents.profiles, config.n_agents, config.seed)
        results = simulate_rounds(
            arm_config(config.arm, **overrides),
            train_ratings,
            valid_ratings,
            users,
            mm_ml_1m,
            agents,
            embedded_brain,
            rounds_config,
            chosen,
        )
        metrics = filter_bubble_metrics(results, mm_ml_1m, config.n_bootstrap, rounds_config.confidence, config.seed)
        seconds = time.perf_counter() - started
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
            mlflow_tracking.log_metrics({"seconds": seconds, "agents": len(chosen)})
            mlflow_tracking.log_table(metrics, "filter_bubble")
            mlflow_tracking.log_figure(filter_bubble_figure(metrics), "plots/filter_bubble.png")
            digest = mlflow_tracking.log_frame(metrics, "filter_bubble", role="output")
        wide = metrics.with_columns(
            pl.format(
                "{} [{}, {}]", pl.col("mean").round(3), pl.col("ci_low").round(3), pl.col("ci_high").round(3)
            ).alias("value")
        ).pivot(on="round", index="metric", values="value")
        return MaterializeResult(
            value=metrics,
            data_version=DataVersion(digest),
            metadata={
                "arm": config.arm,
                "rounds": config.rounds,
                "agents": len(chosen),
                "seconds": round(seconds, 1),
                "figures (mean [95 % interval]) by round": MetadataValue.md(wide.to_pandas().to_markdown(index=False)),
            },
        )

    return [agent_round, filter_bubble]

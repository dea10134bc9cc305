"""The papers' experiments: each one asset that writes its table — Markdown and
CSV under `$SIMAB_HOME/experiments/<name>/`, logged to MLflow — beside the paper's numbers
with the protocol differences named (built by `ops.studies.experiments`).

- `ab_agent_table2`, `ab_agent_table3`, `ab_agent_table4`: assembled from the lifecycle's
  arm partitions (`offline_metrics`, `top20_lists`, `simulation_events`) of the table's arms;
- `experiment_simulation_events`: the experiments' own simulations, partitioned by arm ×
  condition (brain, with or without vision), so the vision and no-vision runs of Table 5 and
  the embedded and LLM runs of the brain comparison coexist and never touch the lifecycle's
  `simulation_events`;
- `ab_agent_table5`: models refit on the clicks / views of the vision and no-vision runs;
- `simuser_thumbnail_quality`: SimUSER App. C.7, click rate per poster version;
- `brain_comparison`: the same arms under the embedded and the LLM brain.

`python -m pipelines.experiments <name>` runs an experiment with everything it needs.
"""

from pathlib import Path

import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetIn,
    Config,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
)
from pydantic import Field

from assets.partitions import DEFAULT_ARMS, condition_name, experiment_partitions
from assets.simulation import SimulationAssetConfig, agents_of, simulate_partition
from ops.agents.embeddings import load_poster
from ops.figures import save_figure
from ops.readout.readout_config import ReadoutConfig
from ops.settings import DEFAULT_CONTROL, config_default
from ops.simulation.kinds import DEFAULT_BRAIN, brain_kind
from ops.simulation.kinds.llm import LLM
from ops.simulation.runner import SimulationConfig
from ops.studies.experiments.arm_tables import arm_experiment, arm_figure, arm_markdown, brain_figure, brain_markdown
from ops.studies.experiments.arm_tables import brain_comparison as compare
from ops.studies.experiments.augmentation_table import WITH_VISION, WITHOUT_VISION, table5, table5_events
from ops.studies.experiments.output import experiment_markdown, write_experiment
from ops.studies.experiments.papers import DIFFERENCES, TABLE2, TABLE3, TABLE4, TABLE5_MODELS
from ops.studies.experiments.thumbnails import ORIGINAL, VERSIONS, thumbnail_experiment
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root, frame_digest

GROUP = "experiments"
# The papers' line-ups, as their tables list them (ops.studies.experiments.papers).
TABLE3_ARMS = tuple(TABLE3)
TABLE4_ARMS = tuple(TABLE4)


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


@asset(group_name=GROUP, partitions_def=experiment_partitions, code_version="1", compute_kind="python")
def experiment_simulation_events(
    context: AssetExecutionContext,
    config: ExperimentSimulationConfig,
    top20_lists: pl.DataFrame,
    agents,
    embedded_brain,
    mm_ml_1m: pl.DataFrame,
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
    folder = (
        data_root() / "checkpoints" / "experiment_simulation_events" / arm / condition if config.checkpoint else None
    )
    return simulate_partition(
        context,
        arm,
        agents_of(arm, sample, top20_lists, agents),
        sample,
        top20_lists,
        agents,
        embedded_brain,
        mm_ml_1m,
        llm,
        mlflow_tracking,
        folder,
        dataset=f"experiment_simulation_events_{arm}_{condition}",
        tags={"condition": condition},
    )


class ArmTableConfig(Config):
    arms: list[str] = Field(
        default=[], description="the table's arms in row order; empty = the table's own (Table 2: $SIMAB_ARMS)"
    )
    control: str = Field(
        default="", description="the read-out's control arm; empty = Pop for Table 2, full DeepFM for Tables 3 and 4"
    )
    n_bootstrap: int = Field(default=2000, description="bootstrap replicates of every interval")
    seed: int = Field(default=0, description="bootstrap seed")


_ARM_TABLE_INS = {
    "offline_metrics": AssetIn("offline_metrics"),
    "top20_lists": AssetIn("top20_lists"),
    "simulation_events": AssetIn("simulation_events"),
}


@asset(group_name=GROUP, code_version="1", compute_kind="markdown", ins=_ARM_TABLE_INS)
def ab_agent_table2(
    context: AssetExecutionContext,
    config: ArmTableConfig,
    offline_metrics: dict,
    top20_lists: dict,
    simulation_events: dict,
    test_ratings: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """A/B Agent Table 2: every configured arm — offline AUC, Recall@20, NDCG@20, simulated
    CTR, CVR, AR with intervals — and the fidelity verdicts, beside the paper."""
    return _arm_table(
        context,
        config,
        "table2",
        "A/B Agent Table 2: model comparison (MovieLens)",
        TABLE2,
        "the paper's Table 2 (ML, A/B Agent with GPT-4o-mini; Real-World Recall / NDCG)",
        list(DEFAULT_ARMS),
        DEFAULT_CONTROL,
        offline_metrics,
        top20_lists,
        simulation_events,
        test_ratings,
        mlflow_tracking,
    )


@asset(group_name=GROUP, code_version="1", compute_kind="markdown", ins=_ARM_TABLE_INS)
def ab_agent_table3(
    context: AssetExecutionContext,
    config: ArmTableConfig,
    offline_metrics: dict,
    top20_lists: dict,
    simulation_events: dict,
    test_ratings: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """A/B Agent Table 3: DeepFM on 50 %, 75 % and 100 % of the training data, offline and simulated."""
    return _arm_table(
        context,
        config,
        "table3",
        "A/B Agent Table 3: training data scale (DeepFM)",
        TABLE3,
        "the paper's Table 3 (GPT-4o-mini)",
        list(TABLE3_ARMS),
        "deepfm",
        offline_metrics,
        top20_lists,
        simulation_events,
        test_ratings,
        mlflow_tracking,
    )


@asset(group_name=GROUP, code_version="1", compute_kind="markdown", ins=_ARM_TABLE_INS)
def ab_agent_table4(
    context: AssetExecutionContext,
    config: ArmTableConfig,
    offline_metrics: dict,
    top20_lists: dict,
    simulation_events: dict,
    test_ratings: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """A/B Agent Table 4: DeepFM with user id only, movie id only, all features, offline and simulated."""
    return _arm_table(
        context,
        config,
        "table4",
        "A/B Agent Table 4: feature ablation (DeepFM)",
        TABLE4,
        "the paper's Table 4 (GPT-4o-mini)",
        list(TABLE4_ARMS),
        "deepfm",
        offline_metrics,
        top20_lists,
        simulation_events,
        test_ratings,
        mlflow_tracking,
    )


def _arm_table(
    context,
    config: ArmTableConfig,
    name: str,
    title: str,
    paper: dict,
    paper_label: str,
    default_arms: list[str],
    default_control: str,
    offline_metrics: dict,
    top20_lists: dict,
    simulation_events: dict,
    test_ratings: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
):
    arms = list(config.arms) or default_arms
    try:
        experiment = arm_experiment(
            arms,
            simulation_events,
            offline_metrics,
            top20_lists,
            test_ratings,
            control=config.control or default_control,
            readout_config=ReadoutConfig(n_bootstrap=config.n_bootstrap, seed=config.seed),
        )
    except ValueError as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
    folder = data_root() / "experiments" / name
    figure = save_figure(arm_figure(experiment.table, title), folder / "plots" / f"{name}.png")
    body = arm_markdown(experiment, paper, paper_label)
    extra = {"fidelity": experiment.fidelity, "fidelity_pairs": experiment.pairs}
    return _publish(
        context,
        mlflow_tracking,
        name,
        title,
        body,
        DIFFERENCES[name],
        experiment.table,
        extra,
        [figure],
        {"arms": ",".join(arms)},
    )


class Table5Config(Config):
    simulated_arm: str = Field(default="deepfm", description="the arm the agents browsed (the paper: DeepFM)")
    brain: str = Field(
        default=DEFAULT_BRAIN,
        description="a brain of the registry (embedded, llm, …): whose vision and no-vision runs are compared",
    )
    models: list[str] = Field(
        default=list(TABLE5_MODELS), description="the downstream DeepCTR models refit (the paper's eight)"
    )
    seeds: int = Field(
        default=3, ge=1, description="training seeds per model (seed, seed+1, …): the AUC gains get intervals over them"
    )
    seed: int = Field(default=1024, description="first training seed (deepctr's default)")
    max_epochs: int = Field(default=0, description="≤ 20 in Appendix B; 0 = default ($SIMAB_MAX_EPOCHS)")
    device: str = Field(default="auto", description="auto (GPU when torch sees one) | cpu | cuda")
    vision_ablation: bool = Field(
        default=True,
        description="also refit on the no-vision simulation (§3.5); False: the with-vision rows only, "
        "one simulation and 2 refits per (model, seed) fewer",
    )


@asset(
    group_name=GROUP,
    code_version="1",
    compute_kind="pytorch",
    ins={"experiment_simulation_events": AssetIn("experiment_simulation_events")},
)
def ab_agent_table5(
    context: AssetExecutionContext,
    config: Table5Config,
    experiment_simulation_events: dict,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    users: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """A/B Agent Table 5 with the §3.5 ablation: every DeepCTR model on the original train
    split and with the clicks / views of the vision and the no-vision simulation added,
    several training seeds, all rows side by side."""
    conditions = {WITH_VISION: condition_name(config.brain, True)}
    if config.vision_ablation:
        conditions[WITHOUT_VISION] = condition_name(config.brain, False)
    try:
        events = table5_events(_by_arm_and_condition(experiment_simulation_events), config.simulated_arm, conditions)
    except ValueError as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
    long, body, figure = table5(
        config.models,
        events,
        train_ratings,
        valid_ratings,
        test_ratings,
        users,
        mm_ml_1m,
        data_root() / "experiments" / "table5",
        **config.model_dump(include={"seed", "seeds", "device", "max_epochs"}),
    )
    return _publish(
        context,
        mlflow_tracking,
        "table5",
        "A/B Agent Table 5: data augmentation, with and without vision",
        body,
        DIFFERENCES["table5"],
        long,
        {},
        [figure],
        config.model_dump(),
    )


class ThumbnailConfig(Config):
    brain: str = Field(
        default=DEFAULT_BRAIN,
        description="a brain of the registry: embedded, llm (the `llm` resource's endpoint, images sent when it has "
        "vision), …",
    )
    n_movies: int = Field(default=100, ge=1, description="movies sampled (SimUSER: 100)")
    n_agents: int = Field(default=100, ge=1, description="agents sampled (SimUSER: 100)")
    list_length: int = Field(
        default=20,
        ge=1,
        description="movies on each agent's home-page list, drawn from the sampled ones it never rated",
    )
    seed: int = Field(default=0, description="seed of the samples and of the agents' decisions")


@asset(group_name=GROUP, code_version="1", compute_kind="python")
def simuser_thumbnail_quality(
    context: AssetExecutionContext,
    config: ThumbnailConfig,
    agents,
    embedded_brain,
    mm_ml_1m: pl.DataFrame,
    train_ratings: pl.DataFrame,
    llm: LLMResource,
    embeddings: EmbeddingsResource,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """SimUSER App. C.7 / Figure 10: click rate with the original poster, a blue-filtered
    poster and a background crop standing in for a trailer screenshot, with intervals."""
    kind = brain_kind(config.brain)
    experiment = thumbnail_experiment(
        kind,
        llm.sources(context, embedded=embedded_brain, fatigue=SimulationConfig().fatigue),
        agents,
        mm_ml_1m,
        train_ratings,
        data_root() / "experiments" / "thumbnails",
        run_id=context.run.run_id,
        poster_vectors=lambda frames, movie_ids: _version_posters(frames, movie_ids, embedded_brain, embeddings),
        **config.model_dump(),
    )
    events = experiment.events
    return _publish(
        context,
        mlflow_tracking,
        "thumbnails",
        "SimUSER App. C.7: thumbnail quality",
        experiment.body,
        DIFFERENCES["thumbnails"],
        experiment.table,
        {"events_per_version": events.group_by("arm", "action").len().sort("arm", "action")},
        [experiment.figure],
        config.model_dump(),
        experiment.notes,
    )


def _version_posters(frames: dict, movie_ids, embedded_brain, embeddings: EmbeddingsResource) -> dict:
    """version -> movie id -> its poster's vector, embedded as the embedded brain's posters
    were (the original version is the fitted brain's own)."""
    embedder = embeddings.poster_embedder()
    model_name = embedded_brain.context.vectors.poster_model
    if embedder is None or embedder.name != model_name:
        raise Failure(
            description=f"the embedded brain's posters were embedded with {model_name!r}; the embeddings resource gives "
            f"{getattr(embedder, 'name', 'none')!r}: configure the same poster embedder",
            allow_retries=False,
        )
    return {
        v: {
            m: embedder.embed_images(
                [load_poster(frames[v].filter(pl.col("movie_id") == m).get_column("poster_large")[0])]
            )[0]
            for m in movie_ids
        }
        for v in VERSIONS
        if v != ORIGINAL
    }


class BrainComparisonConfig(Config):
    arms: list[str] = Field(default=list(DEFAULT_ARMS), description="the arms simulated by every brain ($SIMAB_ARMS)")
    brains: list[str] = Field(
        default=[DEFAULT_BRAIN, LLM.name],
        description="the brains compared (registry names); the first is the reference",
    )
    vision: bool = Field(default=True, description="compare the brains with (True) or without vision")
    n_bootstrap: int = Field(default=2000)
    seed: int = Field(default=0, description="bootstrap seed")


@asset(
    group_name=GROUP,
    code_version="1",
    compute_kind="markdown",
    ins={"experiment_simulation_events": AssetIn("experiment_simulation_events")},
)
def brain_comparison(
    context: AssetExecutionContext,
    config: BrainComparisonConfig,
    experiment_simulation_events: dict,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """The same arms simulated by the embedded brain and by the LLM brain, in one table:
    CTR, CVR, AR with intervals per brain, their paired differences, and the arm orderings."""
    runs = _by_arm_and_condition(experiment_simulation_events)
    events = {
        (a, b): runs[(a, condition_name(b, config.vision))]
        for a in config.arms
        for b in config.brains
        if (a, condition_name(b, config.vision)) in runs
    }
    try:
        table, differences = compare(
            events, config.arms, config.brains, ReadoutConfig(n_bootstrap=config.n_bootstrap, seed=config.seed)
        )
    except ValueError as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
    folder = data_root() / "experiments" / "brains"
    figure = save_figure(brain_figure(table), folder / "plots" / "brains.png")
    body = brain_markdown(table, differences, config.brains)
    return _publish(
        context,
        mlflow_tracking,
        "brains",
        "Brain comparison: the same arms, embedded and LLM agents",
        body,
        DIFFERENCES["brains"],
        table,
        {"differences": differences},
        [figure],
        config.model_dump(),
    )


def _by_arm_and_condition(partitions: dict) -> dict[tuple[str, str], pl.DataFrame]:
    """{(arm, condition): events} from the multi-partition keys ("arm|condition")."""
    out = {}
    for key, frame in partitions.items():
        dims = getattr(key, "keys_by_dimension", None) or dict(zip(("arm", "condition"), str(key).split("|")))
        out[(dims["arm"], dims["condition"])] = frame
    return out


def _publish(
    context,
    mlflow_tracking: MlflowTracking,
    name: str,
    title: str,
    body: list[str],
    differences,
    table: pl.DataFrame,
    extra: dict,
    figures: list[Path],
    params: dict,
    notes=(),
) -> MaterializeResult:
    """Write the experiment's folder, log it to MLflow, print it to the run's log, and return the table."""
    folder = data_root() / "experiments" / name
    markdown = experiment_markdown(title, body, differences, figures, folder, notes)
    paths = write_experiment(folder, markdown, table, extra)
    with mlflow_tracking.asset_run(
        context,
        params={k: (",".join(map(str, v)) if isinstance(v, list) else v) for k, v in params.items()},
        tags={"experiment": name},
    ):
        mlflow_tracking.log_table(table, name)
        for key, frame in extra.items():
            mlflow_tracking.log_table(frame, f"{name}_{key}")
        for path in paths.values():
            mlflow_tracking.log_artifact(path, artifact_path=f"experiments/{name}")
        for figure in figures:
            mlflow_tracking.log_artifact(figure, artifact_path=f"experiments/{name}/plots")
        run_id = mlflow_tracking.active_run_id()
    context.log.info(f"{title}\n\n{markdown}")
    return MaterializeResult(
        value=table,
        data_version=DataVersion(frame_digest(table)),
        metadata={
            "folder": MetadataValue.path(str(folder)),
            "table": MetadataValue.md(markdown),
            "mlflow_run_id": run_id,
            "rows": table.height,
        },
    )

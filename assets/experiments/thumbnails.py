"""SimUSER App. C.7 as an asset: click rate per poster version, the posters embedded as the
embedded brain's were (`ops.studies.experiments.thumbnails`)."""

import polars as pl
from dagster import AssetExecutionContext, Config, Failure, MaterializeResult, asset
from pydantic import Field

from assets.experiments import GROUP
from assets.experiments.publish import publish
from ops.agents.embeddings import load_poster
from ops.simulation.kinds import DEFAULT_BRAIN, brain_kind
from ops.simulation.runner import SimulationConfig
from ops.studies.experiments.papers import DIFFERENCES
from ops.studies.experiments.thumbnails import ORIGINAL, VERSIONS, thumbnail_experiment
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root


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


@asset(group_name=GROUP, code_version="1", kinds={"python"})
def simuser_thumbnail_quality(
    context: AssetExecutionContext,
    config: ThumbnailConfig,
    agents,
    embedded_brain,
    catalogue: pl.DataFrame,
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
        catalogue,
        train_ratings,
        data_root() / "experiments" / "thumbnails",
        run_id=context.run.run_id,
        poster_vectors=lambda frames, item_ids: _version_posters(frames, item_ids, embedded_brain, embeddings),
        **config.model_dump(),
    )
    events = experiment.events
    return publish(
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


def _version_posters(frames: dict, item_ids, embedded_brain, embeddings: EmbeddingsResource) -> dict:
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
                [load_poster(frames[v].filter(pl.col("item_id") == m).get_column("poster_large")[0])]
            )[0]
            for m in item_ids
        }
        for v in VERSIONS
        if v != ORIGINAL
    }

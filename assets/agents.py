"""Lifecycle step 7: one agent per user — profile, long-term memory, fitted embedded brain.

Profiles and memories come from the train split only; the embedded brain's few parameters
are fitted on the train and validation windows (ops/brains/embedded.py says how).
"""

import polars as pl
from dagster import AssetExecutionContext, Config, MetadataValue, Output, asset
from pydantic import Field

from resources.embeddings import EmbeddingsResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root

GROUP = "agents"


class AgentsAssetConfig(Config):
    seed: int = Field(default=0, description="seed of the brain's fitting (negative sampling)")


@asset(group_name=GROUP, code_version="2", compute_kind="numpy")
def agents(
    context: AssetExecutionContext,
    config: AgentsAssetConfig,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    users: pl.DataFrame,
    movies: pl.DataFrame,
    movie_metadata: pl.DataFrame,
    embeddings: EmbeddingsResource,
    mlflow_tracking: MlflowTracking,
):
    """Profiles (demographics, social traits, pickiness, per-page preferences), memories and brain parameters."""
    from ops.agents.profile import profiles_frame
    from ops.agents.build import AgentsConfig, build_agents

    cfg = AgentsConfig()
    cfg = cfg.model_copy(update={"brain": cfg.brain.model_copy(update={"fit_seed": config.seed})})
    bundle = build_agents(
        train_ratings,
        valid_ratings,
        users,
        movies,
        movie_metadata if movie_metadata.height else None,
        cfg,
        embeddings.text_embedder(),
        embeddings.poster_embedder(),
        cache_dir=data_root() / "cache" / "embeddings",
    )
    table = profiles_frame(bundle.profiles)
    with mlflow_tracking.asset_run(context, params={**embeddings.describe(), "agents": len(bundle.profiles)}):
        import mlflow

        mlflow.log_metrics({f"seconds_{k}": v for k, v in bundle.timings_s.items()})
        mlflow.log_dict(bundle.params.model_dump(mode="json"), "embedded_brain_params.json")
        mlflow.log_table(table.head(200).to_pandas(), artifact_file="tables/agent_profiles_sample.json")
        for column in ("activity_tier", "conformity_tier", "diversity_tier", "pickiness"):
            if column in table.columns:
                counts = table.group_by(column).len()
                mlflow.log_metrics({f"{column}_{k}": float(v) for k, v in counts.iter_rows()})
    preview = table.head(10).to_pandas().to_markdown(index=False)
    return Output(bundle, metadata={"agents": len(bundle.profiles), "profiles (first 10)": MetadataValue.md(preview), **{f"seconds {k}": round(v, 2) for k, v in bundle.timings_s.items()}})

"""Lifecycle step 7: one agent per user — profile and long-term memory — and the fitted
embedded brain.

`agents` reads the train split only (profiles, memories, the catalogue's embeddings);
`embedded_brain` fits the offline brain's few parameters on the train and validation
windows (`ops.simulation.brains.embedded` says how).  The LLM brain needs no fitting.
"""

import polars as pl
from dagster import AssetExecutionContext, Config, MetadataValue, Output, asset
from pydantic import Field

from resources.embeddings import EmbeddingsResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root

GROUP = "agents"


@asset(group_name=GROUP, code_version="3", compute_kind="numpy")
def agents(
    context: AssetExecutionContext,
    train_ratings: pl.DataFrame,
    users: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    embeddings: EmbeddingsResource,
    mlflow_tracking: MlflowTracking,
):
    """Profiles (demographics, social traits, pickiness, per-page preferences) and memories."""
    from ops.agents.build import AgentsConfig, build_agents
    from ops.agents.profile import profiles_frame

    population = build_agents(
        train_ratings,
        users,
        mm_ml_1m,
        AgentsConfig(),
        embeddings.text_embedder(),
        embeddings.poster_embedder(),
        cache_dir=data_root() / "cache" / "embeddings",
    )
    table = profiles_frame(population.profiles)
    with mlflow_tracking.asset_run(context, params={**embeddings.describe(), "agents": len(population.profiles)}):
        mlflow_tracking.log_metrics({f"seconds_{k}": v for k, v in population.timings_s.items()})
        mlflow_tracking.log_table(table.head(200), "agent_profiles_sample")
        for column in ("activity_tier", "conformity_tier", "diversity_tier", "pickiness"):
            if column in table.columns:
                mlflow_tracking.log_metrics({f"{column}_{k}": v for k, v in table.group_by(column).len().iter_rows()})
    preview = table.head(10).to_pandas().to_markdown(index=False)
    return Output(
        population,
        metadata={
            "agents": len(population.profiles),
            "profiles (first 10)": MetadataValue.md(preview),
            **{f"seconds {k}": round(v, 2) for k, v in population.timings_s.items()},
        },
    )


class EmbeddedBrainAssetConfig(Config):
    seed: int = Field(default=0, description="seed of the brain's fitting (negative sampling)")


@asset(group_name=GROUP, code_version="1", compute_kind="scikit-learn")
def embedded_brain(
    context: AssetExecutionContext,
    config: EmbeddedBrainAssetConfig,
    agents,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    users: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
):
    """The embedded brain's click, like and rating models, fitted on train + validation."""
    from ops.simulation.brains.embedded import EmbeddedBrainConfig, fit_embedded_brain

    model = fit_embedded_brain(agents, train_ratings, valid_ratings, users, EmbeddedBrainConfig(fit_seed=config.seed))
    params = model.params
    holdout = {"click_auc_holdout": params.click_auc_holdout, "like_auc_holdout": params.like_auc_holdout, "rating_rmse_holdout": params.rating_rmse_holdout}
    with mlflow_tracking.asset_run(context, params={"fit_seed": config.seed}):
        mlflow_tracking.log_metrics({**{f"seconds_{k}": v for k, v in model.timings_s.items()}, **holdout})
        mlflow_tracking.log_dict(params.model_dump(mode="json"), "embedded_brain_params.json")
    return Output(model, metadata={**{k: round(v, 4) for k, v in holdout.items() if v is not None}, "fitted users": params.n_users})

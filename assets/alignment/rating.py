"""Rating prediction as an asset: the brain's ratings of held-out pairs beside the user mean
and the offline arms (SimUSER Table 2) and the rating distribution (Agent4Rec Fig. 3)
(`ops.studies.alignment.rating`)."""

import polars as pl
from dagster import AssetExecutionContext, AssetIn, MetadataValue, Output, asset
from pydantic import Field

from assets.alignment import GROUP
from assets.alignment.protocol import AlignmentConfig, degrades, log_protocol, protocol_opening
from ops.figures import table_markdown
from ops.studies.alignment.protocol_figures import rating_figure
from ops.studies.alignment.protocols import measure_rating
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking


class RatingAlignmentConfig(AlignmentConfig):
    max_pairs_per_agent: int = Field(
        default=20, description="held-out ratings asked per agent (one request each for the LLM brain); 0 = all"
    )


@asset(group_name=GROUP, code_version="1", kinds={"python"}, ins={"recommender_arm": AssetIn("recommender_arm")})
@degrades
def rating_alignment(
    context: AssetExecutionContext,
    config: RatingAlignmentConfig,
    agents,
    embedded_brain,
    recommender_arm: dict,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    catalogue: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
):
    """Rating prediction beside the user mean and the offline arms (SimUSER Table 2) and the
    rating distribution (Agent4Rec Fig. 3), on the same held-out pairs."""
    with protocol_opening(
        context,
        config,
        "rating prediction",
        "rating",
        agents,
        embedded_brain,
        catalogue,
        llm,
        train_ratings,
        valid_ratings,
        test_ratings,
    ) as opening:
        result = measure_rating(
            opening, train_ratings, valid_ratings, test_ratings, recommender_arm, config.max_pairs_per_agent
        )
    brain, users = opening.brain, opening.users
    with mlflow_tracking.asset_run(
        context,
        params={
            **config.model_dump(),
            "brain_name": brain.name,
            "agents": len(users),
            "arms": ",".join(sorted(recommender_arm)),
        },
    ):
        figure = rating_figure(result.distribution, result.prediction)
        log_protocol(mlflow_tracking, result, brain, figure, "plots/alignment_rating.png")
    return Output(
        result,
        metadata={
            "brain": brain.name,
            "pairs": result.pairs.height,
            "wasserstein": result.wasserstein or 0.0,
            "prediction": MetadataValue.md(table_markdown(result.prediction, ".3f")),
        },
    )

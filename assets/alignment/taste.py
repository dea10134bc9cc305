"""Taste discrimination as an asset (SimUSER Table 1, Agent4Rec Table 1): the sandbox
protocol, the papers' per-item protocol on the test window, and the per-item protocol under
the papers' hold-out (`ops.studies.alignment.taste`)."""

import polars as pl
from dagster import AssetExecutionContext, MetadataValue, Output, asset
from pydantic import Field

from assets.agents import build_population
from assets.alignment import GROUP
from assets.alignment.protocol import AlignmentConfig, degrades, log_protocol, protocol_opening
from ops.figures import table_markdown
from ops.studies.alignment.protocol_figures import taste_figure
from ops.studies.alignment.protocols import measure_taste
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking


class TasteAlignmentConfig(AlignmentConfig):
    papers_holdout: int = Field(
        default=10,
        ge=0,
        description="the per-item protocol again under the papers' hold-out: this many ratings per judged user drawn from its train window as positives (and as many for the thresholds), the agents rebuilt and the embedded brain refitted without them; 0 = off",
    )


@asset(group_name=GROUP, code_version="1", kinds={"python"})
@degrades
def taste_alignment(
    context: AssetExecutionContext,
    config: TasteAlignmentConfig,
    agents,
    embedded_brain,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    embeddings: EmbeddingsResource,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
):
    """Taste discrimination at 1:1, 1:3, 1:9 and 1:4 (SimUSER Table 1, Agent4Rec Table 1):
    the sandbox protocol, the papers' per-item protocol on the test window, and the per-item
    protocol under the papers' hold-out (`papers_holdout`)."""

    def rebuild(kept: pl.DataFrame):  # the agents the run built, from the ratings the papers' hold-out keeps
        return build_population(kept, users, catalogue, embeddings, sorted(agents.profiles))

    with protocol_opening(
        context,
        config,
        "taste discrimination",
        "taste",
        agents,
        embedded_brain,
        catalogue,
        llm,
        train_ratings,
        valid_ratings,
        test_ratings,
    ) as opening:
        result = measure_taste(
            opening,
            agents,
            train_ratings,
            valid_ratings,
            test_ratings,
            catalogue.get_column("item_id").to_numpy(),
            config.papers_holdout,
            users,
            rebuild,
            warn=context.log.warning,
        )
    brain = opening.brain
    with mlflow_tracking.asset_run(
        context, params={**config.model_dump(), "brain_name": brain.name, "agents": len(opening.users)}
    ):
        figure = taste_figure(result.summary, result.per_item, result.holdout)
        log_protocol(mlflow_tracking, result, brain, figure, "plots/alignment_taste.png")
    return Output(
        result,
        metadata={
            "brain": brain.name,
            "agents": len(opening.users),
            "table": MetadataValue.md(table_markdown(result.table())),
        },
    )

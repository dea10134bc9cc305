"""List quality as an asset: sandbox sessions on lists of rising quality, 1:9, 1:4, 1:1
(A/B Agent Fig. 5; `ops.studies.alignment.list_quality`)."""

import polars as pl
from dagster import AssetExecutionContext, MetadataValue, Output, asset

from assets.alignment import GROUP
from assets.alignment.protocol import AlignmentConfig, degrades, log_protocol, protocol_opening
from ops.figures import table_markdown
from ops.studies.alignment.protocol_figures import list_quality_figure
from ops.studies.alignment.protocols import list_quality_ladder, measure_list_quality
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking


@asset(group_name=GROUP, code_version="1", kinds={"python"})
@degrades
def list_quality_alignment(
    context: AssetExecutionContext,
    config: AlignmentConfig,
    agents,
    embedded_brain,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    catalogue: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
):
    """Sandbox sessions on lists of rising quality, 1:9, 1:4, 1:1 (A/B Agent Fig. 5)."""
    liked, ladder = list_quality_ladder(test_ratings, embedded_brain.config.like_threshold, agents.population)
    with protocol_opening(
        context,
        config,
        "list quality",
        "list_quality",
        agents,
        embedded_brain,
        catalogue,
        llm,
        train_ratings,
        valid_ratings,
        test_ratings,
        held=liked,
        min_items=ladder.need,
    ) as opening:
        item_ids = catalogue.get_column("item_id").to_numpy()
        result = measure_list_quality(opening, liked, ladder, train_ratings, valid_ratings, test_ratings, item_ids)
    brain, users = opening.brain, opening.users
    with mlflow_tracking.asset_run(
        context, params={**config.model_dump(), "brain_name": brain.name, "agents": len(users)}
    ):
        figure = list_quality_figure(result.readout.arms, result.ratios)
        log_protocol(mlflow_tracking, result, brain, figure, "plots/alignment_list_quality.png")
    return Output(
        result,
        metadata={
            "brain": brain.name,
            "agents": len(users),
            "lists": f"{ladder.list_length} items at " + ", ".join(result.ratios),
            "rises": str(result.rises),
            "table": MetadataValue.md(table_markdown(result.table())),
        },
    )

"""Agent4Rec §4.2 as an asset: the filter-bubble study's rounds played again with its
settings (so the same events), and DirectLiNGAM's causal graph over per-item quality,
popularity, exposure rate, views and mean simulated rating, beside Figure 9
(`ops.studies.causal`)."""

import polars as pl
from dagster import AssetExecutionContext, Failure, MaterializeResult, asset
from pydantic import Field

from assets.experiments import GROUP
from assets.experiments.publish import publish
from assets.rounds import FilterBubbleConfig
from ops.figures import save_figure
from ops.studies.causal import causal_figure, causal_study
from ops.studies.experiments.papers import DIFFERENCES
from ops.studies.rounds import RoundsConfig
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root


class CausalGraphConfig(FilterBubbleConfig):
    """The filter-bubble study's settings (its rounds) and the discovery's own."""

    item_facts: str = Field(
        default="profile",
        description="quality and popularity from the item profile (mean train rating, log number of train ratings: "
        "Agent4Rec's) or the catalogue (vote_average, log vote_count)",
    )
    min_views: int = Field(default=1, ge=1, description="an item enters the frame once watched this many times")
    n_bootstrap: int = Field(
        default=100, ge=0, description="bootstrap resamples of the items for each edge's share (0: none)"
    )
    prior_knowledge: bool = Field(
        default=True,
        description="tell DirectLiNGAM that nothing simulated causes quality and popularity: they are known before "
        "the first round (the train window's, or the catalogue's); Agent4Rec names no prior knowledge",
    )


@asset(group_name=GROUP, code_version="1", compute_kind="python")
def agent4rec_causal_graph(
    context: AssetExecutionContext,
    config: CausalGraphConfig,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    agents,
    embedded_brain,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """Agent4Rec §4.2, Figure 9: the causal graph DirectLiNGAM learns from the simulated
    rounds of the filter-bubble study, per item, with each edge's weight and bootstrap share."""
    rounds = RoundsConfig(rounds=config.rounds, pages=config.pages, split_pool=config.split_pool, seed=config.seed)
    try:
        study = causal_study(
            config.arm,
            rounds,
            train_ratings,
            valid_ratings,
            users,
            catalogue,
            agents,
            embedded_brain,
            n_agents=config.n_agents,
            max_epochs=config.max_epochs,
            item_facts=config.item_facts,
            min_views=config.min_views,
            n_bootstrap=config.n_bootstrap,
            prior_knowledge=config.prior_knowledge,
        )
    except ValueError as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
    folder = data_root() / "experiments" / "causal"
    figure = save_figure(causal_figure(study.graph), folder / "plots" / "causal_graph.png")
    body = study.markdown(config.arm, config.rounds, config.pages, config.split_pool, config.item_facts, config.seed)
    return publish(
        context,
        mlflow_tracking,
        "causal",
        "Agent4Rec §4.2: causal discovery over the simulated data (Figure 9)",
        body,
        DIFFERENCES["causal"],
        study.graph.edges,
        {"items": study.items},
        [figure],
        config.model_dump(),
    )

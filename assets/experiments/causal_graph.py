"""Agent4Rec §4.2 as an asset: the filter-bubble study's rounds played again with its
settings (so the same events), and DirectLiNGAM's causal graph over per-item quality,
popularity, exposure rate, views and mean simulated rating, beside Figure 9
(`ops.studies.causal`)."""

import time

import polars as pl
from dagster import AssetExecutionContext, Failure, MaterializeResult, asset
from pydantic import Field

from assets.experiments import GROUP
from assets.experiments.publish import publish
from assets.rounds import FilterBubbleConfig
from ops.figures import save_figure
from ops.studies.causal import (
    ITEM_FACTS,
    catalogue_facts,
    causal_figure,
    causal_markdown,
    discover,
    item_frame,
    profile_facts,
)
from ops.studies.experiments.papers import DIFFERENCES
from ops.studies.filter_bubble import play_rounds
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
    mm_ml_1m: pl.DataFrame,
    agents,
    embedded_brain,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """Agent4Rec §4.2, Figure 9: the causal graph DirectLiNGAM learns from the simulated
    rounds of the filter-bubble study, per item, with each edge's weight and bootstrap share."""
    started = time.perf_counter()
    rounds_config = RoundsConfig(
        rounds=config.rounds, pages=config.pages, split_pool=config.split_pool, seed=config.seed
    )
    results, chosen = play_rounds(
        config.arm,
        rounds_config,
        train_ratings,
        valid_ratings,
        users,
        mm_ml_1m,
        agents,
        embedded_brain,
        n_agents=config.n_agents,
        max_epochs=config.max_epochs,
    )
    events = pl.concat(
        [r.events.with_columns(round=pl.lit(r.round, dtype=pl.Int64)) for r in results], how="vertical_relaxed"
    )
    if config.item_facts not in ITEM_FACTS:
        raise Failure(description=f"item_facts must be one of {ITEM_FACTS}, got {config.item_facts!r}")
    facts = profile_facts(train_ratings) if config.item_facts == "profile" else catalogue_facts(mm_ml_1m)
    frame = item_frame(events, facts, config.min_views)
    try:
        graph = discover(frame, config.n_bootstrap, config.seed, config.prior_knowledge)
    except ValueError as exc:
        raise Failure(description=str(exc), allow_retries=False) from None
    context.log.info(
        f"{len(chosen)} agents, {config.rounds} rounds of {config.arm}: {time.perf_counter() - started:.0f} s"
    )
    folder = data_root() / "experiments" / "causal"
    figure = save_figure(causal_figure(graph), folder / "plots" / "causal_graph.png")
    body = [
        f"{len(chosen)} agents, {config.rounds} rounds of {config.arm} (pool split: {config.split_pool}, "
        f"{config.pages} pages), the embedded brain; seed {config.seed}; quality and popularity from the "
        + (
            "item profile (train window's mean rating and number of ratings)."
            if config.item_facts == "profile"
            else "catalogue (vote_average, vote_count)."
        ),
        "",
        *causal_markdown(graph, frame),
    ]
    return publish(
        context,
        mlflow_tracking,
        "causal",
        "Agent4Rec §4.2: causal discovery over the simulated data (Figure 9)",
        body,
        DIFFERENCES["causal"],
        graph.edges,
        {"items": frame},
        [figure],
        config.model_dump(),
    )

"""Social traits alignment as an asset: Spearman's ρ between each social trait's tier and
the behaviour it should drive, real beside simulated (Agent4Rec Fig. 4, A/B Agent Fig. 6;
`ops.studies.alignment.social`)."""

import polars as pl
from dagster import AssetExecutionContext, AssetIn, MetadataValue, Output, asset
from pydantic import Field

from assets.alignment import GROUP
from assets.alignment.protocol import AlignmentConfig
from ops.arms.ranking import evaluation_users
from ops.figures import table_markdown
from ops.settings import config_default
from ops.simulation.kinds import BrainSources, kinds_in_events
from ops.studies.alignment.protocol_figures import social_figure
from ops.studies.alignment.social import (
    real_behaviour,
    real_session_behaviour,
    simulated_behaviour,
    simulated_session_behaviour,
    tiers_frame,
    verdicts,
)
from ops.studies.alignment.social import social_traits_alignment as score_social
from ops.studies.alignment.windows import check_held_out
from resources.mlflow_tracking import MlflowTracking


class SocialTraitsConfig(AlignmentConfig):
    eval_users: int = Field(
        default=config_default("eval_users"),
        ge=0,
        description="the real side over a seeded sample of this many test users, the offline metrics' ($SIMAB_EVAL_USERS); 0 = all",
    )


@asset(group_name=GROUP, code_version="1", kinds={"scipy"}, ins={"simulation_events": AssetIn("simulation_events")})
def social_traits_alignment(
    context: AssetExecutionContext,
    config: SocialTraitsConfig,
    agents,
    embedded_brain,
    simulation_events: dict,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    catalogue: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
):
    """Spearman's ρ between each social trait's tier and the behaviour it should drive, real
    (test window) beside simulated (the arms' sandbox sessions) (Agent4Rec Fig. 4, A/B Agent Fig. 6)."""
    if not simulation_events:
        raise ValueError(
            "social traits alignment: no simulated arm yet; materialise simulation_events for at least one arm"
        )
    events = pl.concat([simulation_events[a] for a in sorted(simulation_events)])
    # A brain fitted on data (the embedded brain) carries what it was fitted on into the simulated side.
    sources = BrainSources(embedded=embedded_brain)
    fitted = [k.fitted_through(sources) for k in kinds_in_events(events.get_column("brain").unique().to_list())]
    fitted_through = max((t for t in fitted if t is not None), default=None)
    check_held_out(test_ratings, {"train": train_ratings, "validation": valid_ratings}, "social traits", fitted_through)
    context.log.info(
        f"social traits: the sessions of brain(s) {sorted(set(events.get_column('brain').to_list()))} on arms {sorted(simulation_events)}"
    )
    movie_mean = train_ratings.group_by("item_id").agg(pl.col("rating").mean().alias("mean"))
    movies = catalogue.select("item_id", "genres")
    real = test_ratings.filter(
        pl.col("user_id").is_in(pl.Series(evaluation_users(test_ratings, config.eval_users)).implode())
    )
    table = score_social(
        tiers_frame(agents.traits if agents.traits is not None else agents.profiles),
        real_behaviour(real, movie_mean, movies),
        simulated_behaviour(events, movie_mean, movies),
        config.n_bootstrap,
        seed=config.seed,
        real_sessions=real_session_behaviour(real, movies),
        simulated_sessions=simulated_session_behaviour(events, movies),
    )
    with mlflow_tracking.asset_run(
        context, params={"arms": ",".join(sorted(simulation_events)), "n_bootstrap": config.n_bootstrap}
    ):
        mlflow_tracking.log_metrics(
            {f"rho_{r['trait']}_{r['behaviour']}_{r['side']}": r["rho"] for r in table.iter_rows(named=True)}
        )
        mlflow_tracking.log_table(table, "social_traits")
        mlflow_tracking.log_figure(social_figure(table), "plots/alignment_social.png")
    return Output(
        table,
        metadata={"verdicts": MetadataValue.md(table_markdown(verdicts(table), ".3f"))},
    )

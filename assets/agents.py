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
    seed: int = Field(default=0, description="seed of the brain's fitting (negative sampling) and of its list-response calibration")
    calibrate_list_response: bool = Field(
        default=True,
        description="calibrate the click decision to real users' response to list quality on the validation window (issue 16 item 4)",
    )
    calibration_agents: int = Field(default=300, description="validation-window agents the calibration's yardstick runs on")


@asset(group_name=GROUP, code_version="2", compute_kind="scikit-learn")
def embedded_brain(
    context: AssetExecutionContext,
    config: EmbeddedBrainAssetConfig,
    agents,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    users: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
):
    """The embedded brain's click, like and rating models, fitted on train + validation, its
    click decision calibrated to real users' response to list quality (validation window)."""
    import time

    from ops.simulation.brains.embedded import EmbeddedBrainConfig, fit_embedded_brain

    model = fit_embedded_brain(agents, train_ratings, valid_ratings, users, EmbeddedBrainConfig(fit_seed=config.seed))
    skipped = ""
    if config.calibrate_list_response:
        from ops.readout.alignment.calibration import CalibrationConfig, TooFewAgents, calibrate_list_response
        from ops.simulation.catalogue import Catalogue

        started = time.perf_counter()
        calibration = CalibrationConfig(n_agents=config.calibration_agents, seed=config.seed)
        try:
            model = calibrate_list_response(model, agents.sessions(), train_ratings, valid_ratings, Catalogue.from_frame(mm_ml_1m), calibration)
            model.timings_s["calibration"] = time.perf_counter() - started
        except TooFewAgents as exc:
            # A tiny data set: the brain stays as fitted, and says so, rather than stopping the lifecycle.
            skipped = f"{exc}; the click decision is left uncalibrated"
            context.log.warning(skipped)
    params = model.params
    holdout = {"click_auc_holdout": params.click_auc_holdout, "like_auc_holdout": params.like_auc_holdout, "rating_rmse_holdout": params.rating_rmse_holdout}
    response = params.list_response
    calibrated = {} if response is None else {
        "list_response_real": response.real_elasticity, "list_response_before": response.elasticity_before,
        "list_response_after": response.elasticity_after, "click_scale": params.click_scale, "click_shift": params.click_shift,
    }
    with mlflow_tracking.asset_run(context, params={"fit_seed": config.seed, "calibrate_list_response": config.calibrate_list_response}):
        mlflow_tracking.log_metrics({**{f"seconds_{k}": v for k, v in model.timings_s.items()}, **holdout, **calibrated})
        mlflow_tracking.log_dict(params.model_dump(mode="json"), "embedded_brain_params.json")
        if response is not None:
            from ops.readout.alignment.plots import calibration_figure

            mlflow_tracking.log_table(pl.DataFrame(response.grid), "list_response_calibration")
            mlflow_tracking.log_figure(calibration_figure(response.grid, response.real_elasticity, response.click_scale), "plots/list_response_calibration.png")
    metadata = {**{k: round(v, 4) for k, v in {**holdout, **calibrated}.items() if v is not None}, "fitted users": params.n_users}
    if skipped:
        metadata["list-response calibration"] = skipped
    return Output(model, metadata=metadata)

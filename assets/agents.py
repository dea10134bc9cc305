"""Lifecycle step 7: one agent per user — profile and long-term memory — and the fitted
embedded brain.

`agents` reads the train split only (profiles, memories, the catalogue's embeddings);
`embedded_brain` fits the offline brain's few parameters on the train and validation
windows (`ops.simulation.brains.embedded` says how).  The LLM brain needs no fitting.
"""

import polars as pl
from dagster import AssetExecutionContext, Config, Failure, MetadataValue, Output, asset
from pydantic import Field

from ops.agents.build import Agents, AgentsConfig, build_agents
from ops.simulation.kinds.llm import LLM
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root

GROUP = "agents"


def build_population(
    ratings: pl.DataFrame, users: pl.DataFrame, mm_ml_1m: pl.DataFrame, embeddings: EmbeddingsResource
) -> Agents:
    """The agents of `users` built from `ratings` (the train window, or what a hold-out keeps)
    with the embeddings resource's embedders, through the run's embeddings cache."""
    return build_agents(
        ratings,
        users,
        mm_ml_1m,
        AgentsConfig(),
        embeddings.text_embedder(),
        embeddings.poster_embedder(),
        cache_dir=data_root() / "cache" / "embeddings",
    )


@asset(group_name=GROUP, code_version="4", compute_kind="numpy")
def agents(
    context: AssetExecutionContext,
    train_ratings: pl.DataFrame,
    users: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    embeddings: EmbeddingsResource,
    mlflow_tracking: MlflowTracking,
):
    """Profiles (demographics, social traits, pickiness, per-page preferences) and memories."""
    from ops.agents.profile import profiles_frame

    population = build_population(train_ratings, users, mm_ml_1m, embeddings)
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
    seed: int = Field(
        default=0, description="seed of the brain's fitting (negative sampling) and of its list-response calibration"
    )
    calibrate_list_response: bool = Field(
        default=True,
        description="calibrate the click decision to real users' response to list quality on the validation window (issue 16 item 4)",
    )
    calibration_agents: int = Field(
        default=300, description="validation-window agents the calibration's yardstick runs on"
    )


@asset(group_name=GROUP, code_version="4", compute_kind="scikit-learn")
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
        from ops.simulation.catalogue import Catalogue
        from ops.studies.alignment.calibration import CalibrationConfig, calibrate_if_possible

        started = time.perf_counter()
        calibration = CalibrationConfig(n_agents=config.calibration_agents, seed=config.seed)
        model = calibrate_if_possible(
            model, agents.sessions(), train_ratings, valid_ratings, Catalogue.from_frame(mm_ml_1m), calibration
        )
        model.timings_s["calibration"] = time.perf_counter() - started
        # A tiny data set: the brain stays as fitted and says so (the verdict warns too).
        skipped = model.params.list_response_skipped or ""
        if skipped:
            context.log.warning(skipped)
    params = model.params
    holdout = {
        "click_auc_holdout": params.click_auc_holdout,
        "like_auc_holdout": params.like_auc_holdout,
        "rating_rmse_holdout": params.rating_rmse_holdout,
    }
    response = params.list_response
    calibrated = (
        {}
        if response is None
        else {
            "list_response_real": response.real_elasticity,
            "list_response_before": response.elasticity_before,
            "list_response_after": response.elasticity_after,
            "click_scale": params.click_scale,
            "click_shift": params.click_shift,
            "list_response_agents": response.agents,
            "list_response_list_length": response.list_length,
        }
    )
    # The click model's collaborative ablation (issue 22, item 2): each variant's held-out AUC.
    ablation = {
        f"click_auc_holdout_{r['variant'].replace('+', '_')}": r["click_auc_holdout"]
        for r in params.click_ablation
        if r["click_auc_holdout"] is not None
    }
    run_params = {
        "fit_seed": config.seed,
        "calibrate_list_response": config.calibrate_list_response,
        "click_variant": params.click_variant,
    }
    with mlflow_tracking.asset_run(context, params=run_params):
        seconds = {f"seconds_{k}": v for k, v in model.timings_s.items()}
        mlflow_tracking.log_metrics({**seconds, **holdout, **calibrated, **ablation})
        mlflow_tracking.log_dict(params.model_dump(mode="json"), "embedded_brain_params.json")
        if response is not None:
            from ops.studies.alignment.plots import calibration_figure

            mlflow_tracking.log_table(pl.DataFrame(response.grid), "list_response_calibration")
            mlflow_tracking.log_figure(
                calibration_figure(response.grid, response.real_elasticity, response.click_scale),
                "plots/list_response_calibration.png",
            )
    metadata = {
        **{k: round(v, 4) for k, v in {**holdout, **calibrated}.items() if v is not None},
        "fitted users": params.n_users,
    }
    if skipped:
        metadata["list-response calibration"] = skipped
    return Output(model, metadata=metadata)


class LLMPersonasAssetConfig(Config):
    n_agents: int = Field(
        default=0, ge=0, description="agents matched, a seeded sample; 0 = every agent with a validation rating"
    )
    n_candidates: int = Field(
        default=5, ge=1, description="candidate personas written per agent (SimUSER §3.1); each costs two calls"
    )
    validation_movies: int = Field(
        default=10, ge=1, description="validation-window ratings each candidate predicts (a seeded sample per agent)"
    )
    seed: int = Field(default=0, description="seed of the samples and of every request")


@asset(group_name="personas", code_version="1", compute_kind="openai")
def llm_personas(
    context: AssetExecutionContext,
    config: LLMPersonasAssetConfig,
    agents,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
) -> Output[pl.DataFrame]:
    """SimUSER's persona matching for the LLM brain: per agent, candidate personas written by
    the model from its train history, the one whose ratings of the agent's held-out
    validation movies are closest to the real ones kept.  A simulation with `persona:
    matched` shows it in every prompt.  Estimates its bill first and refuses to start above
    the `llm` resource's max_cost_usd."""
    import numpy as np

    from ops.simulation.brains.llm.persona import drop_summary, match_personas, persona_inputs, personas_frame
    from ops.simulation.catalogue import Catalogue
    from ops.simulation.cost import estimate_persona_cost

    users = sorted(agents.profiles)
    if config.n_agents and config.n_agents < len(users):
        users = sorted(np.random.default_rng(config.seed).choice(users, config.n_agents, replace=False).tolist())
    inputs = persona_inputs(train_ratings, valid_ratings, users, config.validation_movies, config.seed)
    if not inputs:
        raise Failure(
            description="llm_personas: no agent has a validation-window rating to score candidate personas on",
            allow_retries=False,
        )
    # SimUSER's persona matching asks the LLM brain: the persona is a text it writes and reads.
    kind, sources = LLM(), llm.sources(context, Catalogue.from_frame(mm_ml_1m))
    # Priced by the transport's own cost() on the prompts it would send (nothing is sent).
    with llm.open_brain(context, kind, sources) as pricing:
        estimate = estimate_persona_cost(pricing, inputs, config.n_candidates, config.seed)
    context.log.info(f"LLM bill before persona matching: {estimate.describe()}")
    with llm.open_brain(context, kind, sources, estimate=lambda: estimate) as brain:
        step = max(1, len(inputs) // 10)

        def progress(done: int, total: int) -> None:
            if done % step == 0 or done == total:
                context.log.info(f"personas matched: {done}/{total} agents")

        matches = match_personas(brain, inputs, config.n_candidates, config.seed, progress=progress)
    table = personas_frame(matches)
    matched = table.filter(pl.col("persona").is_not_null())
    # Why candidates were dropped (the per-candidate reasons are in the table's `dropped`).
    drops = drop_summary(matches)
    examples = (
        table.select("user_id", "dropped")
        .explode("dropped")
        .drop_nulls("dropped")
        .unique("dropped", keep="first", maintain_order=True)
        .head(5)
    )
    context.log.info(
        f"persona matching: {matched.height} of {table.height} agents matched; candidates dropped: "
        + (", ".join(f"{n} {kind}" for kind, n in drops.items()) or "none")
        + "".join(f"\n  user {u}: {why}" for u, why in examples.iter_rows())
    )
    rmse = matched.get_column("rmse").mean() if matched.height else None
    with mlflow_tracking.asset_run(context, params={**config.model_dump(), **llm.describe()}):
        mlflow_tracking.log_metrics(
            {
                "agents": table.height,
                "matched": matched.height,
                **({"rmse_kept_mean": rmse} if rmse is not None else {}),
                "estimated_cost_usd": estimate.cost_usd,
                **{f"candidates_dropped_{kind}": n for kind, n in drops.items()},
                **{f"llm_{k}": v for k, v in brain.usage.as_dict().items()},
            }
        )
        mlflow_tracking.set_tags({f"llm_{k}": v for k, v in brain.usage.facts().items()})
        mlflow_tracking.log_table(table.head(200), "llm_personas_sample")
    return Output(
        table,
        metadata={
            "agents": table.height,
            "matched": matched.height,
            "unmatched (keep the trait persona)": table.height - matched.height,
            "candidates dropped": MetadataValue.json(drops),
            "why candidates were dropped (examples)": MetadataValue.md(
                examples.to_pandas().to_markdown(index=False) if examples.height else "none dropped"
            ),
            **{f"llm {k}": v for k, v in brain.usage.facts().items()},
            **({"mean RMSE of the kept persona": round(rmse, 4)} if rmse is not None else {}),
            "estimated calls": estimate.calls,
            "estimated cost (USD)": round(estimate.cost_usd, 4),
            "estimate": MetadataValue.md(estimate.to_markdown()),
            "personas (first 5)": MetadataValue.md(
                matched.select("user_id", "rmse", "persona").head(5).to_pandas().to_markdown(index=False)
            ),
        },
    )

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
from ops.agents.profile import population_ids, profiles_frame
from ops.data.random_exposure import calibration_rows, calibration_users
from ops.figures import table_markdown
from ops.settings import config_default
from ops.simulation.brains.llm.persona import PersonaOutcome, match_personas, persona_agents, persona_inputs, tenths
from ops.simulation.catalogue import Catalogue
from ops.simulation.cost import estimate_persona_cost
from ops.simulation.kinds.llm import LLM
from ops.studies.alignment.calibration import brain_figures, fit_calibrated_brain
from ops.studies.alignment.exposure_calibration import exposure_calibration_line
from ops.studies.alignment.protocol_figures import calibration_figure
from ops.studies.read_users import ROLES, ReadUsersConfig, read_users
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking

GROUP = "agents"


def build_population(
    ratings: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    embeddings: EmbeddingsResource,
    user_ids=None,
    valid: pl.DataFrame | None = None,
) -> Agents:
    """The agents of `users` built from `ratings` (the train window, or what a hold-out keeps)
    with the embeddings resource's embedders, through the run's embeddings cache; those of
    `user_ids` only when given (the users the run reads); with `valid`, standing at the
    simulation clock (`ops.agents.clock`)."""
    return build_agents(
        ratings,
        users,
        catalogue,
        AgentsConfig(),
        embeddings.text_embedder(),
        embeddings.poster_embedder(),
        cache_dir=embeddings.cache_folder(),
        user_ids=user_ids,
        valid=valid,
    )


class AgentsAssetConfig(Config):
    """Whose agents are built: the users the run reads (`ops.studies.read_users`), from the
    samples the later steps draw, configured as they are (the same settings feed both)."""

    n_agents: int = Field(
        default=config_default("agents"),
        ge=0,
        description="the simulation's agents, a seeded sample; 0 = every user, and every agent is built ($SIMAB_AGENTS)",
    )
    seed: int = Field(default=0, description="the simulation's seed (its agent sample)")
    brain_seed: int = Field(default=0, description="the embedded brain's seed (its fitting and calibration samples)")
    calibration_agents: int = Field(default=300, ge=0, description="the embedded brain's calibration agents")
    trust_protocols: bool = Field(
        default=config_default("trust_protocols"),
        description="the trust protocols that ask the brain are run: their agents are built ($SIMAB_TRUST_PROTOCOLS)",
    )
    protocol_agents: int | None = Field(
        default=None,
        ge=0,
        description="agents of each trust protocol; null: as many as half_width needs ($SIMAB_ALIGNMENT_AGENTS)",
    )
    half_width: float = Field(
        default=config_default("trust_half_width"), gt=0, le=0.5, description="($SIMAB_TRUST_HALF_WIDTH)"
    )
    protocol_seed: int = Field(default=0, description="the trust protocols' seed")
    click_calibration: str = Field(
        default=config_default("click_calibration"),
        description="random_exposure: the random bucket's calibration half is built too ($SIMAB_CLICK_CALIBRATION)",
    )


@asset(group_name=GROUP, code_version="7", kinds={"numpy"})
def agents(
    context: AssetExecutionContext,
    config: AgentsAssetConfig,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    ground_truth: pl.DataFrame,
    embeddings: EmbeddingsResource,
    mlflow_tracking: MlflowTracking,
):
    """Profiles (demographics, social traits, pickiness, per-page preferences) and memories
    of the users the run reads (`ops.studies.read_users`), the traits of every user; the agents
    stand at the start of the test period: their train and validation history."""
    readers = read_users(
        train_ratings,
        valid_ratings,
        test_ratings,
        population_ids(train_ratings),
        ReadUsersConfig(
            **config.model_dump(exclude={"trust_protocols", "click_calibration"}), protocols=config.trust_protocols
        ),
        # whom to build only: the bucket's rows reach the brain's calibration, never the agents
        exposure_users=calibration_users(ground_truth) if config.click_calibration == "random_exposure" else (),
    )
    population = build_population(
        train_ratings, users, catalogue, embeddings, readers.get_column("user_id"), valid=valid_ratings
    )
    table = profiles_frame(population.profiles)
    read = {role: int(readers.get_column(role).sum()) for role in ROLES}
    context.log.info(
        f"agents built for {len(population.profiles):,} of {population.population.size:,} users: "
        + ", ".join(f"{role} {n:,}" for role, n in read.items())
    )
    with mlflow_tracking.asset_run(context, params={**embeddings.describe(), "agents": len(population.profiles)}):
        mlflow_tracking.log_metrics({f"read_{role}": n for role, n in read.items()})
        mlflow_tracking.log_metrics({f"seconds_{k}": v for k, v in population.timings_s.items()})
        mlflow_tracking.log_table(table.head(200), "agent_profiles_sample")
        for column in ("activity_tier", "conformity_tier", "diversity_tier", "pickiness"):
            if column in table.columns:
                mlflow_tracking.log_metrics({f"{column}_{k}": v for k, v in table.group_by(column).len().iter_rows()})
    preview = table_markdown(table.head(10))
    return Output(
        population,
        metadata={
            "agents": len(population.profiles),
            "population": int(population.population.size),
            **{f"read: {role}": n for role, n in read.items()},
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
        description="calibrate the click decision to real users' response to list quality on the validation window",
    )
    calibration_agents: int = Field(
        default=300, description="validation-window agents the calibration's yardstick runs on"
    )
    click_calibration: str = Field(
        default=config_default("click_calibration"),
        description="list_response | random_exposure: a seeded half of the random bucket's users with clicks sets "
        "the click decision (the other half judges; docs/definitions.md#the-truth) ($SIMAB_CLICK_CALIBRATION)",
    )


@asset(group_name=GROUP, code_version="6", kinds={"scikit-learn"})
def embedded_brain(
    context: AssetExecutionContext,
    config: EmbeddedBrainAssetConfig,
    agents,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    ground_truth: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
):
    """The embedded brain's click, like and rating models, fitted on train + validation, its
    click decision calibrated on the random-exposure sample's calibration half where the run
    has one with clicks, else to real users' response to list quality (validation window)."""
    model = fit_calibrated_brain(
        agents,
        train_ratings,
        valid_ratings,
        users,
        catalogue,
        seed=config.seed,
        calibrate=config.calibrate_list_response,
        calibration_agents=config.calibration_agents,
        # The calibration half only: the judging half and a planted world's exact truth never reach the fit.
        exposure_rows=calibration_rows(ground_truth) if config.click_calibration == "random_exposure" else None,
    )
    params = model.params
    # A tiny data set or a bucket too small: the step says how the brain was calibrated instead.
    skipped = (params.list_response_skipped or "") if config.calibrate_list_response else ""
    for line in (skipped, params.exposure_calibration_skipped):
        if line:
            context.log.warning(line)
    if params.exposure_calibration is not None:
        context.log.info(exposure_calibration_line(params.exposure_calibration))
    shown, ablation = brain_figures(params)
    run_params = {
        "fit_seed": config.seed,
        "calibrate_list_response": config.calibrate_list_response,
        "click_calibration": "random_exposure" if params.exposure_calibration else "list_response",
        "click_variant": params.click_variant,
    }
    with mlflow_tracking.asset_run(context, params=run_params):
        seconds = {f"seconds_{k}": v for k, v in model.timings_s.items()}
        mlflow_tracking.log_metrics({**seconds, **shown, **ablation})
        mlflow_tracking.log_dict(params.model_dump(mode="json"), "embedded_brain_params.json")
        response = params.list_response
        if response is not None:
            mlflow_tracking.log_table(pl.DataFrame(response.grid), "list_response_calibration")
            mlflow_tracking.log_figure(
                calibration_figure(response.grid, response.real_elasticity, response.click_scale),
                "plots/list_response_calibration.png",
            )
    metadata = {**{k: round(v, 4) for k, v in shown.items() if v is not None}, "fitted users": params.n_users}
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


@asset(group_name="personas", code_version="1", kinds={"openai"})
def llm_personas(
    context: AssetExecutionContext,
    config: LLMPersonasAssetConfig,
    agents,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    catalogue: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
) -> Output[pl.DataFrame]:
    """SimUSER's persona matching for the LLM brain: per agent, candidate personas written by
    the model from its train history, the one whose ratings of the agent's held-out
    validation movies are closest to the real ones kept.  A simulation with `persona:
    matched` shows it in every prompt.  Estimates its bill first and refuses to start above
    the `llm` resource's max_cost_usd."""
    # The personas are scored on the validation window: the agents as it found them.
    users = persona_agents(agents.at_fit_clock().profiles, config.n_agents, config.seed)
    inputs = persona_inputs(train_ratings, valid_ratings, users, config.validation_movies, config.seed)
    if not inputs:
        raise Failure(
            description="llm_personas: no agent has a validation-window rating to score candidate personas on",
            allow_retries=False,
        )
    # SimUSER's persona matching asks the LLM brain: the persona is a text it writes and reads.
    kind, sources = LLM(), llm.sources(context, Catalogue.from_frame(catalogue))
    # Priced by the transport's own cost() on the prompts it would send (nothing is sent).
    with llm.open_brain(context, kind, sources) as pricing:
        estimate = estimate_persona_cost(pricing, inputs, config.n_candidates, config.seed)
    context.log.info(f"LLM bill before persona matching: {estimate.describe()}")
    with llm.open_brain(context, kind, sources, estimate=lambda: estimate) as brain:
        progress = tenths(context.log.info, len(inputs))
        outcome = PersonaOutcome.of(match_personas(brain, inputs, config.n_candidates, config.seed, progress=progress))
    # Why candidates were dropped (the per-candidate reasons are in the table's `dropped`).
    context.log.info(outcome.describe())
    usage = {f"llm_{k}": v for k, v in brain.usage.as_dict().items()}
    with mlflow_tracking.asset_run(context, params={**config.model_dump(), **llm.describe()}):
        mlflow_tracking.log_metrics({**outcome.metrics(), "estimated_cost_usd": estimate.cost_usd, **usage})
        mlflow_tracking.set_tags({f"llm_{k}": v for k, v in brain.usage.facts().items()})
        mlflow_tracking.log_table(outcome.table.head(200), "llm_personas_sample")
    rmse = outcome.rmse
    return Output(
        outcome.table,
        metadata={
            **outcome.counts(),
            "candidates dropped": MetadataValue.json(outcome.drops),
            "why candidates were dropped (examples)": MetadataValue.md(outcome.examples_markdown()),
            **{f"llm {k}": v for k, v in brain.usage.facts().items()},
            **({"mean RMSE of the kept persona": round(rmse, 4)} if rmse is not None else {}),
            "estimated calls": estimate.calls,
            "estimated cost (USD)": round(estimate.cost_usd, 4),
            "estimate": MetadataValue.md(estimate.to_markdown()),
            "personas (first 5)": MetadataValue.md(outcome.personas_markdown()),
        },
    )

"""How far to trust the agents: the papers' alignment protocols as assets, and
the fidelity warning as a (non-blocking) asset check.

Every protocol holds out the test window and asks the brain the run config names
(`brain:` a name of the brain registry, as the simulation asset; `$SIMAB_BRAIN`) through its sandbox
decision path, on a seeded sample of agents: as many as the 95 % intervals of its figures
need to be ±`half_width` at most (`ops.studies.alignment.sizing`: 97 agents for ±0.10), or
`n_agents` (0 = every agent with held-out ratings).  `ops.studies.alignment` says how.

The three protocols that ask the brain never stop the read-out: one switched off
(`enabled: false`, $SIMAB_TRUST_PROTOCOLS=off), refused by the run's cost limit before its
first call, stopped at the limit or failed on the endpoint stores a "not measured" record
(the reason and the protocol's estimate) instead of failing, and the report says so beside
the A/B verdict; so does one that breaks (its traceback in the log).  Dagster skips an
asset whose input failed, so a failed protocol would leave no report at all; a record keeps
the graph, the lineage and the verdict.
"""

import functools
import traceback

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetIn,
    Config,
    MetadataValue,
    Output,
    asset,
    asset_check,
)
from pydantic import Field

from assets.agents import build_population
from ops.arms.ranking import evaluation_users
from ops.arms.registry import has_capability
from ops.preflight.bill import protocol_bill
from ops.readout.fidelity import arm_agreement
from ops.settings import config_default
from ops.simulation.brains.llm import LLMEndpointError, LLMTransportError
from ops.simulation.budget import CostLimitExceeded
from ops.simulation.catalogue import Catalogue
from ops.simulation.kinds import DEFAULT_BRAIN, BrainSources, brain_kind, kinds_in_events
from ops.simulation.runner import SimulationFailed
from ops.studies.alignment.lists import ProtocolFailed
from ops.studies.alignment.plots import (
    list_quality_figure,
    rating_figure,
    sensitivity_figure,
    social_figure,
    taste_figure,
)
from ops.studies.alignment.protocols import (
    NotMeasurable,
    Opening,
    ProtocolSettings,
    list_quality_ladder,
    measure_list_quality,
    measure_rating,
    measure_taste,
    open_protocol,
)
from ops.studies.alignment.sensitivity import run_agents, sensitivity_study, skip_reason
from ops.studies.alignment.sizing import DEFAULT_HALF_WIDTH, protocol_agents
from ops.studies.alignment.social import (
    real_behaviour,
    real_session_behaviour,
    simulated_behaviour,
    simulated_session_behaviour,
    tiers_frame,
    verdicts,
)
from ops.studies.alignment.social import social_traits_alignment as score_social
from ops.studies.alignment.trust import fidelity_warning
from ops.studies.alignment.windows import check_held_out
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking

GROUP = "alignment"
# An arm that measures the simulator (the mirror, ops.arms.mirror) is no candidate.
_is_diagnostic = functools.partial(has_capability, attribute="diagnostic")


class AlignmentConfig(Config):
    brain: str = Field(
        default=DEFAULT_BRAIN,
        description="who answers, a brain of the registry: embedded (offline default), llm (the `llm` resource's "
        "endpoint), … ($SIMAB_BRAIN)",
    )
    vision: bool = Field(
        default=True, description="False: the brain without posters, as the simulation's vision ablation"
    )
    n_agents: int | None = Field(
        default=None,
        ge=0,
        description="agents sampled among those with held-out (test-window) ratings; null: as many as half_width "
        "needs; 0 = all ($SIMAB_ALIGNMENT_AGENTS)",
    )
    half_width: float = Field(
        default=DEFAULT_HALF_WIDTH,
        gt=0,
        le=0.5,
        description="without n_agents: the 95 % intervals' half-width the sample is sized for ($SIMAB_TRUST_HALF_WIDTH)",
    )
    enabled: bool = Field(
        default=config_default("trust_protocols"),
        description="false: not run, stored as not measured (the protocols that ask the brain; $SIMAB_TRUST_PROTOCOLS)",
    )
    seed: int = Field(default=0, description="seed of the sample, the lists and every decision")
    n_bootstrap: int = Field(default=1000, description="bootstrap replicates of the 95 % intervals")


class TasteAlignmentConfig(AlignmentConfig):
    papers_holdout: int = Field(
        default=10,
        ge=0,
        description="the per-item protocol again under the papers' hold-out: this many ratings per judged user drawn from its train window as positives (and as many for the thresholds), the agents rebuilt and the embedded brain refitted without them; 0 = off",
    )


class RatingAlignmentConfig(AlignmentConfig):
    max_pairs_per_agent: int = Field(
        default=20, description="held-out ratings asked per agent (one request each for the LLM brain); 0 = all"
    )


def _degrades(protocol):
    """A protocol asset that stores a not-measured record (`_not_measured`) instead of
    failing — it cannot be measured, the LLM or its cost limit stops it, or it breaks — so
    that the report, which depends on it, still gives the A/B verdict.  An error that is not
    the LLM's is logged with its traceback: the step shows a warning, not a success."""

    @functools.wraps(protocol)
    def measured(*args, **kwargs):
        context = kwargs.get("context", args[0] if args else None)
        try:
            return protocol(*args, **kwargs)
        except NotMeasurable as exc:
            return _not_measured(context, exc)
        except Exception as exc:  # noqa: BLE001 - a trust check that breaks must not take the verdict with it
            if not isinstance(exc, _LLM_FAILURES):
                context.log.error(f"{context.asset_key.to_user_string()} broke:\n{traceback.format_exc()}")
            llm, name = kwargs.get("llm"), context.asset_key.to_user_string()
            known = llm.bill_of(context).bill()["estimates"].get(name) if llm is not None else None
            estimate = f"estimated ${known:,.2f} by its dry run" if known is not None else ""
            stopped = "stopped at the cost limit" if isinstance(exc, CostLimitExceeded) else "failed"
            said = str(exc) if isinstance(exc, _LLM_FAILURES) else f"{type(exc).__name__}: {exc}"
            return _not_measured(context, NotMeasurable(f"{name}: {stopped}: {said}", stopped, estimate))

    return measured


@asset(group_name=GROUP, code_version="1", compute_kind="python")
@_degrades
def taste_alignment(
    context: AssetExecutionContext,
    config: TasteAlignmentConfig,
    agents,
    embedded_brain,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    users: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    embeddings: EmbeddingsResource,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
):
    """Taste discrimination at 1:1, 1:3, 1:9 and 1:4 (SimUSER Table 1, Agent4Rec Table 1):
    the sandbox protocol, the papers' per-item protocol on the test window, and the per-item
    protocol under the papers' hold-out (`papers_holdout`)."""

    def rebuild(kept: pl.DataFrame):  # the agents the run built, from the ratings the papers' hold-out keeps
        return build_population(kept, users, mm_ml_1m, embeddings, sorted(agents.profiles))

    with _open(
        context,
        config,
        "taste discrimination",
        "taste",
        agents,
        embedded_brain,
        mm_ml_1m,
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
            mm_ml_1m.get_column("movie_id").to_numpy(),
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
        _log_protocol(mlflow_tracking, result, brain, figure, "plots/alignment_taste.png")
    return Output(
        result,
        metadata={
            "brain": brain.name,
            "agents": len(opening.users),
            "table": MetadataValue.md(result.table().to_pandas().to_markdown(index=False)),
        },
    )


@asset(group_name=GROUP, code_version="1", compute_kind="python", ins={"recommender_arm": AssetIn("recommender_arm")})
@_degrades
def rating_alignment(
    context: AssetExecutionContext,
    config: RatingAlignmentConfig,
    agents,
    embedded_brain,
    recommender_arm: dict,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
):
    """Rating prediction beside the user mean and the offline arms (SimUSER Table 2) and the
    rating distribution (Agent4Rec Fig. 3), on the same held-out pairs."""
    with _open(
        context,
        config,
        "rating prediction",
        "rating",
        agents,
        embedded_brain,
        mm_ml_1m,
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
        _log_protocol(mlflow_tracking, result, brain, figure, "plots/alignment_rating.png")
    return Output(
        result,
        metadata={
            "brain": brain.name,
            "pairs": result.pairs.height,
            "wasserstein": result.wasserstein or 0.0,
            "prediction": MetadataValue.md(result.prediction.to_pandas().to_markdown(index=False, floatfmt=".3f")),
        },
    )


@asset(group_name=GROUP, code_version="1", compute_kind="python")
@_degrades
def list_quality_alignment(
    context: AssetExecutionContext,
    config: AlignmentConfig,
    agents,
    embedded_brain,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
):
    """Sandbox sessions on lists of rising quality, 1:9, 1:4, 1:1 (A/B Agent Fig. 5)."""
    liked, ladder = list_quality_ladder(test_ratings, embedded_brain.config.like_threshold, agents.population)
    with _open(
        context,
        config,
        "list quality",
        "list_quality",
        agents,
        embedded_brain,
        mm_ml_1m,
        llm,
        train_ratings,
        valid_ratings,
        test_ratings,
        held=liked,
        min_items=ladder.need,
    ) as opening:
        movie_ids = mm_ml_1m.get_column("movie_id").to_numpy()
        result = measure_list_quality(opening, liked, ladder, train_ratings, valid_ratings, test_ratings, movie_ids)
    brain, users = opening.brain, opening.users
    with mlflow_tracking.asset_run(
        context, params={**config.model_dump(), "brain_name": brain.name, "agents": len(users)}
    ):
        figure = list_quality_figure(result.readout.arms, result.ratios)
        _log_protocol(mlflow_tracking, result, brain, figure, "plots/alignment_list_quality.png")
    return Output(
        result,
        metadata={
            "brain": brain.name,
            "agents": len(users),
            "lists": f"{ladder.list_length} items at " + ", ".join(result.ratios),
            "rises": str(result.rises),
            "table": MetadataValue.md(result.table().to_pandas().to_markdown(index=False)),
        },
    )


class SensitivityConfig(Config):
    brain: str = Field(
        default=DEFAULT_BRAIN,
        description="the brain of the run ($SIMAB_BRAIN); a brain that pays per decision (llm) is skipped unless metered_brain",
    )
    vision: bool = Field(default=True, description="False: the brain without posters")
    slots: list[int] = Field(
        default=[0, 5, 10, 15, 20],
        description="the ladder's rungs: slots of the control's top-20 lists replaced by random unseen items (0 included: the control)",
    )
    metered_brain: bool = Field(
        default=False,
        description="run the ladder with a brain that pays per decision too (five simulations of the run's agents)",
    )
    seed: int = Field(default=0, description="seed of the replaced slots and items and of every decision")
    n_bootstrap: int = Field(default=1000, description="bootstrap replicates of the 95 % intervals")


@asset(
    group_name=GROUP,
    code_version="1",
    compute_kind="python",
    ins={"ab_readout": AssetIn("ab_readout"), "top20_lists": AssetIn("top20_lists")},
)
@_degrades
def list_sensitivity(
    context: AssetExecutionContext,
    config: SensitivityConfig,
    ab_readout,
    top20_lists: dict,
    agents,
    embedded_brain,
    train_ratings: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
    llm: LLMResource,
    mlflow_tracking: MlflowTracking,
):
    """The control's lists degraded step by step (0, 5, 10, 15, 20 of 20 slots replaced by
    random unseen items), simulated with the run's agents: CTR per rung and the smallest
    degradation the simulation detects (`ops.studies.alignment.sensitivity`)."""
    control = ab_readout.control
    if control not in top20_lists:
        return _not_measured(context, NotMeasurable(f"the control arm {control!r} has no top-20 lists"))
    kind = brain_kind(config.brain).seeing(config.vision)
    if "sensitivity" not in kind.answers:
        return _not_measured(context, NotMeasurable(f"sensitivity ladder: the {kind.name} brain does not answer it"))
    run = run_agents(ab_readout, control)
    sources = llm.sources(context, Catalogue.from_frame(mm_ml_1m), embedded_brain)
    with llm.open_brain(context, kind, sources) as brain:
        skipped = skip_reason(brain, len(run), config.metered_brain)
        if skipped:
            return _not_measured(context, NotMeasurable(skipped))
        result = sensitivity_study(
            brain,
            agents.sessions(sorted(run)),
            run,
            control,
            top20_lists[control],
            train_ratings.select("user_id", "movie_id"),
            sources.catalogue,
            mm_ml_1m.get_column("movie_id").to_numpy(),
            config.slots,
            config.seed,
            config.n_bootstrap,
            concurrency=kind.concurrency(sources),
        )
    smallest = result.smallest_detected()
    with mlflow_tracking.asset_run(
        context, params={**config.model_dump(), "brain_name": brain.name, "control": control, "agents": result.agents}
    ):
        _log_protocol(mlflow_tracking, result, brain, sensitivity_figure(result), "plots/sensitivity_ladder.png")
    return Output(
        result,
        metadata={
            "brain": brain.name,
            "control": control,
            "agents": result.agents,
            "smallest detected (slots)": smallest if smallest is not None else "none",
            "table": MetadataValue.md(result.table().to_pandas().to_markdown(index=False)),
        },
    )


class SocialTraitsConfig(AlignmentConfig):
    eval_users: int = Field(
        default=config_default("eval_users"),
        ge=0,
        description="the real side over a seeded sample of this many test users, the offline metrics' ($SIMAB_EVAL_USERS); 0 = all",
    )


@asset(
    group_name=GROUP, code_version="1", compute_kind="scipy", ins={"simulation_events": AssetIn("simulation_events")}
)
def social_traits_alignment(
    context: AssetExecutionContext,
    config: SocialTraitsConfig,
    agents,
    embedded_brain,
    simulation_events: dict,
    train_ratings: pl.DataFrame,
    valid_ratings: pl.DataFrame,
    test_ratings: pl.DataFrame,
    mm_ml_1m: pl.DataFrame,
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
    movie_mean = train_ratings.group_by("movie_id").agg(pl.col("rating").mean().alias("mean"))
    movies = mm_ml_1m.select("movie_id", "genres")
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
        metadata={"verdicts": MetadataValue.md(verdicts(table).to_pandas().to_markdown(index=False, floatfmt=".3f"))},
    )


class FidelityCheckConfig(Config):
    tau_floor: float = Field(
        default=config_default("fidelity_tau_floor"),
        description="Kendall τ(CTR, NDCG@20), or the arm pairs' τ with a missed pair counted as a tie, below this warns ($SIMAB_FIDELITY_TAU_FLOOR)",
    )
    eval_users: int = Field(
        default=config_default("eval_users"),
        ge=0,
        description="the offline metrics over a seeded sample of this many test users, as the arms measured them; 0 = all ($SIMAB_EVAL_USERS)",
    )


@asset_check(
    asset="ab_readout",
    blocking=False,
    additional_ins={
        "offline_metrics": AssetIn("offline_metrics"),
        "top20_lists": AssetIn("top20_lists"),
        "test_ratings": AssetIn("test_ratings"),
    },
    description="warns (does not block) when Kendall τ between simulated CTR and offline NDCG@20 is below the floor, the pairs' τ (missed pairs counted as ties) is below it, or any pair of arms disagrees",
)
def fidelity_trust(
    config: FidelityCheckConfig, ab_readout, offline_metrics: dict, top20_lists: dict, test_ratings: pl.DataFrame
) -> AssetCheckResult:
    evaluated = pl.Series(evaluation_users(test_ratings, config.eval_users)).implode()
    test = test_ratings.filter(pl.col("user_id").is_in(evaluated))
    agreement = arm_agreement(ab_readout, offline_metrics, top20_lists, test, _is_diagnostic)
    fid, pairs = agreement.fid, agreement.pairs
    warning = fidelity_warning(fid, pairs, config.tau_floor)
    table = (
        pairs.select("arm_a", "arm_b", "offline_difference", "simulated_difference", "verdict")
        if pairs.height
        else pl.DataFrame({"pairs": []})
    )
    return AssetCheckResult(
        passed=warning.passed,
        severity=AssetCheckSeverity.WARN,
        description=warning.description,
        metadata={
            "kendall_tau": warning.tau if warning.tau is not None else float("nan"),
            "tau_floor": config.tau_floor,
            "disagreements": len(warning.disagreements),
            "misses": len(warning.misses),
            "pair_tau": warning.pair_tau if warning.pair_tau is not None else float("nan"),
            "pairs": MetadataValue.md(table.to_pandas().to_markdown(index=False, floatfmt=".4f")),
        },
    )


ALIGNMENT_CHECKS = [fidelity_trust]


# -- helpers ---------------------------------------------------------------------------------


# What stops a protocol that asks the LLM without being a fault of the code: the run's cost
# limit (a call refused before it is sent), the endpoint, most answers unusable.
_LLM_FAILURES = (CostLimitExceeded, LLMEndpointError, LLMTransportError, ProtocolFailed, SimulationFailed)


def _not_measured(context: AssetExecutionContext, exc: NotMeasurable) -> Output:
    """{"not_measured": the reason, "why": in a few words, "estimate": what it would have
    cost} stored for the protocol, so the read-out and the report go on; the report and the
    console say "not measured" with the reason, and the asset's metadata and log too."""
    context.log.warning(f"{exc}: not measured")
    record = {"not_measured": str(exc), "why": exc.why, "estimate": exc.estimate}
    return Output(record, metadata={"not measured": str(exc), **({"estimate": exc.estimate} if exc.estimate else {})})


def _open(
    context,
    config: AlignmentConfig,
    protocol: str,
    answers: str,
    agents,
    embedded_brain,
    mm_ml_1m: pl.DataFrame,
    llm: LLMResource,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    held: pl.DataFrame | None = None,
    min_items: int = 1,
) -> Opening:
    """The protocol's opening (`ops.studies.alignment.protocols.open_protocol`) with the brain
    `config` names, made from this run's sources, its calls charged to the run's bill."""
    kind = brain_kind(config.brain).seeing(config.vision)
    settings = ProtocolSettings(config.enabled, config.n_agents, config.half_width, config.seed, config.n_bootstrap)
    return open_protocol(
        protocol,
        answers,
        kind,
        llm.sources(context, Catalogue.from_frame(mm_ml_1m), embedded_brain),
        agents,
        train,
        valid,
        test,
        settings,
        held=held,
        min_items=min_items,
        off_estimate=functools.partial(_settings_estimate, context, config, llm),
        log=context.log.info,
    )


def _settings_estimate(context, config: AlignmentConfig, llm: LLMResource) -> str:
    """What the protocol would cost by the settings alone (`ops.preflight.bill`), in words;
    "" for a brain with nothing to pay."""
    if brain_kind(config.brain).decides_offline:
        return ""
    agents = protocol_agents(config.n_agents, config.half_width)
    bill = protocol_bill(context.asset_key.to_user_string(), agents, llm.brain_config())
    return f"about ${bill.usd:,.2f} for {agents} agents (at most ${bill.usd_at_most:,.2f}), from the settings"


def _log_protocol(mlflow_tracking: MlflowTracking, result, brain, figure, path: str) -> None:
    """A protocol's figures, tables and plot into the open run, and what its brain spent."""
    mlflow_tracking.log_metrics(result.metrics())
    for name, table in result.tables().items():
        mlflow_tracking.log_table(table, name)
    mlflow_tracking.log_figure(figure, path)
    _log_usage(mlflow_tracking, brain)


def _log_usage(mlflow_tracking: MlflowTracking, brain) -> None:
    usage = getattr(brain, "usage", None)
    if usage is not None:  # the LLM brain's real spend (cache hits cost nothing)
        mlflow_tracking.log_metrics({f"llm_{k}": v for k, v in usage.as_dict().items()})
        mlflow_tracking.set_tags({f"llm_{k}": v for k, v in usage.facts().items()})

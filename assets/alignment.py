"""How far to trust the agents (issue 11): the papers' alignment protocols as assets, and
the fidelity warning as a (non-blocking) asset check.

Every protocol holds out the test window and asks the brain the run config names
(`brain: embedded | llm`, as the simulation asset; `$SIMAB_BRAIN`) through its sandbox
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

from ops.settings import BrainName, config_default
from ops.simulation.brains.llm import LLMEndpointError, LLMTransportError
from ops.simulation.budget import CostLimitExceeded
from ops.simulation.runner import SimulationFailed
from ops.studies.alignment.lists import ProtocolFailed
from ops.studies.alignment.sizing import DEFAULT_HALF_WIDTH, protocol_agents
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking

GROUP = "alignment"


class AlignmentConfig(Config):
    brain: BrainName = Field(
        default=config_default("brain"),
        description="embedded (offline default) | llm (the `llm` resource's endpoint) ($SIMAB_BRAIN)",
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
    from ops.studies.alignment.lists import mixed_lists
    from ops.studies.alignment.plots import taste_figure
    from ops.studies.alignment.taste import (
        TASTE_RATIOS,
        embedded_scorer,
        fit_taste_thresholds,
        llm_answerer,
        taste_discrimination,
        taste_per_item,
        threshold_answerer,
    )

    users_frame = users  # `users` becomes the sampled agents below
    try:
        brain, catalogue, users = _setup(
            context,
            config,
            "taste discrimination",
            agents,
            embedded_brain,
            train_ratings,
            valid_ratings,
            test_ratings,
            mm_ml_1m,
            llm,
        )
    except NotMeasurable as exc:
        return _not_measured(context, exc)
    known = pl.concat([f.select("user_id", "movie_id") for f in (train_ratings, valid_ratings, test_ratings)])
    lists = mixed_lists(
        test_ratings,
        known,
        mm_ml_1m.get_column("movie_id").to_numpy(),
        TASTE_RATIOS,
        20,
        config.seed,
        users,
        stream="taste",
    )
    sessions = agents.sessions(users)

    def dry_run(meter):  # both protocols, every prompt written and counted, nothing sent
        taste_discrimination(meter, sessions, lists, catalogue, config.seed, n_bootstrap=10, progress=False)
        for _ in range(2 if config.papers_holdout else 1):  # the papers' hold-out: about as many lists again
            taste_per_item(
                _counted_list_answers(meter, catalogue), sessions, lists, config.seed, n_bootstrap=10, progress=False
            )

    _check_bill(context, config, llm, embedded_brain, catalogue, len(users), dry_run)
    result = taste_discrimination(
        brain, sessions, lists, catalogue, config.seed, n_bootstrap=config.n_bootstrap, progress=True
    )
    # The papers' protocol beside it (issue 22, item 1): every item of the list answered.
    thresholds = None
    if config.brain == "llm":
        answer = llm_answerer(brain, catalogue, config.seed)
    else:
        scorer = embedded_scorer(brain)
        movie_ids = mm_ml_1m.get_column("movie_id").to_numpy()
        thresholds = fit_taste_thresholds(
            scorer,
            agents.sessions(),
            valid_ratings,
            {"train": train_ratings},
            test_ratings,
            movie_ids,
            TASTE_RATIOS,
            20,
            config.seed,
            protocol_agents(config.n_agents, config.half_width),
        )
        answer = threshold_answerer(scorer, thresholds)
    per_item = taste_per_item(answer, sessions, lists, config.seed, n_bootstrap=config.n_bootstrap, progress=True)
    result = result.with_per_item(per_item, thresholds)
    if config.papers_holdout:
        holdout, holdout_thresholds = _papers_holdout(
            context,
            config,
            brain,
            catalogue,
            embedded_brain,
            embeddings,
            train_ratings,
            valid_ratings,
            users_frame,
            mm_ml_1m,
            users,
            known,
        )
        if holdout is not None:
            result = result.with_holdout(holdout, holdout_thresholds)
    result.brain = brain.name
    with mlflow_tracking.asset_run(
        context, params={**config.model_dump(), "brain_name": brain.name, "agents": len(users)}
    ):
        mlflow_tracking.log_metrics(
            {f"{r['metric']}_1_{r['ratio'].split(':')[1]}": r["mean"] for r in result.summary.iter_rows(named=True)}
        )
        mlflow_tracking.log_metrics(
            {
                f"per_item_{r['metric']}_1_{r['ratio'].split(':')[1]}": r["mean"]
                for r in per_item.summary.iter_rows(named=True)
            }
        )
        mlflow_tracking.log_metrics(
            {f"per_item_threshold_1_{k.split(':')[1]}": v for k, v in (thresholds or {}).items()}
        )
        if result.holdout is not None:
            mlflow_tracking.log_metrics(
                {
                    f"papers_holdout_{r['metric']}_1_{r['ratio'].split(':')[1]}": r["mean"]
                    for r in result.holdout.iter_rows(named=True)
                }
            )
            mlflow_tracking.log_table(result.holdout, "taste_discrimination_papers_holdout")
        mlflow_tracking.log_table(result.summary, "taste_discrimination")
        mlflow_tracking.log_table(per_item.summary, "taste_discrimination_per_item")
        mlflow_tracking.log_figure(
            taste_figure(result.summary, result.per_item, result.holdout), "plots/alignment_taste.png"
        )
        _log_usage(mlflow_tracking, brain)
    return Output(
        result,
        metadata={
            "brain": brain.name,
            "agents": len(users),
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
    from ops.studies.alignment.plots import rating_figure
    from ops.studies.alignment.rating import brain_ratings, offline_rating_predictors, rating_pairs
    from ops.studies.alignment.rating import rating_alignment as score

    try:
        brain, catalogue, users = _setup(
            context,
            config,
            "rating prediction",
            agents,
            embedded_brain,
            train_ratings,
            valid_ratings,
            test_ratings,
            mm_ml_1m,
            llm,
        )
    except NotMeasurable as exc:
        return _not_measured(context, exc)
    pairs = rating_pairs(test_ratings, users, config.max_pairs_per_agent, config.seed)
    _check_bill(
        context,
        config,
        llm,
        embedded_brain,
        catalogue,
        len(users),
        lambda meter: brain_ratings(meter, agents.sessions(users), pairs, catalogue, config.seed, progress=False),
    )
    rated = brain_ratings(brain, agents.sessions(users), pairs, catalogue, config.seed, progress=True)
    result = score(
        rated,
        train_ratings,
        offline_rating_predictors(recommender_arm, valid_ratings, seed=config.seed),
        config.n_bootstrap,
        seed=config.seed,
    )
    result.brain = brain.name
    with mlflow_tracking.asset_run(
        context,
        params={
            **config.model_dump(),
            "brain_name": brain.name,
            "agents": len(users),
            "arms": ",".join(sorted(recommender_arm)),
        },
    ):
        mlflow_tracking.log_metrics(
            {f"rmse_{r['predictor']}": r["rmse"] for r in result.prediction.iter_rows(named=True)}
        )
        mlflow_tracking.log_metrics(
            {f"mae_{r['predictor']}": r["mae"] for r in result.prediction.iter_rows(named=True)}
        )
        mlflow_tracking.log_metrics({"wasserstein": result.wasserstein, "unanswered": result.unanswered})
        mlflow_tracking.log_table(result.prediction, "rating_prediction")
        mlflow_tracking.log_table(result.distribution, "rating_distribution")
        mlflow_tracking.log_figure(rating_figure(result.distribution, result.prediction), "plots/alignment_rating.png")
        _log_usage(mlflow_tracking, brain)
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
    from ops.simulation.runner import SimulationConfig
    from ops.studies.alignment.list_quality import list_quality, simulate_lists
    from ops.studies.alignment.lists import LADDERS, Ladder, choose_ladder, mixed_lists
    from ops.studies.alignment.plots import list_quality_figure

    liked = test_ratings.filter(pl.col("rating") >= embedded_brain.config.like_threshold)
    # Full lists at every ratio: the papers' 20 (10 liked held-out items at 1:1) where enough
    # agents hold them, shorter lists where users like few items (ops.studies.alignment.lists).
    ladder = choose_ladder(liked, agents.profiles) or Ladder(*LADDERS[0], 0)
    need = ladder.need
    try:
        brain, catalogue, users = _setup(
            context,
            config,
            "list quality",
            agents,
            embedded_brain,
            train_ratings,
            valid_ratings,
            test_ratings,
            mm_ml_1m,
            llm,
            held=liked,
            min_items=need,
        )
    except NotMeasurable as exc:
        return _not_measured(context, exc)
    known = pl.concat([f.select("user_id", "movie_id") for f in (train_ratings, valid_ratings, test_ratings)])
    lists = mixed_lists(
        liked,
        known,
        mm_ml_1m.get_column("movie_id").to_numpy(),
        ladder.ratios,
        ladder.list_length,
        config.seed,
        users,
        stream="quality",
        full_lists_only=True,
    )
    concurrency = llm.concurrency if config.brain == "llm" else 1
    _check_bill(
        context,
        config,
        llm,
        embedded_brain,
        catalogue,
        len(users),
        lambda meter: simulate_lists(
            meter, agents.sessions(users), lists, catalogue, SimulationConfig(), seed=config.seed, concurrency=1
        ),
    )
    events = simulate_lists(
        brain, agents.sessions(users), lists, catalogue, SimulationConfig(), seed=config.seed, concurrency=concurrency
    )
    result = list_quality(events, lists, window=test_ratings, n_bootstrap=config.n_bootstrap, seed=config.seed)
    result.brain = brain.name
    if config.brain == "embedded":
        result.calibration = embedded_brain.params.list_response
    with mlflow_tracking.asset_run(
        context, params={**config.model_dump(), "brain_name": brain.name, "agents": len(users)}
    ):
        mlflow_tracking.log_metrics(
            {
                f"{r['arm'].replace(':', '_')}_{r['metric']}": r["mean"]
                for r in result.readout.arms.iter_rows(named=True)
            }
        )
        mlflow_tracking.log_metrics(
            {f"elasticity_{r['metric']}_{r['side']}": r["elasticity"] for r in result.elasticity.iter_rows(named=True)}
        )
        spread = result.spread()
        if spread is not None:  # the trust figure of the verdict
            mlflow_tracking.log_metrics({"spread_ctr": spread["difference"], "spread_ctr_ci_low": spread["ci_low"]})
        mlflow_tracking.log_table(result.readout.arms, "list_quality")
        mlflow_tracking.log_table(result.elasticity, "list_quality_elasticity")
        mlflow_tracking.log_figure(
            list_quality_figure(result.readout.arms, result.ratios),
            "plots/alignment_list_quality.png",
        )
        _log_usage(mlflow_tracking, brain)
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
    brain: BrainName = Field(
        default=config_default("brain"),
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
    from ops.simulation.catalogue import Catalogue
    from ops.studies.alignment.plots import sensitivity_figure
    from ops.studies.alignment.sensitivity import run_agents, sensitivity_study, skip_reason

    control = ab_readout.control
    if control not in top20_lists:
        return _not_measured(context, NotMeasurable(f"the control arm {control!r} has no top-20 lists"))
    catalogue = Catalogue.from_frame(mm_ml_1m)
    run = run_agents(ab_readout, control)
    vision = {} if config.vision else {"vision": False}
    with llm.open_brain(
        context, config.brain, lambda: _embedded_brain(embedded_brain, config.vision), catalogue, **vision
    ) as brain:
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
            catalogue,
            mm_ml_1m.get_column("movie_id").to_numpy(),
            config.slots,
            config.seed,
            config.n_bootstrap,
            concurrency=getattr(brain, "concurrency", 1),
        )
    smallest = result.smallest_detected()
    with mlflow_tracking.asset_run(
        context, params={**config.model_dump(), "brain_name": brain.name, "control": control, "agents": result.agents}
    ):
        mlflow_tracking.log_metrics(
            {
                f"sensitivity_ctr_{r['slots']}_of_{result.list_length}": r["ctr"]
                for r in result.steps.iter_rows(named=True)
            }
        )
        if smallest is not None:
            mlflow_tracking.log_metrics({"sensitivity_smallest_detected_slots": smallest})
        mlflow_tracking.log_table(result.steps, "sensitivity_steps")
        mlflow_tracking.log_table(result.adjacent, "sensitivity_adjacent")
        mlflow_tracking.log_figure(sensitivity_figure(result), "plots/sensitivity_ladder.png")
        _log_usage(mlflow_tracking, brain)
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


@asset(
    group_name=GROUP, code_version="1", compute_kind="scipy", ins={"simulation_events": AssetIn("simulation_events")}
)
def social_traits_alignment(
    context: AssetExecutionContext,
    config: AlignmentConfig,
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
    from ops.studies.alignment.plots import social_figure
    from ops.studies.alignment.social import (
        real_behaviour,
        real_session_behaviour,
        simulated_behaviour,
        simulated_session_behaviour,
        tiers_frame,
        verdicts,
    )
    from ops.studies.alignment.social import social_traits_alignment as score
    from ops.studies.alignment.windows import check_held_out

    if not simulation_events:
        raise ValueError(
            "social traits alignment: no simulated arm yet; materialise simulation_events for at least one arm"
        )
    events = pl.concat([simulation_events[a] for a in sorted(simulation_events)])
    # Sessions of the embedded brain carry what it was fitted on into the simulated side.
    embedded = any(str(b).startswith("embedded") for b in events.get_column("brain").unique().to_list())
    check_held_out(
        test_ratings,
        {"train": train_ratings, "validation": valid_ratings},
        "social traits",
        embedded_brain.params.fit_last_timestamp if embedded else None,
    )
    context.log.info(
        f"social traits: the sessions of brain(s) {sorted(set(events.get_column('brain').to_list()))} on arms {sorted(simulation_events)}"
    )
    movie_mean = train_ratings.group_by("movie_id").agg(pl.col("rating").mean().alias("mean"))
    movies = mm_ml_1m.select("movie_id", "genres")
    table = score(
        tiers_frame(agents.profiles),
        real_behaviour(test_ratings, movie_mean, movies),
        simulated_behaviour(events, movie_mean, movies),
        config.n_bootstrap,
        seed=config.seed,
        real_sessions=real_session_behaviour(test_ratings, movies),
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
    from ops.arms.catalog import has_capability
    from ops.readout.fidelity import fidelity, offline_per_user, pairwise_agreement
    from ops.studies.alignment.trust import fidelity_warning

    offline = (
        pl.concat([offline_metrics[a] for a in sorted(offline_metrics)], how="vertical_relaxed")
        if offline_metrics
        else pl.DataFrame({"arm": []})
    )
    per_user = offline_per_user(top20_lists, test_ratings)
    # As the report: a diagnostic arm (the mirror, ops.arms.mirror) is no candidate.
    candidate = ~pl.col("arm").is_in([a for a in top20_lists if has_capability(a, "diagnostic")])
    per_user = per_user.filter(candidate)
    fid = fidelity(ab_readout.arms.filter(candidate), offline, per_user) if offline_metrics else pl.DataFrame()
    pairs = pairwise_agreement(
        ab_readout.per_agent.filter(candidate),
        per_user,
        paired=ab_readout.design == "paired",
        seed=ab_readout.config.seed,
    )
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


class NotMeasurable(ValueError):
    """A protocol that cannot be measured: the data hold no agent for it (a small data set),
    it is switched off, or the run's cost limit refuses it.  `why`: the reason in a few
    words; `estimate`: what it would have cost, in words, where known."""

    def __init__(self, message: str, why: str = "", estimate: str = "") -> None:
        super().__init__(message)
        self.why, self.estimate = why or message, estimate


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


def _papers_holdout(
    context, config, brain, catalogue, embedded_brain, embeddings, train, valid, users_frame, mm_ml_1m, judged, known
):
    """The per-item protocol under the papers' hold-out (`ops.studies.alignment.taste.
    papers_holdout_taste`): (result, thresholds), or (None, None) when no judged user has
    enough train ratings for the draw.  `users_frame`: every user (the agents' rebuild)."""
    from ops.agents.build import AgentsConfig, build_agents
    from ops.simulation.brains.embedded import fit_embedded_brain
    from ops.studies.alignment.taste import (
        embedded_scorer,
        llm_answerer,
        papers_holdout_taste,
        threshold_answerer,
        thresholds_on_lists,
    )
    from resources.storage import data_root

    def rebuild(kept: pl.DataFrame):
        return build_agents(
            kept,
            users_frame,
            mm_ml_1m,
            AgentsConfig(),
            embeddings.text_embedder(),
            embeddings.poster_embedder(),
            cache_dir=data_root() / "cache" / "embeddings",
        )

    def answerer_for(agents_h, kept: pl.DataFrame, threshold_lists: pl.DataFrame):
        if config.brain == "llm":  # the same brain, asked about the rebuilt agents
            return llm_answerer(brain, catalogue, config.seed), None
        model = fit_embedded_brain(agents_h, kept, valid, users_frame, embedded_brain.config)
        scorer = embedded_scorer(
            model.brain(None if config.vision else model.config.model_copy(update={"use_posters": False}))
        )
        cuts = thresholds_on_lists(scorer, agents_h.sessions(), threshold_lists)
        return threshold_answerer(scorer, cuts), cuts

    result, cuts = papers_holdout_taste(
        answerer_for,
        rebuild,
        train,
        judged,
        known,
        mm_ml_1m.get_column("movie_id").to_numpy(),
        held_out=config.papers_holdout,
        seed=config.seed,
        n_bootstrap=config.n_bootstrap,
        progress=True,
    )
    if result is None:
        context.log.warning("taste under the papers' hold-out not measured: no judged user has train ratings to draw")
    return result, cuts


def _setup(
    context,
    config: AlignmentConfig,
    protocol: str,
    agents,
    embedded_brain,
    train,
    valid,
    test,
    mm_ml_1m,
    llm: LLMResource,
    held: pl.DataFrame | None = None,
    min_items: int = 1,
):
    """(brain, catalogue, the sampled agents) after the leakage guard: agents with at least
    `min_items` rows in `held` (default: the test window)."""
    from ops.simulation.catalogue import Catalogue
    from ops.simulation.runner import sample_agents
    from ops.studies.alignment.windows import check_held_out

    if not config.enabled:
        raise NotMeasurable(
            f"{protocol}: switched off (SIMAB_TRUST_PROTOCOLS=off)",
            "switched off",
            _settings_estimate(context, config, llm),
        )
    fitted_through = embedded_brain.params.fit_last_timestamp if config.brain == "embedded" else None
    check_held_out(test, {"train": train, "validation": valid}, protocol, fitted_through)
    counts = (test if held is None else held).group_by("user_id").len().filter(pl.col("len") >= min_items)
    candidates = sorted(set(counts.get_column("user_id").to_list()) & set(agents.profiles))
    users = sample_agents(candidates, protocol_agents(config.n_agents, config.half_width), config.seed)
    if not users:
        raise NotMeasurable(f"{protocol}: no agent has {min_items} or more ratings in the held-out (test) window")
    catalogue = Catalogue.from_frame(mm_ml_1m)
    if config.brain == "llm":
        # Every call charged to the run's bill: the read-out is capped with the simulations.
        brain = llm.charged_brain(context, catalogue, **({} if config.vision else {"vision": False}))
    else:
        brain = embedded_brain.brain(
            None if config.vision else embedded_brain.config.model_copy(update={"use_posters": False})
        )
    return brain, catalogue, users


def _check_bill(
    context, config: AlignmentConfig, llm: LLMResource, embedded_brain, catalogue, agents: int, dry_run
) -> None:
    """With the LLM brain and a cost limit: the protocol's bill before its first call — the
    protocol dry-run with every prompt the LLM brain would send written and counted while the
    embedded brain decides — recorded in the run's bill; NotMeasurable above what the run has left."""
    if not _pays(config) or not llm.cap_usd:
        return
    from ops.simulation.cost import estimate_protocol_cost

    vision = {} if config.vision else {"vision": False}
    writer = llm.brain(catalogue, cache="off", **vision)
    behaviour = embedded_brain.brain(
        None if config.vision else embedded_brain.config.model_copy(update={"use_posters": False})
    )
    try:
        estimate = estimate_protocol_cost(llm.label_of(context), writer, behaviour, dry_run, agents)
    finally:
        writer.close()
    refused = llm.refusal(context, estimate)
    if refused is not None:
        raise NotMeasurable(
            refused,
            f"refused by the cost limit: ${llm.cap_usd:,.2f}",
            f"estimated ${estimate.cost_usd:,.2f} ({estimate.calls:,} calls) by its dry run",
        )


def _pays(config: AlignmentConfig) -> bool:
    """Whether the protocol's brain is one whose calls are billed (the `llm` resource's)."""
    return config.brain == "llm"


def _settings_estimate(context, config: AlignmentConfig, llm: LLMResource) -> str:
    """What the protocol would cost by the settings alone (`ops.preflight.bill`), in words;
    "" for the embedded brain (nothing to pay)."""
    if not _pays(config):
        return ""
    from ops.preflight.bill import protocol_bill

    agents = protocol_agents(config.n_agents, config.half_width)
    bill = protocol_bill(context.asset_key.to_user_string(), agents, llm.brain_config())
    return f"about ${bill.usd:,.2f} for {agents} agents (at most ${bill.usd_at_most:,.2f}), from the settings"


def _counted_list_answers(meter, catalogue):
    """An answerer of the per-item protocol that counts the one request per list the LLM brain
    would send (and a reply naming half the list), answering nothing."""
    import json

    from ops.simulation.brains.llm.tokens import prompt_tokens, text_tokens
    from ops.studies.alignment.lists import fresh_session
    from ops.studies.alignment.taste import list_messages

    def answer(template, movies, ratio):
        meter.prompt[template.user_id].append(
            prompt_tokens(list_messages(meter.llm, fresh_session(template), movies, catalogue))
        )
        meter.completion[template.user_id].append(text_tokens(json.dumps({"watch": list(movies)[: len(movies) // 2]})))
        return set()

    return answer


def _embedded_brain(embedded_brain, vision: bool):
    return embedded_brain.brain(None if vision else embedded_brain.config.model_copy(update={"use_posters": False}))


def _log_usage(mlflow_tracking: MlflowTracking, brain) -> None:
    usage = getattr(brain, "usage", None)
    if usage is not None:  # the LLM brain's real spend (cache hits cost nothing)
        mlflow_tracking.log_metrics({f"llm_{k}": v for k, v in usage.as_dict().items()})
        mlflow_tracking.set_tags({f"llm_{k}": v for k, v in usage.facts().items()})

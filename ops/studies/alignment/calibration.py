"""Calibrating the embedded brain's response to list quality.

Uncalibrated, the simulated CTR of an arm moved far less than its offline metrics (FM vs Pop:
+2.5 % relative CTR for +15 % relative NDCG@20).  The yardstick is the list-quality protocol
(`ops.studies.alignment.list_quality`) measured on the VALIDATION window — lists mixing
the agent's validation-window liked items with movies it rated in neither the train nor
the validation window, at 1:9, 1:4 and 1:1:

- real users' response: the share of each list's items they rated in the validation
  window — an elasticity of 1.0 in the share of relevant items (5x the ratings from a
  list half relevant as from one a tenth relevant);
- the brain's response: the elasticity of its sandbox CVR (watch-and-rate ÷ impressions,
  the sandbox's "rated") on the same lists.

What is calibrated: the click decision's log-odds become s × (click model) + b
(`EmbeddedBrainParams.click_scale`, `click_shift`).  A larger s separates what the model
ranks high from what it ranks low more sharply; b is solved for each s so that the mean
first-look click probability on the 1:4 lists stays what the fitted model gives (the
response pivots around the middle of the yardstick instead of inflating or deflating
every CTR).  The s whose elasticity comes closest to the real one is kept — the smallest
within `tolerance` of the best, because beyond the click model's own discrimination a
sharper s buys nothing and only makes decisions more deterministic.

Sparse windows.  The papers' lists of 20 at 1:1 need 10 liked validation items per agent;
on Steam no user has them (most review one or two games).  The yardstick then keeps its
design on shorter lists, the first of `lists.LADDERS` that `min_agents` agents can fill
(Steam: 6 items at 1:5, 1:2, 1:1, 245 agents); the record names the shape.  Only where no
agent can fill even the shortest (2 liked items) is the click decision left as fitted, with
the reason in `params.list_response_skipped`, which the verdict prints as a warning.

Which click model.  The fitted click model draws half its negatives by popularity, so that
it must separate taste from popularity.  Where interactions follow popularity (Steam: Pop's
NDCG@20 0.086 against 0.026 for an untuned ALS), that model ranks the catalogue like the
ALS (NDCG@20 0.026 as a recommender on the test window) and its agents cannot tell Pop's
lists from the ALS's at any scale (first-page click probability 0.285 against 0.247 at
scale 8).  So the click model refitted on uniform negatives (`negative_shares`) runs the
same grid, and the (model, scale) whose response to list quality comes closest to the real
one is kept — the fitted model and the smaller scale unless another does better by more
than `tolerance`.  The kept model's share is written into the model's configuration, so a
refit (the papers' taste hold-out) fits the same kind of click model.

Level.  Real users' response to list quality is proportional (elasticity 1): a rate in
the regime where P(click) ≈ exp(log-odds).  A click decision pivoting at the fitted
model's level cannot reach it on a log like Steam's: the arms' lists are the catalogue's
head, their cards catch the eye with probability ≥ 0.95 at any scale that sharpens the
yardstick (scale 4: 0.99 on Pop's and MF's first pages, 0.95 on FM's), and the arms' CTR
is then decided by the detail page's interest (the like model), which sets what each
action costs in fatigue and so how many cards an agent clicks before it leaves — not by
the click preference.  So the grid also lowers the pivot: the anchor's mean first-look
click probability at `levels` × the fitted model's, the scale and shift re-solved at each.
The fitted level comes first; a lower one is kept only where it brings the response
closer to the real one by more than `tolerance`.  Only on implicit feedback (a liked /
not-liked log, `ops.data.domain.feedback_of`): there an interaction is the choice the
click decision models and the arms' lists sit at the head where it saturates.  On rating
logs the fitted level is kept: lower levels there reordered ML-1M's offline-tied arms
(τ 0.80 -> 0.40, the pairs unchanged) and left the synthetic generator's agents picking
their planted tastes no better than chance at their pick rate.  docs/trust.md has the
measurements.

It reads the train and validation windows and the fitted brain, nothing else: the test
window never reaches it (`tests/test_alignment_brains.py` checks that).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import polars as pl
from pydantic import BaseModel, Field
from scipy.optimize import brentq
from tqdm.auto import tqdm

from ops.data.domain import feedback_of
from ops.data.random_exposure import MIN_CALIBRATION_CLICKS
from ops.readout.statistics import named_rng
from ops.simulation.brains.embedded import (
    EmbeddedBrainConfig,
    EmbeddedBrainModel,
    EmbeddedBrainParams,
    ListResponse,
    fit,
    fit_embedded_brain,
)
from ops.simulation.catalogue import Catalogue
from ops.simulation.request import SimulationConfig
from ops.studies.alignment.exposure_calibration import NoExposureSignal, calibrate_on_random_exposure
from ops.studies.alignment.list_quality import QUALITY_RATIOS, list_quality, simulate_lists
from ops.studies.alignment.mixed_lists import LADDERS, Ladder, choose_ladder, mixed_lists, ratio_name


class TooFewAgents(ValueError):
    """The validation window holds too few agents to measure their response to list quality."""


IMPLICIT_LEVELS = (1.0, 0.5, 0.25, 0.125)


class CalibrationConfig(BaseModel):
    # Validation-window agents the yardstick is measured on (sampled, seeded).
    n_agents: int = Field(600, ge=2)
    # The yardstick's shape; None (both): the first of `lists.LADDERS` — the papers' lists of
    # 20 at 1:9, 1:4, 1:1, then shorter ones — that `min_agents` agents can fill.
    ratios: tuple[int, ...] | None = None
    list_length: int | None = Field(None, ge=2)
    min_agents: int = Field(50, ge=2)
    # Log-odds scales tried (1 = the fitted click model as it is).
    scales: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
    # Click levels tried: the anchor lists' mean first-look click probability as a share of
    # the fitted model's (module docstring, "Level").  1 first: a lower level is kept only
    # where it brings the response closer to the real one by more than `tolerance`.  None:
    # `IMPLICIT_LEVELS` on implicit feedback (`ops.data.domain.feedback_of` of the
    # validation window), the fitted level alone on ratings.
    levels: tuple[float, ...] | None = None
    # The metric matched: watch-and-rate per impression is what MovieLens records as a rating.
    metric: str = "cvr"
    # The ratio whose mean first-look click probability every scale keeps.
    anchor_ratio: int = 4
    tolerance: float = Field(0.03, ge=0)
    # Click models tried beside the fitted one: refitted with these shares of popularity-drawn
    # negatives (the module docstring says why; the fitted one is kept unless another responds
    # to list quality more like real users by more than `tolerance`).
    negative_shares: tuple[float, ...] = (0.0,)
    seed: int = 0
    n_bootstrap: int = 200  # the yardstick's intervals are not what is chosen on; the points are
    progress: bool = True


def calibrate_list_response(
    model: EmbeddedBrainModel,
    sessions: Sequence,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    catalogue: Catalogue,
    config: CalibrationConfig | None = None,
    simulation: SimulationConfig | None = None,
) -> EmbeddedBrainModel:
    """`model` with its click decision calibrated to real users' response to list quality
    on the validation window (module docstring); the record is `params.list_response`.
    `sessions`: the agents' session templates at the fit clock (`Agents.at_fit_clock().sessions()`:
    the validation window is what happened next to them)."""
    config = config or CalibrationConfig()
    simulation = simulation or SimulationConfig(progress=False)
    base = model.params.model_copy(update={"click_scale": 1.0, "click_shift": 0.0, "list_response": None})
    ladder = yardstick(model, sessions, valid, config)
    lists = validation_lists(model, sessions, train, valid, config, ladder)
    users = sorted(set(lists.get_column("user_id").to_list()))
    if len(users) < 2:
        raise TooFewAgents(
            f"list-response calibration: {len(users)} agents have liked validation items and a memory "
            f"(the shortest yardstick, lists of {LADDERS[-1][0]}, needs "
            f"{Ladder(LADDERS[-1][0], LADDERS[-1][1], 0).need} per agent); need >= 2"
        )
    by_user = {s.user_id: s for s in sessions}
    chosen = [by_user[u] for u in users]
    anchor = config.anchor_ratio if config.anchor_ratio in ladder.ratios else ladder.ratios[len(ladder.ratios) // 2]
    levels = config.levels or (IMPLICIT_LEVELS if feedback_of(valid) == "implicit" else (1.0,))
    fitted_share = model.config.popular_negative_share
    candidates = {fitted_share: base}
    for share in config.negative_shares:
        if share not in candidates:
            candidates[share] = _with_click_refitted(model, base, sessions, train, valid, share)

    grid = []
    for share, params in candidates.items():
        z = _anchor_logits(model, params, chosen, lists, ratio_name(anchor))
        target = float(_sigmoid(z).mean())
        for level, scale in tqdm(
            [(level, scale) for level in levels for scale in config.scales],
            desc=f"list-response calibration ({len(users)} agents, popular negatives {share:g})",
            disable=not config.progress,
        ):
            shift = 0.0 if scale == 1.0 and level == 1.0 else _solve_shift(z, scale, target * level)
            brain = model.fit_brain(params.model_copy(update={"click_scale": scale, "click_shift": shift}))
            events = simulate_lists(brain, chosen, lists, catalogue, simulation, seed=config.seed)
            result = list_quality(events, lists, window=valid, n_bootstrap=config.n_bootstrap, seed=config.seed)
            el = {(r["metric"], r["side"]): r["elasticity"] for r in result.elasticity.iter_rows(named=True)}
            means = {
                f"{r['arm']} {r['metric']}": r["mean"]
                for r in result.readout.arms.filter(pl.col("metric").is_in(["ctr", "cvr"])).iter_rows(named=True)
            }
            grid.append(
                {
                    "popular_negative_share": share,
                    "level": level,
                    "scale": scale,
                    "shift": shift,
                    "elasticity_ctr": el.get(("ctr", "simulated")),
                    "elasticity_cvr": el.get(("cvr", "simulated")),
                    "real": el.get(("rated_share", "real")),
                    **means,
                }
            )
    real = grid[0]["real"]
    key = f"elasticity_{config.metric}"
    gaps = [abs((g[key] if g[key] is not None and np.isfinite(g[key]) else -np.inf) - real) for g in grid]
    best = min(gaps)
    # The grid runs the fitted click model first, levels falling, scales rising: the fitted
    # model, its level and the smallest scale are kept unless another does better by more
    # than the tolerance.
    pick = next(g for g, gap in zip(grid, gaps) if gap <= best + config.tolerance)
    share = pick["popular_negative_share"]
    base = candidates[share]
    record = ListResponse(
        metric=config.metric,
        real_elasticity=real,
        elasticity_before=grid[0][key],
        popular_negative_share=share,
        elasticity_after=pick[key],
        click_scale=pick["scale"],
        click_shift=pick["shift"],
        level=pick["level"],
        agents=len(users),
        seed=config.seed,
        grid=grid,
        list_length=ladder.list_length,
        ratios=list(ladder.ratios),
    )
    params = base.model_copy(
        update={"click_scale": pick["scale"], "click_shift": pick["shift"], "list_response": record}
    )
    # The configuration says which negatives the kept click model was fitted on, so that a
    # refit from it (the papers' hold-out) fits the same click model.
    fitted = model.config.model_copy(update={"popular_negative_share": share})
    return model.with_params(params, fitted)


def _with_click_refitted(
    model: EmbeddedBrainModel,
    base: EmbeddedBrainParams,
    sessions: Sequence,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    share: float,
) -> EmbeddedBrainParams:
    """`base` with its click model refitted on negatives `share` of them drawn by popularity
    (the rest uniformly); the like, rating and every other fitted part stay as they are."""
    config = model.config.model_copy(update={"popular_negative_share": share})
    memories = {s.user_id: s.memory for s in sessions}
    profiles = {s.user_id: s.profile for s in sessions}
    refit = fit(train, valid, memories, profiles, model.fit_context, config)
    return base.model_copy(
        update={
            "click": refit.click,
            "click_auc_holdout": refit.click_auc_holdout,
            "click_ablation": refit.click_ablation,
            "click_variant": refit.click_variant,
        }
    )


def yardstick(model: EmbeddedBrainModel, sessions: Sequence, valid: pl.DataFrame, config: CalibrationConfig) -> Ladder:
    """The yardstick's shape: the configured one, else the first of `LADDERS` that
    `config.min_agents` agents with a memory can fill from their liked validation items
    (on ML-1M the papers' lists of 20; on Steam, where no user likes 10 validation games,
    shorter lists).  An empty Ladder (0 agents) when nobody can fill even the shortest."""
    liked = _liked_with_memory(model, sessions, valid)
    if config.list_length is not None or config.ratios is not None:
        shape = ((config.list_length or 20, tuple(config.ratios or QUALITY_RATIOS)),)
        return choose_ladder(liked, None, 1, shape) or Ladder(shape[0][0], shape[0][1], 0)
    return choose_ladder(liked, None, config.min_agents) or Ladder(LADDERS[-1][0], LADDERS[-1][1], 0)


def validation_lists(
    model: EmbeddedBrainModel,
    sessions: Sequence,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    config: CalibrationConfig,
    ladder: Ladder | None = None,
) -> pl.DataFrame:
    """The yardstick's lists on the validation window: liked validation items mixed with
    movies rated in neither train nor validation, for a seeded sample of the agents;
    `ladder` (default `yardstick`) gives their length and ratios."""
    ladder = ladder or yardstick(model, sessions, valid, config)
    liked = _liked_with_memory(model, sessions, valid)
    need = ladder.need  # full lists at every ratio (lists.py)
    candidates = sorted(liked.group_by("user_id").len().filter(pl.col("len") >= need).get_column("user_id").to_list())
    if len(candidates) > config.n_agents:
        candidates = sorted(
            named_rng(config.seed, "calibration agents").choice(candidates, config.n_agents, replace=False).tolist()
        )
    known = pl.concat([train.select("user_id", "item_id"), valid.select("user_id", "item_id")])
    return mixed_lists(
        liked,
        known,
        model.fit_context.facts.item_ids,
        ladder.ratios,
        ladder.list_length,
        config.seed,
        candidates,
        stream="calibration",
        full_lists_only=True,
    )


def _liked_with_memory(model: EmbeddedBrainModel, sessions: Sequence, valid: pl.DataFrame) -> pl.DataFrame:
    with_memory = {s.user_id for s in sessions if len(getattr(s.memory, "item_ids", ())) > 0}
    return (
        valid.filter(pl.col("rating") >= model.config.like_threshold)
        .filter(pl.col("user_id").is_in(sorted(with_memory)))
        .unique(["user_id", "item_id"])
    )


def _anchor_logits(model: EmbeddedBrainModel, params, sessions, lists: pl.DataFrame, anchor: str) -> np.ndarray:
    brain = model.fit_brain(params)
    anchor_lists = lists.filter(pl.col("ratio") == anchor).group_by("user_id").agg("item_id")
    shown = dict(anchor_lists.iter_rows())
    brain.prepare([s for s in sessions if s.user_id in shown], shown)
    return np.concatenate([brain.click_logits(s, shown[s.user_id]) for s in sessions if s.user_id in shown])


def _solve_shift(z: np.ndarray, scale: float, target: float) -> float:
    return float(brentq(lambda b: _sigmoid(scale * z + b).mean() - target, -100.0, 100.0))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))


def calibrate_if_possible(
    model: EmbeddedBrainModel,
    sessions: Sequence,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    catalogue: Catalogue,
    config: CalibrationConfig | None = None,
) -> EmbeddedBrainModel:
    """`calibrate_list_response`, or on a window too sparse for any yardstick the model as
    fitted with the reason in `params.list_response_skipped` (the verdict warns with it)
    rather than a stopped lifecycle."""
    try:
        return calibrate_list_response(model, sessions, train, valid, catalogue, config)
    except TooFewAgents as exc:
        reason = f"{exc}; the click decision is left uncalibrated"
        params = model.params.model_copy(update={"list_response": None, "list_response_skipped": reason})
        return model.with_params(params)


def list_response_status(params: EmbeddedBrainParams) -> dict:
    """Whether the click decision was calibrated, as the verdict reads it (`ops.studies.verdict.
    build_verdict`): the yardstick and the elasticities, or why it was not."""
    exposure = params.exposure_calibration
    if exposure is not None:
        return {
            "calibrated": True,
            "on": "random_exposure",
            "users": exposure.users,
            "rows": exposure.rows,
            "clicks": exposure.clicks,
            "click_scale": exposure.scale,
            "auc": exposure.auc,
        }
    response = params.list_response
    if response is None:
        return {"calibrated": False, "reason": params.list_response_skipped or "calibration not run"}
    return {
        "calibrated": True,
        "agents": response.agents,
        "list_length": response.list_length,
        "ratios": list(response.ratios),
        "real": response.real_elasticity,
        "before": response.elasticity_before,
        "after": response.elasticity_after,
        "click_scale": response.click_scale,
        "level": response.level,
        "popular_negative_share": response.popular_negative_share,
    }


def fit_calibrated_brain(
    agents,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame,
    catalogue_frame: pl.DataFrame,
    *,
    seed: int = 0,
    calibrate: bool = True,
    calibration_agents: int = 300,
    brain_config: EmbeddedBrainConfig | None = None,
    levels: tuple[float, ...] | None = None,
    exposure_rows: pl.DataFrame | None = None,
) -> EmbeddedBrainModel:
    """The embedded brain fitted on train + validation (`fit_embedded_brain`, seed `seed`,
    `brain_config` when given), its click decision then calibrated when `calibrate`: on the
    random-exposure sample's calibration half where `exposure_rows` holds it
    (`ops.studies.alignment.exposure_calibration`), else to real users' response to list
    quality on the validation window (`calibrate_if_possible`, over the click `levels` when
    given: a window too sparse leaves it as fitted, the reason in
    `params.list_response_skipped`)."""
    model = fit_embedded_brain(agents, train, valid, users, brain_config or EmbeddedBrainConfig(fit_seed=seed))
    if not calibrate:
        return model
    started = time.perf_counter()
    if exposure_rows is not None and not exposure_rows.height:
        skipped = (
            "SIMAB_CLICK_CALIBRATION=random_exposure: the run has no random-exposure sample with clicks enough for a "
            f"calibration half (at least {MIN_CALIBRATION_CLICKS} clicks); the click decision is calibrated to list "
            "quality"
        )
        model = model.with_params(model.params.model_copy(update={"exposure_calibration_skipped": skipped}))
    elif exposure_rows is not None:
        try:
            model = calibrate_on_random_exposure(model, agents, exposure_rows)
            model.timings_s["calibration"] = time.perf_counter() - started
            return model
        except NoExposureSignal as exc:
            # The list response below: the log's yardstick is the calibration left; the step's log says why.
            skipped = f"{exc}; the click decision is calibrated to list quality instead"
            model = model.with_params(model.params.model_copy(update={"exposure_calibration_skipped": skipped}))
    config = CalibrationConfig(n_agents=calibration_agents, seed=seed, levels=levels)
    model = calibrate_if_possible(
        model, agents.at_fit_clock().sessions(), train, valid, Catalogue.from_frame(catalogue_frame), config
    )
    model.timings_s["calibration"] = time.perf_counter() - started
    return model


def brain_figures(params: EmbeddedBrainParams) -> tuple[dict, dict]:
    """The fitted brain's figures: (held-out AUCs and RMSE, with the list response's
    calibration when it ran) and the click model's collaborative ablation, each variant's
    held-out AUC."""
    shown = {
        "click_auc_holdout": params.click_auc_holdout,
        "like_auc_holdout": params.like_auc_holdout,
        "rating_rmse_holdout": params.rating_rmse_holdout,
    }
    if params.list_response is not None or params.exposure_calibration is not None:
        shown |= {"click_scale": params.click_scale, "click_shift": params.click_shift}
    response = params.list_response
    if response is not None:
        shown |= {
            "list_response_real": response.real_elasticity,
            "list_response_before": response.elasticity_before,
            "list_response_after": response.elasticity_after,
            "list_response_agents": response.agents,
            "list_response_list_length": response.list_length,
        }
    exposure = params.exposure_calibration
    if exposure is not None:
        what = exposure.model_dump(include={"users", "rows", "click_rate", "auc"})
        shown |= {f"exposure_calibration_{k}": v for k, v in what.items()}
    ablation = {
        f"click_auc_holdout_{r['variant'].replace('+', '_')}": r["click_auc_holdout"]
        for r in params.click_ablation
        if r["click_auc_holdout"] is not None
    }
    return shown, ablation

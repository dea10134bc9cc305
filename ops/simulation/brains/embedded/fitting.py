"""Fitting the embedded brain on the train and validation windows only (package docstring,
"Fitting"): the click, like and rating models, and `fit_embedded_brain`, which builds the
shared context from the agents and fits it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ops.agents.build import Agents
from ops.agents.clock import Clock, fit_half_life
from ops.agents.memory import LongTermMemory, RecallWeights
from ops.simulation.brains.embedded.brain import EmbeddedBrain
from ops.simulation.brains.embedded.config import (
    COLLAB_FEATURES,
    DETAIL_FEATURES,
    FEATURES,
    HOME_FEATURES,
    TIME_FEATURES,
    EmbeddedBrainConfig,
    EmbeddedBrainParams,
    LinearModel,
)
from ops.simulation.brains.embedded.features import BrainContext, agent_states, pair_features
from ops.simulation.brains.embedded.rating_rule import choose_crowd_rule
from ops.storage.codec import check_format, load_json, save_json


@dataclass(eq=False)
class EmbeddedBrainModel:
    """A fitted embedded brain: its parameters, the context its agents decide in (the
    simulation clock's: `ops.agents.clock`) and the one it was fitted in (the fit clock's;
    the same object when the agents stand at the fit clock)."""

    params: EmbeddedBrainParams
    context: BrainContext
    config: EmbeddedBrainConfig
    timings_s: dict[str, float] = field(default_factory=dict)
    fit_context: BrainContext = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.fit_context is None:
            self.fit_context = self.context

    def brain(self, config: EmbeddedBrainConfig | None = None) -> EmbeddedBrain:
        """A fresh embedded brain at the simulation clock (one per simulation: it caches
        per-user scores)."""
        return EmbeddedBrain(self.params, self.context, config or self.config)

    def fit_brain(self, params: EmbeddedBrainParams | None = None) -> EmbeddedBrain:
        """A fresh brain at the fit clock, for what is checked on the validation window
        (the list-response calibration); `params` instead of the model's own."""
        return EmbeddedBrain(params or self.params, self.fit_context, self.config)

    def with_params(self, params: EmbeddedBrainParams, config: EmbeddedBrainConfig | None = None) -> EmbeddedBrainModel:
        return EmbeddedBrainModel(params, self.context, config or self.config, dict(self.timings_s), self.fit_context)

    def save(self, folder: Path) -> None:
        """Into `folder`, without pickle: parameters, configuration and timings as JSON, the
        context in its own folder (`BrainContext.save`)."""

        folder.mkdir(parents=True, exist_ok=True)
        save_json(
            folder / "brain.json",
            {
                "kind": "EmbeddedBrainModel",
                "format_version": 1,
                "params": self.params.model_dump(mode="json"),
                "config": self.config.model_dump(mode="json"),
                "timings_s": self.timings_s,
            },
        )
        self.context.save(folder / "context")
        if self.fit_context is not self.context:
            self.fit_context.save(folder / "fit_context", with_vectors=False)

    @classmethod
    def load(cls, folder: Path) -> EmbeddedBrainModel:
        meta = load_json(folder / "brain.json")
        check_format(meta, "EmbeddedBrainModel", 1, folder / "brain.json")
        context = BrainContext.load(folder / "context")
        fitted = folder / "fit_context"
        return cls(
            params=EmbeddedBrainParams.model_validate(meta["params"]),
            context=context,
            config=EmbeddedBrainConfig.model_validate(meta["config"]),
            timings_s=meta["timings_s"],
            fit_context=BrainContext.load(fitted, context.vectors) if fitted.is_dir() else context,
        )


def fit_embedded_brain(
    agents: Agents,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame | None,
    config: EmbeddedBrainConfig | None = None,
) -> EmbeddedBrainModel:
    """The parameters fitted on train + validation, at the fit clock (`ops.agents.clock`):
    the features read from the train window, the labels what users took up next in the
    validation window; and the context the agents decide in — the same features read from
    the history up to the agents' clock (train + validation for agents at the simulation
    clock, `Agents.at_simulation_clock`), popularity weighted by the half-life fitted on the
    validation window."""
    config = config or EmbeddedBrainConfig()
    started = time.perf_counter()
    ids = agents.facts.item_ids
    half_life, half_life_grid = fit_half_life(train, valid, ids) if config.popularity_decay else (float("inf"), [])

    def context_of(history: pl.DataFrame, clock: int) -> BrainContext:
        return BrainContext.build(
            agents.vectors,
            agents.facts.at(history),
            history,
            agents.config.profile,
            users,
            crowd_rating_prior=config.crowd_rating_prior,
            collab_factors=config.collab_factors,
            collab_family=config.collab_family,
            clock=clock,
            half_life_days=half_life,
        )

    clock = Clock.of(train, valid)
    fit_context = context_of(train, clock.fit)
    at_fit = agents.at_fit_clock()
    params = fit(train, valid, at_fit.memories, at_fit.profiles, fit_context, config)
    # The recall the fit chose is the configuration from here on (a refit asks it again).
    config = config.model_copy(update={"recall": params.recall})
    params = params.model_copy(
        update={
            "half_life_days": half_life if np.isfinite(half_life) else None,
            "half_life_grid": [
                {**g, "half_life_days": g["half_life_days"] if np.isfinite(g["half_life_days"]) else None}
                for g in half_life_grid
            ],
        }
    )
    context = fit_context
    if agents.at_simulation_clock:
        context = context_of(pl.concat([train, valid.select(train.columns)]), clock.simulation)
    return EmbeddedBrainModel(params, context, config, {"fit": time.perf_counter() - started}, fit_context)


def fit(
    train: pl.DataFrame,
    valid: pl.DataFrame,
    memories: Mapping[int, LongTermMemory],
    profiles: Mapping[int, object],
    ctx: BrainContext,
    config: EmbeddedBrainConfig | None = None,
) -> EmbeddedBrainParams:
    """Fit the click, like and rating models (module docstring, "Fitting")."""
    # lazy: scikit-learn
    from sklearn.linear_model import LogisticRegression, Ridge

    # lazy: scikit-learn
    from sklearn.metrics import roc_auc_score

    config = config or EmbeddedBrainConfig()
    rng = np.random.default_rng(np.random.SeedSequence([config.fit_seed, 5150]))
    valid_users = valid.get_column("user_id").unique().sort().to_list()
    fit_users = [u for u in valid_users if u in memories and len(memories[u])]
    if len(fit_users) < 2:
        raise ValueError(
            f"embedded brain fit: {len(fit_users)} users have both train and validation ratings; need >= 2"
        )
    if len(fit_users) > config.fit_max_users:
        fit_users = sorted(rng.choice(fit_users, config.fit_max_users, replace=False).tolist())
    # Only the fitting users' rows go into per-user sets: the fit reads `fit_max_users` users
    # whatever the log holds (every user's sets: 0.3 CPU s on 1 M rows, growing with them).
    chosen = pl.Series(fit_users, dtype=valid.schema["user_id"]).implode()
    rated = pl.concat([train.select("user_id", "item_id"), valid.select("user_id", "item_id")]).filter(
        pl.col("user_id").is_in(chosen)
    )
    rated_by_user = {u: set(ms) for u, ms in rated.group_by("user_id").agg(pl.col("item_id")).iter_rows()}
    valid_by_user = {
        u: (np.asarray(ms), np.asarray(rs))
        for u, ms, rs in valid.filter(pl.col("user_id").is_in(chosen))
        .group_by("user_id")
        .agg(pl.col("item_id"), pl.col("rating"))
        .sort("user_id")
        .iter_rows()
    }
    n_hold = int(round(len(fit_users) * config.holdout_share)) if len(fit_users) >= 10 else 0
    holdout = set(rng.choice(fit_users, n_hold, replace=False).tolist()) if n_hold else set()

    pop_p = (ctx.facts.popularity + 1.0) / (ctx.facts.popularity + 1.0).sum()
    states = agent_states({u: memories[u] for u in fit_users}, profiles, ctx, config)
    agents, candidates, labels, ratings_all, held, row_user = [], [], [], [], [], []
    for u in fit_users:
        movies_u, ratings_u = valid_by_user[u]
        if len(movies_u) > config.fit_max_positives_per_user:
            pick = rng.choice(len(movies_u), config.fit_max_positives_per_user, replace=False)
            movies_u, ratings_u = movies_u[pick], ratings_u[pick]
        pos_rows = ctx.vectors.rows_of(movies_u)
        neg_rows = _sample_negatives(
            rng, len(pos_rows) * config.negatives_per_positive, pop_p, rated_by_user[u], ctx, config
        )
        agents.append(states[u])
        candidates.append(np.concatenate([pos_rows, neg_rows]))
        labels.append(np.r_[np.ones(len(pos_rows)), np.zeros(len(neg_rows))])
        ratings_all.append(np.r_[ratings_u.astype(np.float64), np.full(len(neg_rows), np.nan)])
        held.append(np.full(len(pos_rows) + len(neg_rows), u in holdout))
        row_user.append(np.full(len(pos_rows) + len(neg_rows), u))
    yc, hc, r_all = np.concatenate(labels), np.concatenate(held), np.concatenate(ratings_all)
    rows_c = np.concatenate(candidates)
    weight = _propensity_weights(ctx.facts.popularity[rows_c], yc, config.exposure_correction)
    config, recall_grid = _fit_recall(config, memories, profiles, fit_users, candidates, yc, hc, ctx)
    states = agent_states({u: memories[u] for u in fit_users}, profiles, ctx, config)
    Xc, _, _ = pair_features([states[u] for u in fit_users], candidates, ctx, config)
    is_pos = yc == 1
    Xp, rp, hp = Xc[is_pos], r_all[is_pos], hc[is_pos]
    up, crowd_p = np.concatenate(row_user)[is_pos], Xp[:, FEATURES.index("crowd_rating")] + ctx.global_mean_rating
    rows_p = rows_c[is_pos]
    yl = (rp >= config.like_threshold).astype(float)

    def auc(model: LinearModel, X, y):
        return float(roc_auc_score(y, model.score(X))) if len(np.unique(y)) == 2 else None

    # The collaborative variants of the click model, each scored on the
    # held-out users; "auto" keeps the best, so a catalogue where the factors add nothing
    # (or are off) keeps the click model it had without them.
    ablation, models = [], {}
    # The popularity head only where the negatives are uniform: against popularity-drawn
    # negatives the popularity terms contrast the sampling distribution, and a curve free to
    # bend learns to shun the head (ML-1M users 1-1999: Pop's simulated CTR 0.66 -> 0.54).
    head = () if config.popular_negative_share == 0 else ("popularity_head",)
    unused = _unused(config)
    for variant, dropped in _COLLAB_VARIANTS.items():
        if ctx.collab.shape[1] == 0 and ctx.neighbours is None and variant != "none":
            continue
        names = tuple(f for f in HOME_FEATURES if f not in dropped and f not in head and f not in unused)
        idx = [FEATURES.index(f) for f in names]
        models[variant] = _fit_logistic(LogisticRegression, Xc[~hc][:, idx], yc[~hc], names, config, weight[~hc])
        ablation.append(
            {
                "variant": variant,
                "features": len(names),
                "click_auc_holdout": auc(models[variant], Xc[hc], yc[hc]) if hc.any() else None,
            }
        )
    if config.click_collaborative != "auto":
        if config.click_collaborative not in models:
            raise ValueError(
                f"embedded brain fit: click_collaborative={config.click_collaborative!r} needs collab_factors > 0"
            )
        variant = config.click_collaborative
    else:
        scored = [r for r in ablation if r["click_auc_holdout"] is not None]
        variant = max(scored, key=lambda r: r["click_auc_holdout"])["variant"] if scored else ablation[-1]["variant"]
    click = models[variant]
    detail = tuple(f for f in DETAIL_FEATURES if f not in _COLLAB_VARIANTS[variant] and f not in unused)
    Xp = Xp[:, [FEATURES.index(f) for f in detail]]
    # The detail page's models read what users rated, so the log's exposure shaped their rows
    # too; "all" weighs them as the click model's positives (exposure_correction_models).
    detail_weight = weight[is_pos][~hp] if config.exposure_correction_models == "all" else None
    like = _fit_logistic(LogisticRegression, Xp[~hp], yl[~hp], detail, config, detail_weight)
    rating, resid_sd = _fit_ridge(Ridge, Xp[~hp], rp[~hp], detail, config, detail_weight)
    cuts = rating_cut_points(rating.score(Xp[~hp], detail), rp[~hp], config.rating_range)
    # The rule "crowd"'s weight and spread, on every fit user's validation ratings: a ρ over
    # users needs more of them than the held-out share holds (ML-1M users 1–1999: 74 of 369),
    # and the ridge's in-sample edge is the same for every pair of values tried.
    crowd_weight, spread, crowd_grid = choose_crowd_rule(
        rating.score(Xp, detail),
        crowd_p,
        np.array([states[int(u)].conformity for u in up]),
        rp,
        up,
        [getattr(profiles.get(int(u)), "conformity_tier", None) for u in up],
        ctx.facts.mean_rating[rows_p],
        cuts,
        config.rating_range,
        config.rating_rmse_budget,
    )

    return EmbeddedBrainParams(
        click=click,
        like=like,
        rating=rating,
        rating_residual_sd=resid_sd,
        n_users=len(fit_users),
        n_positives=int(yc.sum()),
        n_negatives=int((1 - yc).sum()),
        holdout_users=len(holdout),
        click_auc_holdout=auc(click, Xc[hc], yc[hc]) if hc.any() else None,
        like_auc_holdout=float(roc_auc_score(yl[hp], like.score(Xp[hp], detail)))
        if hp.any() and len(np.unique(yl[hp])) == 2
        else None,
        rating_rmse_holdout=float(np.sqrt(np.mean((rating.score(Xp[hp], detail) - rp[hp]) ** 2))) if hp.any() else None,
        global_mean_rating=ctx.global_mean_rating,
        text_model=ctx.vectors.text_model,
        poster_model=ctx.vectors.poster_model if config.use_posters else "none",
        catalogue_digest=ctx.vectors.digest,
        seed=config.fit_seed,
        rating_cuts=cuts,
        rating_crowd_weight=crowd_weight,
        rating_spread=spread,
        rating_crowd_grid=crowd_grid,
        click_ablation=ablation,
        click_variant=variant,
        fit_rows=train.height + valid.height,
        fit_last_timestamp=_last_timestamp(train, valid),
        recall=config.recall,
        recall_grid=recall_grid,
    )


def _fit_recall(config, memories, profiles, fit_users, candidates, y, held, ctx) -> tuple[EmbeddedBrainConfig, list]:
    """`config` with its recall weights (`RecallWeights`): the configured ones, else those of
    `recall_grid` whose click model (no collaborative score) scores the held-out users'
    validation window best (AUC; the first of the grid on a tie or without held-out users),
    with the popularity half-life; and every weighting tried with its AUC."""
    # lazy: scikit-learn
    from sklearn.metrics import roc_auc_score

    if config.recall is not None:
        return config, []
    half_life = ctx.half_life_days if np.isfinite(ctx.half_life_days) else RecallWeights().half_life_days
    names = tuple(f for f in HOME_FEATURES if f not in COLLAB_FEATURES and f not in _unused(config))
    idx = [FEATURES.index(f) for f in names]
    grid, best = [], None
    for recency, importance in config.recall_grid:
        weights = RecallWeights(recency=recency, importance=importance, half_life_days=half_life)
        tried = config.model_copy(update={"recall": weights})
        states = agent_states({u: memories[u] for u in fit_users}, profiles, ctx, tried)
        X, _, _ = pair_features([states[u] for u in fit_users], candidates, ctx, tried)
        score = None
        if held.any() and len(np.unique(y[held])) == 2:
            # lazy: scikit-learn
            from sklearn.linear_model import LogisticRegression

            model = _fit_logistic(LogisticRegression, X[~held][:, idx], y[~held], names, config)
            score = float(roc_auc_score(y[held], model.score(X[held][:, idx], names)))
        grid.append({"recency": recency, "importance": importance, "click_auc_holdout": score})
        if best is None or (score is not None and (best[0] is None or score > best[0] + 1e-4)):
            best = (score, weights)
    return config.model_copy(update={"recall": best[1]}), grid


def _unused(config: EmbeddedBrainConfig) -> tuple[str, ...]:
    """The item-time features the configuration leaves out (`time_features`)."""
    return tuple(f for f in TIME_FEATURES if f not in config.time_features)


# Collaborative variants of the click model: the collaborative features each leaves out.
_COLLAB_VARIANTS: dict[str, tuple[str, ...]] = {
    "none": COLLAB_FEATURES,
    "collab": ("collab_recent",),
    "collab+recent": (),
}


def rating_cut_points(
    predicted: np.ndarray, real: np.ndarray, rating_range: tuple[int, int] = (1, 5)
) -> list[float] | None:
    """Cut points on predicted mean ratings so that the stars they give have the real
    ratings' shares: the predicted values' quantiles at the real cumulative shares."""
    lo, hi = rating_range
    if len(real) == 0:
        return None
    stars = np.arange(lo, hi + 1)
    cumulative = np.cumsum([(real == s).mean() for s in stars])[:-1]
    return np.quantile(predicted, np.clip(cumulative, 0.0, 1.0)).tolist()


def _last_timestamp(*frames: pl.DataFrame) -> int | None:
    stamps = [f.get_column("timestamp").max() for f in frames if f.height and "timestamp" in f.columns]
    return int(max(stamps)) if stamps else None


def _sample_negatives(rng, n, pop_p, rated: set, ctx: BrainContext, config: EmbeddedBrainConfig) -> np.ndarray:
    """n catalogue rows the user rated in neither window: a share by popularity, the rest uniform."""
    n_pop = int(round(n * config.popular_negative_share))
    want = {"uniform": n - n_pop, "popular": n_pop}
    got: dict[str, list[int]] = {"uniform": [], "popular": []}
    ids = ctx.facts.item_ids
    for _ in range(50):  # rejection sampling: a user rated a small share of the catalogue
        for kind in got:
            short = want[kind] - len(got[kind])
            if short <= 0:
                continue
            draw = (
                rng.integers(0, len(ids), 2 * short) if kind == "uniform" else rng.choice(len(ids), 2 * short, p=pop_p)
            )
            got[kind] += [r for r in draw.tolist() if int(ids[r]) not in rated][:short]
        if all(len(got[k]) == want[k] for k in got):
            return np.asarray(got["uniform"] + got["popular"], dtype=np.int64)
    # Rejection fails where the user rated most of what the draw favours — the head, on a log
    # led by the popular (a planted world at exposure 2.5): the rest is drawn from the same
    # distribution restricted to the unrated rows (the first rounds' draws kept, so a fit that
    # never gets here draws what it always drew).
    unrated = np.fromiter((int(m) not in rated for m in ids.tolist()), dtype=bool, count=len(ids))
    if not unrated.any():
        raise ValueError("embedded brain fit: cannot sample negatives (a user rated the whole catalogue)")
    for kind in got:
        short = want[kind] - len(got[kind])
        if short > 0:
            p = np.where(unrated, 1.0 if kind == "uniform" else pop_p, 0.0)
            got[kind] += rng.choice(len(ids), short, p=p / p.sum()).tolist()
    return np.asarray(got["uniform"] + got["popular"], dtype=np.int64)


def _propensity_weights(counts: np.ndarray, y: np.ndarray, power: float) -> np.ndarray:
    """1 for negatives; for positives 1 / (count + 1) ** power, scaled so that the positives
    keep their total weight (the click model's base rate stays that of the sampling)."""
    weight = np.ones(len(y))
    pos = y == 1
    if power > 0 and pos.any():
        inverse = (np.asarray(counts, dtype=float)[pos] + 1.0) ** -power
        weight[pos] = inverse * (pos.sum() / inverse.sum())
    return weight


def _fit_logistic(cls, X, y, names, config, sample_weight=None) -> LinearModel:
    if len(np.unique(y)) < 2:
        raise ValueError(f"embedded brain fit: the labels for {names[-1]!r}-model are all {y[:1]}; need both classes")
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 1e-9, sd, 1.0)
    model = cls(C=config.l2_c, max_iter=2000).fit((X - mu) / sd, y, sample_weight=sample_weight)
    coef = model.coef_[0] / sd
    return LinearModel(features=list(names), coef=coef.tolist(), intercept=float(model.intercept_[0] - coef @ mu))


def _fit_ridge(cls, X, y, names, config, sample_weight=None) -> tuple[LinearModel, float]:
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 1e-9, sd, 1.0)
    model = cls(alpha=config.ridge_alpha).fit((X - mu) / sd, y, sample_weight=sample_weight)
    coef = model.coef_ / sd
    lin = LinearModel(features=list(names), coef=coef.tolist(), intercept=float(model.intercept_ - coef @ mu))
    resid = y - lin.score(X, names)
    return lin, float(resid.std()) if len(resid) > 1 else 1.0

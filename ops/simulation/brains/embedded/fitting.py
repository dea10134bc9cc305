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
from ops.agents.memory import LongTermMemory
from ops.simulation.brains.embedded.brain import EmbeddedBrain
from ops.simulation.brains.embedded.config import (
    COLLAB_FEATURES,
    DETAIL_FEATURES,
    FEATURES,
    HOME_FEATURES,
    EmbeddedBrainConfig,
    EmbeddedBrainParams,
    LinearModel,
)
from ops.simulation.brains.embedded.features import BrainContext, agent_states, pair_features
from ops.simulation.brains.embedded.rating_rule import choose_crowd_rule


@dataclass(eq=False)
class EmbeddedBrainModel:
    """A fitted embedded brain: its parameters and the context they were fitted in."""

    params: EmbeddedBrainParams
    context: BrainContext
    config: EmbeddedBrainConfig
    timings_s: dict[str, float] = field(default_factory=dict)

    def brain(self, config: EmbeddedBrainConfig | None = None) -> EmbeddedBrain:
        """A fresh embedded brain (one per simulation: it caches per-user scores)."""
        return EmbeddedBrain(self.params, self.context, config or self.config)

    def save(self, folder: Path) -> None:
        """Into `folder`, without pickle: parameters, configuration and timings as JSON, the
        context in its own folder (`BrainContext.save`)."""
        from ops.codec import save_json

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

    @classmethod
    def load(cls, folder: Path) -> EmbeddedBrainModel:
        from ops.codec import check_format, load_json

        meta = load_json(folder / "brain.json")
        check_format(meta, "EmbeddedBrainModel", 1, folder / "brain.json")
        return cls(
            params=EmbeddedBrainParams.model_validate(meta["params"]),
            context=BrainContext.load(folder / "context"),
            config=EmbeddedBrainConfig.model_validate(meta["config"]),
            timings_s=meta["timings_s"],
        )


def fit_embedded_brain(
    agents: Agents,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame | None,
    config: EmbeddedBrainConfig | None = None,
) -> EmbeddedBrainModel:
    """The shared context (catalogue vectors and facts, population and demographic
    statistics of the train window) and the parameters fitted on train + validation."""
    config = config or EmbeddedBrainConfig()
    started = time.perf_counter()
    context = BrainContext.build(
        agents.vectors,
        agents.facts,
        train,
        agents.config.profile,
        users,
        crowd_rating_prior=config.crowd_rating_prior,
        collab_factors=config.collab_factors,
        collab_family=config.collab_family,
    )
    params = fit(train, valid, agents.memories, agents.profiles, context, config)
    return EmbeddedBrainModel(params, context, config, {"fit": time.perf_counter() - started})


def fit(
    train: pl.DataFrame,
    valid: pl.DataFrame,
    memories: Mapping[int, LongTermMemory],
    profiles: Mapping[int, object],
    ctx: BrainContext,
    config: EmbeddedBrainConfig | None = None,
) -> EmbeddedBrainParams:
    """Fit the click, like and rating models (module docstring, "Fitting")."""
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.metrics import roc_auc_score

    config = config or EmbeddedBrainConfig()
    rng = np.random.default_rng(np.random.SeedSequence([config.fit_seed, 5150]))
    rated = pl.concat([train.select("user_id", "movie_id"), valid.select("user_id", "movie_id")])
    rated_by_user = {u: set(ms) for u, ms in rated.group_by("user_id").agg(pl.col("movie_id")).iter_rows()}
    valid_by_user = {
        u: (np.asarray(ms), np.asarray(rs))
        for u, ms, rs in valid.group_by("user_id").agg(pl.col("movie_id"), pl.col("rating")).sort("user_id").iter_rows()
    }
    fit_users = [u for u in sorted(valid_by_user) if u in memories and len(memories[u])]
    if len(fit_users) < 2:
        raise ValueError(
            f"embedded brain fit: {len(fit_users)} users have both train and validation ratings; need >= 2"
        )
    if len(fit_users) > config.fit_max_users:
        fit_users = sorted(rng.choice(fit_users, config.fit_max_users, replace=False).tolist())
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
    Xc, _, _ = pair_features(agents, candidates, ctx, config)
    yc, hc, r_all = np.concatenate(labels), np.concatenate(held), np.concatenate(ratings_all)
    is_pos = yc == 1
    Xp, rp, hp = Xc[is_pos], r_all[is_pos], hc[is_pos]
    up, crowd_p = np.concatenate(row_user)[is_pos], Xp[:, FEATURES.index("crowd_rating")] + ctx.global_mean_rating
    rows_p = np.concatenate(candidates)[is_pos]
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
    for variant, dropped in _COLLAB_VARIANTS.items():
        if ctx.collab.shape[1] == 0 and variant != "none":
            continue
        names = tuple(f for f in HOME_FEATURES if f not in dropped and f not in head)
        idx = [FEATURES.index(f) for f in names]
        models[variant] = _fit_logistic(LogisticRegression, Xc[~hc][:, idx], yc[~hc], names, config)
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
    detail = tuple(f for f in DETAIL_FEATURES if f not in _COLLAB_VARIANTS[variant])
    Xp = Xp[:, [FEATURES.index(f) for f in detail]]
    like = _fit_logistic(LogisticRegression, Xp[~hp], yl[~hp], detail, config)
    rating, resid_sd = _fit_ridge(Ridge, Xp[~hp], rp[~hp], detail, config)
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
    )


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
    ids = ctx.facts.movie_ids
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
    raise ValueError("embedded brain fit: cannot sample negatives (a user rated nearly the whole catalogue)")


def _fit_logistic(cls, X, y, names, config) -> LinearModel:
    if len(np.unique(y)) < 2:
        raise ValueError(f"embedded brain fit: the labels for {names[-1]!r}-model are all {y[:1]}; need both classes")
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 1e-9, sd, 1.0)
    model = cls(C=config.l2_c, max_iter=2000).fit((X - mu) / sd, y)
    coef = model.coef_[0] / sd
    return LinearModel(features=list(names), coef=coef.tolist(), intercept=float(model.intercept_[0] - coef @ mu))


def _fit_ridge(cls, X, y, names, config) -> tuple[LinearModel, float]:
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 1e-9, sd, 1.0)
    model = cls(alpha=config.ridge_alpha).fit((X - mu) / sd, y)
    coef = model.coef_ / sd
    lin = LinearModel(features=list(names), coef=coef.tolist(), intercept=float(model.intercept_ - coef @ mu))
    resid = y - lin.score(X, names)
    return lin, float(resid.std()) if len(resid) > 1 else 1.0

"""The embedded brain's configuration (constants with the reason for each) and what
fitting learns (`EmbeddedBrainParams`, saved as JSON).  See the package docstring."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from ops.agents.memory import RecallWeights

HOME_FEATURES = (
    "user_mean",
    "text_familiarity",
    "text_affinity",
    "poster_familiarity",
    "poster_affinity",
    "genre_lift",
    "genre_deviation",
    "era_lift",
    "vote",
    "vote_x_conformity",
    "popularity",
    "popularity_x_conformity",
    "popularity_head",
    "trend",
    "age",
    "crowd_rating",
    "crowd_rating_x_conformity",
    "demographic_lift",
    "collab",
    "collab_recent",
)
# The collaborative scores (package docstring, "Features"); the click model keeps them only
# where they raise its held-out AUC on the validation window (`click_collaborative`).
COLLAB_FEATURES = ("collab", "collab_recent")
# The item's place in time as seen from the clock (`ops.agents.clock`).
TIME_FEATURES = ("trend", "age")
DETAIL_FEATURES = HOME_FEATURES + ("director_match", "actor_match")
FEATURES = DETAIL_FEATURES


class EmbeddedBrainConfig(BaseModel):
    # Long-term memory retrieval: memories recalled per query (A/B Agent §2.4.2 retrieves
    # "relevant records"; 10 keeps a handful of strong neighbours without averaging away).
    retrieval_k: int = Field(10, ge=1)
    # Catalogues up to this size get a precomputed movie x movie cosine matrix (float32,
    # 60 MB for ML-1M's 3,883 movies), so retrieval is a gather instead of a product per
    # agent; larger catalogues fall back to one small product per agent.
    similarity_cache_max_movies: int = Field(8000, ge=0)
    # Vision ablation (A/B Agent §3.5, Table 5 "w/o vision"): False zeroes poster features.
    use_posters: bool = True
    # Ratings at or above this count as liked (A/B Agent label, docs/definitions.md#lifecycle, step 5).
    like_threshold: int = 4
    # The crowd's rating of a movie (its train mean) is shrunk towards the global mean by
    # this many pseudo-ratings, so a movie rated twice does not read as a masterpiece.
    crowd_rating_prior: float = Field(10.0, ge=0)

    # Reflection (Agent4Rec §2.1.2: "once the agent's actions surpass a pre-defined count,
    # it triggers a reflection"): every `reflect_every` actions of a session, the agent's
    # memory-derived features (retrieval affinity and familiarity, genre / era lifts and
    # deviations, credits) are recomputed from its long-term memory plus the movies it has
    # watched and rated so far in the session, so the rest of the session reads a
    # preference state that includes them.  0 (the default): never, so a session reads its
    # long-term memory only, as before reflection existed.
    reflect_every: int = Field(0, ge=0)
    # Collaborative score: item factors of a truncated SVD of the train
    # window's user x movie matrix (PureSVD); the pair's score is the movie's factor dotted
    # with the mean factor of the agent's remembered movies ("collab") and of its
    # `collab_recent` most recent ones ("collab_recent": tastes drift).  0 factors: off.
    collab_factors: int = Field(48, ge=0)
    collab_recent: int = Field(20, ge=1)
    # Which model family the collaborative score comes from: "puresvd", the item factors
    # above (a factor model, as the FM family and ALS are); "itemknn", an item-item
    # neighbourhood: the movie's cosine similarity (over the train window's binary user
    # columns) to each remembered movie, averaged — no factorisation.  docs/trust.md has
    # the measurements behind the default.
    collab_family: Literal["puresvd", "itemknn", "pathsim"] = "puresvd"
    # Which collaborative features the click model uses: "auto" picks, among none / collab /
    # collab + recent, the one with the best click AUC on the fit's held-out users
    # (validation window); the others force a variant.  "none" by default: with the PureSVD
    # features the held-out click AUC rises (ML-1M users 1-1999: 0.752 -> 0.778) but the
    # agents' taste becomes a factor model's, and the simulation favours factor models'
    # lists beyond their offline worth — an outside ALS 11.9 CTR points above Pop where the
    # test window ties them, the brain's own ranking 19 points above what its NDCG@20
    # predicts, Kendall τ 0.33 instead of 0.67 (docs/trust.md).  The fit still scores every
    # variant (`EmbeddedBrainParams.click_ablation`).
    click_collaborative: Literal["auto", "none", "collab", "collab+recent"] = "none"
    # How memories are chosen for retrieval (`ops.agents.memory.RecallWeights`: relevance,
    # recency, importance); None: fitted, the weights of `recall_grid` (half-life: the
    # popularity's) whose click model predicts the held-out users' validation window best.
    recall: RecallWeights | None = None
    recall_grid: tuple[tuple[float, float], ...] = ((0.0, 0.0), (0.5, 0.0), (1.0, 0.0), (0.5, 0.5), (1.0, 1.0))
    # Popularity as of the clock weighted by recency, with the half-life under which the
    # train window's decayed counts best predict the validation window's interactions
    # (`ops.agents.clock.fit_half_life`); False: plain counts (no decay, no trend).
    popularity_decay: bool = True
    # Which of the item-time features (TIME_FEATURES) the models read.
    time_features: tuple[str, ...] = TIME_FEATURES
    # An agent does not click a card of an item already in its memory: MovieLens and Steam
    # record an item once per user (what a user has rated or reviewed they do not take
    # again), and the offline metrics count such an item in a list as a miss.  False: a
    # remembered item is clicked as any other (a log of repeated consumption).
    skip_seen: bool = True

    # -- fitting (train and validation windows) --
    negatives_per_positive: int = Field(4, ge=1)
    popular_negative_share: float = Field(0.5, ge=0, le=1)
    # The exposure taken out of the click model (docs/definitions.md#the-truth): the log holds
    # what a production system exposed, led by the popular, so what users took up next is
    # uptake x exposure.  Each validation positive weighs 1 / propensity, the propensity of its
    # item estimated from the log as (count + 1) ** exposure_correction (inverse propensity
    # scoring; 0: no correction, 1: exposure in proportion to the log's counts); the click
    # model then estimates P(click | shown) rather than P(taken up | exposed).
    exposure_correction: float = Field(0.0, ge=0, le=2)
    # Which models the correction weighs: the click model ("click"), or the like and rating
    # models as well ("all"), whose rows are the rated items the same exposure chose.
    exposure_correction_models: Literal["click", "all"] = "click"
    fit_max_users: int = Field(3000, ge=1)
    fit_max_positives_per_user: int = Field(30, ge=1)
    holdout_share: float = Field(0.2, ge=0, lt=1)
    l2_c: float = Field(1.0, gt=0)  # inverse L2 strength of both logistic models
    ridge_alpha: float = Field(1.0, ge=0)
    fit_seed: int = 0

    # -- home page --
    # Shift of the fitted click log-odds.  The click model is fitted with 1 positive per
    # `negatives_per_positive` negatives; 0 keeps that base rate.
    click_bias: float = 0.0
    # Eyes scan a page top to bottom: each slot lower costs this much log-odds (not in any
    # log, so not fitted; A/B Agent §3.1 shows 5 items per page).
    position_decay: float = 0.1
    # Interest 1..5 on a home page: 1 + number of these cut points the page's best click
    # probability reaches.
    home_interest_cuts: tuple[float, float, float, float] = (0.15, 0.3, 0.5, 0.7)
    # Leaving instead of turning the page: sigmoid(bias + fatigue_weight·spent/budget
    # + interest_weight·(3 − interest)).  A/B Agent §2.4.4: fatigue and low interest
    # drive exits; Table 6 case 4 exits at 25/30 fatigue on an uninteresting page.
    exit_bias: float = -2.0
    exit_fatigue_weight: float = 2.5
    exit_interest_weight: float = 0.7

    # -- detail page --
    # Watch probability = sigmoid(like log-odds + watch_bias): most clicks end in a watch
    # (A/B Agent Table 2: CVR / CTR between 0.5 and 0.8).
    watch_bias: float = 0.8
    # How the detail page's rating is chosen from the rating model's mean μ (package
    # docstring, "Ratings"): "expected" rounds μ (the best guess: lowest RMSE, stars bunched
    # at 3–4); "matched" cuts μ at points fitted so the stars' shares are the validation
    # window's (the real spread, RMSE ~0.1 higher on ML-1M); "sampled" rounds μ plus Gaussian
    # noise of rating_noise × the residual sd (spread matched, RMSE ~0.3 higher).
    # "personal" is "sampled" with the noise scaled by 1 − rating_conformity_weight ×
    # conformity (−1 … +1): independent agents stray further from the crowd-informed mean,
    # conformists less (the conformity tier must move the rating gap, as it does for real users).
    # "crowd" (`rating_rule` module) moves μ away from the crowd's rating for independent
    # agents and towards it for conformists by `rating_crowd_weight`, and cuts it `rating_spread`
    # of the way from rounding to the "matched" cuts; both None = the values the fit chose on
    # the validation window, within `rating_rmse_budget` of rounding's RMSE.  The default:
    # on ML-1M users 1–1999 it is the one rule with a lower Wasserstein distance than
    # "expected" and the real sign of ρ(conformity tier, rating gap) within the RMSE target.
    rating_rule: Literal["expected", "matched", "sampled", "personal", "crowd"] = "crowd"
    rating_noise: float = 1.0  # "sampled" and "personal"
    rating_conformity_weight: float = Field(0.8, ge=0, le=1)  # "personal" only
    rating_crowd_weight: float | None = Field(None, ge=0, le=1)  # "crowd" only
    rating_spread: float | None = Field(None, ge=0, le=1)  # "crowd" only
    # The RMSE the fit's choice for "crowd" may add to rounding's, relative: the issue's
    # target is the best offline arm's RMSE (ML-1M: 0.960 against rounding's 0.942, +1.9 %);
    # half of that leaves room for the test window differing from the validation window.
    rating_rmse_budget: float = Field(0.01, ge=0)
    detail_interest_cuts: tuple[float, float, float, float] = (0.3, 0.5, 0.7, 0.85)

    # -- exit interview (Agent4Rec §3.3: satisfaction 1..10) --
    satisfaction_base: float = 4.0
    satisfaction_per_like: float = 1.5
    satisfaction_per_watch: float = 0.3  # watched but not liked
    satisfaction_per_dislike: float = -1.0  # watched and rated <= 2
    satisfaction_interest_weight: float = 0.8  # per point of mean home interest above 3
    satisfaction_pickiness: dict[str, float] = {"not picky": 0.5, "moderately picky": 0.0, "extremely picky": -0.7}
    satisfaction_noise_sd: float = 0.5
    satisfaction_range: tuple[int, int] = (1, 10)
    rating_range: tuple[int, int] = (1, 5)


class LinearModel(BaseModel):
    """A linear score on named features, in raw (unstandardised) feature units."""

    features: list[str]
    coef: list[float]
    intercept: float

    def score(self, X: np.ndarray, columns: Sequence[str] = FEATURES) -> np.ndarray:
        idx = [list(columns).index(f) for f in self.features]
        return X[:, idx] @ np.asarray(self.coef) + self.intercept


class ListResponse(BaseModel):
    """How the click decision was calibrated to real users' response to list quality
    (`ops.studies.alignment.calibration`): the elasticities measured on the validation
    window's list-quality yardstick before and after, and the chosen scale and shift."""

    metric: str  # the simulated metric matched (cvr: watch-and-rate, MovieLens's "rated")
    real_elasticity: float  # d log(rate) / d log(share of relevant items), real users
    elasticity_before: float
    elasticity_after: float
    click_scale: float
    click_shift: float
    agents: int  # validation-window agents the yardstick was measured on
    seed: int
    grid: list[dict] = Field(default_factory=list)  # every scale tried, with its elasticities
    # The yardstick's lists (`ops.studies.alignment.mixed_lists.choose_ladder`): the papers' 20 items
    # at 1:9, 1:4, 1:1 where the window allows, shorter lists where users like few items.
    list_length: int = 20
    ratios: list[int] = Field(default_factory=lambda: [9, 4, 1])
    # The share of popularity-drawn negatives the kept click model was fitted on (None: as configured).
    popular_negative_share: float | None = None
    # The kept click level: the yardstick's anchor lists' mean first-look click probability as
    # a share of what the fitted click model gives them (1: the fitted model's level).
    level: float = 1.0


class ExposureCalibration(BaseModel):
    """How the click decision was calibrated on a random-exposure sample
    (`ops.studies.alignment.exposure_calibration`): what it read and the scale and shift set."""

    users: int
    rows: int
    clicks: int
    click_rate: float
    # the click decision's log-odds = scale × (click model) + shift
    scale: float
    shift: float
    # the click model's AUC on the calibration rows (how well it ranks the clicks of random items)
    auc: float
    # the calibrated decision's mean click probability on the rows (≈ click_rate by construction)
    mean_probability: float


class EmbeddedBrainParams(BaseModel):
    """What `fit` learned; saved as JSON beside the run."""

    version: int = 2
    click: LinearModel
    like: LinearModel
    rating: LinearModel
    rating_residual_sd: float
    n_users: int
    n_positives: int
    n_negatives: int
    holdout_users: int
    click_auc_holdout: float | None
    like_auc_holdout: float | None
    rating_rmse_holdout: float | None
    global_mean_rating: float
    text_model: str
    poster_model: str
    catalogue_digest: str
    seed: int
    # The windows fitting read (leakage guard of ops.studies.alignment): rows, and the last
    # timestamp; every alignment protocol's held-out window must start at or after it.
    fit_rows: int | None = None
    fit_last_timestamp: int | None = None
    # The click decision's log-odds are click_scale × (click model) + click_shift: 1 and 0
    # until calibrated to the real response to list quality (`ListResponse`).
    click_scale: float = 1.0
    click_shift: float = 0.0
    list_response: ListResponse | None = None
    # Why the click decision was left uncalibrated (e.g. too few agents for any yardstick).
    list_response_skipped: str | None = None
    # Where a random-exposure sample with clicks calibrated the click decision instead.
    exposure_calibration: ExposureCalibration | None = None
    # Why a random-exposure calibration that was asked for was not made (its sample carries no signal).
    exposure_calibration_skipped: str | None = None
    # The click model's collaborative variants (none / collab / collab+recent) with their
    # held-out click AUC, and the one chosen (`EmbeddedBrainConfig.click_collaborative`).
    click_ablation: list[dict] = Field(default_factory=list)
    click_variant: str | None = None
    # The rating rule "matched": the four cut points on the rating model's mean between 1|2,
    # 2|3, 3|4 and 4|5 stars, fitted on the validation window's ratings.
    rating_cuts: list[float] | None = None
    # The rating rule "crowd": the weight and spread chosen on the validation window, and
    # every pair tried (`rating_rule.choose_crowd_rule`).
    rating_crowd_weight: float = 0.0
    rating_spread: float = 0.0
    rating_crowd_grid: list[dict] = Field(default_factory=list)
    # The popularity half-life in days fitted on the validation window (None: no decay) and
    # every half-life tried with its validation log-likelihood (`ops.agents.clock`).
    half_life_days: float | None = None
    half_life_grid: list[dict] = Field(default_factory=list)
    # The recall weights the fit chose (None: plain similarity) and every weighting tried.
    recall: RecallWeights | None = None
    recall_grid: list[dict] = Field(default_factory=list)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(self.model_dump_json(indent=2))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> EmbeddedBrainParams:
        try:
            return cls.model_validate(json.loads(Path(path).read_text()))
        except Exception as exc:
            raise ValueError(f"embedded brain parameters {path} cannot be read: {exc}") from exc

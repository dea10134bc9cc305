"""Recommender arms: Random, Pop and the DeepCTR family (A/B Agent §2.3.2, §3.2, Appendix B).

An arm is a named configuration.  `arm_config("deepfm")` gives DeepFM with the Appendix B
hyper-parameters; variants studied by the paper are spelled into the name:
`deepfm_data50` / `deepfm_data75` (Table 3, share of the train split) and
`deepfm_user_id_only` / `deepfm_movie_id_only` (Table 4, feature sets).  Any field can be
overridden: `arm_config("afn", max_epochs=3)`.

`train_arm` fits one arm on the train split, with early stopping on validation AUC and
the best epoch's weights restored; `TrainedArm.score` scores aligned (user, movie) arrays
in batches; `top_k` ranks the whole catalogue for many users at once, excluding each
user's train items (docs/definitions.md#top-20-list); `evaluate_arm` gives the offline metrics of
docs/definitions.md#lifecycle, step 6.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.arms.base import TOP_CELLS, Factors, FitData, rank_arm, sigmoid
from ops.arms.features import FeatureConfig, FeatureEncoder, FeatureSet, fit_encoder
from ops.arms.metrics import auc, log_loss, relevant_items
from ops.arms.ranking import OfflineMetrics, metrics_from_lists, positive_threshold
from ops.data.domain import feedback_of

ModelName = Literal["random", "pop", "fm", "deepfm", "afn", "wdl", "xdeepfm", "dcn", "nfm", "autoint", "pnn"]
DEEPCTR_MODELS = ("fm", "deepfm", "afn", "wdl", "xdeepfm", "dcn", "nfm", "autoint", "pnn")
# Table 2 compares these; Table 5 retrains the eight DeepCTR models after augmentation.
TABLE2_ARMS = ("random", "pop", "fm", "afn", "deepfm")
TABLE5_ARMS = ("nfm", "xdeepfm", "wdl", "dcn", "deepfm", "afn", "autoint", "pnn")
ALL_ARMS = ("random", "pop", *DEEPCTR_MODELS)
# Table 3 (data scale) and Table 4 (feature sets) variants of DeepFM.
VARIANT_ARMS = ("deepfm_data50", "deepfm_data75", "deepfm_user_id_only", "deepfm_movie_id_only")

EpochCallback = Callable[[int, dict[str, float]], None]
log = logging.getLogger(__name__)


class DivergenceGuard(BaseModel):
    """When training gives up on an arm instead of registering a useless model.  Every
    check names the arm, the epoch and the figures (`ArmDivergedError`)."""

    enabled: bool = True
    # A loss that is not a number (NaN / inf) stops the arm at once, at the batch it
    # appears in: nothing after it can be trusted.  Not configurable.
    # Mean log loss, train or validation, above this stops the arm after the epoch.  A
    # constant 0.5 scores ln 2 = 0.69 and the base rate less; the sane arms score
    # 0.45-0.75 on ML-1M validation (bench/arms.py); 2.0 is reached only by confident wrong
    # predictions, like AFN's 14.2 at epoch 1 (issue 16).  After a kept epoch that passed
    # every check, a log loss past it ends training there instead (over-fitting: the best
    # epoch is kept, a warning logged), as early stopping would.
    max_log_loss: float = Field(2.0, gt=0)
    # Best validation AUC so far below this after `auc_epochs` epochs stops the arm: "near
    # 0.5", i.e. the model ranks a positive above a negative hardly more often than a coin.
    # Pop, which knows nothing of the user, scores 0.62 on ML-1M (users 1-1999) validation
    # and 0.59 on ML-100K, DeepFM 0.70 after one epoch; a DeepCTR arm below 0.55 is not
    # learning.
    min_val_auc: float = Field(0.55, ge=0, le=1)
    # Epochs before the AUC check: the first epoch of a slow learner (a small step, few
    # rows) may still be near 0.5; two are enough on every arm of bench/arms.py.
    auc_epochs: int = Field(2, ge=1)


class ArmDivergedError(RuntimeError):
    """Training of an arm was stopped by its DivergenceGuard."""

    def __init__(self, arm: str, epoch: int, reason: str, figures: dict[str, float]):
        self.arm, self.epoch, self.reason, self.figures = arm, epoch, reason, dict(figures)
        shown = ", ".join(f"{k} {v:.4g}" for k, v in figures.items())
        super().__init__(
            f"arm {arm!r} diverged at epoch {epoch}: {reason} ({shown}); training stopped, the arm is not "
            "registered. The limits are the arm's `divergence` settings (ops.arms.recommenders.DivergenceGuard)."
        )


class ArmConfig(BaseModel):
    """One arm.  Defaults are A/B Agent Appendix B's common settings; `arm_config` applies
    the per-model adjustments."""

    name: str
    model: ModelName
    # Appendix B: "binary cross-entropy loss, Adam optimizer, batch size 1024".
    batch_size: int = Field(1024, ge=1)
    # Appendix B names Adam but its learning rate was lost from the text we have; 1e-3 is
    # Adam's and DeepCTR's default.
    learning_rate: float = Field(1e-3, gt=0)
    # Appendix B: "embedding dimension of 64, DNN layers of (256, 128), dropout of 0.3, and
    # L2 regularization of 0.003".  The paper does not say which weights the 0.003 is on;
    # we put it on the DNN kernels (l2_reg_dnn), as the paper lists the linear L2 as a
    # separate, model-specific adjustment.  On the embeddings instead it made no
    # difference we could see (DeepFM on ML-1M users 1-1999, epoch-1 validation AUC 0.7062
    # vs 0.7060; bench/arms.py --l2-on embedding).
    embedding_dim: int = 64
    dnn_hidden_units: tuple[int, ...] = (256, 128)
    dnn_dropout: float = 0.3
    l2_reg_dnn: float = 0.003
    l2_reg_embedding: float = 1e-5  # deepctr default
    # Appendix B gives FM, xDeepFM and DCN a "linear L2" whose value was lost from the text
    # we have; deepctr's default stands in for it.
    l2_reg_linear: float = 1e-5
    # Model-specific constructor arguments of deepctr-torch (cross_num, ltl_hidden_size, …).
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    # Standard deviation the embeddings start from; None keeps deepctr's 1e-4, which is
    # fine for the additive and product models (their scale is learnt) but not for AFN's
    # logarithmic neurons (APPENDIX_B below says why).
    embedding_init_std: float | None = Field(None, gt=0)
    # AFN only: the logarithmic neurons take log(max(|e|, floor)) of each embedding
    # component; None keeps deepctr's floor of 1e-7 (APPENDIX_B below says why AFN gets 1e-4).
    log_input_floor: float | None = Field(None, gt=0)
    # Appendix B: "early stopping based on validation AUC ... converge within 20 epochs".
    max_epochs: int = Field(20, ge=1)
    patience: int = Field(2, ge=1)  # epochs without a better validation AUC; not stated in the paper
    # docs/definitions.md#lifecycle, step 5: "Label: rating >= 4".
    positive_threshold: int = 4
    # Table 3: share of the train split used (seeded row sample).
    train_fraction: float = Field(1.0, gt=0, le=1)
    # Table 4: which features the model sees.
    feature_set: FeatureSet = "all"
    use_metadata: bool = True
    seed: int = 1024  # deepctr's default seed
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # Pairs per forward pass when scoring (memory, not maths): at most score_batch_size,
    # fewer where the model's widest intermediate tensor would take a pass above
    # score_memory_mb (`rows_per_forward`).
    score_batch_size: int = Field(262_144, ge=1)
    score_memory_mb: float = Field(512.0, gt=0)
    # Unrated (user, movie) pairs added as negatives (label 0), per train row, redrawn
    # each epoch.  The paper does not say; with 0 (rated >= 4 vs rated < 4 only) a model
    # learns "liked, given rated" and ranks obscure well-liked items first: measured on
    # ML-1M (users 1-1999), FM NDCG@20 0.024 against Pop's 0.154, the reverse of Table 2's
    # order; with 1.0, FM 0.179 (test AUC on rated pairs 0.769 -> 0.722).  Set 0 for
    # Table 5-style AUC comparisons on rated pairs.
    sampled_negatives: float = Field(1.0, ge=0)
    # Unrated (user, item) pairs of validation users added to the validation pairs as
    # negatives (one fixed seeded draw, `ratio` per validation row), so that early stopping
    # and the divergence guard judge "interacted or not" as training does.  0 (MovieLens,
    # the papers) keeps the rated pairs alone.  Implicit feedback needs it: on Steam,
    # "recommended or not, among reviewed games" is nearly unpredictable (FM's validation AUC
    # 0.50 after 2 epochs, stopped by the guard) while the arms learn "reviewed or not".
    # None (the default): 1 where the validation window is implicit feedback
    # (`ops.data.domain.feedback_of`), 0 otherwise: the domain says, no setting needed.
    validation_negatives: float | None = Field(None, ge=0)
    # Pop: rank by number of train interactions (Steck 2011) or by train positives.
    popularity_of: Literal["interactions", "positives"] = "interactions"
    divergence: DivergenceGuard = Field(default_factory=DivergenceGuard)


# Appendix B, "Specific adjustments", per model.  "PNN and NFM follow the default
# configuration."  FM is DeepFM without its DNN (deepctr-torch has no FM class).
APPENDIX_B: dict[str, dict[str, Any]] = {
    "random": {},
    "pop": {},
    "fm": {"dnn_hidden_units": ()},
    "deepfm": {"dnn_hidden_units": (256, 128, 64), "dnn_dropout": 0.5},
    "wdl": {"dnn_hidden_units": (256, 64), "dnn_dropout": 0.5},
    "xdeepfm": {"dnn_dropout": 0.5},
    "dcn": {"dnn_dropout": 0.5, "model_kwargs": {"cross_num": 2}},
    # Not in Appendix B, the fix of issue 16 (validation AUC 0.56-0.60 and log loss 3-14 on
    # ML-1M, against DeepFM's 0.67-0.70): AFN's logarithmic neurons compute
    # exp(sum_f w_f log|e_f|), so every embedding must stay well away from 0.  deepctr-torch
    # starts embeddings at 1e-4, below one Adam step (1e-3), so their components cross 0 in
    # the first batches and log|e| is noise down to its floor log(1e-7) = -16; and the
    # embedding of an id unseen in train (2 of 3 validation rows come from users first seen
    # there) is pulled to ~0 by the L2 term and, at prediction time, sends exp() to 1e4 and
    # beyond, which batch norm's running statistics cannot tame (batch statistics hide it
    # in training).  The AFN authors' code (WeiyuCheng/AFN-AAAI-20, src/AFN.py) starts the
    # embeddings at Glorot scale (~1e-2) and clips |e| at 1e-4; we do the same.  Measured on
    # ML-1M users 1-1999, 10 % of train, one epoch: validation AUC 0.563 (deepctr as is),
    # 0.603 (floor 1e-4 only), 0.670 (init 0.01 only), 0.676 (both); DeepFM 0.672.
    "afn": {
        "dnn_dropout": 0.0,
        "model_kwargs": {"ltl_hidden_size": 256},
        "embedding_init_std": 0.01,
        "log_input_floor": 1e-4,
    },
    "autoint": {"model_kwargs": {"att_layer_num": 2, "att_head_num": 2}},
    "pnn": {},
    "nfm": {},
}

_ARM_NAME = re.compile(
    r"^(?P<model>[a-z]+)(?:_data(?P<percent>\d{1,3}))?(?:_(?P<feature_set>user_id_only|movie_id_only|all))?$"
)


def arm_config(name: str, **overrides: Any) -> ArmConfig:
    """The configuration of arm `name` (a model, optionally `_dataNN` and/or a feature set),
    Appendix B defaults first, then `overrides`."""
    match = _ARM_NAME.match(name)
    if not match or match["model"] not in APPENDIX_B:
        raise ValueError(
            f"unknown arm {name!r}: expected one of {sorted(APPENDIX_B)} optionally followed by "
            "'_data<percent>' and/or '_user_id_only' / '_movie_id_only'"
        )
    values: dict[str, Any] = {"name": name, "model": match["model"], **copy.deepcopy(APPENDIX_B[match["model"]])}
    if match["percent"]:
        percent = int(match["percent"])
        if not 0 < percent <= 100:
            raise ValueError(f"arm {name!r}: data share must be 1..100 percent")
        values["train_fraction"] = percent / 100
    if match["feature_set"]:
        values["feature_set"] = match["feature_set"]
    if "model_kwargs" in overrides:
        values["model_kwargs"] = {**values.get("model_kwargs", {}), **overrides.pop("model_kwargs")}
    values.update(overrides)
    return ArmConfig(**values)


class ArmsConfig(BaseModel):
    """Which arms run (each becomes a partition) and per-arm overrides."""

    arms: list[str] = Field(default_factory=lambda: list(TABLE2_ARMS))
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)

    def configs(self) -> list[ArmConfig]:
        return [arm_config(name, **self.overrides.get(name, {})) for name in self.arms]


@dataclass
class TrainedArm:
    """A fitted arm.  `score` returns one float per (user, movie) pair; for the DeepCTR arms
    and Random it is a probability of a positive rating, for Pop a popularity score."""

    config: ArmConfig
    encoder: FeatureEncoder | None = None
    model: Any = None  # the deepctr-torch module
    popularity: tuple[np.ndarray, np.ndarray] | None = None  # (sorted movie ids, scores)
    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int | None = None
    train_rows: int = 0
    # Scores per `score_matrix` call when ranking: Random's hash and the DeepCTR passes work
    # in small chunks anyway, and a small block stays in cache for the top k (base.TOP_CELLS).
    score_block_cells: ClassVar[int] = TOP_CELLS

    @property
    def scores_are_probabilities(self) -> bool:
        return self.config.model != "pop"

    # The Arm protocol (ops.arms.base): the built-ins meet it as an outside arm does.
    @property
    def name(self) -> str:
        return self.config.name

    @property
    def can_refit(self) -> bool:
        return self.config.model in DEEPCTR_MODELS

    def fit(self, data: FitData) -> None:
        fitted = train_arm(self.config, data.train, data.valid, data.users, data.catalogue, on_epoch=data.on_epoch)
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(fitted, f.name))

    def rank(
        self, user_ids: np.ndarray, item_ids: np.ndarray, exclude: pl.DataFrame | None = None, k: int = 20
    ) -> pl.DataFrame:
        return top_k(self, user_ids, item_ids, exclude, k)

    def refit(self, data: FitData) -> TrainedArm:
        fresh = TrainedArm(config=self.config)
        fresh.fit(data)
        return fresh

    def describe(self) -> dict[str, Any]:
        return arm_params(self)

    def score(self, user_ids: np.ndarray, movie_ids: np.ndarray) -> np.ndarray:
        user_ids = np.asarray(user_ids, dtype=np.int64)
        movie_ids = np.asarray(movie_ids, dtype=np.int64)
        if user_ids.shape != movie_ids.shape:
            raise ValueError(f"score: {user_ids.shape} user ids but {movie_ids.shape} movie ids")
        if self.config.model == "random":
            return _uniform_hash(self.config.seed, user_ids, movie_ids)
        if self.config.model == "pop":
            return self._popularity_of(movie_ids)
        return _predict(self.model, self.encoder, user_ids, movie_ids, rows_per_forward(self.model, self.config))

    def factors(self, user_ids: np.ndarray, movie_ids: np.ndarray) -> Factors | None:
        """Pop's scores and FM's logits are products of user and item factors (`ArmBase.factors`)."""
        user_ids = np.asarray(user_ids, dtype=np.int64)
        movie_ids = np.asarray(movie_ids, dtype=np.int64)
        if self.config.model == "pop":
            return Factors(np.ones((user_ids.size, 1)), self._popularity_of(movie_ids)[:, None])
        if self.config.model not in DEEPCTR_MODELS:
            return None
        blocks = _scorer(self).factors(user_ids, movie_ids)
        return None if blocks is None else Factors(*blocks, link=sigmoid)

    def score_matrix(self, user_ids: np.ndarray, movie_ids: np.ndarray) -> np.ndarray:
        """Scores of every user x movie, (users, movies): a matrix product where the arm has
        `factors`; each user's and each movie's parts computed once for a DeepCTR model."""
        user_ids = np.asarray(user_ids, dtype=np.int64)
        movie_ids = np.asarray(movie_ids, dtype=np.int64)
        factors = self.factors(user_ids, movie_ids)
        if factors is not None:
            return factors.scores()
        if self.config.model == "random":
            return _uniform_hash_matrix(self.config.seed, user_ids, movie_ids)
        return _scorer(self).score_matrix(user_ids, movie_ids)

    def _popularity_of(self, movie_ids: np.ndarray) -> np.ndarray:
        ids, scores = self.popularity
        if ids.size == 0:
            return np.zeros(movie_ids.shape)
        position = np.clip(np.searchsorted(ids, movie_ids), 0, ids.size - 1)
        return np.where(ids[position] == movie_ids, scores[position], 0.0)


def arm_params(trained: TrainedArm) -> dict[str, Any]:
    """The arm's configuration flattened for `mlflow.log_params`, plus what training found."""
    params: dict[str, Any] = {}
    for key, value in trained.config.model_dump(mode="json").items():
        if isinstance(value, dict):
            params.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            params[key] = value
    params["train_rows"] = trained.train_rows
    if trained.best_epoch is not None:
        params["best_epoch"] = trained.best_epoch
        params["epochs_run"] = len(trained.history)
    if trained.encoder is not None:
        params["features"] = ",".join(trained.encoder.user_columns + trained.encoder.movie_columns)
    return params


def train_arm(
    config: ArmConfig,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    on_epoch: EpochCallback | None = None,
) -> TrainedArm:
    """Fit arm `config` on `train` (RATINGS frames), early-stopping on `valid`'s AUC.
    `catalogue` is MM-ML-1M (the `mm_ml_1m` asset): the movies and their side features.

    `on_epoch(epoch, metrics)` is called after every epoch (1-based) with train_loss,
    val_auc, val_log_loss and epoch_seconds, e.g. to log them to MLflow.
    """
    train = _sample_train(train, config)
    if config.model == "random":
        return TrainedArm(config=config, train_rows=train.height)
    if config.model == "pop":
        return TrainedArm(config=config, popularity=_popularity(train, config), train_rows=train.height)
    return _train_deepctr(config, train, valid, users, catalogue, on_epoch)


def top_k(
    trained: TrainedArm,
    user_ids: np.ndarray,
    movie_ids: np.ndarray,
    exclude: pl.DataFrame | None = None,
    k: int = 20,
) -> pl.DataFrame:
    """The `k` best-scored candidates per user, without the user's `exclude` pairs.

    `movie_ids` is the candidate catalogue; `exclude` has user_id and movie_id columns
    (the train interactions).  Returns a TOP_K frame sorted by user and rank; a user with
    fewer than `k` candidates left gets fewer rows.  Users are scored in blocks of
    users x catalogue: one matrix product per block where the arm has `factors` (Pop, FM),
    per-user and per-item parts computed once for the other DeepCTR models.
    """
    if not isinstance(trained, TrainedArm):
        return trained.rank(user_ids, movie_ids, exclude, k)
    return rank_arm(trained, user_ids, movie_ids, exclude, k, trained.config.score_memory_mb)


def evaluate_arm(
    trained: TrainedArm,
    train: pl.DataFrame,
    test: pl.DataFrame,
    movie_ids: np.ndarray,
    k: int = 20,
) -> OfflineMetrics:
    """Test AUC and log-loss on the test pairs; Recall@k and NDCG@k by full ranking of the
    catalogue `movie_ids` minus each user's train items, relevant = test items rated
    >= the arm's positive threshold (docs/definitions.md#offline-metrics).  Ranks the users with a
    relevant test item only; the pipeline ranks once for lists and metrics
    (`ops.arms.ranking.rank_once`)."""
    ranked_users = relevant_items(test, positive_threshold(trained)).get_column("user_id").unique().to_numpy()
    lists = top_k(trained, ranked_users, movie_ids, exclude=train.select("user_id", "movie_id"), k=k)
    return metrics_from_lists(trained, lists, test, k)


# ---------------------------------------------------------------------------------------
# DeepCTR arms
# ---------------------------------------------------------------------------------------


def build_model(config: ArmConfig, encoder: FeatureEncoder, device: str):
    """The deepctr-torch module for `config` (FM = DeepFM without a DNN)."""
    from deepctr_torch import models

    columns = encoder.feature_columns(config.embedding_dim)
    common = dict(
        l2_reg_embedding=config.l2_reg_embedding,
        l2_reg_dnn=config.l2_reg_dnn,
        seed=config.seed,
        dnn_dropout=config.dnn_dropout,
        task="binary",
        device=device,
    )
    name = config.model
    if name not in _DEEPCTR_CLASSES:
        raise ValueError(f"arm {config.name!r}: model {name!r} is not a DeepCTR model")
    class_name, dnn_argument, linear = _DEEPCTR_CLASSES[name]
    model_class = getattr(models, class_name)
    # PNN has no linear part, so it takes only the DNN feature columns.
    column_args = (columns,) if class_name == "PNN" else (columns, columns)
    kwargs = {dnn_argument: config.dnn_hidden_units, **common, **config.model_kwargs}
    if linear:
        kwargs["l2_reg_linear"] = config.l2_reg_linear
    model = model_class(*column_args, **kwargs)
    if config.embedding_init_std is not None:
        _reinitialise_embeddings(model, config.embedding_init_std, config.seed)
    if class_name == "AFN":
        # deepctr's AFN accepts l2_reg_dnn but never registers it (every other model
        # does): Appendix B's L2 on the DNN kernels, as DeepFM registers it.
        model.add_regularization_weight(
            [w for n, w in model.afn_dnn.named_parameters() if "weight" in n and "bn" not in n], l2=config.l2_reg_dnn
        )
        model.add_regularization_weight(model.afn_dnn_linear.weight, l2=config.l2_reg_dnn)
        if config.log_input_floor is not None:
            model.ltl.register_forward_pre_hook(functools.partial(_floor_log_input, config.log_input_floor))
    return model


def _reinitialise_embeddings(model, std: float, seed: int) -> None:
    """Embeddings drawn afresh from N(0, std²), from their own seeded generator so that
    torch's global random stream (dropout) is left as deepctr's seeding set it."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for table in model.embedding_dict.values():
            table.weight.copy_(torch.randn(table.weight.shape, generator=generator) * std)


def _floor_log_input(floor: float, module, args):
    """Forward pre-hook of AFN's log layer: |e| clipped below at `floor` before the layer
    takes its log (the layer's own abs and 1e-7 clip then change nothing).  A module-level
    function, so that a trained arm still pickles."""
    import torch

    return (torch.clamp(torch.abs(args[0]), min=floor),)


# model -> (deepctr-torch class, its DNN-layers argument, whether it has a linear part)
_DEEPCTR_CLASSES: dict[str, tuple[str, str, bool]] = {
    "fm": ("DeepFM", "dnn_hidden_units", True),
    "deepfm": ("DeepFM", "dnn_hidden_units", True),
    "wdl": ("WDL", "dnn_hidden_units", True),
    "xdeepfm": ("xDeepFM", "dnn_hidden_units", True),
    "dcn": ("DCN", "dnn_hidden_units", True),
    "nfm": ("NFM", "dnn_hidden_units", True),
    "afn": ("AFN", "afn_dnn_hidden_units", True),
    "autoint": ("AutoInt", "dnn_hidden_units", False),
    "pnn": ("PNN", "dnn_hidden_units", False),
}


def resolve_device(config: ArmConfig) -> str:
    import torch

    if config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available()):
        return "cuda:0"
    return "cpu"


def _train_deepctr(config, train, valid, users, catalogue, on_epoch) -> TrainedArm:
    import torch
    import torch.nn.functional as F
    from tqdm import tqdm

    device = resolve_device(config)
    torch.manual_seed(config.seed)
    encoder = fit_encoder(
        FeatureConfig(feature_set=config.feature_set, use_metadata=config.use_metadata), train, users, catalogue
    )
    x_train = torch.from_numpy(encoder.transform(train["user_id"].to_numpy(), train["movie_id"].to_numpy()))
    y_train = torch.from_numpy((train["rating"].to_numpy() >= config.positive_threshold).astype(np.float32))
    valid_labels = (valid["rating"].to_numpy() >= config.positive_threshold).astype(np.float64)
    valid_users, valid_items = valid["user_id"].to_numpy(), valid["movie_id"].to_numpy()
    validation_negatives = implicit_settings(config, valid)["validation_negatives"]
    if validation_negatives > 0 and valid.height:
        seen = pl.concat([train.select("user_id", "movie_id"), valid.select("user_id", "movie_id")])
        neg_u, neg_m = _unrated_pairs(
            valid, catalogue, validation_negatives, np.random.default_rng(config.seed + 1), _rated_keys(seen)
        )
        valid_users = np.concatenate([valid_users, neg_u])
        valid_items = np.concatenate([valid_items, neg_m])
        valid_labels = np.concatenate([valid_labels, np.zeros(neg_u.size)])
    if valid.height == 0 or valid_labels.min() == valid_labels.max():
        raise ValueError(f"arm {config.name!r}: the validation split needs both positive and negative labels")
    model = build_model(config, encoder, device)  # re-seeds torch with config.seed
    optimiser = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    shuffle = np.random.default_rng(config.seed)
    rated = _rated_keys(train) if config.sampled_negatives > 0 else None

    history: list[dict[str, float]] = []
    guard = config.divergence
    best_auc, best_epoch, best_state, stale = -np.inf, None, None, 0
    for epoch in range(1, config.max_epochs + 1):
        started = time.perf_counter()
        model.train()
        x_epoch, y_epoch = x_train, y_train
        if config.sampled_negatives > 0:
            x_neg = torch.from_numpy(
                _sampled_negatives(train, catalogue, encoder, config.sampled_negatives, shuffle, rated)
            )
            x_epoch = torch.cat([x_train, x_neg])
            y_epoch = torch.cat([y_train, torch.zeros(x_neg.shape[0])])
        order = torch.from_numpy(shuffle.permutation(x_epoch.shape[0]))
        total = 0.0
        batches = range(0, x_epoch.shape[0], config.batch_size)
        for start in tqdm(batches, desc=f"{config.name} epoch {epoch}", leave=False, disable=None):
            idx = order[start : start + config.batch_size]
            x = x_epoch[idx].to(device)
            y = y_epoch[idx].to(device)
            prediction = model(x).squeeze(-1)
            if guard.enabled and not bool(torch.isfinite(prediction).all()):
                # torch's BCE refuses NaN inputs with an error that names neither arm nor epoch.
                bad = int((~torch.isfinite(prediction)).sum())
                raise ArmDivergedError(
                    config.name,
                    epoch,
                    f"batch {start // config.batch_size + 1} gives {bad} predictions that are not numbers",
                    {"train_loss_so_far": total / max(start, 1)},
                )
            # deepctr's own fit: summed BCE plus the registered L2 terms plus aux loss.
            loss = F.binary_cross_entropy(prediction, y, reduction="sum")
            objective = loss + model.get_regularization_loss() + model.aux_loss
            optimiser.zero_grad()
            objective.backward()
            optimiser.step()
            batch_loss = float(loss.detach())
            if guard.enabled and not math.isfinite(batch_loss):
                raise ArmDivergedError(
                    config.name,
                    epoch,
                    f"the loss of batch {start // config.batch_size + 1} is {batch_loss}",
                    {"train_loss_so_far": total / max(start, 1)},
                )
            total += batch_loss
        valid_scores = _predict(model, encoder, valid_users, valid_items, rows_per_forward(model, config))
        if guard.enabled and not np.all(np.isfinite(valid_scores)):
            raise ArmDivergedError(
                config.name,
                epoch,
                f"{int((~np.isfinite(valid_scores)).sum())} validation predictions are not numbers",
                {"train_loss": total / x_epoch.shape[0]},
            )
        metrics = {
            "train_loss": total / x_epoch.shape[0],
            "val_auc": auc(valid_labels, valid_scores),
            "val_log_loss": log_loss(valid_labels, valid_scores),
            "epoch_seconds": time.perf_counter() - started,
        }
        history.append({"epoch": epoch, **metrics})
        if on_epoch is not None:
            on_epoch(epoch, metrics)  # before the guard, so that the figures that stop an arm are logged
        if guard.enabled and _overfits(config, metrics, best_auc, best_state is not None):
            # A sane, learning epoch came before and its weights are kept: a log loss that
            # climbs past the limit now is over-fitting (the small implicit sets: deepfm's
            # refit on Steam at epoch 8, validation AUC 0.64, log loss 2.3), which early
            # stopping ends, not a divergence that must stop the lifecycle.
            log.warning(
                "arm %r: log loss past %g at epoch %d after a sane epoch %s: stopped there, epoch %s kept",
                config.name,
                guard.max_log_loss,
                epoch,
                best_epoch,
                best_epoch,
            )
            break
        if guard.enabled:
            _check_divergence(config, epoch, metrics, max(h["val_auc"] for h in history))
        if metrics["val_auc"] > best_auc:
            best_auc, best_epoch, stale = metrics["val_auc"], epoch, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            stale += 1
            if stale >= config.patience:
                break
    model.load_state_dict(best_state)
    model.eval()
    return TrainedArm(
        config=config, encoder=encoder, model=model, history=history, best_epoch=best_epoch, train_rows=train.height
    )


def implicit_settings(config: ArmConfig, valid: pl.DataFrame) -> dict[str, float]:
    """The settings that follow the feedback kind: what the arm's configuration leaves to the
    domain (None) is taken from `feedback_of(valid)` — the validation window, which no
    augmentation touches (a refit's train window holds the agents' clicks, rated 4)."""
    implicit = feedback_of(valid) == "implicit"
    negatives = config.validation_negatives
    return {"validation_negatives": (1.0 if implicit else 0.0) if negatives is None else float(negatives)}


def _overfits(config: ArmConfig, metrics: dict[str, float], best_auc: float, has_best: bool) -> bool:
    """Whether this epoch's log loss, finite but above the guard's limit, comes after a kept
    epoch that passed the guard with a validation AUC at or above its floor."""
    guard = config.divergence
    losses = [metrics["train_loss"], metrics["val_log_loss"]]
    return (
        has_best
        and best_auc >= guard.min_val_auc
        and all(math.isfinite(v) for v in losses)
        and any(v > guard.max_log_loss for v in losses)
    )


def _check_divergence(config: ArmConfig, epoch: int, metrics: dict[str, float], best_val_auc: float) -> None:
    """Raise ArmDivergedError when an epoch's figures break the arm's DivergenceGuard."""
    guard = config.divergence
    figures = {k: v for k, v in metrics.items() if k != "epoch_seconds"}
    for name in ("train_loss", "val_log_loss"):
        if not metrics[name] <= guard.max_log_loss:  # NaN fails too
            raise ArmDivergedError(
                config.name, epoch, f"{name.replace('_', ' ')} {metrics[name]:.4g} > {guard.max_log_loss:g}", figures
            )
    if epoch >= guard.auc_epochs and not best_val_auc >= guard.min_val_auc:
        raise ArmDivergedError(
            config.name,
            epoch,
            f"best validation AUC {best_val_auc:.4f} < {guard.min_val_auc:g} after {epoch} epochs",
            figures,
        )


def _sampled_negatives(
    train: pl.DataFrame,
    movies: pl.DataFrame,
    encoder: FeatureEncoder,
    ratio: float,
    rng: np.random.Generator,
    rated: np.ndarray | None = None,
) -> np.ndarray:
    """Encoded (user, movie) pairs drawn uniformly from train users x catalogue, none of
    them rated in train, `ratio` per train row: unrated items as negatives.  `rated`: the
    train pairs' `_rated_keys`, computed once per training instead of once per epoch."""
    u, m = _unrated_pairs(train, movies, ratio, rng, _rated_keys(train) if rated is None else rated)
    return encoder.transform(u, m)


def _unrated_pairs(
    frame: pl.DataFrame, movies: pl.DataFrame, ratio: float, rng: np.random.Generator, rated: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(user ids, movie ids) drawn uniformly from `frame`'s users x catalogue, `ratio` per
    row of `frame`, leaving out the pairs in `rated` (`_rated_keys`)."""
    users = frame.get_column("user_id").to_numpy()
    catalogue = movies.get_column("movie_id").unique().to_numpy()
    n = int(round(ratio * users.size))
    u = users[rng.integers(0, users.size, n)]  # users in proportion to their activity
    m = catalogue[rng.integers(0, catalogue.size, n)]
    keys = _pair_keys(u, m)
    at = np.minimum(np.searchsorted(rated, keys), max(rated.size - 1, 0))
    keep = rated[at] != keys if rated.size else np.ones(keys.size, dtype=bool)
    return u[keep], m[keep]


def _rated_keys(train: pl.DataFrame) -> np.ndarray:
    """The train (user, movie) pairs as sorted unique int64 keys, for membership tests."""
    return np.unique(_pair_keys(train.get_column("user_id").to_numpy(), train.get_column("movie_id").to_numpy()))


def _pair_keys(user_ids: np.ndarray, movie_ids: np.ndarray) -> np.ndarray:
    return user_ids.astype(np.int64) * (1 << 32) + movie_ids.astype(np.int64)


def activation_floats_per_row(model, config: ArmConfig) -> int:
    """About how many floats the widest intermediate tensors of one forward pass hold per
    scored pair.  Most models stay near fields x embedding; two do not (issue 16: AFN's
    offline metrics on ML-1M were killed for memory at 21.6 GB with 262,144 pairs a pass):
    AFN's logarithmic layer holds embedding x ltl_hidden_size per row through log, batch
    norm, the product and exp (64 x 256 = 16,384 floats, 64 kB), and xDeepFM's CIN the
    outer product of a layer's feature maps with the fields, feature maps x fields x
    embedding (128 x m x 64)."""
    fields = max(1, len(getattr(model, "embedding_dict", {}) or {}))
    e = config.embedding_dim
    kwargs = config.model_kwargs
    if config.model == "afn":
        return e * int(kwargs.get("ltl_hidden_size", 256)) * 4
    if config.model == "xdeepfm":
        maps = (fields, *kwargs.get("cin_layer_size", (256, 128)))
        return max(maps) * fields * e * 2
    if config.model == "autoint":
        heads = int(kwargs.get("att_head_num", 2))
        return fields * fields * heads * 2 + fields * e * 6
    return fields * e * 4 + 2 * sum(config.dnn_hidden_units)


def rows_per_forward(model, config: ArmConfig) -> int:
    """Pairs per forward pass when scoring: score_batch_size, or fewer so that one pass's
    widest tensors stay within score_memory_mb (never fewer than 256)."""
    fit = int(config.score_memory_mb * 2**20 // (4 * activation_floats_per_row(model, config)))
    return max(256, min(config.score_batch_size, fit))


def _scorer(trained: TrainedArm):
    # torch is a heavy import: loaded when a DeepCTR arm first scores.
    from ops.arms.deepctr_parts import PartsScorer

    return PartsScorer(trained.model, trained.encoder, rows_per_forward(trained.model, trained.config))


def _predict(model, encoder: FeatureEncoder, user_ids: np.ndarray, movie_ids: np.ndarray, batch: int) -> np.ndarray:
    """The model's probability per (user, movie) pair, `batch` pairs a pass, from each user's
    and each movie's parts computed once (`ops.arms.deepctr_parts`)."""
    from ops.arms.deepctr_parts import PartsScorer

    return PartsScorer(model, encoder, batch).score_pairs(user_ids, movie_ids)


# ---------------------------------------------------------------------------------------
# Random and Pop
# ---------------------------------------------------------------------------------------


def _uniform_hash(seed: int, user_ids: np.ndarray, movie_ids: np.ndarray) -> np.ndarray:
    """A uniform (0, 1) number per (seed, user, movie): the same pair always gets the same
    score, so Random's lists and its test scores agree (splitmix64 finaliser)."""
    return _mixed(_user_key(seed, user_ids) ^ _movie_key(movie_ids))


def _uniform_hash_matrix(seed: int, user_ids: np.ndarray, movie_ids: np.ndarray) -> np.ndarray:
    """`_uniform_hash` of every user x movie, (users, movies): each id's key computed once,
    the mixing in place on blocks of ~64k pairs, which stay in cache."""
    users, movies = _user_key(seed, user_ids), _movie_key(movie_ids)
    out = np.empty((users.size, movies.size), dtype=np.float64)
    step = max(1, 65_536 // max(movies.size, 1))
    for start in range(0, users.size, step):
        out[start : start + step] = _mixed(users[start : start + step, None] ^ movies[None, :])
    return out


def _user_key(seed: int, user_ids: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (user_ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64(seed & 0xFFFFFFFFFFFFFFFF)


def _movie_key(movie_ids: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return movie_ids.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)


def _mixed(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on the keys (written in place), as uniform (0, 1) floats."""
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    x >>= np.uint64(11)
    out = x.astype(np.float64)
    out += 0.5
    out /= float(1 << 53)
    return out


def _popularity(train: pl.DataFrame, config: ArmConfig) -> tuple[np.ndarray, np.ndarray]:
    """Pop (Steck 2011): an item's count in train, scaled to [0, 1] by the largest."""
    rows = (
        train if config.popularity_of == "interactions" else train.filter(pl.col("rating") >= config.positive_threshold)
    )
    counts = rows.group_by("movie_id").len().sort("movie_id")
    ids = counts.get_column("movie_id").to_numpy().astype(np.int64)
    values = counts.get_column("len").to_numpy().astype(np.float64)
    return ids, values / values.max() if values.size else values


def _sample_train(train: pl.DataFrame, config: ArmConfig) -> pl.DataFrame:
    """Table 3: a seeded sample of `train_fraction` of the train rows."""
    if not 0 < config.train_fraction <= 1:
        raise ValueError(f"arm {config.name!r}: train_fraction must be in (0, 1], got {config.train_fraction}")
    if config.train_fraction == 1:
        return train
    n = int(round(train.height * config.train_fraction))
    keep = np.sort(np.random.default_rng(config.seed).choice(train.height, size=n, replace=False))
    return train[keep]

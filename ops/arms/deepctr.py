"""The DeepCTR family's common machinery: what FM, DeepFM, AFN, WDL, xDeepFM, DCN, NFM,
AutoInt and PNN (A/B Agent §3.2, Appendix B) share, each model being a `DeepCTRArm` subclass
in its own file under `ops/arms/kinds/` that names its deepctr-torch class, keeps its
Appendix B adjustments and says how its model is scored from parts (`parts_head`), with what
only it needs besides (AFN's settings and L2, the memory a pass of xDeepFM or AutoInt takes).

`DeepCTRArm` builds the deepctr-torch module of its configuration (`build_model`), trains it
with binary cross-entropy, Adam and early stopping on the validation AUC, the best epoch's
weights restored and a `DivergenceGuard` watching (`train_deepctr`), and scores in passes
sized to `score_memory_mb` from each user's and each item's parts computed once by its
kind's head (`ops.arms.deepctr_parts`).  torch and deepctr are imported inside the functions
that use them, so that listing or configuring arms imports neither.
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
import polars as pl
from pydantic import Field

from ops.arms.base import Factors, FitData, sigmoid
from ops.arms.features import FeatureConfig, FeatureEncoder, FeatureSet, fit_encoder
from ops.arms.metrics import auc, log_loss
from ops.arms.trained import ArmConfig, ArmDivergedError, DivergenceGuard, TrainedArm
from ops.data.domain import feedback_of
from ops.environment import offline_defaults

log = logging.getLogger(__name__)


class DeepCTRConfig(ArmConfig):
    """The DeepCTR family's configuration: the common fields and what training and scoring a
    deepctr-torch model read.  Defaults are A/B Agent Appendix B's common settings; each
    model's adjustments are in its class's `appendix_b` (`ops/arms/kinds/<model>.py`)."""

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
    # Bounded so that a spec such as `deepfm;embedding_dim=-4` is refused by the preflight,
    # naming the field, rather than by torch minutes into the arm's step.
    embedding_dim: int = Field(64, ge=1)
    dnn_hidden_units: tuple[Annotated[int, Field(ge=1)], ...] = (256, 128)
    dnn_dropout: float = Field(0.3, ge=0, lt=1)
    l2_reg_dnn: float = Field(0.003, ge=0)
    l2_reg_embedding: float = Field(1e-5, ge=0)  # deepctr default
    # Appendix B gives FM, xDeepFM and DCN a "linear L2" whose value was lost from the text
    # we have; deepctr's default stands in for it.
    l2_reg_linear: float = Field(1e-5, ge=0)
    # Model-specific constructor arguments of deepctr-torch (cross_num, ltl_hidden_size, …).
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    # How the optimiser treats the embedding tables: "lazy" updates the rows a batch looks
    # up (SparseAdam, the tables' L2 on those rows: an epoch's cost per row does not grow
    # with the users and items, `ops.arms.lazy_updates`); "dense" is deepctr's own (one Adam
    # over every row, the L2 of whole tables), whose batches grow with the tables.
    embedding_updates: Literal["lazy", "dense"] = "lazy"
    # Appendix B: "early stopping based on validation AUC ... converge within 20 epochs".
    max_epochs: int = Field(20, ge=1)
    patience: int = Field(2, ge=1)  # epochs without a better validation AUC; not stated in the paper
    # Table 4: which features the model sees.
    feature_set: FeatureSet = "all"
    use_metadata: bool = True
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # Pairs per forward pass when scoring (memory, not maths): at most score_batch_size,
    # fewer where the model's widest intermediate tensor would take a pass above
    # score_memory_mb (`rows_per_forward`).
    score_batch_size: int = Field(262_144, ge=1)
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
    divergence: DivergenceGuard = Field(default_factory=DivergenceGuard)


@dataclass
class DeepCTRArm(TrainedArm):
    """A deepctr-torch model as an arm (module docstring).  A model's class names
    `deepctr_class` (the deepctr_torch.models class), `dnn_argument` (its DNN-layers
    argument), whether it has a linear part (`has_linear`: it takes `l2_reg_linear`) and
    whether it takes the linear feature columns (`linear_columns`)."""

    encoder: FeatureEncoder | None = None
    model: Any = None  # the deepctr-torch module
    can_refit: ClassVar[bool] = True
    scores_are_probabilities: ClassVar[bool] = True
    uses_gpu: ClassVar[bool] = True
    deepctr_class: ClassVar[str] = ""
    dnn_argument: ClassVar[str] = "dnn_hidden_units"
    has_linear: ClassVar[bool] = True
    linear_columns: ClassVar[bool] = True
    config_class: ClassVar[type[ArmConfig]] = DeepCTRConfig

    def _fit(self, train: pl.DataFrame, data: FitData) -> None:
        train_deepctr(self, train, data)

    def score(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        user_ids = np.asarray(user_ids, dtype=np.int64)
        item_ids = np.asarray(item_ids, dtype=np.int64)
        if user_ids.shape != item_ids.shape:
            raise ValueError(f"score: {user_ids.shape} user ids but {item_ids.shape} item ids")
        batch = rows_per_forward(type(self), self.model, self.config)
        return _predict(self.model, self.encoder, user_ids, item_ids, batch, self.parts_head())

    def factors(self, user_ids: np.ndarray, item_ids: np.ndarray) -> Factors | None:
        """FM's logits are products of user and item factors (`ArmBase.factors`); the other
        models' are not."""
        user_ids = np.asarray(user_ids, dtype=np.int64)
        item_ids = np.asarray(item_ids, dtype=np.int64)
        blocks = _scorer(self).factors(user_ids, item_ids)
        return None if blocks is None else Factors(*blocks, link=sigmoid)

    def score_matrix(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        """Scores of every user x movie, (users, movies): a matrix product where the model
        has `factors`, else each user's and each movie's parts computed once."""
        user_ids = np.asarray(user_ids, dtype=np.int64)
        item_ids = np.asarray(item_ids, dtype=np.int64)
        factors = self.factors(user_ids, item_ids)
        if factors is not None:
            return factors.scores()
        return _scorer(self).score_matrix(user_ids, item_ids)

    # -- what a model's own file may change -------------------------------------------

    @classmethod
    def parts_head(cls):
        """How its model is scored from per-user and per-item parts (an
        `ops.arms.deepctr_parts.Head`, imported there: it needs torch); None, the default,
        scores by the model's own forward on encoded pairs."""
        return None

    @classmethod
    def adjust_model(cls, model, config: ArmConfig) -> None:
        """Changes to the built deepctr-torch module (none: AFN starts its embeddings anew and
        registers what deepctr leaves out)."""

    @classmethod
    def activation_floats_per_row(cls, model, config: ArmConfig) -> int:
        """About how many floats the widest intermediate tensors of one forward pass hold per
        scored pair: near fields x embedding for most models (AFN, xDeepFM and AutoInt say
        otherwise in their files)."""
        fields = max(1, len(getattr(model, "embedding_dict", {}) or {}))
        return fields * config.embedding_dim * 4 + 2 * sum(config.dnn_hidden_units)

    # -- storage ---------------------------------------------------------------------------

    def _save_state(self, folder) -> None:
        from safetensors.torch import save_file

        if self.encoder is None or self.model is None:
            raise RuntimeError(f"arm {self.name!r}: nothing to save (fit first)")
        (folder / "encoder.json").write_text(self.encoder.to_json())
        np.savez(folder / "encoder.npz", allow_pickle=False, **self.encoder.arrays())
        # Copies: safetensors refuses tensors that share memory (tied weights, views).
        state = {k: v.detach().cpu().clone().contiguous() for k, v in self.model.state_dict().items()}
        save_file(state, folder / "weights.safetensors")

    def _load_state(self, folder, device: str | None) -> None:
        """The encoder and the weights: safetensors, or `weights.pt` in folders saved before
        safetensors, read with `torch.load(weights_only=True)`."""
        import torch

        with np.load(folder / "encoder.npz", allow_pickle=False) as arrays:
            self.encoder = FeatureEncoder.from_saved((folder / "encoder.json").read_text(), dict(arrays))
        weights = [path for path in (folder / "weights.safetensors", folder / "weights.pt") if path.is_file()]
        if not weights:
            raise FileNotFoundError(f"{folder}: a saved {self.config.model} arm without its weights")
        device = device or resolve_device(self.config)
        model = build_model(type(self), self.config, self.encoder, device)
        if weights[0].suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(weights[0], device=str(device))
        else:
            state = torch.load(weights[0], map_location=device, weights_only=True)
        model.load_state_dict(state)
        model.eval()
        self.model = model


def build_model(kind: type[DeepCTRArm], config: ArmConfig, encoder: FeatureEncoder, device: str):
    """The deepctr-torch module for `config`, as its model's class `kind` describes it (the
    arm's own class: `type(arm)`)."""
    offline_defaults()  # deepctr-torch's version check off before its first import (ops.environment)
    from deepctr_torch import models

    if not issubclass(kind, DeepCTRArm):
        raise ValueError(f"arm {config.name!r}: model {config.model!r} is not a DeepCTR model")
    columns = encoder.feature_columns(config.embedding_dim)
    common = dict(
        l2_reg_embedding=config.l2_reg_embedding,
        l2_reg_dnn=config.l2_reg_dnn,
        seed=config.seed,
        dnn_dropout=config.dnn_dropout,
        task="binary",
        device=device,
    )
    model_class = getattr(models, kind.deepctr_class)
    column_args = (columns, columns) if kind.linear_columns else (columns,)
    kwargs = {kind.dnn_argument: config.dnn_hidden_units, **common, **config.model_kwargs}
    if kind.has_linear:
        kwargs["l2_reg_linear"] = config.l2_reg_linear
    model = model_class(*column_args, **kwargs)
    kind.adjust_model(model, config)
    return model


def activation_floats_per_row(kind: type[DeepCTRArm], model, config: ArmConfig) -> int:
    """`DeepCTRArm.activation_floats_per_row` of the model's class `kind`."""
    return kind.activation_floats_per_row(model, config)


def rows_per_forward(kind: type[DeepCTRArm], model, config: ArmConfig) -> int:
    """Pairs per forward pass when scoring: score_batch_size, or fewer so that one pass's
    widest tensors stay within score_memory_mb (never fewer than 256)."""
    fit = int(config.score_memory_mb * 2**20 // (4 * activation_floats_per_row(kind, model, config)))
    return max(256, min(config.score_batch_size, fit))


def _scorer(trained: DeepCTRArm):
    # torch is a heavy import: loaded when a DeepCTR arm first scores.
    from ops.arms.deepctr_parts import PartsScorer

    batch = rows_per_forward(type(trained), trained.model, trained.config)
    return PartsScorer(trained.model, trained.encoder, batch, trained.parts_head())


def _predict(
    model, encoder: FeatureEncoder, user_ids: np.ndarray, item_ids: np.ndarray, batch: int, head
) -> np.ndarray:
    """The model's probability per (user, movie) pair, `batch` pairs a pass, from each user's
    and each movie's parts computed once by its kind's `head` (`ops.arms.deepctr_parts`)."""
    from ops.arms.deepctr_parts import PartsScorer

    return PartsScorer(model, encoder, batch, head).score_pairs(user_ids, item_ids)


def resolve_device(config: ArmConfig) -> str:
    import torch

    if config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available()):
        return "cuda:0"
    return "cpu"


def train_deepctr(arm: DeepCTRArm, train: pl.DataFrame, data: FitData) -> None:
    """Fit `arm`'s model on `train` (already sampled) with early stopping on the validation
    AUC, the best epoch's weights kept; its guard (`DivergenceGuard`) may stop it."""
    import torch

    config, valid, users, catalogue, on_epoch = arm.config, data.valid, data.users, data.catalogue, data.on_epoch
    device = resolve_device(config)
    torch.manual_seed(config.seed)
    encoder = fit_encoder(
        FeatureConfig(feature_set=config.feature_set, use_metadata=config.use_metadata), train, users, catalogue
    )
    encoded = encoder.transform(train["user_id"].to_numpy(), train["item_id"].to_numpy())
    y_train = torch.from_numpy((train["rating"].to_numpy() >= config.positive_threshold).astype(np.float32))
    # The train rows and each epoch's sampled negatives share one buffer, the negatives
    # written after the rows: an epoch's rows are not a third copy (torch.cat) of both.
    rows = x_rows = y_rows = None
    if config.sampled_negatives > 0:
        rows = encoded.shape[0]
        x_rows = torch.empty(
            (rows + int(round(config.sampled_negatives * rows)), encoded.shape[1]), dtype=torch.float32
        )
        x_rows[:rows] = torch.from_numpy(encoded)
        y_rows = torch.zeros(x_rows.shape[0])
        y_rows[:rows] = y_train
        x_train, y_train = x_rows[:rows], y_rows[:rows]
    else:
        x_train = torch.from_numpy(encoded)
    del encoded
    valid_labels = (valid["rating"].to_numpy() >= config.positive_threshold).astype(np.float64)
    valid_users, valid_items = valid["user_id"].to_numpy(), valid["item_id"].to_numpy()
    validation_negatives = implicit_settings(config, valid)["validation_negatives"]
    if validation_negatives > 0 and valid.height:
        seen = pl.concat([train.select("user_id", "item_id"), valid.select("user_id", "item_id")])
        neg_u, neg_m = _unrated_pairs(
            valid, catalogue, validation_negatives, np.random.default_rng(config.seed + 1), _rated_keys(seen)
        )
        valid_users = np.concatenate([valid_users, neg_u])
        valid_items = np.concatenate([valid_items, neg_m])
        valid_labels = np.concatenate([valid_labels, np.zeros(neg_u.size)])
    if valid.height == 0 or valid_labels.min() == valid_labels.max():
        raise ValueError(f"arm {config.name!r}: the validation split needs both positive and negative labels")
    model = build_model(type(arm), config, encoder, device)  # re-seeds torch with config.seed
    optimiser = _optimiser(model, config)
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
            x_neg = _sampled_negatives(train, catalogue, encoder, config.sampled_negatives, shuffle, rated)
            x_rows[rows : rows + x_neg.shape[0]] = torch.from_numpy(x_neg)
            x_epoch, y_epoch = x_rows[: rows + x_neg.shape[0]], y_rows[: rows + x_neg.shape[0]]
            del x_neg
        total = train_epoch(model, optimiser, x_epoch, y_epoch, config, shuffle, epoch, device)
        valid_scores = _predict(
            model, encoder, valid_users, valid_items, rows_per_forward(type(arm), model, config), arm.parts_head()
        )
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
    optimiser.close()
    model.load_state_dict(best_state)
    model.eval()
    arm.encoder, arm.model, arm.history, arm.best_epoch = encoder, model, history, best_epoch


def train_epoch(
    model, optimiser, x_epoch, y_epoch, config: ArmConfig, shuffle: np.random.Generator, epoch: int, device
):
    """One pass over the encoded rows `x_epoch` (labels `y_epoch`) in a `shuffle`d order,
    `config.batch_size` rows a step; the summed BCE.  The arm's guard stops a batch whose
    predictions or loss are not numbers."""
    import torch

    guard = config.divergence
    order = torch.from_numpy(shuffle.permutation(x_epoch.shape[0]))
    with training_threads(config, device):
        return _batches(model, optimiser, x_epoch, y_epoch, config, order, epoch, device, guard)


# A batch of this many rows or fewer trains on one thread (`training_threads` says why).
ONE_THREAD_MAX_ROWS = 8192


@contextmanager
def training_threads(config: ArmConfig, device: str):
    """torch's intra-op threads while a CPU training pass runs: one for a batch of at most
    `ONE_THREAD_MAX_ROWS` rows, torch's own number (restored afterwards) for larger ones or on
    a GPU.  A batch of 1,024 rows is a few hundred small operations (lookups of a few rows, a
    1,024 x 64 product): split over two threads they wait for each other, and on the 2-core
    machine an FM batch of the 1 M-row log took 13 ms of CPU on one thread against 203 ms on
    two (DeepFM: 42 against 374 ms), 10 to 12 times the wall time on a loaded machine
    (docs/findings/scale.md); scoring and ranking, large products, keep every thread."""
    import torch

    before = torch.get_num_threads()
    single = device == "cpu" and config.batch_size <= ONE_THREAD_MAX_ROWS and before > 1
    if single:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if single:
            torch.set_num_threads(before)


def _batches(model, optimiser, x_epoch, y_epoch, config: ArmConfig, order, epoch: int, device, guard) -> float:
    """`train_epoch`'s pass over the batches of `order`; the summed BCE."""
    import torch
    import torch.nn.functional as F
    from tqdm import tqdm

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
        # deepctr's own fit: summed BCE plus the registered L2 terms plus aux loss (with
        # lazy updates, the tables' L2 over the rows this batch looked up).
        loss = F.binary_cross_entropy(prediction, y, reduction="sum")
        objective = loss + model.get_regularization_loss() + model.aux_loss + optimiser.regularization()
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
    return total


class _DenseUpdates:
    """deepctr's own optimisation, one Adam over every parameter and the L2 of whole tables
    (`ArmConfig.embedding_updates = "dense"`), behind `LazyEmbeddingUpdates`' interface."""

    def __init__(self, model, learning_rate: float) -> None:
        import torch

        self.optimiser = torch.optim.Adam(model.parameters(), lr=learning_rate)

    def regularization(self) -> float:
        return 0.0

    def zero_grad(self) -> None:
        self.optimiser.zero_grad()

    def step(self) -> None:
        self.optimiser.step()

    def close(self) -> None:
        pass


def _optimiser(model, config: ArmConfig):
    """The optimisation of `config.embedding_updates`: lazy (`ops.arms.lazy_updates`) or dense."""
    if config.embedding_updates == "dense":
        return _DenseUpdates(model, config.learning_rate)
    from ops.arms.lazy_updates import LazyEmbeddingUpdates

    return LazyEmbeddingUpdates(
        model, config.learning_rate, config.l2_reg_embedding, config.l2_reg_linear, min_rows=config.batch_size
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
    """(user ids, item ids) drawn uniformly from `frame`'s users x catalogue, `ratio` per
    row of `frame`, leaving out the pairs in `rated` (`_rated_keys`)."""
    users = frame.get_column("user_id").to_numpy()
    catalogue = movies.get_column("item_id").unique().to_numpy()
    n = int(round(ratio * users.size))
    u = users[rng.integers(0, users.size, n)]  # users in proportion to their activity
    m = catalogue[rng.integers(0, catalogue.size, n)]
    keys = _pair_keys(u, m)
    at = np.minimum(np.searchsorted(rated, keys), max(rated.size - 1, 0))
    keep = rated[at] != keys if rated.size else np.ones(keys.size, dtype=bool)
    return u[keep], m[keep]


def _rated_keys(train: pl.DataFrame) -> np.ndarray:
    """The train (user, movie) pairs as sorted unique int64 keys, for membership tests."""
    return np.unique(_pair_keys(train.get_column("user_id").to_numpy(), train.get_column("item_id").to_numpy()))


def _pair_keys(user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
    return user_ids.astype(np.int64) * (1 << 32) + item_ids.astype(np.int64)

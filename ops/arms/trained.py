"""The trained built-in arms' common parts: `ArmConfig` (the few fields every trained kind
reads; the DeepCTR family's are `ops.arms.deepctr.DeepCTRConfig`), `TrainedArm` (the base of Random, Pop and the
DeepCTR family, each a class in its own file under `ops/arms/kinds/`), the divergence guard
and a saved arm's folder format.

The kinds import this module and nothing that finds kinds: which class a configuration's
`model` names is the registry's to say (`ops.arms.registry`: `trained_kind`, `arm_config`,
`trained_arm`, `load_trained`), so the registry can import the kinds and this module without
a circle.  Training, ranking and evaluating an arm: `ops.arms.recommenders`.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from ops.arms.base import ArmBase, FitData
from ops.arms.top_k import TOP_CELLS, rank_arm

# The version of a saved arm's folder (arm.json, `TrainedArm.save`).
FORMAT_VERSION = 1


class DivergenceGuard(BaseModel):
    """When training gives up on an arm instead of registering a useless model.  Every
    check names the arm, the epoch and the figures (`ArmDivergedError`)."""

    enabled: bool = True
    # A loss that is not a number (NaN / inf) stops the arm at once, at the batch it
    # appears in: nothing after it can be trusted.  Not configurable.
    # Mean log loss, train or validation, above this stops the arm after the epoch.  A
    # constant 0.5 scores ln 2 = 0.69 and the base rate less; the sane arms score
    # 0.45-0.75 on ML-1M validation (bench/arms.py); 2.0 is reached only by confident wrong
    # predictions, like AFN's 14.2 at epoch 1 on ML-1M.  After a kept epoch that passed
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
            "registered. The limits are the arm's `divergence` settings (ops.arms.trained.DivergenceGuard)."
        )


class ArmConfig(BaseModel):
    """One trained built-in arm: the fields every trained kind reads (Random, Pop, trending and
    the DeepCTR family).  A kind with settings of its own declares them in its file, on a
    subclass of this class (its `config_class`: Pop's `popularity_of`, the DeepCTR family's
    training and network fields in `ops.arms.deepctr.DeepCTRConfig`, AFN's embedding start and
    log floor); a field its kind does not declare is refused."""

    model_config = ConfigDict(extra="forbid")

    name: str
    # The arm kind: a TrainedArm subclass in ops/arms/kinds/<model>.py.
    model: str
    # docs/definitions.md#lifecycle, step 5: "Label: rating >= 4".
    positive_threshold: int = 4
    # Table 3: share of the train split used (seeded row sample).
    train_fraction: float = Field(1.0, gt=0, le=1)
    seed: int = 1024  # deepctr's default seed
    # The memory one ranking pass may take (`ops.arms.top_k.rank_arm`; the DeepCTR kinds' forward
    # passes too, `rows_per_forward`).
    score_memory_mb: float = Field(512.0, gt=0)


@dataclass
class TrainedArm(ArmBase):
    """A built-in arm configured by an `ArmConfig` and fitted on the train window: the base of
    Random, Pop and the DeepCTR family (`ops/arms/kinds/`).  `score` returns one float per
    (user, movie) pair.  A kind implements `_fit(train, data)` (`train`: the train rows,
    sampled to `train_fraction`), `score` and, where it keeps learnt state, `_save_state` /
    `_load_state`; its `appendix_b` holds its adjustments of the common configuration, its
    `config_class` the fields only it reads, with their defaults."""

    config: ArmConfig
    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int | None = None
    train_rows: int = 0
    # A/B Agent Appendix B's "specific adjustments" of this model (ArmConfig fields).
    appendix_b: ClassVar[dict[str, Any]] = {}
    # Its configuration: ArmConfig, or a subclass of it in the kind's own file that adds the
    # fields only this kind reads (a spec's parameters, `spec_parameters`).
    config_class: ClassVar[type[ArmConfig]] = ArmConfig
    can_refit: ClassVar[bool] = False
    # Its configuration is its spec: stored as it is (`ops.arms.model_registry.save_arm`).
    keeps_its_spec: ClassVar[bool] = True
    # Scores per `score_matrix` call when ranking: Random's hash and the DeepCTR passes work
    # in small chunks anyway, and a small block stays in cache for the top k (base.TOP_CELLS).
    score_block_cells: ClassVar[int] = TOP_CELLS

    def __post_init__(self) -> None:
        if not isinstance(self.config, self.config_class):  # a common ArmConfig: its kind's own defaults added
            self.config = self.config_class(**self.config.model_dump())

    @classmethod
    def configure(cls, kind: str, name: str, *given: dict[str, Any]) -> ArmConfig:
        """The configuration of arm `name` of this class (registered as kind `kind`): its
        Appendix B defaults, then each of `given` in turn (`model_kwargs` merged, not replaced)."""
        values: dict[str, Any] = {"name": name, "model": kind, **copy.deepcopy(cls.appendix_b)}
        for fields in given:
            fields = dict(fields)
            if "model_kwargs" in fields:
                values["model_kwargs"] = {**values.get("model_kwargs", {}), **fields.pop("model_kwargs")}
            values.update(fields)
        return cls.config_class(**values)

    @classmethod
    def from_spec(cls, name, params, settings, make) -> TrainedArm:
        """The spec's parameters and the run settings its configuration has fields for (a run's
        `max_epochs` or `device` reach the DeepCTR kinds, not Pop)."""
        return cls(config=cls.configure(cls.__module__.rsplit(".", 1)[-1], name, params, cls.settings_read(settings)))

    @classmethod
    def settings_read(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """Of run-wide `settings`, those its configuration has a field for."""
        return {k: v for k, v in settings.items() if k in cls.config_class.model_fields}

    # The common fields the kind reads (None: all of them, as the DeepCTR family does);
    # the fields of its own configuration class it reads too (`parameters_read`).
    reads_common: ClassVar[frozenset[str] | None] = None

    @classmethod
    def spec_parameters(cls) -> frozenset[str]:
        """Every field of its configuration (the common ones and its own) but the name and
        the model, which the spec gives itself."""
        return frozenset(cls.config_class.model_fields) - {"name", "model"}

    @classmethod
    def parameters_read(cls) -> frozenset[str]:
        """The parameters the kind reads (what a refusal of an unknown one lists): its own
        configuration's fields and the common ones it uses (`reads_common`)."""
        if cls.reads_common is None:
            return cls.spec_parameters()
        own = frozenset(cls.config_class.model_fields) - frozenset(ArmConfig.model_fields)
        return own | cls.reads_common

    # The Arm protocol (ops.arms.base): the built-ins meet it as an outside arm does.
    @property
    def name(self) -> str:
        return self.config.name

    def fit(self, data: FitData) -> None:
        train = _sample_train(data.train, self.config)
        self.history, self.best_epoch, self.train_rows = [], None, train.height
        self._fit(train, data)

    def _fit(self, train: pl.DataFrame, data: FitData) -> None:
        raise NotImplementedError(f"arm kind {self.config.model!r} ({type(self).__name__}) does not implement _fit")

    def rank(
        self, user_ids: np.ndarray, item_ids: np.ndarray, exclude: pl.DataFrame | None = None, k: int = 20
    ) -> pl.DataFrame:
        return rank_arm(self, user_ids, item_ids, exclude, k, self.config.score_memory_mb)

    def refit(self, data: FitData) -> TrainedArm:
        fresh = type(self)(config=self.config)
        fresh.fit(data)
        return fresh

    def describe(self) -> dict[str, Any]:
        return arm_params(self)

    def save(self, folder: Path) -> None:
        """Write the arm into `folder` (exists, empty): `arm.json` (configuration, history) and
        the state its class keeps (`_save_state`)."""
        folder = Path(folder)
        manifest = {
            "format_version": FORMAT_VERSION,
            "config": self.config.model_dump(mode="json"),
            "history": self.history,
            "best_epoch": self.best_epoch,
            "train_rows": self.train_rows,
        }
        (folder / "arm.json").write_text(json.dumps(manifest, indent=1))
        self._save_state(folder)

    @classmethod
    def load(cls, name: str, params: dict[str, Any], folder: Path) -> TrainedArm:
        return cls.load_folder(folder)

    @classmethod
    def load_folder(cls, folder: Path | str, device: str | None = None, manifest: dict | None = None) -> TrainedArm:
        """The arm of this class saved in `folder` (`save`); DeepCTR weights go to `device`
        (default: the arm's configured device); `manifest`: its `arm.json` where the caller
        read it already.  `ops.arms.registry.load_trained` finds the class of a folder from
        its configuration's model."""
        folder = Path(folder)
        manifest = manifest if manifest is not None else read_manifest(folder)
        # A folder saved before each kind declared its own fields holds every kind's: those of
        # other kinds (at their defaults) are dropped.
        fields = cls.config_class.model_fields
        trained = cls(
            config=cls.config_class(**{k: v for k, v in manifest["config"].items() if k in fields}),
            history=manifest["history"],
            best_epoch=manifest["best_epoch"],
            train_rows=manifest["train_rows"],
        )
        trained._load_state(folder, device)
        return trained

    def _save_state(self, folder: Path) -> None:
        """Nothing learnt to keep (Random)."""

    def _load_state(self, folder: Path, device: str | None) -> None:
        """Nothing learnt to read back (Random)."""


def read_manifest(folder: Path) -> dict[str, Any]:
    """A saved arm's `arm.json`, its format checked (the folder named where it is not one)."""
    manifest_path = Path(folder) / "arm.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{manifest_path}: not a saved arm (no arm.json)")
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{manifest_path}: format_version {manifest.get('format_version')!r}, expected {FORMAT_VERSION}"
        )
    return manifest


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
    encoder = getattr(trained, "encoder", None)
    if encoder is not None:
        params["features"] = ",".join(encoder.user_columns + encoder.movie_columns)
    return params


def _sample_train(train: pl.DataFrame, config: ArmConfig) -> pl.DataFrame:
    """Table 3: a seeded sample of `train_fraction` of the train rows."""
    if not 0 < config.train_fraction <= 1:
        raise ValueError(f"arm {config.name!r}: train_fraction must be in (0, 1], got {config.train_fraction}")
    if config.train_fraction == 1:
        return train
    n = int(round(train.height * config.train_fraction))
    keep = np.sort(np.random.default_rng(config.seed).choice(train.height, size=n, replace=False))
    return train[keep]

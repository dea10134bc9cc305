"""A trained arm on disk and in the MLflow Model Registry (docs/definitions.md#lifecycle, steps 5 and 11).

`save_arm(trained, folder)` writes everything needed to score again: the arm's
configuration, the train-fitted encoders, the model weights (DeepCTR arms) or the item
popularity (Pop), and the training history.  `load_arm(folder)` rebuilds a `TrainedArm`
that scores exactly as the saved one.  Nothing is pickled: JSON, `.npz` read with
`allow_pickle=False`, and the weights as a safetensors file (a JSON header and raw tensor
bytes).  Folders saved before safetensors hold `weights.pt`, read with
`torch.load(weights_only=True)`.

`log_and_register(trained, registered_name)` logs the arm to the ACTIVE MLflow run as a
pyfunc model (input: a frame with user_id and movie_id; output: one score per row) and
registers it, one registered model per arm, a new version per training; it returns the
version string so the asset can record which version it produced.

mlflow and torch are imported inside the functions that need them.  The pyfunc wrapper
lives in `ops/arms/pyfunc.py` and is logged as "models from code" (no pickled Python
object); loading it needs `ops` importable, or pass `code_paths`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ops.arms.features import FeatureEncoder
from ops.arms.recommenders import ArmConfig, TrainedArm, arm_params, build_model  # noqa: F401 - arm_params re-exported

FORMAT_VERSION = 1


def save_arm(trained: TrainedArm, folder: Path | str) -> Path:
    """Write `trained` into `folder` atomically (a sibling temp folder, then a rename)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        manifest = {
            "format_version": FORMAT_VERSION,
            "config": trained.config.model_dump(mode="json"),
            "history": trained.history,
            "best_epoch": trained.best_epoch,
            "train_rows": trained.train_rows,
        }
        (staging / "arm.json").write_text(json.dumps(manifest, indent=1))
        if trained.encoder is not None:
            (staging / "encoder.json").write_text(trained.encoder.to_json())
            np.savez(staging / "encoder.npz", allow_pickle=False, **trained.encoder.arrays())
        if trained.popularity is not None:
            ids, scores = trained.popularity
            np.savez(staging / "popularity.npz", allow_pickle=False, movie_ids=ids, scores=scores)
        if trained.model is not None:
            from safetensors.torch import save_file

            # Copies: safetensors refuses tensors that share memory (tied weights, views).
            state = {k: v.detach().cpu().clone().contiguous() for k, v in trained.model.state_dict().items()}
            save_file(state, staging / "weights.safetensors")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def load_arm(folder: Path | str, device: str | None = None) -> TrainedArm:
    """Rebuild the arm saved in `folder`; DeepCTR weights go to `device` (default: the
    arm's configured device, i.e. the GPU when torch sees one)."""
    folder = Path(folder)
    manifest_path = folder / "arm.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{manifest_path}: not a saved arm (no arm.json)")
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{manifest_path}: format_version {manifest.get('format_version')!r}, expected {FORMAT_VERSION}"
        )
    config = ArmConfig(**manifest["config"])
    trained = TrainedArm(
        config=config, history=manifest["history"], best_epoch=manifest["best_epoch"], train_rows=manifest["train_rows"]
    )
    if (folder / "encoder.json").is_file():
        with np.load(folder / "encoder.npz", allow_pickle=False) as arrays:
            trained.encoder = FeatureEncoder.from_saved((folder / "encoder.json").read_text(), dict(arrays))
    if (folder / "popularity.npz").is_file():
        with np.load(folder / "popularity.npz", allow_pickle=False) as arrays:
            trained.popularity = (arrays["movie_ids"], arrays["scores"])
    weights = [path for path in (folder / "weights.safetensors", folder / "weights.pt") if path.is_file()]
    if weights:
        import torch

        from ops.arms.recommenders import resolve_device

        device = device or resolve_device(config)
        model = build_model(config, trained.encoder, device)
        if weights[0].suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(weights[0], device=str(device))
        else:
            state = torch.load(weights[0], map_location=device, weights_only=True)
        model.load_state_dict(state)
        model.eval()
        trained.model = model
    return trained


def log_and_register(
    trained: TrainedArm,
    registered_name: str,
    metrics: dict[str, float] | None = None,
    log_params: bool = True,
    code_paths: list[str] | None = None,
) -> str:
    """Log `trained` to the active MLflow run and register it as `registered_name`.

    Logs the arm's configuration as parameters (when `log_params`), `metrics` as final
    metrics, and the pyfunc model with the saved arm as its artefact.  `code_paths` (for
    example the `ops` folder) travel with the model for use outside this checkout.
    Returns the registered version, e.g. "3".
    """
    import mlflow
    import pandas as pd
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    run = mlflow.active_run()
    if run is None:
        raise RuntimeError("log_and_register needs an active MLflow run (mlflow.start_run())")
    if log_params:
        mlflow.log_params(arm_params(trained))
    if metrics:
        mlflow.log_metrics({k: float(v) for k, v in metrics.items() if v is not None})
    with tempfile.TemporaryDirectory() as tmp:
        arm_dir = save_arm(trained, Path(tmp) / "arm")
        signature = ModelSignature(
            inputs=Schema([ColSpec("long", "user_id"), ColSpec("long", "movie_id")]),
            outputs=Schema([ColSpec("double")]),
        )
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=str(Path(__file__).with_name("pyfunc.py")),
            artifacts={"arm": str(arm_dir)},
            registered_model_name=registered_name,
            signature=signature,
            input_example=pd.DataFrame({"user_id": [1, 1], "movie_id": [1, 2]}),
            code_paths=code_paths,
            # Inferring requirements imports and probes the environment: slow and not
            # needed to load the model in this project's own venv.
            pip_requirements=_pip_requirements(),
        )
    if info.registered_model_version is None:
        raise RuntimeError(f"MLflow did not register {registered_name!r}; is the tracking store a database?")
    return str(info.registered_model_version)


def mlflow_epoch_logger(prefix: str = ""):
    """An `on_epoch` callback for `train_arm` that logs each epoch's metrics to the active
    MLflow run with step = epoch."""

    def log_epoch(epoch: int, metrics: dict[str, float]) -> None:
        import mlflow

        mlflow.log_metrics({f"{prefix}{k}": float(v) for k, v in metrics.items()}, step=epoch)

    return log_epoch


def _pip_requirements() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for package in ("mlflow", "numpy", "pandas", "polars", "pydantic", "torch", "deepctr-torch"):
        try:
            out.append(f"{package}=={version(package)}")
        except PackageNotFoundError:
            pass
    return out

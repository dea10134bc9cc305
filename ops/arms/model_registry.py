"""A trained arm on disk and in the MLflow Model Registry (docs/definitions.md#lifecycle, steps 5 and 11).

`save_arm(trained, folder)` writes everything needed to score again, atomically: the arm's
configuration and training history (`arm.json`) and what its class learnt: the train-fitted
encoders and the model weights (DeepCTR arms), the item popularity (Pop)
(`ops.arms.trained.TrainedArm.save`).  `load_arm(folder)` rebuilds the arm, of the
class its configuration's model names (`ops/arms/kinds/<model>.py`), scoring exactly as the
saved one; a folder whose model is no kind of this checkout fails naming the folder.
Nothing is pickled: JSON, `.npz` read with `allow_pickle=False`, and the weights as a
safetensors file (a JSON header and raw tensor bytes).  Folders saved before safetensors
hold `weights.pt`, read with `torch.load(weights_only=True)`.

`log_and_register(trained, registered_name)` logs the arm to the ACTIVE MLflow run as a
pyfunc model (input: a frame with user_id and item_id; output: one score per row) and
registers it, one registered model per arm, a new version per training; it returns the
version string so the asset can record which version it produced.  Its best validation
metrics are logged after the model, linked to it (MLflow 3's LoggedModel: the model comparison
shows them); `model_id_of(name, version)` finds the logged model of a registered version, so
that the arm's offline test metrics are linked to it too.

`point_aliases(targets, names)` moves registry aliases: after a verdict, `@winner` and
`@control` (`ops.readout.verdict.registry_roles`) name the versions of that verdict's arms,
and no other arm of the verdict keeps them, so `models:/<prefix>-<arm>@winner` loads the
arm the last verdict named.

mlflow and torch are imported inside the functions that need them.  The pyfunc wrapper
lives in `ops/arms/pyfunc.py` and is logged as "models from code" (no pickled Python
object); loading it needs `ops` importable, or pass `code_paths`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

# Rebuilds the arm saved in a folder (DeepCTR weights to a device, default the arm's own: the
# GPU when torch sees one); the name older registered models' pyfunc.py imports.
from ops.arms.registry import load_arm, load_trained  # noqa: F401 - re-exported
from ops.arms.trained import FORMAT_VERSION, TrainedArm, arm_params  # noqa: F401 - re-exported


def save_arm(trained: TrainedArm, folder: Path | str) -> Path:
    """Write `trained` into `folder` atomically (a sibling temp folder, then a rename)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        trained.save(staging)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


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
    with tempfile.TemporaryDirectory() as tmp:
        arm_dir = save_arm(trained, Path(tmp) / "arm")
        signature = ModelSignature(
            inputs=Schema([ColSpec("long", "user_id"), ColSpec("long", "item_id")]),
            outputs=Schema([ColSpec("double")]),
        )
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=str(Path(__file__).with_name("pyfunc.py")),
            artifacts={"arm": str(arm_dir)},
            registered_model_name=registered_name,
            signature=signature,
            input_example=pd.DataFrame({"user_id": [1, 1], "item_id": [1, 2]}),
            code_paths=code_paths,
            # Inferring requirements imports and probes the environment: slow and not
            # needed to load the model in this project's own venv.
            pip_requirements=_pip_requirements(),
        )
    if info.registered_model_version is None:
        raise RuntimeError(f"MLflow did not register {registered_name!r}; is the tracking store a database?")
    if metrics:
        # After the model, linked to it: the logged model's page and comparison show them.
        mlflow.log_metrics({k: float(v) for k, v in metrics.items() if v is not None}, model_id=info.model_id)
    return str(info.registered_model_version)


def model_id_of(registered_name: str, version: str) -> str | None:
    """The id of the logged model behind a registered version (None for a version registered
    from a path, with no logged model)."""
    import mlflow

    found = mlflow.MlflowClient().get_model_version(registered_name, str(version))
    if getattr(found, "model_id", None):
        return found.model_id
    # A SQL store keeps no model id on the version; its source is the logged model's URI, models:/<model id>.
    source = found.source or ""
    tail = source[len("models:/") :] if source.startswith("models:/") else ""
    return tail if tail.startswith("m-") and "/" not in tail else None


def point_aliases(
    targets: dict[str, tuple[str, str]], names: Iterable[str], label: str | None = None
) -> dict[str, str]:
    """Point each alias of `targets` ({alias: (registered name, version)}) at that version and
    take it off the other registered models in `names` (the arms of the same verdict), so one
    of them holds it; with a `label` (the lifecycle), each targeted version is tagged
    `simab_<alias>` = label: which verdict gave it the alias.  Returns {alias: "models:/name@alias"}."""
    import mlflow

    client = mlflow.MlflowClient()
    for alias, (name, version) in targets.items():
        for other in sorted(set(names) - {name}):
            if alias in client.get_registered_model(other).aliases:
                client.delete_registered_model_alias(other, alias)
        client.set_registered_model_alias(name, alias, str(version))
        if label:
            client.set_model_version_tag(name, str(version), f"simab_{alias}", label)
    return {alias: f"models:/{name}@{alias}" for alias, (name, _) in targets.items()}


def _pip_requirements() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for package in ("mlflow", "numpy", "pandas", "polars", "pydantic", "torch", "deepctr-torch"):
        try:
            out.append(f"{package}=={version(package)}")
        except PackageNotFoundError:
            pass
    return out

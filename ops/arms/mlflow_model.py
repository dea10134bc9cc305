"""What an MLflow model URI points at (`resolve_uri`): the registered model, its version and
run, or the run of a `runs:/` URI.  The MLflow model as an arm is `ops/arms/kinds/mlflow.py`
(`name=mlflow:URI`); the preflight resolves its URI before a run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ops.web import redact

_MODELS_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:/(?P<version>[^/]+)|@(?P<alias>.+))$")
_RUNS_URI = re.compile(r"^runs:/(?P<run_id>[^/]+)/")


def resolve_uri(uri: str, tracking_uri: str | None = None) -> dict[str, Any]:
    """What a model URI points at: for `models:/name/version|stage` and `models:/name@alias`
    the registered name, the version number, its run and a URI pinned to that version; for
    `runs:/id/path` the run id.  `tracking_uri`: the store to ask (default: MLflow's own)."""
    import mlflow

    models = _MODELS_URI.match(uri)
    if models:
        client = mlflow.MlflowClient(tracking_uri)
        name = models["name"]
        if models["alias"]:
            version = client.get_model_version_by_alias(name, models["alias"])
        elif models["version"].isdigit():
            version = client.get_model_version(name, models["version"])
        else:  # a stage (Production, Staging): its latest version
            found = client.get_latest_versions(name, stages=[models["version"]])
            if not found:
                raise ValueError(f"MLflow model {uri}: no version in stage {models['version']!r}")
            version = found[0]
        return {
            "registered_model": name,
            "model_version": str(version.version),
            "run_id": version.run_id or "",
            "pinned_uri": f"models:/{name}/{version.version}",
        }
    runs = _RUNS_URI.match(uri)
    if runs:
        return {"run_id": runs["run_id"], "pinned_uri": uri}
    return {"pinned_uri": uri}


def uri_problem(uri: str, tracking_uri: str | None) -> str | None:
    """Why an MLflow model URI does not resolve in the store at `tracking_uri`, or None (the
    preflight asks before a run, through the MLflow kind's `source_problem`)."""
    parts = urlsplit(uri)
    if parts.scheme in ("models", "runs") and (tracking_uri or "").startswith("sqlite:///"):
        store = Path(tracking_uri.removeprefix("sqlite:///"))
        if not store.is_file():  # asking would create the store (seconds of migrations) to find it empty
            return f"there is no MLflow store at {store} yet, so no model in it"
    try:
        if parts.scheme in ("models", "runs"):
            resolved = resolve_uri(uri, tracking_uri)
            if parts.scheme == "runs":
                import mlflow

                mlflow.MlflowClient(tracking_uri).get_run(resolved["run_id"])
            return None
    except Exception as exc:  # noqa: BLE001 - MLflow raises its own, REST and SQL errors alike; the first line says which
        where = redact(tracking_uri or "MLflow's default store")
        return f"not found in the MLflow store {where}: {redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}"
    if parts.scheme in ("", "file"):
        path = Path(parts.path if parts.scheme == "file" else uri).expanduser()
        if not (path / "MLmodel").is_file() and not path.is_file():
            return f"no MLflow model at {path} (no MLmodel file)"
    return None  # another store (s3:, gs:, …): resolved when the arm downloads it

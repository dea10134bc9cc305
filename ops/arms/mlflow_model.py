"""What an MLflow model URI points at (`resolve_uri`): the registered model, its version and
run, or the run of a `runs:/` URI.  The MLflow model as an arm is `ops/arms/kinds/mlflow.py`
(`name=mlflow:URI`); the preflight resolves its URI before a run.
"""

from __future__ import annotations

import re
from typing import Any

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

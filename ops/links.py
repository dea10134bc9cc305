"""Where a person looks: the addresses of the trajectory viewer and of the UIs that `make
viewer`, `make ui` and `make mlflow-ui` start, for links in Dagster metadata, MLflow tags and
the console.  Each is a default that an environment variable replaces (a viewer served
elsewhere: `SIMAB_VIEWER_URL`; defaults in `ops.settings`)."""

from __future__ import annotations

from urllib.parse import urlencode

from ops.settings import current


def viewer_url(path: str = "/", **query: object) -> str:
    """A page of the trajectory viewer: `viewer_url("/agents", arm="pop")`.  Query values
    that are None are left out."""
    base = current().viewer_url.rstrip("/")
    params = {k: v for k, v in query.items() if v is not None}
    return base + path + (f"?{urlencode(params)}" if params else "")


def mlflow_run_url(experiment_id: str, run_id: str) -> str:
    """A run in the MLflow UI (the address `make mlflow-ui` serves, or $SIMAB_MLFLOW_UI_URL)."""
    base = current().mlflow_ui_url.rstrip("/")
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}"


def dagster_ui_url() -> str:
    return current().dagster_ui_url.rstrip("/")

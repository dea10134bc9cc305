"""Resources per deployment, chosen by $SIMAB_DEPLOYMENT (local by default).

`local`: SQLite MLflow store and Parquet files under the data folder.  `server`: the same
assets against an MLflow server named by $MLFLOW_TRACKING_URI (required there).
$SIMAB_MAX_COST_USD sets the `llm` resource's max_cost_usd in both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import SimabIOManager
from resources.tmdb import TmdbResource


def resources_for_deployment(name: str | None = None, environ: Mapping[str, str] | None = None) -> dict:
    environ = os.environ if environ is None else environ
    name = name or environ.get("SIMAB_DEPLOYMENT", "local")
    llm = LLMResource(max_cost_usd=_max_cost_usd(environ))
    if name == "local":
        return {"io_manager": SimabIOManager(), "mlflow_tracking": MlflowTracking(), "tmdb": TmdbResource(), "embeddings": EmbeddingsResource(), "llm": llm}
    if name == "server":
        uri = environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            raise ValueError("SIMAB_DEPLOYMENT=server needs MLFLOW_TRACKING_URI (the MLflow server's address)")
        return {"io_manager": SimabIOManager(), "mlflow_tracking": MlflowTracking(tracking_uri=uri), "tmdb": TmdbResource(), "embeddings": EmbeddingsResource(), "llm": llm}
    raise ValueError(f"unknown SIMAB_DEPLOYMENT {name!r}: use 'local' or 'server'")


def _max_cost_usd(environ: Mapping[str, str]) -> float:
    value = environ.get("SIMAB_MAX_COST_USD", "")
    try:
        limit = float(value) if value.strip() else 0.0
    except ValueError:
        raise ValueError(f"$SIMAB_MAX_COST_USD={value!r}: not a number of US dollars (0 or empty: no limit)") from None
    if limit < 0:
        raise ValueError(f"$SIMAB_MAX_COST_USD={value!r}: a limit cannot be negative (0 or empty: no limit)")
    return limit

"""Resources per deployment, chosen by $SIMAB_DEPLOYMENT (local by default).

`local`: SQLite MLflow store and Parquet files under the data folder.  `server`: the same
assets against an MLflow server named by $MLFLOW_TRACKING_URI (required there).
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
    if name == "local":
        return {"io_manager": SimabIOManager(), "mlflow_tracking": MlflowTracking(), "tmdb": TmdbResource(), "embeddings": EmbeddingsResource(), "llm": LLMResource()}
    if name == "server":
        uri = environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            raise ValueError("SIMAB_DEPLOYMENT=server needs MLFLOW_TRACKING_URI (the MLflow server's address)")
        return {"io_manager": SimabIOManager(), "mlflow_tracking": MlflowTracking(tracking_uri=uri), "tmdb": TmdbResource(), "embeddings": EmbeddingsResource(), "llm": LLMResource()}
    raise ValueError(f"unknown SIMAB_DEPLOYMENT {name!r}: use 'local' or 'server'")

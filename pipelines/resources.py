"""Resources and executor per deployment, chosen by $SIMAB_DEPLOYMENT (local by default) and
$SIMAB_EXECUTOR (multiprocess by default).

`local`: SQLite MLflow store and Parquet files under the data folder.  `server`: the same
assets against an MLflow server named by $MLFLOW_TRACKING_URI (required there).
$SIMAB_MAX_COST_USD sets the `llm` resource's max_cost_usd in both.

Executor: `multiprocess` runs a run's steps as processes of this machine, two at a time (two
cores here).  `celery` (`dagster-celery`) sends every step to the Celery workers listening on
the broker $SIMAB_CELERY_BROKER (e.g. `redis://127.0.0.1:6379/0`; results on
$SIMAB_CELERY_BACKEND, by default the broker); the workers need the same code, the same
`SIMAB_*` settings, the run storage of $DAGSTER_HOME and the data folder ($SIMAB_HOME) —
README, "Beyond one machine".
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


def executor_for_deployment(environ: Mapping[str, str] | None = None):
    """The executor of every job: $SIMAB_EXECUTOR `multiprocess` (default) or `celery`."""
    environ = os.environ if environ is None else environ
    name = environ.get("SIMAB_EXECUTOR", "").strip() or "multiprocess"
    if name == "multiprocess":
        from dagster import multiprocess_executor

        # Two cores here: two steps at a time (the CTR arms train in parallel partitions).
        return multiprocess_executor.configured({"max_concurrent": 2})
    if name == "celery":
        broker = environ.get("SIMAB_CELERY_BROKER", "").strip()
        if not broker:
            raise ValueError("SIMAB_EXECUTOR=celery needs SIMAB_CELERY_BROKER (the broker the workers listen on, e.g. redis://127.0.0.1:6379/0)")
        from dagster_celery import celery_executor

        # Without a backend setting, dagster-celery answers on rpc://, an AMQP-only backend.
        backend = environ.get("SIMAB_CELERY_BACKEND", "").strip() or broker
        return celery_executor.configured({"broker": broker, "backend": backend})
    raise ValueError(f"unknown SIMAB_EXECUTOR {name!r}: use 'multiprocess' or 'celery'")


def _max_cost_usd(environ: Mapping[str, str]) -> float:
    value = environ.get("SIMAB_MAX_COST_USD", "")
    try:
        limit = float(value) if value.strip() else 0.0
    except ValueError:
        raise ValueError(f"$SIMAB_MAX_COST_USD={value!r}: not a number of US dollars (0 or empty: no limit)") from None
    if limit < 0:
        raise ValueError(f"$SIMAB_MAX_COST_USD={value!r}: a limit cannot be negative (0 or empty: no limit)")
    return limit

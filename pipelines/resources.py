"""Resources and executor per deployment (`SIMAB_DEPLOYMENT`, `SIMAB_EXECUTOR`: `ops.settings`).

`local`: SQLite MLflow store and Parquet files under the data folder.  `server`: the same
assets against an MLflow server named by $MLFLOW_TRACKING_URI (required there).  The `llm`
resource takes the `SIMAB_LLM_*` settings and `SIMAB_MAX_COST_USD` in both.

Executor: `multiprocess` runs a run's steps as processes of this machine, two at a time (two
cores here).  `celery` (`dagster-celery`, the `celery` extra: `pip install -e '.[celery]'`) sends every step to the Celery workers listening on
the broker $SIMAB_CELERY_BROKER (e.g. `redis://127.0.0.1:6379/0`; results on
$SIMAB_CELERY_BACKEND, by default the broker); the workers need the same code, the same
`SIMAB_*` settings, the run storage of $DAGSTER_HOME and the data folder ($SIMAB_HOME) —
README, "Beyond one machine".
"""

from __future__ import annotations

from ops.settings import SettingError, Settings
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import SimabIOManager
from resources.tmdb import TmdbResource


def resources_for_deployment(settings: Settings) -> dict:
    llm = LLMResource(**settings.resource_fields("llm"))
    tracking = MlflowTracking()
    if settings.deployment == "server":
        if not settings.mlflow_tracking_uri:
            raise SettingError("SIMAB_DEPLOYMENT='server': needs MLFLOW_TRACKING_URI (the MLflow server's address)")
        tracking = MlflowTracking(tracking_uri=settings.mlflow_tracking_uri)
    return {
        "io_manager": SimabIOManager(),
        "mlflow_tracking": tracking,
        "tmdb": TmdbResource(),
        "embeddings": EmbeddingsResource(),
        "llm": llm,
    }


def executor_for_deployment(settings: Settings):
    """The executor of every job: `multiprocess` (default) or `celery`."""
    if settings.executor == "multiprocess":
        from dagster import multiprocess_executor

        # Two cores here: two steps at a time (the CTR arms train in parallel partitions).
        return multiprocess_executor.configured({"max_concurrent": 2})
    if not settings.celery_broker:
        raise SettingError(
            "SIMAB_EXECUTOR='celery': needs SIMAB_CELERY_BROKER (the broker the workers listen on, e.g. redis://127.0.0.1:6379/0)"
        )
    try:
        from dagster_celery import celery_executor
    except ImportError:
        raise SettingError(
            "SIMAB_EXECUTOR='celery': dagster-celery is not installed; it is the `celery` extra: "
            "pip install -e '.[celery]' (docs/deployment.md)"
        ) from None

    # Without a backend setting, dagster-celery answers on rpc://, an AMQP-only backend.
    return celery_executor.configured(
        {"broker": settings.celery_broker, "backend": settings.celery_backend or settings.celery_broker}
    )

"""Resources and executor per deployment (`SIMAB_DEPLOYMENT`, `SIMAB_EXECUTOR`: `ops.settings`).

`local`: SQLite MLflow store and Parquet files under the data folder.  `server`: the same
assets against an MLflow server named by $MLFLOW_TRACKING_URI (required there).  The `llm`
resource takes the `SIMAB_LLM_*` settings and `SIMAB_MAX_COST_USD` in both.

Executor (`SIMAB_EXECUTOR`): `in_process` (the default) runs a run's steps one after another in
the process executing the run; `multiprocess` runs them as processes of this machine,
$SIMAB_CONCURRENCY at a time.  `celery` (`dagster-celery`, the `celery` extra: `pip install -e '.[celery]'`) sends every step to the Celery workers listening on
the broker $SIMAB_CELERY_BROKER (e.g. `redis://127.0.0.1:6379/0`; results on
$SIMAB_CELERY_BACKEND, by default the broker); the workers need the same code, the same
`SIMAB_*` settings, the run storage of $DAGSTER_HOME and the data folder ($SIMAB_HOME) —
README, "Beyond one machine".
"""

from __future__ import annotations

from dagster import Executor

from ops.settings import SettingError, Settings, current
from resources.embeddings import EmbeddingsResource
from resources.llm import LIFECYCLE_TAG, LLMResource
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
        "embeddings": EmbeddingsResource(**settings.resource_fields("embeddings")),
        "llm": llm,
    }


def executor_for_deployment(settings: Settings):
    """The executor of every job launched through the instance: `in_process` (default),
    `multiprocess` or `celery`, each taking the home for the run (`home_locked`)."""
    return home_locked(executor_of(settings))


def executor_of(settings: Settings):
    """The executor `SIMAB_EXECUTOR` names, as it is; the lifecycle runner's jobs run with it
    bare (`pipelines.lifecycle_jobs`: the runner holds the home for them)."""
    if settings.executor == "in_process":
        from dagster import in_process_executor

        return in_process_executor
    if settings.executor == "multiprocess":
        from dagster import multiprocess_executor

        # Spawn (Dagster's default), not forkserver: a forkserver's children write to the
        # standard output it started with, not to the lifecycle's log of the moment.
        return multiprocess_executor.configured({"max_concurrent": settings.concurrency})
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


def home_locked(inner):
    """`inner` (an executor definition) whose runs take the home first (`ops.storage.home_lock`):
    a run launched through the instance — from the UI, a schedule tick, a sensor — holds
    $SIMAB_HOME in its run worker while its steps execute, and waits for it
    (`$SIMAB_HOME_WAIT_S`) or fails at once naming the lifecycle or run that holds it.  A
    lifecycle's own runs use the executor bare (`pipelines.lifecycle_jobs`): the lifecycle runner
    holds the home for them."""
    from dagster import ExecutorDefinition

    create = inner.executor_creation_fn
    return ExecutorDefinition(
        name=inner.name,
        config_schema=inner.config_schema,
        requirements=inner.get_requirements,
        executor_creation_fn=lambda init_context: _HomeLockedExecutor(create(init_context)),
        description=inner.description,
    )


def run_claim(run):
    """How a Dagster run takes the home: the runs of one night or one backfill share it, as do
    the runs of one partitioned job on other partitions (the shards); any other run takes it
    alone."""
    from ops.storage.home_lock import HomeClaim

    tags = run.tags
    partition = tags.get("dagster/partition")
    group = tags.get(LIFECYCLE_TAG) or tags.get("dagster/backfill") or (f"job {run.job_name}" if partition else None)
    label = f"{run.job_name}[{partition}]" if partition else run.job_name
    return HomeClaim(
        holder=f"{run.run_id} of {label}",
        how="Dagster run",
        group=group,
        partition=f"{run.job_name}|{partition}" if partition else None,
    )


class _HomeLockedExecutor(Executor):
    """The executor it wraps, inside the home's lock (`home_locked`)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    @property
    def retries(self):
        return self.inner.retries

    @property
    def step_dependency_config(self):
        return self.inner.step_dependency_config

    def __getattr__(self, name):  # anything else an executor offers: the inner one's
        return getattr(self.inner, name)

    def execute(self, plan_context, execution_plan):
        from ops.storage.home_lock import HomeBusy, home_lock
        from resources.storage import data_root

        run = plan_context.dagster_run
        record = plan_context.instance.get_run_record_by_id(run.run_id)
        submitted = record.create_timestamp.timestamp() if record is not None else None
        try:
            with home_lock(
                data_root(), run_claim(run), current().home_wait_s, on_wait=plan_context.log.info, first_at=submitted
            ):
                yield from self.inner.execute(plan_context, execution_plan)
        except HomeBusy as exc:
            # The run's failure says it in one line (the UI shows it first).
            raise HomeBusy(f"run {run.run_id} of {run.job_name} not started: {exc}") from None

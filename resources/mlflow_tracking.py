"""MLflow tracking for the asset graph: one parent MLflow run per Dagster run, and one
top-level run per lifecycle above them.

Each Dagster run becomes one parent MLflow run, tagged with the Dagster run id, the job,
the code version and (once ingestion has run) the data source.  Each asset materialisation
is a child run nested under it, named after the asset and partition, holding that asset's
parameters, metrics, dataset digests and artefacts — so the MLflow UI shows a run as a
tree and params of different assets never collide.  A Dagster run started by the lifecycle
runner (tagged `simab/lifecycle`) has its parent nested under that lifecycle's own run
(`lifecycle_run_id`, tag `simab_role=lifecycle`), which carries the lifecycle's parameters
and verdict metrics (`resources.lifecycle_run`): two lifecycles compare side by side.

A thin `ConfigurableResource` over the plain mlflow client: dagster-mlflow is an op-era
resource that caps pandas < 3.  With the multiprocess executor several steps may ask for
the parent at once; a file lock makes exactly one of them create it.

The parent's status follows the Dagster run, not its last step: RUNNING while a step runs,
FAILED as soon as one step fails (and kept, whatever later steps do), FINISHED when a step
ends well with no failure and no other step running.  A failure outside a child run (an
input that cannot be loaded) marks it FAILED when the resource is torn down at the end of
the step or run.  A run killed outright leaves its parent RUNNING: the monitoring that marks
the Dagster run failed (`pipelines.instance.mark_dead_runs_failed`) ends it KILLED
(`end_parent`).

A SQLite tracking store that cannot be read (not a database, a damaged page) raises
`TrackingStoreError` naming the file and what to do, instead of SQLAlchemy's bare
"file is not a database".
"""

from __future__ import annotations

import functools
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

from dagster import ConfigurableResource, DagsterEventType, InitResourceContext
from filelock import FileLock
from pydantic import PrivateAttr

from ops.arms.model_registry import log_and_register, model_id_of, point_aliases
from ops.settings import current
from resources.llm import LIFECYCLE_TAG
from resources.storage import PROJECT_ROOT, data_root, frame_digest

PARENT_ROLE = "dagster_run"
LIFECYCLE_ROLE = "lifecycle"
ENDED_BADLY = ("FAILED", "KILLED")  # a parent in either keeps it


class TrackingStoreError(RuntimeError):
    """The MLflow tracking store cannot be used: names the store and what to do."""


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """The git commit of the project (with '+dirty' when the tree has changes), else the
    package version: what MLflow runs and Dagster code versions are stamped with."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return f"simab-{version('simab')}"


class MlflowTracking(ConfigurableResource):
    """Where runs go: `tracking_uri`, else $MLFLOW_TRACKING_URI, else SQLite in the data folder
    (`ops.settings.Settings.mlflow_store`)."""

    tracking_uri: str = ""
    experiment: str = "simab"

    _uri: str = PrivateAttr(default="")

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._uri = self.resolved_uri()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        """A failed step of this run fails its parent, even one that failed before its child
        run began (an input that could not be loaded)."""
        run_id, instance = context.run_id, context.instance
        if not run_id or instance is None:
            return
        if instance.get_records_for_run(run_id, of_type=DagsterEventType.STEP_FAILURE, limit=1).records:
            try:
                self.end_parent(run_id, "FAILED", create=False)
            except TrackingStoreError as exc:  # the step has failed already; say why MLflow was not told
                context.log.warning(str(exc))

    def end_parent(self, dagster_run_id: str, status: str, create: bool = False) -> bool:
        """End the parent of a Dagster run with `status` (FAILED or KILLED; with KILLED its child
        runs still RUNNING too); False when it has no parent (and not `create`)."""
        with self._store_errors():
            client = self.client()
            exp = self.experiment_id()
            query = f"tags.dagster_run_id = '{dagster_run_id}' and tags.simab_role = '{PARENT_ROLE}'"
            found = client.search_runs([exp], filter_string=query, max_results=1)
            if not found and not create:
                return False
            parent = found[0].info.run_id if found else self.parent_run_id(dagster_run_id)
            with _lock("parent"):
                # A killed run's steps died with it; a failed run's may still be going elsewhere.
                running = f"tags.mlflow.parentRunId = '{parent}' and attributes.status = 'RUNNING'"
                for child in client.search_runs([exp], running) if status == "KILLED" else []:
                    client.set_terminated(child.info.run_id, status="KILLED")
                if client.get_run(parent).info.status not in ENDED_BADLY:
                    client.set_terminated(parent, status=status)
        return True

    def resolved_uri(self) -> str:
        """The store (`ops.settings.Settings.mlflow_store`); a local one's folder made."""
        uri = current().mlflow_store(self.tracking_uri)
        if uri.startswith("sqlite:"):
            data_root().mkdir(parents=True, exist_ok=True)
        return uri

    # -- runs ------------------------------------------------------------------------

    def client(self):
        mlflow = _mlflow()

        mlflow.set_tracking_uri(self._uri or self.resolved_uri())
        return mlflow.MlflowClient()

    def experiment_id(self) -> str:
        with self._store_errors():
            return self._experiment_id()

    def _experiment_id(self) -> str:
        client = self.client()
        found = client.get_experiment_by_name(self.experiment)
        if found is not None:
            return found.experiment_id
        with _lock("experiment"):
            found = client.get_experiment_by_name(self.experiment)
            if found is not None:
                return found.experiment_id
            uri = self._uri or self.resolved_uri()
            # A local store keeps artefacts beside the database, not in the working directory.
            artifacts = (data_root() / "mlartifacts").as_uri() if uri.startswith("sqlite:") else None
            return client.create_experiment(self.experiment, artifact_location=artifacts)

    def lifecycle_run_id(self, lifecycle: str, params: dict[str, Any] | None = None) -> str:
        """The top-level MLflow run of a lifecycle (the runner's `simab/lifecycle` id), created
        on first use, with `params` logged (a resumed lifecycle logs the same ones again)."""
        from mlflow.entities import Param  # lazy: mlflow (seconds to import)

        with self._store_errors():
            client = self.client()
            exp = self.experiment_id()
            query = f"tags.simab_lifecycle = '{lifecycle}' and tags.simab_role = '{LIFECYCLE_ROLE}'"
            run_id = _find_or_create(
                client,
                exp,
                query,
                "lifecycle",
                f"lifecycle {lifecycle}",
                lambda: {"simab_lifecycle": lifecycle, "simab_role": LIFECYCLE_ROLE},
            )
            if params:
                logged = client.get_run(run_id).data.params
                fresh = [Param(k, str(_param(v))) for k, v in params.items() if k not in logged]
                if fresh:
                    client.log_batch(run_id, params=fresh)
            return run_id

    def parent_run_id(
        self, dagster_run_id: str, job_name: str = "", tags: dict[str, str] | None = None, lifecycle: str | None = None
    ) -> str:
        """The parent MLflow run of a Dagster run, created on first use; nested under the
        lifecycle's run when the Dagster run belongs to `lifecycle`."""
        with self._store_errors():
            return self._parent_run_id(dagster_run_id, job_name, tags, lifecycle)

    def _parent_run_id(
        self, dagster_run_id: str, job_name: str, tags: dict[str, str] | None, lifecycle: str | None = None
    ) -> str:
        client = self.client()
        exp = self.experiment_id()
        query = f"tags.dagster_run_id = '{dagster_run_id}' and tags.simab_role = '{PARENT_ROLE}'"

        def new_tags() -> dict[str, str]:
            # Called under the parent's lock: lock order parent → lifecycle, never the other way round.
            nested = (
                {"mlflow.parentRunId": self.lifecycle_run_id(lifecycle), "simab_lifecycle": lifecycle}
                if lifecycle
                else {}
            )
            return {**nested, "dagster_run_id": dagster_run_id, "dagster_job": job_name, "simab_role": PARENT_ROLE}

        run_id = _find_or_create(
            client, exp, query, "parent", f"{job_name or 'materialize'} {dagster_run_id[:8]}", new_tags
        )
        for key, value in (tags or {}).items():
            client.set_tag(run_id, key, value)
        return run_id

    @contextmanager
    def asset_run(
        self, context: Any, params: dict[str, Any] | None = None, tags: dict[str, str] | None = None
    ) -> Iterator[Any]:
        """A child run for one asset (or asset check) materialisation, active inside the block,
        so plain `mlflow.log_*` calls land in it.  Yields the mlflow ActiveRun."""
        mlflow = _mlflow()

        with self._store_errors():
            client = self.client()
            dagster_run_id = context.run.run_id
            parent = self.parent_run_id(dagster_run_id, context.run.job_name, lifecycle=_lifecycle_of(context))
            name = _step_name(context)
            child = client.create_run(
                self.experiment_id(),
                run_name=name,
                tags={
                    "mlflow.parentRunId": parent,
                    "dagster_run_id": dagster_run_id,
                    "dagster_asset": name,
                    "simab_role": "asset",
                    "code_version": code_version(),
                    **(tags or {}),
                },
            )
            self._parent_status(client, parent, "RUNNING")
        status = "FAILED"
        try:
            with mlflow.start_run(run_id=child.info.run_id) as active:
                if params:
                    mlflow.log_params({k: _param(v) for k, v in params.items()})
                yield active
            status = "FINISHED"
        finally:
            # start_run's exit already closed the child (FAILED on an exception).
            with self._store_errors():
                self._parent_status(client, parent, status)

    def _parent_status(self, client, parent: str, status: str) -> None:
        """Move the parent to `status` as the module docstring says: FAILED and KILLED stay;
        FINISHED waits for the other steps still running."""
        with _lock("parent"):
            if client.get_run(parent).info.status in ENDED_BADLY:
                return
            if status == "RUNNING":
                client.update_run(parent, status="RUNNING")
                return
            if status == "FINISHED":
                running = f"tags.mlflow.parentRunId = '{parent}' and attributes.status = 'RUNNING'"
                if client.search_runs([self.experiment_id()], running, max_results=1):
                    return  # another step of the run is still going: it closes the parent
            client.set_terminated(parent, status=status)

    @contextmanager
    def _store_errors(self) -> Iterator[None]:
        """A SQLite store SQLite cannot read becomes one `TrackingStoreError` naming the file."""
        try:
            yield
        except TrackingStoreError:
            raise
        except Exception as exc:
            cause = sqlite_cause(exc)
            uri = self._uri or self.resolved_uri()
            if cause is None or not uri.startswith("sqlite:///"):
                raise
            path = uri[len("sqlite:///") :]
            raise TrackingStoreError(
                f"MLflow tracking store {path} cannot be used: {cause}. Move it aside (`mv {path} {path}.damaged`) "
                "and run again to start a new store (the runs recorded in the old one are no longer listed), or set "
                "MLFLOW_TRACKING_URI to another store; the stored assets are not affected"
            ) from exc

    def tag_parent(self, context: Any, tags: dict[str, str]) -> None:
        self.parent_run_id(context.run.run_id, context.run.job_name, tags, lifecycle=_lifecycle_of(context))

    # -- logging (call inside asset_run: everything lands in the asset's child run) ------

    @staticmethod
    def log_params(params: dict[str, Any]) -> None:
        mlflow = _mlflow()

        mlflow.log_params({k: _param(v) for k, v in params.items()})

    @staticmethod
    def log_metrics(metrics: dict[str, float | int | None], step: int | None = None) -> None:
        """Numbers only; None (an undefined metric) is left out rather than logged as 0."""
        mlflow = _mlflow()

        clean = {k: float(v) for k, v in metrics.items() if v is not None}
        if clean:
            mlflow.log_metrics(clean, step=step)

    @staticmethod
    def set_tags(tags: dict[str, str]) -> None:
        mlflow = _mlflow()

        mlflow.set_tags(tags)

    @staticmethod
    def log_table(frame: Any, name: str) -> None:
        """A Polars (or pandas) frame as an MLflow table artefact `tables/<name>.json`."""
        mlflow = _mlflow()

        mlflow.log_table(
            frame.to_pandas() if hasattr(frame, "to_pandas") else frame, artifact_file=f"tables/{name}.json"
        )

    @staticmethod
    def log_figure(figure: Any, artifact_file: str) -> None:
        mlflow = _mlflow()

        mlflow.log_figure(figure, artifact_file)

    @staticmethod
    def log_text(text: str, artifact_file: str) -> None:
        mlflow = _mlflow()

        mlflow.log_text(text, artifact_file)

    @staticmethod
    def log_dict(data: dict, artifact_file: str) -> None:
        mlflow = _mlflow()

        mlflow.log_dict(data, artifact_file)

    @staticmethod
    def log_artifact(path: str | Path, artifact_path: str | None = None) -> None:
        mlflow = _mlflow()

        mlflow.log_artifact(str(path), artifact_path=artifact_path)

    @staticmethod
    def log_artifacts(folder: str | Path, artifact_path: str | None = None) -> None:
        mlflow = _mlflow()

        mlflow.log_artifacts(str(folder), artifact_path=artifact_path)

    @staticmethod
    def log_and_register_arm(trained: Any, registered_name: str, metrics: dict[str, float] | None = None) -> str:
        """The trained arm as a pyfunc model in the active run, registered as a new version of
        `registered_name` in the Model Registry (`ops.arms.model_registry`); returns the version."""
        return log_and_register(trained, registered_name, metrics=metrics)

    def log_model_metrics(
        self, metrics: dict[str, float | int | None], registered_name: str, version: str, dataset: Any = None
    ) -> str | None:
        """`metrics` into the active run, linked to the logged model of a registered version (and
        to `dataset`, a (frame, name) pair, when given): MLflow 3's model comparison shows them
        beside the model.  Without a logged model they are plain run metrics.  Returns its id."""
        mlflow = _mlflow()

        self.client()
        model_id = model_id_of(registered_name, version)
        clean = {k: float(v) for k, v in metrics.items() if v is not None}
        linked = None
        if dataset is not None:
            frame, name = dataset
            linked = mlflow.data.from_polars(frame, name=name, digest=frame_digest(frame))
        if clean:
            mlflow.log_metrics(clean, model_id=model_id, dataset=linked)
        return model_id

    def set_verdict_aliases(
        self, roles: dict[str, str], registered: dict[str, tuple[str, str]], lifecycle: str | None = None
    ) -> dict[str, str]:
        """Point the registry aliases of a verdict (`roles`: {alias: arm},
        `ops.readout.verdict.registry_roles`) at the arms' registered versions (`registered`:
        {arm: (name, version)}); an arm without a registered version (a lists file, an MLflow
        model of its own) gets none.  Returns {alias: "models:/name@alias"}."""
        targets = {alias: registered[arm] for alias, arm in roles.items() if arm in registered}
        if not targets:
            return {}
        with self._store_errors():
            self.client()
            return point_aliases(targets, [name for name, _ in registered.values()], label=lifecycle)

    @staticmethod
    def link_traces(trace_ids: list[str]) -> None:
        """Link MLflow traces (the LLM brain's sessions) to the active run, so that its Traces
        tab lists them, and count them (`llm_traced_sessions`); they are written out first
        (MLflow may export them in the background).  No traces: nothing."""
        if not trace_ids:
            return
        mlflow = _mlflow()

        mlflow.log_metric("llm_traced_sessions", len(trace_ids))
        mlflow.flush_trace_async_logging()
        client, run_id = mlflow.MlflowClient(), mlflow.active_run().info.run_id
        for start in range(0, len(trace_ids), 100):  # MLflow links at most 100 at a time
            client.link_traces_to_run(trace_ids[start : start + 100], run_id=run_id)

    @staticmethod
    def active_run_id() -> str:
        mlflow = _mlflow()

        return mlflow.active_run().info.run_id

    @staticmethod
    def log_frame(df: Any, name: str, role: str = "input", log_table: bool = False) -> str:
        """Log a Polars frame as an MLflow dataset (its digest, schema and row count) and,
        for small frames, as a table artefact; returns the digest."""
        mlflow = _mlflow()

        digest = frame_digest(df)
        dataset = mlflow.data.from_polars(df, name=name, digest=digest)
        mlflow.log_input(dataset, context=role)
        if log_table:
            mlflow.log_table(df.to_pandas(), artifact_file=f"tables/{name}.json")
        return digest


def _lifecycle_of(context: Any) -> str | None:
    """The lifecycle id of the Dagster run (tagged by the lifecycle runner), or None."""
    return (getattr(context.run, "tags", None) or {}).get(LIFECYCLE_TAG)


def _step_name(context: Any) -> str:
    try:
        key = context.asset_key.to_user_string()
    except Exception:  # asset checks and multi-assets have several keys
        key = context.op.name
    partition = getattr(context, "partition_key", None) if getattr(context, "has_partition_key", False) else None
    return f"{key}[{partition}]" if partition else key


def sqlite_cause(exc: BaseException) -> BaseException | None:
    """The sqlite3 error behind `exc` (SQLAlchemy and MLflow wrap it), or None."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, sqlite3.DatabaseError):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _param(value: Any) -> Any:
    text = str(value)
    return text if len(text) <= 6000 else text[:5990] + "…"


def _find_or_create(client, experiment: str, query: str, lock: str, run_name: str, tags: Callable[[], dict]) -> str:
    """The id of the run `query` finds, else of a run created with `run_name` and `tags()`
    (and the code version), under the lock `lock` so that two steps create one."""
    with _lock(lock):
        runs = client.search_runs([experiment], filter_string=query, max_results=1)
        if runs:
            return runs[0].info.run_id
        return client.create_run(
            experiment, run_name=run_name, tags={**tags(), "code_version": code_version()}
        ).info.run_id


@contextmanager
def _lock(name: str) -> Iterator[None]:
    root = data_root()
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(Path(root) / f".mlflow-{name}.lock"), timeout=120):
        yield


def _mlflow():
    """The `mlflow` module, imported on first use: the code location imports this module, and
    mlflow takes seconds to import."""
    import mlflow  # lazy: mlflow (seconds to import)

    return mlflow

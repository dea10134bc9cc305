"""How an experiment's table is published: Markdown and CSV under
`$SIMAB_HOME/experiments/<name>/` with the paper's numbers and the protocol differences named,
logged to MLflow and printed to the run's log (`ops.studies.experiments.output`)."""

from pathlib import Path

import polars as pl
from dagster import DataVersion, MaterializeResult, MetadataValue

from ops.studies.experiments.output import experiment_markdown, write_experiment
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root, frame_digest


def publish(
    context,
    mlflow_tracking: MlflowTracking,
    name: str,
    title: str,
    body: list[str],
    differences,
    table: pl.DataFrame,
    extra: dict,
    figures: list[Path],
    params: dict,
    notes=(),
) -> MaterializeResult:
    """Write the experiment's folder, log it to MLflow, print it to the run's log, and return the table."""
    folder = data_root() / "experiments" / name
    markdown = experiment_markdown(title, body, differences, figures, folder, notes)
    paths = write_experiment(folder, markdown, table, extra)
    with mlflow_tracking.asset_run(
        context,
        params={k: (",".join(map(str, v)) if isinstance(v, list) else v) for k, v in params.items()},
        tags={"experiment": name},
    ):
        mlflow_tracking.log_table(table, name)
        for key, frame in extra.items():
            mlflow_tracking.log_table(frame, f"{name}_{key}")
        for path in paths.values():
            mlflow_tracking.log_artifact(path, artifact_path=f"experiments/{name}")
        for figure in figures:
            mlflow_tracking.log_artifact(figure, artifact_path=f"experiments/{name}/plots")
        run_id = mlflow_tracking.active_run_id()
    context.log.info(f"{title}\n\n{markdown}")
    return MaterializeResult(
        value=table,
        data_version=DataVersion(frame_digest(table)),
        metadata={
            "folder": MetadataValue.path(str(folder)),
            "table": MetadataValue.md(markdown),
            "mlflow_run_id": run_id,
            "rows": table.height,
        },
    )

"""Lifecycle steps 9 and 11: the simulated A/B read-out and the report.

`ab_readout` reads the events of every simulated arm: per-arm CTR, CVR, click-to-watch,
AR and the Agent4Rec set with 95 % bootstrap intervals over agents, and each arm against
the control with a paired (or unpaired) test, Holm-corrected.  `simab_report` adds the
offline metrics and the fidelity of the simulation (Kendall τ between simulated and offline
rankings of the arms), writes a Markdown report with its figures and logs it all to MLflow.
"""

import os
from pathlib import Path

import polars as pl
from dagster import AssetExecutionContext, AssetIn, Config, MetadataValue, Output, asset
from pydantic import Field

from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root

GROUP = "report"


class ReadoutAssetConfig(Config):
    control: str = Field(default=os.environ.get("SIMAB_CONTROL", "pop"), description="the control arm (A/B Agent compares against Pop)")
    n_bootstrap: int = Field(default=2000, description="bootstrap replicates for the 95 % intervals")
    seed: int = Field(default=0, description="bootstrap seed")


@asset(group_name=GROUP, code_version="1", compute_kind="scipy", ins={"simulation_events": AssetIn("simulation_events")})
def ab_readout(context: AssetExecutionContext, config: ReadoutAssetConfig, simulation_events: dict, mlflow_tracking: MlflowTracking):
    """Per-arm metrics with intervals and arm-vs-control differences (design.md step 9)."""
    import tempfile

    from ops.ab_readout import ReadoutConfig, ab_readout as readout

    if not simulation_events:
        raise ValueError("no simulated arm yet: materialise simulation_events for at least the control arm")
    arms = sorted(simulation_events)
    control = config.control if config.control in simulation_events else arms[0]
    if control != config.control:
        context.log.warning(f"control arm {config.control!r} was not simulated; using {control!r}")
    events = pl.concat([simulation_events[a] for a in arms])
    result = readout(events, control=control, config=ReadoutConfig(n_bootstrap=config.n_bootstrap, seed=config.seed))
    markdown = result.to_markdown()
    with mlflow_tracking.asset_run(context, params={"control": control, "arms": ",".join(arms), "design": result.design, "n_bootstrap": config.n_bootstrap}):
        import mlflow

        for row in result.arms.iter_rows(named=True):
            if row["mean"] is not None:
                mlflow.log_metric(f"{row['arm']}_{row['metric']}", float(row["mean"]))
        mlflow.log_text(markdown, "ab_readout.md")
        mlflow.log_table(result.arms.to_pandas(), artifact_file="tables/ab_arms.json")
        mlflow.log_table(result.comparisons.to_pandas(), artifact_file="tables/ab_comparisons.json")
        with tempfile.TemporaryDirectory() as tmp:
            result.write_figures(tmp)
            mlflow.log_artifacts(tmp, artifact_path="plots")
    return Output(result, metadata={"arms": ", ".join(arms), "control": control, "design": result.design, "read-out": MetadataValue.md(markdown)})


@asset(group_name=GROUP, code_version="1", compute_kind="markdown", ins={"offline_metrics": AssetIn("offline_metrics")})
def simab_report(context: AssetExecutionContext, ab_readout, offline_metrics: dict, mlflow_tracking: MlflowTracking):
    """The A/B read-out beside the offline metrics, and how well they agree (fidelity)."""
    from ops.fidelity import fidelity

    offline = pl.concat([offline_metrics[a] for a in sorted(offline_metrics)]) if offline_metrics else pl.DataFrame({"arm": []})
    fid = fidelity(ab_readout.arms, offline) if offline_metrics else pl.DataFrame()
    folder = data_root() / "reports" / context.run.run_id
    folder.mkdir(parents=True, exist_ok=True)
    plots = ab_readout.write_figures(folder / "plots")
    text = _report_markdown(ab_readout, offline, fid, plots, folder)
    path = folder / "report.md"
    path.write_text(text)
    latest = data_root() / "reports" / "latest.md"
    latest.write_text(text)
    with mlflow_tracking.asset_run(context, params={"report": str(path)}):
        import mlflow

        for row in fid.iter_rows(named=True) if fid.height else []:
            if row["kendall_tau"] is not None:
                mlflow.log_metric(f"kendall_tau_{row['simulated']}_vs_{row['offline']}", row["kendall_tau"])
        mlflow.log_artifact(str(path))
        mlflow.log_artifacts(str(folder / "plots"), artifact_path="plots")
        if fid.height:
            mlflow.log_table(fid.to_pandas(), artifact_file="tables/fidelity.json")
        run_id = mlflow.active_run().info.run_id
    context.log.info(f"report written to {path} (MLflow run {run_id})")
    return Output(str(path), metadata={"path": str(path), "mlflow_run_id": run_id, "report": MetadataValue.md(text)})


def _report_markdown(readout, offline: pl.DataFrame, fid: pl.DataFrame, plots: list[Path], folder: Path) -> str:
    lines = ["# simab report", "", readout.to_markdown(), "## Offline metrics (test split)", ""]
    if offline.height:
        cols = [c for c in ("arm", "test_auc", "test_log_loss", "recall_at_k", "ndcg_at_k", "users_ranked") if c in offline.columns]
        lines += [offline.select(cols).sort("arm").to_pandas().to_markdown(index=False, floatfmt=".4f"), ""]
    if fid.height:
        lines += ["## Fidelity: do simulated and offline metrics rank the arms alike? (Kendall τ-b)", ""]
        lines += [fid.to_pandas().to_markdown(index=False, floatfmt=".3f"), ""]
    lines += ["## Figures", ""] + [f"![{p.stem}]({p.relative_to(folder)})" for p in plots]
    return "\n".join(lines) + "\n"

"""Lifecycle steps 9 and 11: the simulated A/B read-out and the report (built by ops.readout.report).

`ab_readout` reads the events of every simulated arm: per-arm CTR, CVR, click-to-watch,
AR and the Agent4Rec set with 95 % bootstrap intervals over agents, and each arm against
the control with a paired (or unpaired) test, Holm-corrected.  `simab_report` adds the
offline metrics and the fidelity of the simulation (Kendall τ between simulated and offline
rankings of the arms), writes a Markdown report with its figures, the same report as one HTML
page with the figures embedded (`report.html`), and logs it all to MLflow; its metadata links
the HTML report and the trajectory viewer, and holds the figures the console prints.
"""

import tempfile

import polars as pl
from dagster import AssetExecutionContext, AssetIn, Config, MetadataValue, Output, asset
from pydantic import Field

from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root

GROUP = "report"


class ReadoutAssetConfig(Config):
    control: str = Field(default="pop", description="the control arm (A/B Agent compares against Pop; $SIMAB_CONTROL)")
    n_bootstrap: int = Field(default=2000, description="bootstrap replicates for the 95 % intervals")
    seed: int = Field(default=0, description="bootstrap seed")


@asset(group_name=GROUP, code_version="1", compute_kind="scipy", ins={"simulation_events": AssetIn("simulation_events")})
def ab_readout(context: AssetExecutionContext, config: ReadoutAssetConfig, simulation_events: dict, mlflow_tracking: MlflowTracking):
    """Per-arm metrics with intervals and arm-vs-control differences (design.md step 9)."""
    from ops.readout.ab_readout import ReadoutConfig, ab_readout as readout
    from ops.readout.plots import write_ab_figures

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
        mlflow_tracking.log_metrics({f"{row['arm']}_{row['metric']}": row["mean"] for row in result.arms.iter_rows(named=True)})
        mlflow_tracking.log_text(markdown, "ab_readout.md")
        mlflow_tracking.log_table(result.arms, "ab_arms")
        mlflow_tracking.log_table(result.comparisons, "ab_comparisons")
        mlflow_tracking.log_table(result.fallbacks, "ab_fallbacks")
        mlflow_tracking.log_metrics({f"{r['arm']}_{k}": r[k] for r in result.fallbacks.iter_rows(named=True) for k in ("fallback_agents", "failed_agents")})
        with tempfile.TemporaryDirectory() as tmp:
            write_ab_figures(result, tmp)
            mlflow_tracking.log_artifacts(tmp, artifact_path="plots")
    return Output(result, metadata={"arms": ", ".join(arms), "control": control, "design": result.design, "read-out": MetadataValue.md(markdown)})


@asset(
    group_name=GROUP,
    code_version="3",
    compute_kind="markdown",
    ins={
        "offline_metrics": AssetIn("offline_metrics"),
        "top20_lists": AssetIn("top20_lists"),
        "test_ratings": AssetIn("test_ratings"),
        "augmentation_metrics": AssetIn("augmentation_metrics"),
    },
)
def simab_report(
    context: AssetExecutionContext,
    ab_readout,
    offline_metrics: dict,
    top20_lists: dict,
    test_ratings: pl.DataFrame,
    augmentation_metrics: dict,
    mlflow_tracking: MlflowTracking,
):
    """The A/B read-out beside the offline metrics, and how well they agree (fidelity):
    Kendall τ over the arms, and arm against arm with intervals on both sides."""
    from ops.readout.fidelity import agreement_summary, fidelity, offline_intervals, offline_per_user, pairwise_agreement
    from ops.atomic import atomic_write_bytes
    from ops.figures import save_figure
    from ops.readout.plots import fidelity_pairs, write_ab_figures
    from ops.links import viewer_url
    from ops.readout.report import report_html, report_markdown, report_summary

    # Relaxed: arms without a CTR model (random, pop) have all-null AUC columns.
    offline = pl.concat([offline_metrics[a] for a in sorted(offline_metrics)], how="vertical_relaxed") if offline_metrics else pl.DataFrame({"arm": []})
    fid = fidelity(ab_readout.arms, offline) if offline_metrics else pl.DataFrame()
    per_user = offline_per_user(top20_lists, test_ratings)
    intervals = offline_intervals(per_user, seed=ab_readout.config.seed)
    pairs = pairwise_agreement(ab_readout.per_agent, per_user, paired=ab_readout.design == "paired", seed=ab_readout.config.seed)
    summary = agreement_summary(pairs)
    folder = data_root() / "reports" / context.run.run_id
    folder.mkdir(parents=True, exist_ok=True)
    plots = write_ab_figures(ab_readout, folder / "plots")
    if pairs.height:
        plots.append(save_figure(fidelity_pairs(pairs), folder / "plots" / "fidelity_pairs.png"))
    text = report_markdown(ab_readout, offline, fid, plots, folder, intervals, pairs, summary, augmentation_metrics)
    path = folder / "report.md"
    atomic_write_bytes(path, text.encode("utf-8"))
    atomic_write_bytes(data_root() / "reports" / "latest.md", text.encode("utf-8"))
    # The HTML page is made from the Markdown as written, so every section anyone adds to it is there.
    page = report_html(text, folder).encode("utf-8")
    html_path = folder / "report.html"
    atomic_write_bytes(html_path, page)
    atomic_write_bytes(data_root() / "reports" / "latest.html", page)
    headline = report_summary(ab_readout, intervals, fid, summary)
    viewer = viewer_url("/")
    with mlflow_tracking.asset_run(context, params={"report": str(path)}, tags={"viewer_url": viewer, "report_html": str(html_path)}):
        if fid.height:
            mlflow_tracking.log_metrics({f"kendall_tau_{row['simulated']}_vs_{row['offline']}": row["kendall_tau"] for row in fid.iter_rows(named=True)})
        mlflow_tracking.log_artifact(path)
        mlflow_tracking.log_artifact(html_path)
        mlflow_tracking.log_artifacts(folder / "plots", artifact_path="plots")
        if fid.height:
            mlflow_tracking.log_table(fid, "fidelity")
        if pairs.height:
            mlflow_tracking.log_table(pairs, "fidelity_pairs")
            mlflow_tracking.log_table(intervals, "offline_intervals")
            mlflow_tracking.log_metrics({f"pairs_{k.replace(' ', '_')}": v for k, v in summary.items()})
        run_id = mlflow_tracking.active_run_id()
    context.log.info(f"report written to {html_path} and {path} (MLflow run {run_id})")
    return Output(
        str(path),
        metadata={
            "path": str(path), "html report": MetadataValue.path(str(html_path)), "mlflow_run_id": run_id,
            "trajectory viewer": MetadataValue.url(viewer), "summary": MetadataValue.json(headline), "report": MetadataValue.md(text),
        },
    )

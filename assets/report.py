"""Lifecycle steps 9 and 11: the simulated A/B read-out and the report (built by ops.readout.report_markdown).

`ab_readout` reads the events of every simulated arm: per-arm CTR, CVR, click-to-watch,
AR and the Agent4Rec set with 95 % bootstrap intervals over agents, and each arm against
the control with a paired (or unpaired) test, Holm-corrected.  `simab_report` adds the
offline metrics and the fidelity of the simulation (Kendall τ between simulated and offline
rankings of the arms), writes a Markdown report with its figures, the same report as one HTML
page with the figures embedded (`report.html`), and logs it all to MLflow; its metadata links
the HTML report and the trajectory viewer, and holds the figures the console prints.
"""

import polars as pl
from dagster import AssetExecutionContext, AssetIn, Config, MetadataValue, Output, asset
from pydantic import Field

from assets.recommenders import registered_arms
from ops.arms.registry import control_arm
from ops.links import viewer_url
from ops.readout.ab_readout import ab_readout as readout
from ops.readout.readout_config import ReadoutConfig
from ops.readout.readout_figures import write_ab_figures
from ops.readout.verdict import Verdict, registry_roles
from ops.settings import config_default
from ops.studies.report_writer import Report, write_report
from ops.studies.verdict import Trust
from resources.llm import LIFECYCLE_TAG, LLMResource
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root

GROUP = "report"


class ReadoutAssetConfig(Config):
    control: str = Field(
        default=config_default("control"),
        description="the control arm (A/B Agent compares against Pop; $SIMAB_CONTROL)",
    )
    n_bootstrap: int = Field(default=2000, description="bootstrap replicates for the 95 % intervals")
    seed: int = Field(default=0, description="bootstrap seed")


@asset(group_name=GROUP, code_version="2", kinds={"scipy"}, ins={"simulation_events": AssetIn("simulation_events")})
def ab_readout(
    context: AssetExecutionContext, config: ReadoutAssetConfig, simulation_events: dict, mlflow_tracking: MlflowTracking
):
    """Per-arm metrics with intervals and arm-vs-control differences (docs/definitions.md#lifecycle, step 9)."""
    if not simulation_events:
        raise ValueError("no simulated arm yet: materialise simulation_events for at least the control arm")
    arms = sorted(simulation_events)
    control = control_arm(config.control, arms)
    if control != config.control:
        context.log.warning(f"control arm {config.control!r} was not simulated; using {control!r}")
    events = pl.concat([simulation_events[a] for a in arms])
    result = readout(events, control=control, config=ReadoutConfig(n_bootstrap=config.n_bootstrap, seed=config.seed))
    markdown = result.to_markdown()
    with mlflow_tracking.asset_run(
        context,
        params={"control": control, "arms": ",".join(arms), "design": result.design, "n_bootstrap": config.n_bootstrap},
    ):
        mlflow_tracking.log_metrics(
            {f"{row['arm']}_{row['metric']}": row["mean"] for row in result.arms.iter_rows(named=True)}
        )
        mlflow_tracking.log_text(markdown, "ab_readout.md")
        mlflow_tracking.log_table(result.arms, "ab_arms")
        mlflow_tracking.log_table(result.comparisons, "ab_comparisons")
        mlflow_tracking.log_table(result.fallbacks, "ab_fallbacks")
        mlflow_tracking.log_metrics(
            {
                f"{r['arm']}_{k}": r[k]
                for r in result.fallbacks.iter_rows(named=True)
                for k in ("fallback_agents", "failed_agents")
            }
        )
        # Drawn into this run's report folder, where the report of the same run finds them.
        plots = data_root() / "reports" / context.run.run_id / "plots"
        write_ab_figures(result, plots)
        mlflow_tracking.log_artifacts(str(plots), artifact_path="plots")
    return Output(
        result,
        metadata={
            "arms": ", ".join(arms),
            "control": control,
            "design": result.design,
            "read-out": MetadataValue.md(markdown),
        },
    )


class ReportConfig(Config):
    tau_floor: float = Field(
        default=config_default("fidelity_tau_floor"),
        description="the verdict's warning when Kendall τ(CTR, NDCG@20), or the arm pairs' τ with a missed pair "
        "counted as a tie, falls below this, as the fidelity_trust check ($SIMAB_FIDELITY_TAU_FLOOR)",
    )
    primary_metric: str = Field(
        default=config_default("primary_metric"),
        description="the metric the verdict names a winner on (ctr, cvr, average_rating, ...)",
    )
    # 0.02: about twice the CTR step a run of a thousand agents detects (docs/definitions.md#list-quality-spread):
    # a brain whose response to a five-fold share of liked items is below it cannot show a run an arm difference.
    spread_floor: float = Field(
        default=config_default("list_quality_spread_floor"),
        ge=0,
        le=1,
        description="the verdict warns that the brain cannot tell lists apart when its list-quality CTR spread "
        "(1:1 lists minus 1:9 lists) has its whole interval below this, or below the larger spread the sensitivity "
        "ladder implies; short of it with an interval that reaches it, the spread is underpowered "
        "($SIMAB_LIST_QUALITY_SPREAD_FLOOR)",
    )
    eval_users: int = Field(
        default=config_default("eval_users"),
        ge=0,
        description="the offline metrics over a seeded sample of this many test users, as the arms measured them; 0 = all ($SIMAB_EVAL_USERS)",
    )


@asset(
    group_name=GROUP,
    code_version="7",
    kinds={"markdown", "mlflow"},
    ins={
        "offline_metrics": AssetIn("offline_metrics"),
        "top20_lists": AssetIn("top20_lists"),
        "test_ratings": AssetIn("test_ratings"),
        "augmentation_metrics": AssetIn("augmentation_metrics"),
        "ground_truth": AssetIn("ground_truth"),
    },
)
def simab_report(
    context: AssetExecutionContext,
    config: ReportConfig,
    ab_readout,
    offline_metrics: dict,
    top20_lists: dict,
    test_ratings: pl.DataFrame,
    augmentation_metrics: dict,
    taste_alignment,
    rating_alignment,
    social_traits_alignment: pl.DataFrame,
    list_quality_alignment,
    embedded_brain,
    list_sensitivity,
    ground_truth: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
    llm: LLMResource,
):
    """The A/B read-out beside the offline metrics, and how well they agree (fidelity):
    Kendall τ over the arms, arm against arm with intervals on both sides, the power of
    the simulated test (minimum detectable CTR difference, agents × sessions needed,
    sensitivity ratio per pair), and how far to trust the agents (the alignment protocols,
    each beside the paper's figure)."""
    reports = data_root() / "reports"
    report = write_report(
        reports / context.run.run_id,
        reports,
        ab_readout,
        offline_metrics,
        top20_lists,
        test_ratings,
        augmentation_metrics,
        Trust(
            taste_alignment,
            rating_alignment,
            social_traits_alignment,
            list_quality_alignment,
            list_sensitivity,
            embedded_brain,
        ),
        bill=llm.bill_of(context),
        # The judge, read here only to measure (ops.readout.truth).
        truth=ground_truth,
        **config.model_dump(),
    )
    tags = {"viewer_url": viewer_url("/"), "report_html": str(report.html_path)}
    with mlflow_tracking.asset_run(context, params={"report": str(report.path)}, tags=tags):
        run_id, aliases = _log_report(context, mlflow_tracking, report)
    return Output(
        str(report.path),
        metadata={
            "path": str(report.path),
            "html report": MetadataValue.path(str(report.html_path)),
            "mlflow_run_id": run_id,
            "registry aliases": MetadataValue.json(aliases),
            "trajectory viewer": MetadataValue.url(tags["viewer_url"]),
            "summary": MetadataValue.json(report.verdict.to_dict()),
            "report": MetadataValue.md(report.text),
        },
    )


def _point_aliases(context: AssetExecutionContext, mlflow_tracking: MlflowTracking, verdict: Verdict) -> dict:
    """The registry follows the verdict: @winner and @control on the arms' registered versions."""
    arms = sorted(verdict.arms)
    aliases = mlflow_tracking.set_verdict_aliases(
        registry_roles(verdict), registered_arms(context.instance, arms), context.run.tags.get(LIFECYCLE_TAG)
    )
    for alias, uri in aliases.items():
        context.log.info(f"Model Registry: {uri} ({alias} of this verdict)")
    return aliases


def _log_report(context: AssetExecutionContext, mlflow_tracking: MlflowTracking, report: Report) -> tuple[str, dict]:
    """The report, its HTML page, figures, tables and figures of merit, into the open run; the
    registry's aliases set by its verdict.  Returns (the run's id, {alias: models:/ URI})."""
    mlflow_tracking.log_artifact(report.path)
    mlflow_tracking.log_artifact(report.html_path)
    mlflow_tracking.log_artifacts(report.plots, artifact_path="plots")
    for name, table in report.tables().items():
        mlflow_tracking.log_table(table, name)
    if metrics := report.metrics():
        mlflow_tracking.log_metrics(metrics)
    run_id = mlflow_tracking.active_run_id()
    context.log.info(f"report written to {report.html_path} and {report.path} (MLflow run {run_id})")
    return run_id, _point_aliases(context, mlflow_tracking, report.verdict)

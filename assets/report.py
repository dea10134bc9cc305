"""Lifecycle steps 9 and 11: the simulated A/B read-out and the report (built by ops.readout.report).

`ab_readout` reads the events of every simulated arm: per-arm CTR, CVR, click-to-watch,
AR and the Agent4Rec set with 95 % bootstrap intervals over agents, and each arm against
the control with a paired (or unpaired) test, Holm-corrected.  `simab_report` adds the
offline metrics and the fidelity of the simulation (Kendall τ between simulated and offline
rankings of the arms), writes a Markdown report with its figures, the same report as one HTML
page with the figures embedded (`report.html`), and logs it all to MLflow; its metadata links
the HTML report and the trajectory viewer, and holds the figures the console prints.
"""

import functools
import tempfile

import polars as pl
from dagster import AssetExecutionContext, AssetIn, Config, MetadataValue, Output, asset
from pydantic import Field

from ops.arms.catalog import control_arm, has_capability
from ops.readout.fidelity import agreement_summary, arm_agreement, offline_intervals
from ops.settings import config_default
from resources.llm import LLMResource
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


@asset(
    group_name=GROUP, code_version="2", compute_kind="scipy", ins={"simulation_events": AssetIn("simulation_events")}
)
def ab_readout(
    context: AssetExecutionContext, config: ReadoutAssetConfig, simulation_events: dict, mlflow_tracking: MlflowTracking
):
    """Per-arm metrics with intervals and arm-vs-control differences (docs/definitions.md#lifecycle, step 9)."""
    from ops.readout.ab_readout import ReadoutConfig
    from ops.readout.ab_readout import ab_readout as readout
    from ops.readout.plots import write_ab_figures

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
        with tempfile.TemporaryDirectory() as tmp:
            write_ab_figures(result, tmp)
            mlflow_tracking.log_artifacts(tmp, artifact_path="plots")
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
        "(1:1 lists minus 1:9 lists) is below this or its interval holds 0 ($SIMAB_LIST_QUALITY_SPREAD_FLOOR)",
    )


@asset(
    group_name=GROUP,
    code_version="6",
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
    mlflow_tracking: MlflowTracking,
    llm: LLMResource,
):
    """The A/B read-out beside the offline metrics, and how well they agree (fidelity):
    Kendall τ over the arms, arm against arm with intervals on both sides, the power of
    the simulated test (minimum detectable CTR difference, agents × sessions needed,
    sensitivity ratio per pair), and how far to trust the agents (the alignment protocols,
    each beside the paper's figure)."""
    from ops.atomic import atomic_write_bytes
    from ops.figures import save_figure
    from ops.links import viewer_url
    from ops.readout.bias import simulator_bias
    from ops.readout.plots import fidelity_pairs, power_figure, write_ab_figures
    from ops.readout.power import power_analysis
    from ops.readout.report import bill_lines, report_html, report_markdown, report_summary
    from ops.readout.slots import slot_warning, slots_markdown

    # Simulated against offline, once: τ, the arm pairs, the diagnostic arms (the mirror:
    # the brain's own ranking, no candidate; it goes to the bias section).
    is_diagnostic = functools.partial(has_capability, attribute="diagnostic")
    agreement = arm_agreement(ab_readout, offline_metrics, top20_lists, test_ratings, is_diagnostic)
    offline, per_user, diagnostic, fid, pairs = (
        agreement.offline,
        agreement.per_user,
        agreement.diagnostic,
        agreement.fid,
        agreement.pairs,
    )
    intervals = offline_intervals(per_user, seed=ab_readout.config.seed)
    bias = simulator_bias(
        ab_readout.per_agent,
        per_user,
        top20_lists,
        diagnostic,
        paired=ab_readout.design == "paired",
        seed=ab_readout.config.seed,
    )
    summary = agreement_summary(pairs)
    # The power figures assume the paired design (each agent its own control).
    power = None
    if ab_readout.design == "paired" and getattr(ab_readout, "per_session", None) is not None and pairs.height:
        ndcg = intervals.filter(pl.col("metric") == "ndcg_at_k")
        power = power_analysis(
            ab_readout.per_session,
            pairs,
            dict(zip(ndcg.get_column("arm").to_list(), ndcg.get_column("mean").to_list())),
        )
    folder = data_root() / "reports" / context.run.run_id
    folder.mkdir(parents=True, exist_ok=True)
    plots = write_ab_figures(ab_readout, folder / "plots")
    if pairs.height:
        plots.append(save_figure(fidelity_pairs(pairs), folder / "plots" / "fidelity_pairs.png"))
    if power is not None and power.pairs.height:
        plots.append(save_figure(power_figure(power), folder / "plots" / "power.png"))
    trust = _trust_section(
        folder, taste_alignment, rating_alignment, social_traits_alignment, list_quality_alignment, list_sensitivity
    )
    from ops.studies.alignment.trust import (
        fidelity_warning,
        list_quality_warning,
        not_measured_summary,
        sensitivity_headline,
    )

    unmeasured = not_measured_summary(
        taste=taste_alignment, rating=rating_alignment, list_quality=list_quality_alignment
    )

    warned = fidelity_warning(fid, pairs, config.tau_floor) if fid.height else None
    # The same figures open the report and close the console's output (verdict_lines).
    warnings = [warned.description] if warned is not None and not warned.passed else []
    warnings += [bias.warning] if bias.warning else []
    clicks = getattr(ab_readout, "slot_clicks", None)  # None in a read-out stored before it was kept
    slot_warned = slot_warning(clicks) if clicks is not None else None
    warnings += [slot_warned] if slot_warned else []
    blind = list_quality_warning(list_quality_alignment, config.spread_floor)
    warnings += [blind] if blind else []
    from ops.studies.alignment.calibration import list_response_status

    headline = report_summary(
        ab_readout,
        intervals,
        fid,
        summary,
        taste_alignment,
        rating_alignment,
        warnings,
        config.primary_metric,
        unmeasured,
        list_response_status(embedded_brain.params),
        exclude=diagnostic,
        power=power,
        list_quality=list_quality_alignment,
        sensitivity=sensitivity_headline(list_sensitivity),
    )
    headline["simulator_bias"] = bias.verdict_line()
    trust = [*trust, bias.to_markdown(), *([slots_markdown(clicks)] if clicks is not None else [])]
    text = report_markdown(
        ab_readout, offline, fid, plots, folder, intervals, pairs, summary, augmentation_metrics, power, trust, headline
    )
    bill = llm.bill_of(context)
    if bill.path.exists():  # the LLM was called in this run (lifecycle): what each asset spent
        text += "\n" + "\n".join(bill_lines(bill.bill()))
    path = folder / "report.md"
    atomic_write_bytes(path, text.encode("utf-8"))
    atomic_write_bytes(data_root() / "reports" / "latest.md", text.encode("utf-8"))
    # The HTML page is made from the Markdown as written, so every section anyone adds to it is there.
    page = report_html(text, folder).encode("utf-8")
    html_path = folder / "report.html"
    atomic_write_bytes(html_path, page)
    atomic_write_bytes(data_root() / "reports" / "latest.html", page)
    viewer = viewer_url("/")
    with mlflow_tracking.asset_run(
        context, params={"report": str(path)}, tags={"viewer_url": viewer, "report_html": str(html_path)}
    ):
        if fid.height:
            mlflow_tracking.log_metrics(
                {
                    f"kendall_tau_{row['simulated']}_vs_{row['offline']}": row["kendall_tau"]
                    for row in fid.iter_rows(named=True)
                }
            )
        mlflow_tracking.log_artifact(path)
        mlflow_tracking.log_artifact(html_path)
        mlflow_tracking.log_artifacts(folder / "plots", artifact_path="plots")
        if fid.height:
            mlflow_tracking.log_table(fid, "fidelity")
        mlflow_tracking.log_table(bias.arms, "simulator_bias")
        if bias.excess is not None:
            mlflow_tracking.log_metrics({"mirror_excess_ctr": bias.excess})
        if pairs.height:
            mlflow_tracking.log_table(pairs, "fidelity_pairs")
            mlflow_tracking.log_table(intervals, "offline_intervals")
            mlflow_tracking.log_metrics(
                {f"pairs_{k.replace(' ', '_')}": v for k, v in summary.items() if isinstance(v, (int, float))}
            )
        if power is not None and power.pairs.height:
            mlflow_tracking.log_table(power.pairs, "power")
            mlflow_tracking.log_table(power.plan, "power_plan")
            for row in power.pairs.iter_rows(named=True):
                pair = f"{row['arm_a']}_vs_{row['arm_b']}"
                mlflow_tracking.log_metrics(
                    {
                        f"mde_ctr_{pair}": row["minimum_detectable_difference"],
                        **(
                            {f"sensitivity_{pair}": row["sensitivity_ratio"]}
                            if row["sensitivity_ratio"] is not None
                            else {}
                        ),
                    }
                )
        run_id = mlflow_tracking.active_run_id()
    context.log.info(f"report written to {html_path} and {path} (MLflow run {run_id})")
    return Output(
        str(path),
        metadata={
            "path": str(path),
            "html report": MetadataValue.path(str(html_path)),
            "mlflow_run_id": run_id,
            "trajectory viewer": MetadataValue.url(viewer),
            "summary": MetadataValue.json(headline),
            "report": MetadataValue.md(text),
        },
    )


def _trust_section(folder, taste, rating, social: pl.DataFrame, list_quality, sensitivity=None) -> list[str]:
    """ "How far to trust the agents": the alignment results and their figures under `folder`/plots."""
    from ops.figures import save_figure
    from ops.studies.alignment.plots import (
        calibration_figure,
        list_quality_figure,
        rating_figure,
        sensitivity_figure,
        social_figure,
        taste_figure,
    )
    from ops.studies.alignment.trust import trust_section

    # A protocol that could not be measured ({"not_measured": why, ...}) has no figure; its reason is said.
    records = {"taste": taste, "rating": rating, "list_quality": list_quality}
    not_measured = {k: r for k, r in records.items() if isinstance(r, dict)}
    skipped = sensitivity.get("not_measured") if isinstance(sensitivity, dict) else None
    taste, rating, list_quality, sensitivity = (
        None if isinstance(r, dict) else r for r in (taste, rating, list_quality, sensitivity)
    )
    plots = folder / "plots"
    figures = {}
    if taste is not None:
        figure = taste_figure(taste.summary, getattr(taste, "per_item", None), getattr(taste, "holdout", None))
        figures["taste"] = save_figure(figure, plots / "alignment_taste.png")
    if rating is not None:
        figures["rating"] = save_figure(
            rating_figure(rating.distribution, rating.prediction), plots / "alignment_rating.png"
        )
    if list_quality is not None:
        figures["list_quality"] = save_figure(
            list_quality_figure(list_quality.readout.arms, list_quality.ratios),
            plots / "alignment_list_quality.png",
        )
    if social is not None and social.height:
        figures["social"] = save_figure(social_figure(social), plots / "alignment_social.png")
    if sensitivity is not None:
        figures["sensitivity"] = save_figure(sensitivity_figure(sensitivity), plots / "sensitivity_ladder.png")
    calibration = getattr(list_quality, "calibration", None)
    if calibration is not None:
        figures["calibration"] = save_figure(
            calibration_figure(calibration.grid, calibration.real_elasticity, calibration.click_scale),
            plots / "list_response_calibration.png",
        )
    brain = next((r.brain for r in (taste, rating, list_quality) if r is not None), "")
    return trust_section(
        taste,
        rating,
        social,
        list_quality,
        brain=brain,
        plots=figures,
        folder=folder,
        calibration=calibration,
        not_measured=not_measured,
        sensitivity=sensitivity,
        sensitivity_skipped=skipped,
    )

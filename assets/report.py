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
    from ops.fidelity import agreement_summary, fidelity, offline_intervals, pairwise_agreement
    from ops.metrics import per_user_metrics, relevant_items

    offline = pl.concat([offline_metrics[a] for a in sorted(offline_metrics)]) if offline_metrics else pl.DataFrame({"arm": []})
    fid = fidelity(ab_readout.arms, offline) if offline_metrics else pl.DataFrame()
    # Over the test users who have a top-20 list (train users, whom the agents are built
    # from); offline_metrics also ranks users first seen in the test window.
    relevant = relevant_items(test_ratings)
    per_user = [
        per_user_metrics(top20_lists[a], relevant.join(top20_lists[a].select("user_id").unique(), on="user_id", how="semi")).with_columns(arm=pl.lit(a))
        for a in sorted(top20_lists)
    ]
    per_user = pl.concat(per_user) if per_user else pl.DataFrame(schema={"user_id": pl.Int64, "recall_at_k": pl.Float64, "ndcg_at_k": pl.Float64, "arm": pl.Utf8})
    intervals = offline_intervals(per_user, seed=ab_readout.config.seed)
    pairs = pairwise_agreement(ab_readout.per_agent, per_user, paired=ab_readout.design == "paired", seed=ab_readout.config.seed)
    summary = agreement_summary(pairs)
    folder = data_root() / "reports" / context.run.run_id
    folder.mkdir(parents=True, exist_ok=True)
    plots = ab_readout.write_figures(folder / "plots")
    if pairs.height:
        plots.append(_pairs_figure(pairs, folder / "plots" / "fidelity_pairs.png"))
    text = _report_markdown(ab_readout, offline, fid, plots, folder, intervals, pairs, summary, augmentation_metrics)
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
        if pairs.height:
            mlflow.log_table(pairs.to_pandas(), artifact_file="tables/fidelity_pairs.json")
            mlflow.log_table(intervals.to_pandas(), artifact_file="tables/offline_intervals.json")
            mlflow.log_metrics({f"pairs_{k.replace(' ', '_')}": float(v) for k, v in summary.items() if v is not None})
        run_id = mlflow.active_run().info.run_id
    context.log.info(f"report written to {path} (MLflow run {run_id})")
    return Output(str(path), metadata={"path": str(path), "mlflow_run_id": run_id, "report": MetadataValue.md(text)})


def _report_markdown(
    readout, offline, fid, plots, folder: Path, intervals: pl.DataFrame, pairs: pl.DataFrame, summary: dict, augmentation: dict | None = None
) -> str:
    lines = ["# simab report", "", readout.to_markdown(), "## Offline metrics (test split)", ""]
    if offline.height:
        cols = [c for c in ("arm", "test_auc", "test_log_loss", "recall_at_k", "ndcg_at_k", "users_ranked") if c in offline.columns]
        lines += [offline.select(cols).sort("arm").to_pandas().to_markdown(index=False, floatfmt=".4f"), ""]
    if intervals.height:
        wide = intervals.with_columns(
            cell=pl.format("{} [{}, {}]", pl.col("mean").round(4), pl.col("ci_low").round(4), pl.col("ci_high").round(4))
        ).pivot(on="metric", index=["arm", "users"], values="cell")
        lines += [
            "Over the test users who have a top-20 list (the train users agents are built from), with 95 % bootstrap intervals over them:",
            "",
            wide.to_pandas().to_markdown(index=False),
            "",
        ]
    lines += _augmentation_section(augmentation or {})
    if fid.height:
        lines += ["## Fidelity: do simulated and offline metrics rank the arms alike? (Kendall τ-b)", ""]
        lines += [fid.to_pandas().to_markdown(index=False, floatfmt=".3f"), ""]
    if pairs.height:
        lines += ["## Fidelity arm against arm: simulated CTR vs offline NDCG@20, 95 % intervals on both sides", ""]
        decided = summary["agree"] + summary["disagree"]
        share = f"{summary['agreement']:.0%}" if summary["agreement"] is not None else "n/a"
        lines += [
            f"Of {summary['pairs']} pairs, the offline metric separates {summary['pairs'] - summary['offline tie']}; the simulation "
            f"orders {summary['agree']} of the {decided} pairs both separate as the offline metric does ({share}); "
            f"offline ties: {summary['offline tie']}, simulation ties: {summary['simulation tie']}.",
            "",
        ]
        show = pairs.select(
            "arm_a", "arm_b",
            pl.format("{} [{}, {}]", pl.col("offline_difference").round(4), pl.col("offline_ci_low").round(4), pl.col("offline_ci_high").round(4)).alias("NDCG@20 a − b"),
            pl.format("{} [{}, {}]", pl.col("simulated_difference").round(4), pl.col("simulated_ci_low").round(4), pl.col("simulated_ci_high").round(4)).alias("CTR a − b"),
            "verdict",
        )
        lines += [show.to_pandas().to_markdown(index=False), ""]
    lines += ["## Figures", ""] + [f"![{p.stem}]({p.relative_to(folder)})" for p in plots]
    return "\n".join(lines) + "\n"


def _augmentation_section(augmentation: dict) -> list[str]:
    """Table 5: test AUC of each downstream model on the original train split and with the
    clicks / views simulated under an arm added; arms with no model to refit are named."""
    lines = ["## Data augmentation (A/B Agent Table 5)", ""]
    tables = [augmentation[a] for a in sorted(augmentation) if augmentation[a].height]
    if tables:
        table = pl.concat(tables)
        cols = ["simulated_arm", "brain", "arm", "training_set", "seed", "added_rows", "test_auc", "auc_difference", "recall_at_k", "ndcg_at_k"]
        lines += [
            "Each model (arm) trained on the train split (original) and on it plus the clicks or views simulated under "
            "simulated_arm, with the same configuration and seed; auc_difference is against the original.",
            "",
            table.select(cols).to_pandas().to_markdown(index=False, floatfmt=".4f"),
            "",
        ]
        if table.group_by("arm", "training_set").len().get_column("len").max() > 1:
            from ops.augmentation import seed_summary

            lines += ["Over training seeds (95 % t-interval of the AUC difference):", "",
                      seed_summary(table).to_pandas().to_markdown(index=False, floatfmt=".4f"), ""]
    empty = [a for a in sorted(augmentation) if not augmentation[a].height]
    if empty:
        lines += [f"Not applicable (no CTR model to refit for this arm's partition): {', '.join(empty)}.", ""]
    if not augmentation:
        lines += ["Not run: materialise augmentation_metrics for an arm.", ""]
    return lines


def _pairs_figure(pairs: pl.DataFrame, path: Path) -> Path:
    """Offline difference against simulated difference per pair of arms, with both
    intervals: points in the upper-right quadrant are pairs the simulation orders right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for r in pairs.drop_nulls(["offline_difference", "simulated_difference"]).iter_rows(named=True):
        x, y = r["offline_difference"], r["simulated_difference"]
        ax.errorbar(x, y, xerr=[[x - r["offline_ci_low"]], [r["offline_ci_high"] - x]], yerr=[[y - r["simulated_ci_low"]], [r["simulated_ci_high"] - y]], fmt="o", capsize=3)
        ax.annotate(f"{r['arm_a']} − {r['arm_b']}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.axhline(0, color="grey", lw=0.8)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("offline NDCG@20 difference (a − b)")
    ax.set_ylabel("simulated CTR difference (a − b)")
    ax.set_title("Fidelity arm against arm (95 % intervals)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

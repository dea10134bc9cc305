"""The Markdown report of a run (design.md lifecycle step 11): the simulated A/B read-out
beside the offline metrics, the data-augmentation table and how far to trust the
simulation (ops.readout.fidelity).  The `simab_report` asset writes it and logs it to MLflow."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ops.readout.augmentation import seed_summary


def report_markdown(
    readout, offline: pl.DataFrame, fid: pl.DataFrame, plots: list[Path], folder: Path, intervals: pl.DataFrame, pairs: pl.DataFrame,
    summary: dict, augmentation: dict | None = None, power=None, trust: list[str] | None = None,
) -> str:
    """The report people read: the A/B read-out (`ABReadout`), the offline metrics with
    their intervals, Table 5, both fidelity views, the power of the simulated test
    (`ops.readout.power.PowerAnalysis`), "How far to trust the agents" (`trust`, Markdown
    lines from `ops.readout.alignment.trust.trust_section`), and the figures (paths under
    `folder`)."""
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
    lines += augmentation_section(augmentation or {})
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
    if power is not None and power.pairs.height:
        lines += [power.to_markdown()]
    lines += list(trust or [])
    lines += ["## Figures", ""] + [f"![{p.stem}]({p.relative_to(folder)})" for p in plots]
    return "\n".join(lines) + "\n"


def augmentation_section(augmentation: dict) -> list[str]:
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
            lines += ["Over training seeds (95 % t-interval of the AUC difference):", "",
                      seed_summary(table).to_pandas().to_markdown(index=False, floatfmt=".4f"), ""]
    empty = [a for a in sorted(augmentation) if not augmentation[a].height]
    if empty:
        lines += [f"Not applicable (no CTR model to refit for this arm's partition): {', '.join(empty)}.", ""]
    if not augmentation:
        lines += ["Not run: materialise augmentation_metrics for an arm.", ""]
    return lines

"""The Markdown report of a run (docs/definitions.md#lifecycle, step 11): the verdict first
(`ops.readout.verdict`), then the simulated A/B read-out beside the offline metrics, the
data-augmentation table, how far to trust the simulation (ops.readout.fidelity) and the run's
LLM bill.  `ops.studies.report_writer` gathers what it holds and writes it; the `simab_report`
asset logs it to MLflow."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ops.figures import table_markdown
from ops.readout.augmentation_summary import seed_summary
from ops.readout.verdict import Verdict, pair_counts, verdict_markdown


def report_markdown(
    readout,
    offline: pl.DataFrame,
    fid: pl.DataFrame,
    plots: list[Path],
    folder: Path,
    intervals: pl.DataFrame,
    pairs: pl.DataFrame,
    verdict: Verdict,
    augmentation: dict | None = None,
    power=None,
    trust: list[str] | None = None,
) -> str:
    """The report people read: first the `verdict` (the same lines the console prints,
    `verdict_lines`) and one figure of the arms with their intervals on the primary metric;
    then the A/B read-out (`ABReadout`), the offline metrics with their intervals, Table 5,
    both fidelity views (the pairs' counts from the verdict), the power of the simulated
    test (`ops.readout.power.PowerAnalysis`), "How far to trust the agents" (`trust`,
    Markdown lines from `ops.studies.alignment.trust.trust_section`), and the figures
    (paths under `folder`)."""
    lines = ["# simab report", "", *verdict_markdown(verdict, plots, folder)]
    lines += ["## The simulated A/B read-out in detail", "", readout.to_markdown()]
    lines += ["## Offline metrics (test split)", ""]
    if offline.height:
        cols = [
            c
            for c in ("arm", "test_auc", "test_log_loss", "recall_at_k", "ndcg_at_k", "users_ranked")
            if c in offline.columns
        ]
        lines += [table_markdown(offline.select(cols).sort("arm"), ".4f"), ""]
    if intervals.height:
        wide = intervals.with_columns(
            cell=pl.format(
                "{} [{}, {}]", pl.col("mean").round(4), pl.col("ci_low").round(4), pl.col("ci_high").round(4)
            )
        ).pivot(on="metric", index=["arm", "users"], values="cell")
        sample = verdict.offline_users.removeprefix("over test users")
        lines += [
            "Over the test users who have a top-20 list (the train users agents are built from)"
            + (f", {sample.removeprefix('over ')}" if sample else "")
            + ", with 95 % bootstrap intervals over them:",
            "",
            table_markdown(wide),
            "",
        ]
    lines += augmentation_section(augmentation or {})
    if fid.height:
        lines += ["## Fidelity: do simulated and offline metrics rank the arms alike? (Kendall τ-b)", ""]
        lines += [table_markdown(fid, ".3f"), ""]
    if pairs.height:
        summary = verdict.fidelity.counts
        lines += ["## Fidelity arm against arm: simulated CTR vs offline NDCG@20, 95 % intervals on both sides", ""]
        lines += [
            f"{summary['pairs']} pairs of arms; {pair_counts(summary)}.  *agree* / *disagree*: both intervals clear of 0, "
            "ordered alike / the other way; *missed*: the offline metric separates the arms and the simulation does "
            "not; *offline tie*: the offline interval holds 0, nothing to agree with.",
            "",
        ]
        show = pairs.select(
            "arm_a",
            "arm_b",
            pl.format(
                "{} [{}, {}]",
                pl.col("offline_difference").round(4),
                pl.col("offline_ci_low").round(4),
                pl.col("offline_ci_high").round(4),
            ).alias("NDCG@20 a − b"),
            pl.format(
                "{} [{}, {}]",
                pl.col("simulated_difference").round(4),
                pl.col("simulated_ci_low").round(4),
                pl.col("simulated_ci_high").round(4),
            ).alias("CTR a − b"),
            "verdict",
        )
        lines += [table_markdown(show), ""]
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
        cols = [
            "simulated_arm",
            "brain",
            "arm",
            "training_set",
            "seed",
            "added_rows",
            "test_auc",
            "auc_difference",
            "recall_at_k",
            "ndcg_at_k",
        ]
        lines += [
            "Each model (arm) trained on the train split (original) and on it plus the clicks or views simulated under "
            "simulated_arm, with the same configuration and seed; auc_difference is against the original.",
            "",
            table_markdown(table.select(cols), ".4f"),
            "",
        ]
        if table.group_by("arm", "training_set").len().get_column("len").max() > 1:
            lines += [
                "Over training seeds (95 % t-interval of the AUC difference):",
                "",
                table_markdown(seed_summary(table), ".4f"),
                "",
            ]
    empty = [a for a in sorted(augmentation) if not augmentation[a].height]
    if empty:
        lines += [f"Not applicable (no CTR model to refit for this arm's partition): {', '.join(empty)}.", ""]
    if not augmentation:
        lines += ["Not run: materialise augmentation_metrics for an arm.", ""]
    return lines


def bill_lines(bill: dict) -> list[str]:
    """The run's LLM bill (`ops.simulation.budget.RunBudget.bill`) as Markdown: per asset
    the estimate made before its first call (where one was made) beside what it spent, and
    the total against the cap."""
    cap = f"${bill['cap']:,.2f}" if bill["cap"] else "no limit"
    rows = ["| asset | estimated (USD) | spent (USD) |", "| --- | ---: | ---: |"]
    for asset in sorted(set(bill["estimates"]) | set(bill["spend"])):
        estimate = bill["estimates"].get(asset)
        rows.append(
            f"| {asset} | {'–' if estimate is None else f'{estimate:,.4f}'} | {bill['spend'].get(asset, 0.0):,.4f} |"
        )
    total = sum(bill["estimates"].values())
    rows.append(f"| **run** | {total:,.4f} | **{bill['spent']:,.4f}** |")
    return [
        "## LLM bill",
        "",
        f"Spent ${bill['spent']:,.4f} of max_cost_usd {cap} over the whole run (every asset that called the "
        "model; cache hits cost nothing).",
        "",
        *rows,
        "",
    ]

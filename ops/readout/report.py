"""The Markdown report of a run (design.md lifecycle step 11): the simulated A/B read-out
beside the offline metrics, the data-augmentation table and how far to trust the
simulation (ops.readout.fidelity).  The `simab_report` asset writes it and logs it to MLflow.

`report_html` turns whatever the Markdown report holds (every section, whoever added it)
into one self-contained HTML page: the figures embedded as data URIs, so the file can be
mailed, opened from an MLflow artefact or served by the viewer as it is."""

from __future__ import annotations

import base64
import html
import mimetypes
from pathlib import Path

import polars as pl

from ops.readout.augmentation_summary import seed_summary


def report_markdown(
    readout, offline: pl.DataFrame, fid: pl.DataFrame, plots: list[Path], folder: Path, intervals: pl.DataFrame, pairs: pl.DataFrame,
    summary: dict, augmentation: dict | None = None, power=None, trust: list[str] | None = None,
) -> str:
    """The report people read: the A/B read-out (`ABReadout`), the offline metrics with
    their intervals, Table 5, both fidelity views, the power of the simulated test
    (`ops.readout.power.PowerAnalysis`), "How far to trust the agents" (`trust`, Markdown
    lines from `ops.studies.alignment.trust.trust_section`), and the figures (paths under
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


def report_summary(readout, intervals: pl.DataFrame, fid: pl.DataFrame, summary: dict) -> dict:
    """The few figures a person reads first, as plain data (the console's closing table,
    Dagster metadata): per arm CTR, CVR, AR and offline NDCG@20, each [mean, low, high];
    and the fidelity verdict — Kendall τ of CTR against NDCG@20, whether both pick the same
    best arm, and the arm-against-arm counts."""
    def cells(frame: pl.DataFrame, key: str) -> dict:
        return {(r["arm"], r[key]): [r["mean"], r["ci_low"], r["ci_high"]] for r in frame.iter_rows(named=True)}

    simulated = cells(readout.arms, "metric")
    offline = cells(intervals, "metric") if intervals.height else {}
    arms = {
        arm: {
            "ctr": simulated.get((arm, "ctr")), "cvr": simulated.get((arm, "cvr")),
            "average_rating": simulated.get((arm, "average_rating")), "ndcg_at_k": offline.get((arm, "ndcg_at_k")),
        }
        for arm in sorted(set(readout.arms.get_column("arm").to_list()))
    }
    tau = fid.filter((pl.col("simulated") == "ctr") & (pl.col("offline") == "ndcg_at_k")).to_dicts() if fid.height else []
    return {
        "control": readout.control,
        "arms": arms,
        "fidelity": {
            "kendall_tau_ctr_ndcg": tau[0]["kendall_tau"] if tau else None,
            "same_best_arm": tau[0]["same_best_arm"] if tau else None,
            **{k: v for k, v in summary.items()},
        },
    }


def fidelity_verdict(fidelity: dict) -> str:
    """One sentence on how far to trust the ordering of the arms (`report_summary`'s fidelity)."""
    tau, best = fidelity.get("kendall_tau_ctr_ndcg"), fidelity.get("same_best_arm")
    if tau is None:
        return "fidelity: not measured (fewer than two arms with offline metrics)"
    parts = [f"Kendall τ(CTR, NDCG@20) = {tau:.2f}", "same best arm" if best else "a different best arm"]
    if fidelity.get("pairs"):
        decided = fidelity.get("agree", 0) + fidelity.get("disagree", 0)
        parts.append(f"arm against arm: {fidelity.get('agree', 0)} of the {decided} pairs both sides separate ordered alike, "
                     f"{fidelity.get('offline tie', 0)} offline ties")
    return "fidelity: " + "; ".join(parts)


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


def report_html(markdown: str, folder: Path, title: str = "simab report") -> str:
    """The Markdown report as one HTML page; images whose path lies under `folder` are
    embedded as data URIs (others keep their address)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(markdown)
    root = Path(folder).resolve()
    for token in tokens:
        for child in token.children or []:
            if child.type == "image":
                src = str(child.attrGet("src") or "")
                embedded = _data_uri(root, src)
                if embedded is not None:
                    child.attrSet("src", embedded)
    body = md.renderer.render(tokens, md.options, {})
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{_REPORT_CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )


_REPORT_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:70rem;margin:1rem auto;padding:0 1rem;color:#222}"
    "table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0 1rem}th,td{border:1px solid #ddd;padding:.2rem .45rem}"
    "th{background:#f4f4f4}img{max-width:100%}"
)


def _data_uri(root: Path, src: str) -> str | None:
    """A relative image path under `root` as a data URI; None for anything else (an
    absolute path, a URL, a path leaving the folder, a missing file)."""
    if not src or "://" in src or src.startswith(("/", "data:")):
        return None
    path = (root / src).resolve()
    if root not in path.parents or not path.is_file():
        return None
    kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode("ascii")

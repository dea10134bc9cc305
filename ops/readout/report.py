"""The Markdown report of a run (docs/definitions.md#lifecycle, step 11): the simulated A/B read-out
beside the offline metrics, the data-augmentation table and how far to trust the
simulation (ops.readout.fidelity).  The `simab_report` asset writes it and logs it to MLflow.

`report_html` turns whatever the Markdown report holds (every section, whoever added it)
into one self-contained HTML page: the figures embedded as data URIs, so the file can be
mailed, opened from an MLflow artefact or served by the viewer as it is.

One concept, the report: its sections, the verdict lines that open it, and its HTML page."""

from __future__ import annotations

import base64
import html
import mimetypes
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from markdown_it import MarkdownIt

from ops.figures import table_markdown
from ops.readout.agent_metrics import LABELS
from ops.readout.augmentation_summary import seed_summary
from ops.readout.power import MISS_AGENTS


def report_markdown(
    readout,
    offline: pl.DataFrame,
    fid: pl.DataFrame,
    plots: list[Path],
    folder: Path,
    intervals: pl.DataFrame,
    pairs: pl.DataFrame,
    summary: dict,
    augmentation: dict | None = None,
    power=None,
    trust: list[str] | None = None,
    headline: dict | None = None,
) -> str:
    """The report people read: first the verdict (`headline`, from `report_summary`: the
    same lines the console prints, `verdict_lines`) and one figure of the arms with their
    intervals on the primary metric; then the A/B read-out (`ABReadout`), the offline
    metrics with their intervals, Table 5, both fidelity views, the power of the simulated
    test (`ops.readout.power.PowerAnalysis`), "How far to trust the agents" (`trust`,
    Markdown lines from `ops.studies.alignment.trust.trust_section`), and the figures
    (paths under `folder`)."""
    lines = ["# simab report", ""]
    if headline is not None:
        lines += verdict_markdown(headline, plots, folder)
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
        sample = (headline or {}).get("offline_users", "over test users").removeprefix("over test users")
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


def report_summary(
    readout,
    intervals: pl.DataFrame,
    fid: pl.DataFrame,
    summary: dict,
    taste=None,
    rating=None,
    warnings: list[str] | None = None,
    primary: str = "ctr",
    not_measured: dict[str, str] | None = None,
    list_response: dict | None = None,
    exclude: Sequence[str] = (),
    power=None,
    list_quality=None,
    sensitivity=None,
) -> dict:
    """The few figures a person reads first, as plain data (the console's closing summary,
    the report's first section, Dagster metadata): per arm CTR, CVR, AR and offline NDCG@20,
    each [mean, low, high]; the verdict on the `primary` metric — the arm with the largest
    difference against the control, with its interval and Holm-corrected p; the fidelity
    verdict — Kendall τ of CTR against NDCG@20, whether both pick the same best arm, and the
    arm-against-arm counts; the trust figures — taste F1 per ratio (the papers' per-item
    protocol where it ran, else the sandbox one; `taste` a TasteDiscrimination) and the
    brain's rating RMSE beside the best offline arm's (`rating` a RatingAlignment), the
    list-quality spread (`list_quality` a ListQuality); the missed pairs with their power
    (`power` a PowerAnalysis); the sensitivity ladder (`sensitivity`: its `headline()`
    dict, or {"measured": False, "reason": …}); and the `warnings` of the checks that warned;
    `not_measured`: the trust protocols that could not be measured, each with its reason and
    estimate in a few words; `list_response` (`ops.studies.alignment.calibration.
    list_response_status`): whether the embedded brain's click decision was calibrated to list
    quality — a brain left uncalibrated is a warning of its own, first of them.  Arms in
    `exclude` (diagnostic arms such as the mirror, `ops/arms/kinds/mirror.py`) are never named the winner."""

    def cells(frame: pl.DataFrame, key: str) -> dict:
        return {(r["arm"], r[key]): [r["mean"], r["ci_low"], r["ci_high"]] for r in frame.iter_rows(named=True)}

    simulated = cells(readout.arms, "metric")
    offline = cells(intervals, "metric") if intervals.height else {}
    arms = {
        arm: {
            "ctr": simulated.get((arm, "ctr")),
            "cvr": simulated.get((arm, "cvr")),
            "average_rating": simulated.get((arm, "average_rating")),
            "ndcg_at_k": offline.get((arm, "ndcg_at_k")),
        }
        for arm in sorted(set(readout.arms.get_column("arm").to_list()))
    }
    tau = (
        fid.filter((pl.col("simulated") == "ctr") & (pl.col("offline") == "ndcg_at_k")).to_dicts() if fid.height else []
    )
    trust = _trust_figures(taste, rating, list_quality)
    warned = list(warnings or [])
    if list_response is not None:
        trust["list_response"] = list_response
        if not list_response.get("calibrated"):
            warned.insert(
                0,
                "the embedded brain's click decision is not calibrated to list quality "
                f"({list_response.get('reason') or 'not run'}): its agents may tie arms that real users tell apart",
            )
    headline = {
        "control": readout.control,
        "verdict": _winner(readout, primary, exclude),
        "trust": {**trust, **({"not_measured": not_measured} if not_measured else {})},
        "warnings": warned,
        "arms": arms,
        "fidelity": {
            "kendall_tau_ctr_ndcg": tau[0]["kendall_tau"] if tau else None,
            "same_best_arm": tau[0]["same_best_arm"] if tau else None,
            **{k: v for k, v in summary.items()},
            "misses": power.misses() if power is not None else [],
        },
    }
    if sensitivity is not None:
        headline["sensitivity"] = sensitivity
    return headline


def _winner(readout, metric: str, exclude: Sequence[str] = ()) -> dict:
    """The non-control arm with the largest difference against the control on `metric`."""
    comps = readout.comparisons.filter(
        (pl.col("metric") == metric) & pl.col("difference").is_not_null() & ~pl.col("arm").is_in(list(exclude))
    )
    if not comps.height:
        return {"metric": metric, "arm": None, "control": readout.control}
    best = comps.sort("difference", descending=True).row(0, named=True)
    return {
        "metric": metric,
        "arm": best["arm"],
        "control": readout.control,
        "difference": best["difference"],
        "ci_low": best["ci_low"],
        "ci_high": best["ci_high"],
        "p_holm": best["p_holm"],
        "significant": bool(best["significant"]),
    }


def _trust_figures(taste, rating, list_quality=None) -> dict:
    out: dict = {}
    spread = list_quality.spread() if list_quality is not None and not isinstance(list_quality, dict) else None
    if spread is not None:
        out["list_quality_spread"] = spread
    if taste is not None and not isinstance(taste, dict):
        per_item = getattr(taste, "per_item", None)
        summary = per_item if per_item is not None else taste.summary
        out["taste_protocol"] = "per item" if per_item is not None else getattr(taste, "protocol", "sandbox")
        out["taste_f1"] = {
            r["ratio"]: r["mean"] for r in summary.filter(pl.col("metric") == "f1").iter_rows(named=True)
        }
        holdout = getattr(taste, "holdout", None)
        if holdout is not None:
            out["taste_f1_papers_holdout"] = {
                r["ratio"]: r["mean"] for r in holdout.filter(pl.col("metric") == "f1").iter_rows(named=True)
            }
    if rating is not None and not isinstance(rating, dict):
        rows = {r["predictor"]: r for r in rating.prediction.iter_rows(named=True)}
        if "brain" in rows:
            out["rmse"] = rows["brain"]["rmse"]
        arms = [r for r in rows.values() if r["kind"] in ("offline arm", "best offline arm") and r["rmse"] is not None]
        if arms:
            best = min(arms, key=lambda r: r["rmse"])
            out["rmse_best_arm"], out["best_arm"] = best["rmse"], best["predictor"]
    return out


def verdict_lines(headline: dict) -> list[str]:
    """The verdict in plain sentences — the console's summary and the report's first
    section both print these, so they say the same: the winning arm against the control on
    the primary metric, the fidelity verdict, the gap sizes (`ops.readout.gaps`), the trust
    figures, whether the agents see list quality (one figure, named:
    `ops.studies.alignment.trust.list_quality_seen`), the simulator's bias, then one line
    per warning (each starting "WARNING:")."""
    lines = []
    v = headline.get("verdict") or {}
    metric = LABELS.get(v.get("metric"), str(v.get("metric", "CTR")).upper())
    if v.get("arm") is None:
        lines.append(f"Verdict on {metric}: no arm to compare with the control {headline.get('control')}")
    else:
        diff = f"{v['difference']:+.4f} [{v['ci_low']:+.4f}, {v['ci_high']:+.4f}]"
        p = "n/a" if v.get("p_holm") is None else f"{v['p_holm']:.3g}"
        if v.get("significant") and v["difference"] > 0:
            lines.append(
                f"Winner on {metric}: {v['arm']}, {diff} against the control {v['control']} "
                f"(95 % interval; Holm p = {p})"
            )
        else:
            lines.append(
                f"No arm beats the control {v['control']} on {metric}: the best, {v['arm']}, differs by {diff} "
                f"(95 % interval; Holm p = {p})"
            )
    fidelity = headline.get("fidelity", {})
    lines.append(fidelity_verdict(fidelity))
    lines += [line for line in (misses_verdict(fidelity.get("misses") or []),) if line]
    if (headline.get("gap_sizes") or {}).get("line"):
        lines.append(headline["gap_sizes"]["line"])
    lines += [line for line in (sensitivity_verdict(headline.get("sensitivity")),) if line]
    t = headline.get("trust") or {}
    parts = []
    if t.get("taste_f1"):
        parts.append(
            f"taste F1 ({t.get('taste_protocol')} protocol) "
            + ", ".join(f"{r} {f:.2f}" for r, f in t["taste_f1"].items() if f is not None)
        )
    if t.get("taste_f1_papers_holdout"):
        parts.append(
            "under the papers' hold-out "
            + ", ".join(f"{r} {f:.2f}" for r, f in t["taste_f1_papers_holdout"].items() if f is not None)
        )
    if t.get("rmse") is not None:
        best = (
            f" (best offline arm, {t['best_arm']}: {t['rmse_best_arm']:.3f})"
            if t.get("rmse_best_arm") is not None
            else ""
        )
        parts.append(f"rating RMSE {t['rmse']:.3f}{best}")
    if t.get("not_measured"):
        parts.append("not measured: " + "; ".join(f"{k} ({why})" for k, why in t["not_measured"].items()))
    response = t.get("list_response") or {}
    if response.get("calibrated"):
        ratios = ", ".join(f"1:{m}" for m in response.get("ratios") or [])
        parts.append(
            f"click decision calibrated to list quality on {response.get('agents')} agents "
            f"(lists of {response.get('list_length')} at {ratios}; elasticity {response['before']:.2f} -> "
            f"{response['after']:.2f}, real {response['real']:.2f}"
            + (f"; click level × {response['level']:g}" if response.get("level", 1.0) != 1.0 else "")
            + ")"
        )
    elif response:
        parts.append("click decision NOT calibrated to list quality")
    spread = t.get("list_quality_spread")
    seen = headline.get("list_quality_seen") or {}
    if spread is not None:
        underpowered = (seen.get("spread") or {}).get("status") == "underpowered"
        parts.append(
            f"list-quality spread {spread['label']} {spread['best']} − {spread['worst']} "
            f"{spread['difference']:+.3f} [{spread['ci_low']:+.3f}, {spread['ci_high']:+.3f}]"
            + (f" (underpowered: {spread['agents']} agents)" if underpowered else "")
        )
    lines.append("trust in the agents: " + ("; ".join(parts) if parts else "not measured"))
    if seen.get("line"):
        lines.append(seen["line"])
    if headline.get("simulator_bias"):
        lines.append(headline["simulator_bias"])
    lines += [f"WARNING: {w}" for w in headline.get("warnings", [])]
    return lines


VERDICT_HEADING = "Verdict"


def verdict_markdown(headline: dict, plots: list[Path], folder: Path) -> list[str]:
    """The report's first section: `verdict_lines` (warnings as a quoted block), then the
    primary metric's figure of the arms with their intervals (`plots/ab_<metric>.png`)."""
    lines = [f"## {VERDICT_HEADING}", ""]
    said = verdict_lines(headline)
    lines += [f"- {line}" for line in said if not line.startswith("WARNING:")] + [""]
    warnings = [f"> **{line}**" for line in said if line.startswith("WARNING:")]
    if warnings:
        lines += "\n>\n".join(warnings).split("\n") + [""]
    metric = (headline.get("verdict") or {}).get("metric", "ctr")
    figure = next((p for p in plots if Path(p).name == f"ab_{metric}.png"), None)
    if figure is not None:
        lines += [f"![arms on {metric}]({Path(figure).relative_to(folder)})", ""]
    return lines


def pair_counts(summary: dict) -> str:
    """The arm-against-arm counts in words (`ops.readout.fidelity.agreement_summary`): the
    pairs the offline metric separates, split into agree / disagree / missed, then the
    offline ties — a missed pair counts against the simulation, so a simulator that ties
    everything reads "0 agree, …, N missed", not "0 of 0"."""
    separated = summary.get("separated", 0)
    ties = summary.get("offline tie", 0)
    tied = f"{ties} offline tie{'' if ties == 1 else 's'}"
    if not separated:
        return f"the offline metric separates none ({tied})"
    return (
        f"of the {separated} pairs the offline metric separates: {summary.get('agree', 0)} agree, "
        f"{summary.get('disagree', 0)} disagree, {summary.get('missed', 0)} missed; {tied}"
    )


def fidelity_verdict(fidelity: dict) -> str:
    """One sentence on how far to trust the ordering of the arms (`report_summary`'s fidelity)."""
    tau, best = fidelity.get("kendall_tau_ctr_ndcg"), fidelity.get("same_best_arm")
    if tau is None:
        return "fidelity: not measured (fewer than two arms with offline metrics)"
    parts = [f"Kendall τ(CTR, NDCG@20) = {tau:.2f}", "same best arm" if best else "a different best arm"]
    if fidelity.get("pairs"):
        parts.append(f"arm against arm, {pair_counts(fidelity)}")
    return "fidelity: " + "; ".join(parts)


def misses_verdict(misses: list[dict]) -> str | None:
    """One sentence on the missed pairs (`ops.readout.power.PowerAnalysis.misses`): for each,
    whether too few agents explain it — this run's MDE against the difference the offline
    metric implies at the run's response elasticity."""
    if not misses:
        return None
    parts = []
    for m in misses:
        mde, expected, needed = (
            m["minimum_detectable_difference"],
            m["expected_difference"],
            m["expected_agents_needed"],
        )
        implied = "n/a" if expected is None else f"{expected:+.4f}"
        detail = f"MDE {mde:.4f} at {m['agents']} agents, offline-implied difference {implied}"
        if needed is not None and m["miss"] == MISS_AGENTS:
            detail += f": about {needed:,} agents"
        parts.append(f"{m['arm_a']} vs {m['arm_b']} {m['miss']} ({detail})")
    return "missed pairs: " + "; ".join(parts)


def sensitivity_verdict(sensitivity: dict | None) -> str | None:
    """One sentence on the smallest degradation of the control's lists the simulation detects
    (`ops.studies.alignment.sensitivity.Sensitivity.headline`); None when the study is absent."""
    if sensitivity is None:
        return None
    if not sensitivity.get("measured"):
        return f"sensitivity: not measured ({sensitivity.get('reason', 'not run')})"
    length, agents, control = sensitivity["list_length"], sensitivity["agents"], sensitivity["control"]
    smallest = sensitivity.get("smallest_detected")
    if smallest is None:
        worst = sensitivity["steps"][-1]
        return (
            f"sensitivity: at {agents} agents the simulation detects no degradation of {control}'s lists, "
            f"up to {worst['slots']} of {length} slots replaced by random unseen items"
        )
    step = next(s for s in sensitivity["steps"] if s["slots"] == smallest)
    first = sensitivity["steps"][0]
    finer = ""
    if sensitivity.get("detectable_slots") is not None and sensitivity["detectable_slots"] < smallest:
        mde = sensitivity["adjacent"][0]["minimum_detectable_difference"]
        finer = (
            f"; about {sensitivity['detectable_slots']:.1f} slots at the MDE of one step ({mde:.4f}; "
            f"CTR {sensitivity['slope']:+.4f} per slot)"
        )
    return (
        f"sensitivity: at {agents} agents the smallest degradation of {control}'s lists the simulation detects is "
        f"{smallest} of {length} slots replaced by random unseen items (CTR {first['ctr']:.3f} → {step['ctr']:.3f}, "
        f"{step['difference']:+.4f} [{step['ci_low']:+.4f}, {step['ci_high']:+.4f}]){finer}"
    )


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


def report_html(markdown: str, folder: Path, title: str = "simab report") -> str:
    """The Markdown report as one HTML page; images whose path lies under `folder` are
    embedded as data URIs (others keep their address)."""
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
    body = _verdict_section(md.renderer.render(tokens, md.options, {}))
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_REPORT_CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )


_REPORT_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:70rem;margin:1rem auto;padding:0 1rem;color:#222}"
    "table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0 1rem}th,td{border:1px solid #ddd;padding:.2rem .45rem}"
    "th{background:#f4f4f4}img{max-width:100%}"
    "#verdict{border:2px solid #4c72b0;border-radius:6px;padding:.2rem 1rem;margin:0 0 1.5rem}"
    "#verdict img{max-height:22rem}"
    "#verdict blockquote{background:#fff4e5;border-left:4px solid #e08a00;margin:.5rem 0;padding:.3rem .8rem}"
)


def _verdict_section(body: str) -> str:
    """The verdict's heading and everything up to the next section inside <section
    id="verdict">, so that it can be styled and found (the screenshot test)."""
    start = body.find(f"<h2>{VERDICT_HEADING}</h2>")
    if start < 0:
        return body
    end = body.find("<h2>", start + 4)
    end = len(body) if end < 0 else end
    return body[:start] + '<section id="verdict">\n' + body[start:end] + "</section>\n" + body[end:]


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

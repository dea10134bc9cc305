"""The verdict of a run: the few figures a person reads first, as plain data
(`report_summary`: the console's closing summary, the report's first section, Dagster and
MLflow), and the same verdict in plain sentences (`verdict_lines`), which the console and the
report's first section both print so that they say the same."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from ops.readout.agent_metrics import LABELS
from ops.readout.power import MISS_AGENTS


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


def registry_roles(headline: dict) -> dict[str, str]:
    """The arm each Model Registry alias names after this verdict ({alias: arm}): `control` the
    control arm; `winner` the arm the verdict calls the winner (better than the control on the
    primary metric, significantly: "Winner on …" in `verdict_lines`), else the control itself,
    since no arm beat it."""
    control = headline.get("control")
    v = headline.get("verdict") or {}
    beats = v.get("arm") is not None and v.get("significant") and (v.get("difference") or 0) > 0
    winner = v["arm"] if beats else control
    return {alias: arm for alias, arm in (("winner", winner), ("control", control)) if arm}


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
    if response.get("on") == "random_exposure":
        parts.append(
            f"click decision calibrated on the random-exposure sample's calibration half ({response['users']} users, "
            f"{response['clicks']} clicks of {response['rows']} random items; log-odds × {response['click_scale']:.2f})"
        )
    elif response.get("calibrated"):
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
    # The truth, where the run has one (ops.readout.truth): after the log's figures, before the warnings.
    lines += (headline.get("truth") or {}).get("lines") or []
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

"""How far to trust the agents: the fidelity warning and the report's
section of that name, every protocol beside the paper's figure for it.

The fidelity warning reads the read-out's fidelity (`ops.readout.fidelity`): it fails — as
a warning, the run is not stopped — when Kendall's τ between the simulated metric and the
offline one is below a floor, or undefined; when the arm pairs' τ, which counts a missed pair
(`fidelity_warning` says how), is below the same floor; or when the simulation orders any
pair of arms against the offline metric with both intervals clear of 0 ("disagree").
Whether the agents see list quality (`list_quality_seen`) is said from one figure, named:
the sensitivity ladder when it ran with more agents than the list-quality protocol, else the
protocol's spread; the warning that the brain cannot tell lists apart comes only from the
figure that decides, and a spread too noisy to tell a blind brain from one that responds
as the ladder does is "underpowered (N agents)", not blind.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ops.figures import table_markdown
from ops.readout.fidelity import DISAGREE, MISSED, agreement_summary
from ops.studies.alignment import papers
from ops.studies.alignment.social import verdicts

Z95 = 1.959964  # the 95 % intervals' two-sided quantile (docs/definitions.md#metrics)


@dataclass
class FidelityWarning:
    passed: bool
    description: str
    tau: float | None
    disagreements: list[str] = field(default_factory=list)
    pair_tau: float | None = None
    misses: list[str] = field(default_factory=list)


def fidelity_warning(
    fid: pl.DataFrame, pairs: pl.DataFrame, tau_floor: float, simulated: str = "ctr", offline: str = "ndcg_at_k"
) -> FidelityWarning:
    """Whether the simulation can be trusted to rank the arms: τ(simulated, offline) at or
    above `tau_floor`, the pairs' τ at or above it too, and no pair of arms in disagreement.

    How misses count.  τ over the arms' means gives a pair the simulation cannot tell apart
    the sign of its noise: a simulator that ties every arm still scores a τ, and a lucky one
    a high τ.  The pairs' τ (`ops.readout.fidelity.agreement_summary`'s `pair_tau`) is
    Kendall's concordance over the pairs the offline metric separates, with the simulation's
    intervals deciding each pair: agree +1, disagree −1, missed 0 — a missed pair is counted
    as a tie, the same as τ-b does with tied values, so it is not evidence either way but it
    does dilute the score: a simulator that ties everything scores 0, and one that agrees on
    k of n separated pairs and misses the rest scores k / n.  A miss costs half of what a
    disagreement costs against an agreement (seeing nothing is better than seeing it the
    wrong way round), and the one floor applies to both τs, so a run passes only when its
    arms' ordering and its pair-by-pair evidence both reach it.  With no pair separated
    offline the pairs' τ is undefined and says nothing (the offline metric has no ground
    truth to offer); τ over the means still applies."""
    row = fid.filter((pl.col("simulated") == simulated) & (pl.col("offline") == offline)) if fid.height else fid
    tau = row.get_column("kendall_tau")[0] if row.height else None

    def named(verdict: str) -> list[str]:
        if not pairs.height:
            return []
        return [
            f"{r['arm_a']} vs {r['arm_b']}" for r in pairs.filter(pl.col("verdict") == verdict).iter_rows(named=True)
        ]

    disagree, missed = named(DISAGREE), named(MISSED)
    summary = agreement_summary(pairs) if pairs.height else {"pair_tau": None, "separated": 0}
    pair_tau = summary["pair_tau"]
    problems = []
    if tau is None:
        problems.append(
            f"Kendall τ({simulated}, {offline}) is undefined (fewer than two arms with both metrics, or no spread)"
        )
    elif tau < tau_floor:
        problems.append(f"Kendall τ({simulated}, {offline}) = {tau:.3f} is below the floor {tau_floor:.2f}")
    if pair_tau is not None and pair_tau < tau_floor:
        problems.append(
            f"over the {summary['separated']} pair(s) {offline} separates, the pairs' τ (a missed pair counted as a tie) "
            f"= {pair_tau:.3f} is below the floor {tau_floor:.2f}"
            + (f"; missed: {', '.join(missed)}" if missed else "")
        )
    if disagree:
        problems.append(
            f"the simulation orders {len(disagree)} pair(s) of arms against {offline}, both intervals clear of 0: {', '.join(disagree)}"
        )
    if problems:
        text = "Do not trust this simulated A/B result as it stands: " + "; ".join(problems) + "."
    else:
        pairs_said = f", the pairs' τ {pair_tau:.3f}" if pair_tau is not None else ""
        text = (
            f"Kendall τ({simulated}, {offline}) = {tau:.3f}{pairs_said} ≥ {tau_floor:.2f} and no pair of arms disagrees"
            + (f" ({len(missed)} missed)" if missed else "")
            + "."
        )
    return FidelityWarning(not problems, text, tau, disagree, pair_tau, missed)


def list_quality_warning(list_quality, floor: float, sensitivity: dict | None = None) -> str | None:
    """The warning when the brain cannot tell lists apart (`list_quality_seen`'s); None when
    the agents see list quality, when the figure that decides is underpowered, or when
    neither the protocol nor the ladder ran."""
    return list_quality_seen(list_quality, sensitivity, floor)["warning"]


def list_quality_seen(list_quality, sensitivity: dict | None, floor: float) -> dict:
    """Whether the agents see list quality, from ONE figure, named: the sensitivity ladder
    (`sensitivity`, its `Sensitivity.headline()` dict) when it ran with more agents than the
    list-quality protocol, else the protocol's spread (`ListQuality.spread`).  Returns
    source ("sensitivity ladder", "list-quality spread" or None), sees (True, False, or
    None when not established), the verdict's line, the warning (None unless the figure
    that decides says the brain cannot tell lists apart), and the spread's own status
    (`spread_status`), so that the trust line and this line say the same.

    The spread is judged against a reference it should show (`spread_status`): the spread
    the ladder's response implies on the protocol's lists (`implied_spread`), at least the
    floor."""
    spread = list_quality.spread() if list_quality is not None and not isinstance(list_quality, dict) else None
    ladder = sensitivity if sensitivity and sensitivity.get("measured") else None
    implied = implied_spread(spread, ladder_elasticity(ladder)) if spread is not None and ladder else None
    status = spread_status(spread, floor, implied) if spread is not None else None
    out = {"source": None, "sees": None, "line": None, "warning": None, "spread": status}
    if ladder is not None and (spread is None or ladder["agents"] > spread["agents"]):
        out["source"] = "sensitivity ladder"
        length, control, agents = ladder["list_length"], ladder["control"], ladder["agents"]
        smallest = ladder.get("smallest_detected")
        beside = "" if status is None else f"; the list-quality spread {status['said']}"
        if smallest is not None:
            out["sees"] = True
            out["line"] = (
                f"the agents see list quality: yes, by the sensitivity ladder ({agents} agents, more than the "
                f"list-quality protocol's): it detects {smallest} of {length} slots of {control}'s lists replaced{beside}"
            )
        else:
            worst = ladder["steps"][-1]["slots"]
            out["sees"] = False
            out["line"] = (
                f"the agents see list quality: no, by the sensitivity ladder ({agents} agents): no degradation of "
                f"{control}'s lists detected, up to {worst} of {length} slots replaced{beside}"
            )
            out["warning"] = (
                f"the brain cannot tell lists apart: at {agents} agents the sensitivity ladder detects no "
                f"degradation of {control}'s lists, even {worst} of {length} slots replaced by random unseen items; "
                "a difference between arms in this run says little about real users"
            )
        return out
    if status is None:
        out["line"] = "the agents see list quality: not measured (neither the list-quality protocol nor the ladder ran)"
        return out
    out["source"] = "list-quality spread"
    out["sees"] = {"sees": True, "blind": False}.get(status["status"])
    said = f"{status['difference']:+.3f} [{status['ci_low']:+.3f}, {status['ci_high']:+.3f}]"
    if status["status"] == "sees":
        out["line"] = (
            f"the agents see list quality: yes, by the list-quality spread ({status['agents']} agents): {said}"
        )
    elif status["status"] == "underpowered":
        out["line"] = f"the agents see list quality: not established, the list-quality spread {status['said']}"
    else:
        out["line"] = f"the agents see list quality: no, by the list-quality spread ({status['agents']} agents): {said}"
        below = f"below the {status['reference']:.3f} {status['reference_from']}"
        out["warning"] = (
            f"the brain cannot tell lists apart: its {spread['label']} on the list-quality protocol's best lists "
            f"({spread['best']}) minus on the worst ({spread['worst']}) is {said} over {spread['agents']} agents, "
            + (f"its interval holding 0 and lying {below}" if status["ci_low"] <= 0 else f"its interval {below}")
            + " ($SIMAB_LIST_QUALITY_SPREAD_FLOOR); a difference between arms in this run says little about real users"
        )
    return out


def spread_status(spread: dict, floor: float, implied: float | None = None) -> dict:
    """The list-quality spread judged (docs/definitions.md#list-quality-spread).

    - *sees*: the spread is at least `floor`, its interval above 0;
    - *blind* — the brain cannot tell lists apart — only when its interval lies below the
      reference spread δ: the spread the ladder's response implies for these lists
      (`implied`), at least `floor`.  "Cannot tell lists apart" is a claim of absence; it
      stands only where the data rule out the response that matters;
    - *underpowered* otherwise: the interval holds 0 (or values under the floor) and δ too.
      Said with the agents it would take for the 95 % interval to be narrower than δ, so that
      it could not hold both: ⌈(2 z σ ÷ δ)²⌉, σ the SD of one agent's paired difference,
      z = 1.96 — the power criterion that matches this decision rule."""
    d, lo, hi, agents = spread["difference"], spread["ci_low"], spread["ci_high"], spread["agents"]
    reference = max(floor, implied) if implied is not None else floor
    reference_from = (
        "the ladder's response implies for these lists" if implied is not None and implied > floor else "floor"
    )
    variance = spread.get("agent_variance")
    resolving = (
        math.ceil((2 * Z95 * math.sqrt(variance) / reference) ** 2) if variance is not None and reference > 0 else None
    )
    if d >= floor and lo > 0:
        status = "sees"
    elif hi < reference:
        status = "blind"
    else:
        status = "underpowered"
    if status == "underpowered":
        detail = (
            f"its interval holds 0 and the {reference:.3f} {reference_from}"
            if lo <= 0
            else f"below the floor {floor:.3f}, its interval reaching the {reference:.3f} {reference_from}"
        )
        if resolving is not None and resolving > agents:
            detail += f"; about {resolving:,} agents would tell the two apart"
        said = f"is underpowered ({agents} agents: {detail})"
    elif status == "sees":
        said = f"agrees ({agents} agents: {d:+.3f} [{lo:+.3f}, {hi:+.3f}])"
    else:
        said = (
            f"shows less than the {reference:.3f} {reference_from} ({agents} agents: {d:+.3f} [{lo:+.3f}, {hi:+.3f}])"
        )
    return {
        "status": status,
        "said": said,
        "agents": agents,
        "difference": d,
        "ci_low": lo,
        "ci_high": hi,
        "reference": reference,
        "reference_from": reference_from,
        "implied": implied,
        "agents_to_resolve": resolving,
    }


def ladder_elasticity(ladder: dict | None) -> float | None:
    """How the ladder's CTR responds to the share of the control's own items its lists keep:
    the least-squares slope through the origin of log(CTR_k ÷ CTR_0) on log((L − k) ÷ L) over
    the rungs k that keep some (0 < k < L) with a CTR above 0; None without two such rungs or
    a CTR on the intact lists."""
    if not ladder or not ladder.get("measured"):
        return None
    length = ladder["list_length"]
    ctr = {s["slots"]: s["ctr"] for s in ladder["steps"]}
    base = ctr.get(0)
    points = [
        (math.log((length - k) / length), math.log(c / base))
        for k, c in ctr.items()
        if 0 < k < length and c is not None and c > 0 and base
    ]
    if len(points) < 2 or not base or base <= 0:
        return None
    x, y = np.array(points).T
    return float(x @ y / (x @ x))


def implied_spread(spread: dict | None, elasticity: float | None) -> float | None:
    """The spread the list-quality protocol would show if its agents responded to its lists
    as they respond to the ladder: both mix real items (the control's, or the user's liked
    ones) with uniformly drawn unseen ones, so with CTR ∝ share^e, CTR_worst × ((share_best ÷
    share_worst)^e − 1).  None without a positive elasticity or the protocol's shares."""
    if spread is None or elasticity is None or elasticity <= 0:
        return None
    worst, best, level = spread.get("worst_share"), spread.get("best_share"), spread.get("worst_mean")
    if not worst or not best or level is None or worst <= 0:
        return None
    return float(level * ((best / worst) ** elasticity - 1))


def sensitivity_headline(sensitivity) -> dict | None:
    """The verdict's figures of the sensitivity ladder (`Sensitivity.headline`); for a ladder
    not measured ({"not_measured": why}) {"measured": False, "reason": why}; None when the
    study is absent."""
    if sensitivity is None:
        return None
    if isinstance(sensitivity, dict):
        return {"measured": False, "reason": sensitivity.get("not_measured", "not run")}
    return sensitivity.headline()


def trust_section(
    taste=None,
    rating=None,
    social: pl.DataFrame | None = None,
    list_quality=None,
    brain: str = "",
    plots: dict[str, Path] | None = None,
    folder: Path | None = None,
    calibration=None,
    not_measured: Mapping[str, Mapping] | None = None,
    sensitivity=None,
    sensitivity_skipped: str | None = None,
) -> list[str]:
    """The report's "How far to trust the agents" lines (Markdown).  Each argument is a
    protocol's result (None: not run): `taste` TasteDiscrimination, `rating`
    RatingAlignment, `social` the social-traits table, `list_quality` ListQuality,
    `calibration` the embedded brain's ListResponse, `sensitivity` the ladder's Sensitivity
    (`sensitivity_skipped`: why it was not measured); `plots` maps a protocol to its figure;
    `not_measured` maps "taste", "rating", "list_quality" to the record a protocol stored
    when it could not be measured (its reason and estimate are said in its place)."""
    plots = plots or {}
    not_measured = not_measured or {}

    def not_run(name: str, default: str = "Not run.") -> list[str]:
        record = not_measured.get(name)
        return [not_measured_text(record) if record else default, ""]

    lines = ["## How far to trust the agents", ""]
    lines += [
        f"The papers' alignment protocols on the held-out test window{f' for the {brain} brain' if brain else ''} "
        "(the embedded brain is fitted on train + validation; the agents remember the train window).",
        "",
    ]

    def figure(name: str) -> list[str]:
        path = plots.get(name)
        if path is None:
            return []
        shown = (
            Path(path).relative_to(folder) if folder is not None and Path(path).is_relative_to(folder) else Path(path)
        )
        return [f"![{name}]({shown})", ""]

    lines += ["### Taste discrimination (SimUSER Table 1, Agent4Rec Table 1)", ""]
    if taste is not None:
        if getattr(taste, "per_item", None) is not None:
            if taste.thresholds:
                cuts = ", ".join(f"{k} {v:.3f}" for k, v in taste.thresholds.items())
                how = (
                    " (the embedded brain: its click-and-watch log-probability against a threshold per ratio "
                    f"fitted on the validation window: {cuts})"
                )
            else:
                how = " (one structured answer listing the ids)"
            lines += [
                "Two protocols, named: *sandbox* — what catches the agent's eye on the sandbox's pages of five "
                "in one session; *per item* — the papers' — the agent sees the whole list and answers for every "
                f"item whether it would watch it{how}.",
                "",
            ]
            if getattr(taste, "holdout", None) is not None:
                lines += [
                    "*per item, papers' hold-out*: the per-item protocol with the papers' positives — ratings drawn at "
                    "random from each user's train window and kept out of its agent (rebuilt) and of the brain "
                    "(refitted), the thresholds fitted on a second drawn set. The test-window rows ask about the "
                    "future, as an A/B test does; these ask what the papers asked.",
                    "",
                ]
        lines += [table_markdown(taste.table(), ".3f"), ""]
        lines += ["The papers, MovieLens (accuracy / precision / recall / F1):", ""]
        lines += [table_markdown(_paper_taste(), ".3f"), "", f"Protocol difference: {papers.TASTE_DIFFERENCE}", ""]
        lines += figure("taste")
    else:
        lines += not_run("taste")

    lines += ["### Rating prediction (SimUSER Table 2) and rating distribution (Agent4Rec Fig. 3)", ""]
    if rating is not None:
        shown = rating.prediction.select(
            "predictor",
            "kind",
            "pairs",
            "agents",
            pl.format(
                "{} [{}, {}]", pl.col("rmse").round(3), pl.col("rmse_ci_low").round(3), pl.col("rmse_ci_high").round(3)
            ).alias("RMSE"),
            pl.format(
                "{} [{}, {}]", pl.col("mae").round(3), pl.col("mae_ci_low").round(3), pl.col("mae_ci_high").round(3)
            ).alias("MAE"),
        )
        lines += [table_markdown(shown, ".3f"), ""]
        if rating.unanswered:
            lines += [f"{rating.unanswered} pairs got no rating from the brain (invalid answers) and are left out.", ""]
        paper = pl.DataFrame(
            [(k, v[0], v[1]) for k, v in papers.SIMUSER_TABLE2.items()],
            schema=["SimUSER Table 2 (MovieLens)", "RMSE", "MAE"],
            orient="row",
        )
        lines += [table_markdown(paper, ".3f"), ""]
        w = "n/a" if rating.wasserstein is None else f"{rating.wasserstein:.3f}"
        lines += [
            f"Rating distribution: Wasserstein distance {w} stars between the agents' and the real ratings of the same pairs.",
            "",
        ]
        lines += [table_markdown(rating.distribution, ".3f"), ""]
        lines += [f"Protocol difference: {papers.RATING_DIFFERENCE} {papers.DISTRIBUTION_DIFFERENCE}", ""]
        lines += figure("rating")
    else:
        lines += not_run("rating")

    lines += ["### Social traits (Agent4Rec Fig. 4, A/B Agent Fig. 6)", ""]
    if social is not None and social.height:
        lines += [
            table_markdown(
                social.select(
                    "trait",
                    "behaviour",
                    "side",
                    "agents",
                    "rho",
                    "ci_low",
                    "ci_high",
                    "p_value",
                    "mean_low",
                    "mean_medium",
                    "mean_high",
                ),
                ".3f",
            ),
            "",
        ]
        lines += [
            table_markdown(verdicts(social), ".3f"),
            "",
            f"Protocol difference: {papers.SOCIAL_DIFFERENCE}",
            "",
        ] + figure("social")
    else:
        lines += ["Not run (needs simulated sessions and held-out ratings).", ""]

    lines += ["### List quality (A/B Agent Fig. 5)", ""]
    if list_quality is not None:
        lines += [table_markdown(list_quality.table(), ".3f"), "", table_markdown(list_quality.elasticity, ".3f"), ""]
        rising = ", ".join(f"{m}: {'rises' if ok else 'does NOT rise'}" for m, ok in list_quality.rises.items())
        poorest, richest = list_quality.ratios[0], list_quality.ratios[-1]
        lines += [
            f"With the ratio (means increasing and {richest} above {poorest} with an interval clear of 0): {rising}.",
            "",
        ]
        spread = list_quality.spread()
        if spread is not None:
            lines += [
                f"Spread (a trust figure of the verdict): {spread['label']} on the best lists ({spread['best']}) minus on "
                f"the worst ({spread['worst']}) = {spread['difference']:+.4f} [{spread['ci_low']:+.4f}, "
                f"{spread['ci_high']:+.4f}] over {spread['agents']} agents, paired.  A brain that cannot tell lists "
                "apart scores 0 here, whatever arms it is shown.",
                "",
            ]
        lines += [f"Protocol difference: {papers.LIST_QUALITY_DIFFERENCE}", ""] + figure("list_quality")
    else:
        lines += not_run("list_quality")

    lines += ["### Sensitivity: the control's lists degraded step by step", ""]
    if sensitivity is not None:
        smallest = sensitivity.smallest_detected()
        said = (
            f"the smallest degradation it detects is {smallest} of {sensitivity.list_length} slots"
            if smallest is not None
            else "it detects none of these degradations"
        )
        lines += [
            f"The control arm's ({sensitivity.control}) top-{sensitivity.list_length} lists with a share of their slots "
            "replaced by random unseen items (neither in the user's train window nor in the list; the rungs nested, "
            f"seed {sensitivity.seed}), shown to the run's {sensitivity.agents} agents × {sensitivity.sessions} "
            f"session(s) by the {sensitivity.brain or 'run'} brain: {said} (CTR against the intact lists, 95 % "
            "interval below 0).  Step MDE: the smallest CTR step this run's agents detect with 80 % power"
            + (
                f"; the CTR falls {abs(sensitivity.slope):.4f} per slot replaced, so the first step's MDE is about "
                f"{sensitivity.detectable_slots:.1f} slots."
                if sensitivity.slope is not None and sensitivity.detectable_slots is not None
                else "."
            ),
            "",
            table_markdown(sensitivity.table(), ".3f"),
            "",
        ] + figure("sensitivity")
    else:
        lines += [f"Not measured: {sensitivity_skipped}." if sensitivity_skipped else "Not run.", ""]

    if calibration is not None:
        lines += [
            "### The embedded brain's response to list quality (calibrated on the validation window)",
            "",
            f"Elasticity of the sandbox {calibration.metric.upper()} to the share of relevant items: real users {calibration.real_elasticity:.2f}; "
            f"the brain {calibration.elasticity_before:.2f} before calibration, {calibration.elasticity_after:.2f} after "
            f"(click log-odds × {calibration.click_scale:g} {calibration.click_shift:+.2f}, the anchor lists' click "
            f"probability at {calibration.level:g} × the fitted model's; {calibration.agents} agents, seed {calibration.seed}).",
            "",
        ] + figure("calibration")
    return lines


def not_measured_text(record: Mapping) -> str:
    """A protocol's not-measured record (`{"not_measured": reason, "why", "estimate"}`) as
    the report's sentence."""
    estimate = record.get("estimate")
    return f"**Not measured**: {record['not_measured']}" + (f"; {estimate}" if estimate else "") + "."


def not_measured_summary(**records) -> dict[str, str]:
    """protocol name -> its reason in a few words and its estimate, for the protocols whose
    result is a not-measured record (the verdict's line on trust)."""
    return {
        name.replace("_", " "): "; ".join(p for p in (r.get("why") or r["not_measured"], r.get("estimate")) if p)
        for name, r in records.items()
        if isinstance(r, Mapping) and "not_measured" in r
    }


def _paper_taste() -> pl.DataFrame:
    rows = []
    for paper, table in (("SimUSER", papers.SIMUSER_TABLE1), ("Agent4Rec", papers.AGENT4REC_TABLE1)):
        rows += [(paper, ratio, *values) for ratio, values in table.items()]
    return pl.DataFrame(rows, schema=["paper", "ratio", "accuracy", "precision", "recall", "f1"], orient="row")

"""The verdict of a run (`ops.readout.verdict.Verdict`), built once from all it reads: the A/B
read-out, what the report measures beside it (`ops.readout`: fidelity, power, the simulator's
bias, the gap sizes, the truth) and the trust protocols' own results (`ops.studies.alignment`),
so here, above the studies.  `ops.studies.report_writer` builds it; nothing changes it after."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import polars as pl

from ops.readout.ab_readout import ABReadout
from ops.readout.bias import SimulatorBias
from ops.readout.fidelity import agreement_summary
from ops.readout.gaps import GapSizes
from ops.readout.power import PowerAnalysis
from ops.readout.slots import slot_warning
from ops.readout.truth import TruthJudgement
from ops.readout.verdict import ArmFigures, Fidelity, TrustFigures, Verdict, Winner
from ops.simulation.brains.embedded.brain import EmbeddedBrain
from ops.studies.alignment.calibration import list_response_status
from ops.studies.alignment.list_quality import ListQuality
from ops.studies.alignment.rating import RatingAlignment
from ops.studies.alignment.sensitivity import Sensitivity
from ops.studies.alignment.taste import TasteDiscrimination
from ops.studies.alignment.trust import fidelity_warning, list_quality_seen, not_measured_summary, sensitivity_headline

# What a protocol stores when it could not be measured: {"not_measured": why, "why": …, "estimate": …}.
NotMeasured = Mapping[str, str]


@dataclass(frozen=True)
class Trust:
    """The protocols' results the report reads: each a result, a `NotMeasured` record, or None (not run)."""

    taste: TasteDiscrimination | NotMeasured | None = None
    rating: RatingAlignment | NotMeasured | None = None
    social: pl.DataFrame | None = None
    list_quality: ListQuality | NotMeasured | None = None
    sensitivity: Sensitivity | NotMeasured | None = None
    embedded_brain: EmbeddedBrain | None = None  # the fitted embedded brain: its list response's status

    def measured(self, name: str):
        """The protocol's result; None where it did not run or stored a not-measured record."""
        result = getattr(self, name)
        return None if isinstance(result, Mapping) else result


@dataclass(frozen=True)
class VerdictInputs:
    """What the verdict reads (`Report.measured`): the A/B `readout`, Kendall τ of simulated against
    offline rankings (`fid`), the arms two by two (`pairs`), the floors of its warnings, the offline
    metrics' `intervals` per arm (over `offline_users`), the protocols' results, and where measured
    the power, the bias, the gap sizes, the truth, the clicks by slot; `diagnostic` arms never win."""

    readout: ABReadout
    fid: pl.DataFrame
    pairs: pl.DataFrame
    tau_floor: float
    spread_floor: float
    primary_metric: str = "ctr"
    intervals: pl.DataFrame = field(default_factory=pl.DataFrame)
    trust: Trust = field(default_factory=Trust)
    power: PowerAnalysis | None = None
    bias: SimulatorBias | None = None
    gaps: GapSizes | None = None
    truth: TruthJudgement | None = None
    slot_clicks: pl.DataFrame | None = None
    diagnostic: Sequence[str] = ()
    offline_users: str = "over test users"


def build_verdict(inputs: VerdictInputs) -> Verdict:
    """The verdict, with whether the agents see list quality from one figure, named
    (`list_quality_seen`), and its warnings: the embedded brain's click decision left
    uncalibrated first, then low fidelity, gap sizes off by more than a factor of 2, the
    simulator's bias, the slots' position effect, a brain blind to list quality, the truth's."""
    i, trust, readout = inputs, inputs.trust, inputs.readout
    sensitivity = sensitivity_headline(trust.sensitivity)
    seen = list_quality_seen(trust.measured("list_quality"), sensitivity, i.spread_floor)
    response = list_response_status(trust.embedded_brain.params) if trust.embedded_brain is not None else None
    uncalibrated = None if response is None or response.get("calibrated") else response.get("reason") or "not run"
    fidelity = fidelity_warning(i.fid, i.pairs, i.tau_floor) if i.fid.height else None
    warnings = [
        f"the embedded brain's click decision is not calibrated to list quality ({uncalibrated}): its agents "
        "may tie arms that real users tell apart"
        if uncalibrated
        else None,
        fidelity.description if fidelity is not None and not fidelity.passed else None,
        i.gaps.warning if i.gaps is not None else None,
        i.bias.warning if i.bias is not None else None,
        slot_warning(i.slot_clicks) if i.slot_clicks is not None else None,
        seen["warning"],
        *(i.truth.warnings() if i.truth is not None else []),
    ]
    simulated, offline = _cells(readout.arms), _cells(i.intervals)
    tau = i.fid.filter((pl.col("simulated") == "ctr") & (pl.col("offline") == "ndcg_at_k")) if i.fid.height else i.fid
    tau = tau.row(0, named=True) if tau.height else {}
    misses = i.power.misses() if i.power is not None else ()
    return Verdict(
        control=readout.control,
        winner=_winner(readout, i.primary_metric, i.diagnostic),
        trust=_trust_figures(trust, response),
        warnings=[w for w in warnings if w],
        arms={
            arm: ArmFigures(
                *(simulated.get((arm, m)) for m in ("ctr", "cvr", "average_rating")), offline.get((arm, "ndcg_at_k"))
            )
            for arm in sorted(set(readout.arms.get_column("arm").to_list()))
        },
        fidelity=Fidelity(tau.get("kendall_tau"), tau.get("same_best_arm"), agreement_summary(i.pairs), misses),
        sensitivity=sensitivity,
        simulator_bias=i.bias.verdict_line() if i.bias is not None else None,
        offline_users=i.offline_users,
        gap_sizes=i.gaps.headline() if i.gaps is not None else None,
        list_quality_seen=seen,
        truth=i.truth.headline() if i.truth is not None else None,
    )


def _cells(frame: pl.DataFrame) -> dict:
    """(arm, metric) -> (mean, low, high)."""
    return {(r["arm"], r["metric"]): (r["mean"], r["ci_low"], r["ci_high"]) for r in frame.iter_rows(named=True)}


def _winner(readout: ABReadout, metric: str, exclude: Sequence[str]) -> Winner:
    """The non-control arm with the largest difference against the control on `metric`."""
    comps = readout.comparisons.filter(
        (pl.col("metric") == metric) & pl.col("difference").is_not_null() & ~pl.col("arm").is_in(list(exclude))
    )
    if not comps.height:
        return Winner(metric, None, readout.control)
    best = comps.sort("difference", descending=True).row(0, named=True)
    figures = {k: best[k] for k in ("difference", "ci_low", "ci_high", "p_holm")}
    return Winner(metric, best["arm"], readout.control, **figures, significant=bool(best["significant"]))


def _trust_figures(trust: Trust, response: dict | None) -> TrustFigures:
    """Taste F1 per ratio by the papers' per-item protocol where it ran (else the sandbox one)
    and under the papers' hold-out; the brain's rating RMSE beside the best offline arm's."""
    taste, rating, list_quality = map(trust.measured, ("taste", "rating", "list_quality"))
    figures = {}
    if taste is not None:
        figures["taste_protocol"] = "per item" if taste.per_item is not None else taste.protocol
        figures["taste_f1"] = _f1(taste.per_item if taste.per_item is not None else taste.summary)
        figures["taste_f1_papers_holdout"] = _f1(taste.holdout) if taste.holdout is not None else None
    if rating is not None:
        rows = {r["predictor"]: r for r in rating.prediction.iter_rows(named=True)}
        figures["rmse"] = rows["brain"]["rmse"] if "brain" in rows else None
        arms = [r for r in rows.values() if r["kind"] in ("offline arm", "best offline arm") and r["rmse"] is not None]
        if arms:
            best = min(arms, key=lambda r: r["rmse"])
            figures["rmse_best_arm"], figures["best_arm"] = best["rmse"], best["predictor"]
    unmeasured = not_measured_summary(taste=trust.taste, rating=trust.rating, list_quality=trust.list_quality)
    return TrustFigures(
        list_quality_spread=list_quality.spread() if list_quality is not None else None,
        list_response=response,
        not_measured=unmeasured or None,
        **figures,
    )


def _f1(summary: pl.DataFrame) -> dict:
    return {r["ratio"]: r["mean"] for r in summary.filter(pl.col("metric") == "f1").iter_rows(named=True)}

"""The verdict of a run: the few figures a person reads first, as one frozen value (`Verdict`,
built once above the studies it reads: `ops.studies.verdict.build_verdict`), stored as plain
data (`Verdict.to_dict`: the `simab_report` asset's `summary` metadata, read back by
`Verdict.from_dict`), and the same verdict in plain sentences (`verdict_lines`), which the
console and the report's first section both print so that they say the same."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType

from ops.readout.agent_metrics import LABELS
from ops.readout.power import MISS_AGENTS

Cell = tuple[float | None, float | None, float | None]  # a figure with its 95 % interval: mean, low, high


@dataclass(frozen=True)
class _Part:
    """A part of the verdict: its dicts read-only and its lists tuples once built, so that nothing patches it."""

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _frozen(getattr(self, f.name)))

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, stored: Mapping):
        return cls(**{f.name: stored[f.name] for f in fields(cls) if f.name in stored})


@dataclass(frozen=True)
class ArmFigures(_Part):
    """One arm's simulated CTR, CVR and average rating and offline NDCG@20, each a `Cell` or None."""

    ctr: Cell | None = None
    cvr: Cell | None = None
    average_rating: Cell | None = None
    ndcg_at_k: Cell | None = None


@dataclass(frozen=True)
class Winner(_Part):
    """The non-control `arm` with the largest difference against the `control` on the primary
    `metric`, with its interval and Holm-corrected p (`arm` None: no arm to compare)."""

    metric: str = "ctr"
    arm: str | None = None
    control: str | None = None
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_holm: float | None = None
    significant: bool | None = None

    @property
    def beats_control(self) -> bool:
        """Better than the control, significantly: the arm `verdict_lines` names the winner."""
        return self.arm is not None and bool(self.significant) and (self.difference or 0) > 0

    def to_dict(self) -> dict:
        out = super().to_dict()
        return out if self.arm is not None else {k: out[k] for k in ("metric", "arm", "control")}


@dataclass(frozen=True)
class Fidelity(_Part):
    """Kendall τ of simulated CTR against offline NDCG@20 over the arms, whether both name the
    same best arm, the arm-against-arm `counts` (`ops.readout.fidelity.agreement_summary`) and
    the missed pairs with their power (`ops.readout.power.PowerAnalysis.misses`)."""

    tau: float | None = None
    same_best_arm: bool | None = None
    counts: Mapping[str, float | int | None] = field(default_factory=dict)
    misses: tuple[Mapping, ...] = ()

    def to_dict(self) -> dict:
        head = {"kendall_tau_ctr_ndcg": self.tau, "same_best_arm": self.same_best_arm}
        return head | _plain(self.counts) | {"misses": _plain(self.misses)}

    @classmethod
    def from_dict(cls, stored: Mapping) -> Fidelity:
        counts = {k: v for k, v in stored.items() if k not in ("kendall_tau_ctr_ndcg", "same_best_arm", "misses")}
        return cls(stored.get("kendall_tau_ctr_ndcg"), stored.get("same_best_arm"), counts, stored.get("misses", ()))


@dataclass(frozen=True)
class TrustFigures(_Part):
    """How far to trust the agents, where measured (None where not): the list-quality spread,
    taste F1 per ratio (its protocol's, and under the papers' hold-out), the brain's rating
    RMSE beside the best offline arm's, the click decision's calibration
    (`ops.studies.alignment.calibration.list_response_status`), the protocols not measured."""

    list_quality_spread: Mapping | None = None
    taste_protocol: str | None = None
    taste_f1: Mapping[str, float | None] | None = None
    taste_f1_papers_holdout: Mapping[str, float | None] | None = None
    rmse: float | None = None
    rmse_best_arm: float | None = None
    best_arm: str | None = None
    list_response: Mapping | None = None
    not_measured: Mapping[str, str] | None = None  # protocol -> its reason and estimate in a few words

    def to_dict(self) -> dict:
        return {k: v for k, v in super().to_dict().items() if v is not None}


@dataclass(frozen=True)
class Verdict(_Part):
    """The `control`, the `winner`, the `trust` figures, the `warnings` of the checks that
    warned, per arm its figures, the `fidelity`; then as each study gives them (None where it
    is absent): the sensitivity ladder (`Sensitivity.headline`), the simulator's bias
    (`SimulatorBias.verdict_line`), the test users the offline metrics are over, the gap
    sizes (`GapSizes.headline`), whether the agents see list quality
    (`ops.studies.alignment.trust.list_quality_seen`) and the truth (`TruthJudgement.headline`).
    The fields in the order they are stored."""

    control: str | None = None
    winner: Winner = field(default_factory=Winner)
    trust: TrustFigures = field(default_factory=TrustFigures)
    warnings: tuple[str, ...] = ()
    arms: Mapping[str, ArmFigures] = field(default_factory=dict)
    fidelity: Fidelity = field(default_factory=Fidelity)
    sensitivity: Mapping | None = None
    simulator_bias: str | None = None
    offline_users: str = "over test users"
    gap_sizes: Mapping | None = None
    list_quality_seen: Mapping | None = None
    truth: Mapping | None = None

    def to_dict(self) -> dict:
        """Plain data, in the shape and key order it has always been stored in (the winner as "verdict")."""
        return {("verdict" if k == "winner" else k): v for k, v in super().to_dict().items() if v is not None}

    @classmethod
    def from_dict(cls, stored: Mapping) -> Verdict:
        """A stored verdict; a part an older home did not store is left empty."""
        parts = {
            "winner": Winner.from_dict(stored.get("verdict") or {}),
            "trust": TrustFigures.from_dict(stored.get("trust") or {}),
        }
        parts["arms"] = {arm: ArmFigures.from_dict(cells or {}) for arm, cells in (stored.get("arms") or {}).items()}
        parts["fidelity"] = Fidelity.from_dict(stored.get("fidelity") or {})
        return cls(**{f.name: stored[f.name] for f in fields(cls) if stored.get(f.name) is not None} | parts)


def _frozen(value):
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return tuple(map(_frozen, value)) if isinstance(value, list | tuple) else value


def _plain(value):
    """A frozen value as JSON writes it: dicts and lists."""
    if isinstance(value, _Part):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return list(map(_plain, value)) if isinstance(value, tuple) else value


def registry_roles(verdict: Verdict) -> dict[str, str]:
    """The arm each Model Registry alias names after this verdict ({alias: arm}): `control` the
    control arm; `winner` the winner (`Winner.beats_control`), else the control, since no arm beat it."""
    winner = verdict.winner.arm if verdict.winner.beats_control else verdict.control
    return {alias: arm for alias, arm in (("winner", winner), ("control", verdict.control)) if arm}


def verdict_lines(verdict: Verdict) -> list[str]:
    """The verdict in plain sentences — the console's summary and the report's first
    section both print these, so they say the same: the winning arm against the control on
    the primary metric, the fidelity verdict, the gap sizes (`ops.readout.gaps`), the trust
    figures, whether the agents see list quality (one figure, named:
    `ops.studies.alignment.trust.list_quality_seen`), the simulator's bias, then one line
    per warning (each starting "WARNING:")."""
    lines = []
    v = verdict.winner
    metric = LABELS.get(v.metric, v.metric.upper())
    if v.arm is None:
        lines.append(f"Verdict on {metric}: no arm to compare with the control {verdict.control}")
    else:
        diff = f"{v.difference:+.4f} [{v.ci_low:+.4f}, {v.ci_high:+.4f}]"
        p = "n/a" if v.p_holm is None else f"{v.p_holm:.3g}"
        if v.beats_control:
            lines.append(
                f"Winner on {metric}: {v.arm}, {diff} against the control {v.control} (95 % interval; Holm p = {p})"
            )
        else:
            lines.append(
                f"No arm beats the control {v.control} on {metric}: the best, {v.arm}, differs by {diff} "
                f"(95 % interval; Holm p = {p})"
            )
    lines.append(fidelity_verdict(verdict.fidelity))
    lines += [line for line in (misses_verdict(verdict.fidelity.misses),) if line]
    if (verdict.gap_sizes or {}).get("line"):
        lines.append(verdict.gap_sizes["line"])
    lines += [line for line in (sensitivity_verdict(verdict.sensitivity),) if line]
    t = verdict.trust
    parts = []
    if t.taste_f1:
        parts.append(
            f"taste F1 ({t.taste_protocol} protocol) "
            + ", ".join(f"{r} {f:.2f}" for r, f in t.taste_f1.items() if f is not None)
        )
    if t.taste_f1_papers_holdout:
        parts.append(
            "under the papers' hold-out "
            + ", ".join(f"{r} {f:.2f}" for r, f in t.taste_f1_papers_holdout.items() if f is not None)
        )
    if t.rmse is not None:
        best = f" (best offline arm, {t.best_arm}: {t.rmse_best_arm:.3f})" if t.rmse_best_arm is not None else ""
        parts.append(f"rating RMSE {t.rmse:.3f}{best}")
    if t.not_measured:
        parts.append("not measured: " + "; ".join(f"{k} ({why})" for k, why in t.not_measured.items()))
    response = t.list_response or {}
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
    spread = t.list_quality_spread
    seen = verdict.list_quality_seen or {}
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
    if verdict.simulator_bias:
        lines.append(verdict.simulator_bias)
    # The truth, where the run has one (ops.readout.truth): after the log's figures, before the warnings.
    lines += (verdict.truth or {}).get("lines") or []
    lines += [f"WARNING: {w}" for w in verdict.warnings]
    return lines


VERDICT_HEADING = "Verdict"


def verdict_markdown(verdict: Verdict, plots: list[Path], folder: Path) -> list[str]:
    """The report's first section: `verdict_lines` (warnings as a quoted block), then the
    primary metric's figure of the arms with their intervals (`plots/ab_<metric>.png`)."""
    lines = [f"## {VERDICT_HEADING}", ""]
    said = verdict_lines(verdict)
    lines += [f"- {line}" for line in said if not line.startswith("WARNING:")] + [""]
    warnings = [f"> **{line}**" for line in said if line.startswith("WARNING:")]
    if warnings:
        lines += "\n>\n".join(warnings).split("\n") + [""]
    metric = verdict.winner.metric
    figure = next((p for p in plots if Path(p).name == f"ab_{metric}.png"), None)
    if figure is not None:
        lines += [f"![arms on {metric}]({Path(figure).relative_to(folder)})", ""]
    return lines


def pair_counts(summary: Mapping) -> str:
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


def fidelity_verdict(fidelity: Fidelity) -> str:
    """One sentence on how far to trust the ordering of the arms (`Verdict.fidelity`)."""
    if fidelity.tau is None:
        return "fidelity: not measured (fewer than two arms with offline metrics)"
    best = "same best arm" if fidelity.same_best_arm else "a different best arm"
    parts = [f"Kendall τ(CTR, NDCG@20) = {fidelity.tau:.2f}", best]
    if fidelity.counts.get("pairs"):
        parts.append(f"arm against arm, {pair_counts(fidelity.counts)}")
    return "fidelity: " + "; ".join(parts)


def misses_verdict(misses: Sequence[Mapping]) -> str | None:
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


def sensitivity_verdict(sensitivity: Mapping | None) -> str | None:
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

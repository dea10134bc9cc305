"""Power of the simulated A/B test: how large a CTR difference this run could detect, and
how many agents × sessions it would take to separate the arms the offline metrics separate.

The unit is the agent.  Each agent browses every arm (the paired design) in `S` independent
sessions; its metric in an arm is the mean over its sessions, and the test of arm a against
arm b is the paired test of the per-agent differences d_i (`ops.readout.ab_readout`).  The
variance of d_i has two parts:

    Var(d_i) = σ²_between + σ²_within / S

σ²_between is how much the agents' true preferences for a over b differ (more sessions
cannot remove it), σ²_within the session-to-session noise of one agent's difference (which
more sessions average away).  With S ≥ 2 both are estimated from the run by the one-way
random-effects analysis of variance of the session-level differences d_is (session s of the
agent in a against session s in b): σ²_within = the mean over agents of the sample variance
of d_is over s, σ²_between = max(0, Var_i(d̄_i) − σ²_within / S).  With S = 1 they cannot be
told apart: the figures hold for one session per agent, and the sessions column says so.

For a two-sided level-α test with power 1 − β, normal approximation (a few hundred agents
make the t-quantiles within 1 % of the normal ones), with z = z_{1−α/2} + z_{1−β}:

    minimum detectable difference at n agents, S sessions:  MDE = z · sqrt(σ²_between + σ²_within / S) / sqrt(n)
    agents needed for a difference δ at S sessions:          n = ceil(z² · (σ²_between + σ²_within / S) / δ²)

The δ to detect is the difference the run observed (the best estimate of the true one);
a pair whose simulated difference has the opposite sign to the offline one is a
disagreement, not a lack of power, and gets no agent count.

Sensitivity ratio of a pair: the relative simulated difference (CTR_a − CTR_b) / CTR_b
divided by the relative offline difference (NDCG_a − NDCG_b) / NDCG_b, b being the arm the
offline metric ranks lower: 1 means the agents react to a better list in proportion to how
much better the offline metric says it is; 0.1 means their CTR moves a tenth as much.

A missed pair (the offline metric separates it, the simulation's interval holds 0:
`ops.readout.fidelity`) is either a matter of agents or of the agents themselves.  Its
offline-implied simulated difference comes from how this run's agents respond to the offline
metric across every pair it separates: the elasticity e, the least-squares slope through the
origin of log(CTR_a / CTR_b) on log(NDCG_a / NDCG_b) over those pairs (missed ones included,
so that the pairs the simulation happened to separate do not inflate it), then

    expected difference = CTR_b · ((NDCG_a / NDCG_b)^e − 1)

The miss is explained by too few agents when the expected difference lies below this run's
MDE (the agents needed for it are given); when it lies above it, the run could have seen
the difference the other pairs imply, and the agents do not respond to this pair as they
respond to the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl
from pydantic import BaseModel, Field
from scipy.stats import norm

from ops.figures import table_markdown
from ops.readout.agent_metrics import LABELS
from ops.readout.fidelity import MISSED
from ops.readout.statistics import interval_sign

POWER = {
    "arm_a": pl.Utf8,  # the arm the offline metric ranks higher
    "arm_b": pl.Utf8,
    "metric": pl.Utf8,
    "agents": pl.Int64,
    "sessions": pl.Int64,
    "simulated_a": pl.Float64,
    "simulated_b": pl.Float64,
    "simulated_difference": pl.Float64,  # a − b, mean over agents
    "agent_sd": pl.Float64,  # SD of the per-agent difference at this run's sessions
    "between_variance": pl.Float64,  # σ²_between (null with one session)
    "within_variance": pl.Float64,  # σ²_within (null with one session)
    "minimum_detectable_difference": pl.Float64,
    "power_at_observed": pl.Float64,  # this run's power if the true difference were the observed one
    "offline": pl.Utf8,
    "offline_a": pl.Float64,
    "offline_b": pl.Float64,
    "offline_separates": pl.Boolean,  # the offline interval excludes 0
    "relative_simulated": pl.Float64,
    "relative_offline": pl.Float64,
    "sensitivity_ratio": pl.Float64,
    "agents_needed": pl.Int64,  # at this run's sessions; null when there is nothing to detect
    "agents_needed_one_session": pl.Int64,
    "sessions_needed": pl.Int64,  # at this run's agents; null when no number of sessions suffices
    # The simulated difference the offline one implies at this run's elasticity (module
    # docstring); null where either metric is not positive or no elasticity could be fitted.
    "expected_difference": pl.Float64,
    "expected_agents_needed": pl.Int64,  # agents to detect the expected difference, at this run's sessions
    # Missed pairs only (the fidelity verdict "missed"): MISS_AGENTS or MISS_RESPONSE, or
    # MISS_UNKNOWN where no expected difference could be derived.
    "miss": pl.Utf8,
    # "powered" (|difference| >= MDE), "underpowered", "opposite direction" (to the offline
    # metric's), "offline tie" (the offline interval holds 0: nothing to separate).
    "verdict": pl.Utf8,
}


MISS_AGENTS = "too few agents"
MISS_RESPONSE = "not for want of agents"
MISS_UNKNOWN = "no expected difference"

PLAN = {"arm_a": pl.Utf8, "arm_b": pl.Utf8, "sessions": pl.Int64, "agents_needed": pl.Int64, "agent_sessions": pl.Int64}


class PowerConfig(BaseModel):
    # docs/definitions.md#metrics: 95 % intervals, so a two-sided 5 % test.
    alpha: float = Field(0.05, gt=0, lt=1)
    # The convention of power analysis (Cohen 1988): an 80 % chance of detecting the effect.
    power: float = Field(0.8, gt=0, lt=1)
    # Session counts the power curves and the plan are drawn for.
    sessions_options: tuple[int, ...] = (1, 2, 5, 10)
    # No more sessions than this are proposed: beyond it the between-agent part dominates.
    max_sessions: int = Field(100, ge=1)


def power_analysis(
    per_session: pl.DataFrame,
    pairs: pl.DataFrame,
    offline_means: Mapping[str, float],
    metric: str = "ctr",
    config: PowerConfig | None = None,
) -> PowerAnalysis:
    """The power of this run for every arm pair of `pairs` (ops.readout.fidelity.PAIRWISE:
    arm_a the better offline, the offline interval, the offline metric's name), from the
    per-session metrics (arm, user_id, session, <metric>; ABReadout.per_session).
    `offline_means`: arm -> the offline metric's mean over the users the pairs were
    computed on, for the relative offline difference."""
    config = config or PowerConfig()
    rows, plan = [], []
    measured = []
    for pair in pairs.iter_rows(named=True):
        try:
            measured.append((pair, variance_components(per_session, pair["arm_a"], pair["arm_b"], metric)))
        except ValueError:
            continue  # an arm without simulated sessions: nothing to say about its power
    elasticity = response_elasticity(
        [
            (offline_means.get(p["arm_a"]), offline_means.get(p["arm_b"]), c.mean_a, c.mean_b)
            for p, c in measured
            if _offline_sign(p) != 0
        ]
    )
    for pair, comp in measured:
        a, b = pair["arm_a"], pair["arm_b"]
        variance = comp.variance_at(comp.sessions)
        mde = minimum_detectable_difference(variance, comp.agents, config.alpha, config.power)
        delta = comp.mean_difference
        offline_sign = _offline_sign(pair)
        off_a, off_b = offline_means.get(a), offline_means.get(b)
        relative_sim = delta / comp.mean_b if comp.mean_b else None
        relative_off = (off_a - off_b) / off_b if off_a is not None and off_b else None
        sensitivity = relative_sim / relative_off if relative_sim is not None and relative_off else None
        # Only a difference in the offline metric's direction is worth powering a test for.
        wanted = offline_sign != 0 and delta != 0 and np.sign(delta) == offline_sign
        needed_one = None
        if wanted and comp.between is not None:
            needed_one = agents_needed(delta, comp.variance_at(1), config.alpha, config.power)
        elif wanted and comp.sessions == 1:
            needed_one = agents_needed(delta, variance, config.alpha, config.power)
        expected = expected_difference(off_a, off_b, comp.mean_b, elasticity)
        expected_needed = (
            agents_needed(expected, variance, config.alpha, config.power)
            if expected is not None and expected > 0
            else None
        )
        rows.append(
            {
                "arm_a": a,
                "arm_b": b,
                "metric": metric,
                "agents": comp.agents,
                "sessions": comp.sessions,
                "simulated_a": comp.mean_a,
                "simulated_b": comp.mean_b,
                "simulated_difference": delta,
                "agent_sd": math.sqrt(variance),
                "between_variance": comp.between,
                "within_variance": comp.within,
                "minimum_detectable_difference": mde,
                "power_at_observed": achieved_power(delta, variance, comp.agents, config.alpha),
                "offline": pair.get("offline"),
                "offline_a": off_a,
                "offline_b": off_b,
                "offline_separates": offline_sign != 0,
                "relative_simulated": relative_sim,
                "relative_offline": relative_off,
                "sensitivity_ratio": sensitivity,
                "agents_needed": agents_needed(delta, variance, config.alpha, config.power) if wanted else None,
                "agents_needed_one_session": needed_one,
                "sessions_needed": sessions_needed(delta, comp, comp.agents, config) if wanted else None,
                "expected_difference": expected,
                "expected_agents_needed": expected_needed,
                "miss": _miss(expected, mde) if pair.get("verdict") == MISSED else None,
                "verdict": _verdict(offline_sign, delta, mde),
            }
        )
        if wanted:
            options = config.sessions_options if comp.between is not None else (comp.sessions,)
            for sessions in sorted(set(options) | {comp.sessions}):
                n = agents_needed(delta, comp.variance_at(sessions), config.alpha, config.power)
                plan.append((a, b, sessions, n, n * sessions if n is not None else None))
    plan_frame = pl.DataFrame(plan, schema=PLAN, orient="row")
    return PowerAnalysis(pl.DataFrame(rows, schema=POWER), plan_frame, config, elasticity)


def response_elasticity(pairs: list[tuple[float | None, float | None, float, float]]) -> float | None:
    """How the run's simulated metric responds to the offline one across arm pairs: the
    least-squares slope through the origin of log(sim_a / sim_b) on log(off_a / off_b), from
    (off_a, off_b, sim_a, sim_b) tuples; pairs with a metric that is not positive are left
    out.  None when no pair is left."""
    x, y = [], []
    for off_a, off_b, sim_a, sim_b in pairs:
        if off_a is None or off_b is None or min(off_a, off_b, sim_a, sim_b) <= 0 or off_a == off_b:
            continue
        x.append(math.log(off_a / off_b))
        y.append(math.log(sim_a / sim_b))
    if not x:
        return None
    xs, ys = np.asarray(x), np.asarray(y)
    return float(xs @ ys / (xs @ xs))


def expected_difference(
    offline_a: float | None, offline_b: float | None, simulated_b: float, elasticity: float | None
) -> float | None:
    """The simulated difference a − b that the offline means imply at `elasticity`
    (module docstring); None where it cannot be derived."""
    if elasticity is None or offline_a is None or offline_b is None or offline_a <= 0 or offline_b <= 0:
        return None
    return float(simulated_b * ((offline_a / offline_b) ** elasticity - 1.0))


@dataclass
class PowerAnalysis:
    """Per pair of arms the power of this run (`pairs`, POWER rows) and, for the pairs the
    offline metric separates and the simulation orders the same way, the agents needed at
    each number of sessions per agent (`plan`, PLAN rows)."""

    pairs: pl.DataFrame
    plan: pl.DataFrame
    config: PowerConfig
    elasticity: float | None = None  # the run's response elasticity (`response_elasticity`)

    def misses(self) -> list[dict]:
        """The missed pairs: arm_a, arm_b, miss, the MDE, the expected difference and the
        agents it needs (the verdict's line on misses)."""
        rows = self.pairs.filter(pl.col("miss").is_not_null()).sort("arm_a", "arm_b")
        return [
            {
                "arm_a": r["arm_a"],
                "arm_b": r["arm_b"],
                "miss": r["miss"],
                "agents": r["agents"],
                "minimum_detectable_difference": r["minimum_detectable_difference"],
                "expected_difference": r["expected_difference"],
                "expected_agents_needed": r["expected_agents_needed"],
            }
            for r in rows.iter_rows(named=True)
        ]

    def to_markdown(self) -> str:
        c = self.config
        if self.pairs.is_empty():
            return ""
        run = self.pairs.row(0, named=True)
        metric = LABELS.get(run["metric"], run["metric"])
        lines = [
            f"## Power of the simulated A/B test ({metric}; paired design, two-sided α = {c.alpha:g}, power {c.power:.0%})",
            "",
            f"This run: {run['agents']} agents × {run['sessions']} session(s) per agent and arm, the agent the unit "
            "(its metric averaged over its sessions).  MDE: the smallest true difference this run detects with the stated "
            "power; agents needed: to detect the observed difference; sensitivity: relative simulated difference ÷ relative "
            f"offline ({run['offline']}) difference.",
            "",
        ]
        show = self.pairs.select(
            "arm_a",
            "arm_b",
            pl.col("simulated_difference").round(4).alias(f"{metric} a − b"),
            pl.col("minimum_detectable_difference").round(4).alias("MDE"),
            pl.col("power_at_observed").round(2).alias("power at observed"),
            (pl.col("relative_simulated") * 100).round(1).alias("sim. rel. %"),
            (pl.col("relative_offline") * 100).round(1).alias("offline rel. %"),
            pl.col("sensitivity_ratio").round(3).alias("sensitivity"),
            pl.col("agents_needed").cast(pl.Utf8).fill_null("—").alias(f"agents needed ({run['sessions']} sess.)"),
            pl.col("sessions_needed").cast(pl.Utf8).fill_null("—").alias(f"sessions needed ({run['agents']} agents)"),
            pl.col("expected_difference").round(4).alias("offline-implied a − b"),
            "verdict",
            pl.col("miss").fill_null("").alias("missed pair"),
        )
        lines += [table_markdown(show), ""]
        if self.pairs.get_column("miss").is_not_null().any():
            e = "n/a" if self.elasticity is None else f"{self.elasticity:.3f}"
            lines += [
                "Missed pairs (the offline metric separates them, the simulation does not): the offline-implied "
                f"difference is what this run's agents' response to the offline metric (elasticity {e}, fitted over "
                "every pair the offline metric separates) predicts; below the MDE the miss is a matter of too few "
                "agents, above it the agents do not respond to that pair as they do to the others.",
                "",
            ]
        if not self.plan.is_empty():
            wide = self.plan.with_columns(pl.col("sessions").cast(pl.Utf8).alias("sessions")).pivot(
                on="sessions", index=["arm_a", "arm_b"], values="agents_needed"
            )
            wide = wide.rename({col: f"agents at {col} sess." for col in wide.columns if col not in ("arm_a", "arm_b")})
            worst = self.plan.group_by("sessions").agg(pl.col("agents_needed").max()).sort("sessions")
            every = "; ".join(f"{n:,} agents × {s}" for s, n in worst.iter_rows())
            lines += [
                "Agents needed to separate each pair the offline metric separates (and the simulation orders the same way), "
                f"by sessions per agent; all of them at once: {every} sessions.",
                "",
                table_markdown(wide),
                "",
            ]
            if run["between_variance"] is None:
                lines += [
                    "With one session per agent the session noise and the agents' differences cannot be told apart: "
                    "run with sessions_per_agent ≥ 2 to see how far sessions can stand in for agents.",
                    "",
                ]
        return "\n".join(lines)


@dataclass(frozen=True)
class VarianceComponents:
    """The paired differences of one arm pair, split as in the module docstring."""

    agents: int
    sessions: int
    mean_a: float  # the metric's mean over the paired agents, in arm a
    mean_b: float
    mean_difference: float
    agent_variance: float  # Var_i(d̄_i) at `sessions` sessions (ddof = 1)
    between: float | None  # σ²_between; None with one session
    within: float | None  # σ²_within; None with one session

    def variance_at(self, sessions: int) -> float:
        """Var(d_i) for an agent averaged over `sessions` sessions; with one session
        measured, only `sessions == self.sessions` is known."""
        if self.between is None or self.within is None:
            if sessions != self.sessions:
                raise ValueError(
                    f"variance at {sessions} sessions is unknown from a run with {self.sessions} session per agent"
                )
            return self.agent_variance
        return self.between + self.within / sessions


def z_sum(alpha: float = 0.05, power: float = 0.8) -> float:
    """z_{1−α/2} + z_{power}: the standardised distance a two-sided test needs."""
    return float(norm.ppf(1 - alpha / 2) + norm.ppf(power))


def minimum_detectable_difference(variance: float, agents: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true mean difference a paired test over `agents` agents detects with
    probability `power` at level `alpha`, when one agent's difference has `variance`."""
    if agents < 1:
        raise ValueError(f"minimum detectable difference: need at least one agent, got {agents}")
    return z_sum(alpha, power) * math.sqrt(max(variance, 0.0) / agents)


def achieved_power(difference: float, variance: float, agents: int, alpha: float = 0.05) -> float:
    """The probability that a two-sided level-`alpha` paired test over `agents` agents
    rejects when the true mean difference is `difference` (normal approximation, the far
    tail left out)."""
    if variance <= 0:
        return 1.0 if difference != 0 else alpha
    return float(norm.cdf(abs(difference) / math.sqrt(variance / agents) - norm.ppf(1 - alpha / 2)))


def agents_needed(difference: float, variance: float, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Agents a paired test needs to detect `difference` with probability `power` at level
    `alpha` when one agent's difference has `variance`; None for a zero difference."""
    if difference == 0 or not np.isfinite(difference):
        return None
    return max(2, math.ceil((z_sum(alpha, power) ** 2) * max(variance, 0.0) / difference**2))


def sessions_needed(difference: float, components: VarianceComponents, agents: int, config: PowerConfig) -> int | None:
    """The fewest sessions per agent (up to `config.max_sessions`) at which `agents` agents
    detect `difference`; None when even that many are not enough (the between-agent part
    alone is too large) or the split of the variance is unknown."""
    if components.between is None or difference == 0:
        return None
    target = (difference / z_sum(config.alpha, config.power)) ** 2 * agents  # the variance that is still enough
    if components.between >= target:
        return None
    sessions = math.ceil(components.within / (target - components.between)) if components.within > 0 else 1
    return max(1, sessions) if sessions <= config.max_sessions else None


def variance_components(per_session: pl.DataFrame, arm_a: str, arm_b: str, metric: str = "ctr") -> VarianceComponents:
    """σ²_between and σ²_within of arm_a − arm_b from per-session metrics (arm, user_id,
    session, <metric>): agents and sessions that both arms have, with the metric defined in
    both, are paired session by session."""
    for column in ("arm", "user_id", "session", metric):
        if column not in per_session.columns:
            raise ValueError(f"power: the per-session metrics lack column {column!r}")
    a = per_session.filter(pl.col("arm") == arm_a).select("user_id", "session", pl.col(metric).alias("a"))
    b = per_session.filter(pl.col("arm") == arm_b).select("user_id", "session", pl.col(metric).alias("b"))
    pairs = a.join(b, on=["user_id", "session"], how="inner").drop_nulls().with_columns(d=pl.col("a") - pl.col("b"))
    if pairs.is_empty():
        raise ValueError(f"power: arms {arm_a!r} and {arm_b!r} share no (agent, session) with {metric} defined")
    per_agent = pairs.group_by("user_id").agg(
        pl.col("a").mean(),
        pl.col("b").mean(),
        pl.col("d").mean().alias("mean"),
        pl.col("d").var(ddof=1).alias("var"),
        pl.len().alias("n"),
    )
    sessions = int(per_agent.get_column("n").max())
    agents = per_agent.height
    means = per_agent.get_column("mean").to_numpy()
    agent_variance = float(np.var(means, ddof=1)) if agents > 1 else 0.0
    mean_a, mean_b = float(per_agent.get_column("a").mean()), float(per_agent.get_column("b").mean())
    if sessions < 2:
        return VarianceComponents(agents, 1, mean_a, mean_b, float(means.mean()), agent_variance, None, None)
    # Agents with fewer sessions than the rest (visits by activity tier, a run cut short)
    # still give a within variance when they have two.  An agent with n sessions has a
    # mean difference of variance σ²_between + σ²_within / n, so the between part takes off
    # σ²_within times the agents' mean 1/n (1/S when every agent has S).
    within_values = per_agent.get_column("var").drop_nulls().to_numpy()
    within = float(within_values.mean()) if within_values.size else 0.0
    inverse = float((1.0 / per_agent.get_column("n").cast(pl.Float64)).mean())
    between = max(0.0, agent_variance - within * inverse)
    return VarianceComponents(agents, sessions, mean_a, mean_b, float(means.mean()), agent_variance, between, within)


# -- helpers ---------------------------------------------------------------------------


def _offline_sign(pair: Mapping) -> int:
    low, high = pair.get("offline_ci_low"), pair.get("offline_ci_high")
    return 0 if low is None or high is None else interval_sign(low, high)


def _miss(expected: float | None, mde: float) -> str:
    if expected is None:
        return MISS_UNKNOWN
    # A response against the offline direction (e < 0) is no matter of agents either.
    return MISS_AGENTS if 0 < expected < mde else MISS_RESPONSE


def _verdict(offline_sign: int, delta: float, mde: float) -> str:
    if offline_sign == 0:
        return "offline tie"
    if delta == 0 or np.sign(delta) != offline_sign:
        return "opposite direction"
    return "powered" if abs(delta) >= mde else "underpowered"

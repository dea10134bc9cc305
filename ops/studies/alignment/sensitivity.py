"""How small a loss of list quality the simulation notices: the control's lists degraded step
by step (the sensitivity ladder).

The control arm's top-20 lists with 0, 5, 10, 15 and 20 of their 20 slots replaced by random
unseen items (`ops.arms.degraded.degrade_lists`: items neither in the user's train window nor
in the list, the rungs nested, seeded per user) are shown to the run's own agents — the ones
the control arm was simulated with, each for as many sessions as it had there — through the
list-quality protocol's simulation path (`simulate_lists`, one "arm" per rung).  The
read-out is the A/B read-out's with the intact lists (0 slots) as the control: per rung the
CTR with its interval over agents, each rung against the intact lists (paired over agents),
and each rung against the one before it, with the minimum detectable difference of that
step at the run's agents and sessions (`ops.readout.power`).

A degradation is *detected* when the CTR difference against the intact lists has its 95 %
interval below 0 — the criterion the arm pairs use (`ops.readout.fidelity`), so the smallest
degradation detected is comparable with the pairs the simulation separates; a rung whose
interval lies above 0 (CTR rising as the lists get worse) is reported, not detected.  The
smallest degradation detected, in slots of 20, is the verdict's figure: a simulation that
needs 15 random slots of 20 before it notices cannot be expected to separate two trained
arms a few NDCG points apart.  Between the rungs, the CTR lost per slot replaced (the
least-squares slope over the rungs) and the MDE of the first step give the finer figure
"about k slots": MDE ÷ |slope|, the degradation the run's agents would detect with 80 %
power if CTR fell evenly with the slots (an upper estimate: fewer slots replaced also make
the agents' differences less variable).

Repeating five simulations is cheap with a brain that decides without a paid call (the
embedded brain, `decides_offline`); with the LLM brain the study is skipped unless asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from ops.agents.session import AgentSession
from ops.arms.degraded import LIST_LENGTH, degrade_lists
from ops.readout.ab_readout import ABReadout, ab_readout
from ops.readout.power import minimum_detectable_difference, variance_components
from ops.readout.readout_config import ReadoutConfig
from ops.readout.statistics import difference_interval, interval_sign, named_rng
from ops.simulation.brains.protocol import Brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.request import SimulationConfig
from ops.storage.codec import load_fields, save_fields
from ops.studies.alignment.list_quality import simulate_lists

LADDER_SLOTS: tuple[int, ...] = (0, 5, 10, 15, 20)
METRIC = "ctr"

STEPS = {
    "slots": pl.Int64,
    "step": pl.Utf8,
    "agents": pl.Int64,
    "ctr": pl.Float64,
    "ctr_low": pl.Float64,
    "ctr_high": pl.Float64,
    "difference": pl.Float64,  # against the intact lists (0 slots), paired over agents
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "detected": pl.Boolean,  # the interval lies below 0
}
ADJACENT = {
    "from_slots": pl.Int64,
    "to_slots": pl.Int64,
    "agents": pl.Int64,
    "difference": pl.Float64,  # CTR at to_slots − at from_slots
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "separated": pl.Boolean,  # the interval excludes 0
    "minimum_detectable_difference": pl.Float64,  # at this run's agents and sessions
}


def step_name(slots: int, length: int = LIST_LENGTH) -> str:
    """A rung's "arm" name: slots replaced of the list's length, e.g. "5/20"."""
    return f"{slots}/{length}"


def ladder_lists(
    control_lists: pl.DataFrame,
    seen: pl.DataFrame,
    item_ids: np.ndarray,
    slots: Sequence[int] = LADDER_SLOTS,
    seed: int = 0,
    users: Sequence[int] | None = None,
    length: int = LIST_LENGTH,
) -> pl.DataFrame:
    """ratio (the rung, `step_name`), user_id, position, item_id: the control's lists of
    `users` (default all) at every rung, for `simulate_lists`."""
    if any(s < 0 or s > length for s in slots):
        raise ValueError(f"sensitivity ladder: slots must lie in 0..{length}, got {list(slots)}")
    lists = control_lists if users is None else control_lists.filter(pl.col("user_id").is_in(list(users)))
    frames = [
        degrade_lists(lists, s, seen, item_ids, seed).select(
            pl.lit(step_name(s, length)).alias("ratio"),
            "user_id",
            pl.col("rank").alias("position"),
            "item_id",
        )
        for s in sorted(set(slots))
    ]
    return pl.concat(frames)


@dataclass
class Sensitivity:
    """readout: the A/B read-out, one "arm" per rung (control: the intact lists); steps:
    STEPS rows; adjacent: ADJACENT rows; the control arm, the agents and sessions, the seed
    and the brain's name."""

    readout: ABReadout
    steps: pl.DataFrame
    adjacent: pl.DataFrame
    control: str
    list_length: int
    agents: int
    sessions: int
    seed: int
    brain: str = ""
    slope: float | None = None  # CTR per slot replaced, least squares over the rungs
    detectable_slots: float | None = None  # the first step's MDE ÷ |slope|

    def smallest_detected(self) -> int | None:
        """The fewest slots replaced whose CTR drop the simulation detects; None when none."""
        hit = self.steps.filter(pl.col("detected") & (pl.col("slots") > 0))
        return int(hit.get_column("slots").min()) if hit.height else None

    def metrics(self) -> dict[str, float]:
        """CTR per rung, and the smallest degradation detected when one is."""
        metrics = {
            f"sensitivity_ctr_{r['slots']}_of_{self.list_length}": r["ctr"] for r in self.steps.iter_rows(named=True)
        }
        smallest = self.smallest_detected()
        if smallest is not None:
            metrics["sensitivity_smallest_detected_slots"] = smallest
        return metrics

    def tables(self) -> dict[str, pl.DataFrame]:
        return {"sensitivity_steps": self.steps, "sensitivity_adjacent": self.adjacent}

    def headline(self) -> dict:
        """The verdict's figures (`ops.readout.verdict.sensitivity_verdict`)."""
        return {
            "measured": True,
            "control": self.control,
            "list_length": self.list_length,
            "agents": self.agents,
            "sessions": self.sessions,
            "brain": self.brain,
            "smallest_detected": self.smallest_detected(),
            "slope": self.slope,
            "detectable_slots": self.detectable_slots,
            "steps": self.steps.to_dicts(),
            "adjacent": self.adjacent.to_dicts(),
        }

    def table(self) -> pl.DataFrame:
        """The ladder as people read it: per rung CTR, its difference against the intact lists
        and against the rung before, with 95 % intervals, and the step's MDE."""
        adjacent = self.adjacent.select(
            pl.col("to_slots").alias("slots"),
            pl.format(
                "{} [{}, {}]", pl.col("difference").round(4), pl.col("ci_low").round(4), pl.col("ci_high").round(4)
            ).alias("vs the rung before"),
            _yes_no(pl.col("separated")).alias("step separated"),
            pl.col("minimum_detectable_difference").round(4).cast(pl.Utf8).alias("step MDE"),
        )
        intact = pl.col("slots") == 0  # the control: nothing to compare it with
        return (
            self.steps.select(
                pl.format("{} of {}", pl.col("slots"), pl.lit(self.list_length)).alias("slots replaced"),
                "slots",
                pl.format(
                    "{} [{}, {}]", pl.col("ctr").round(4), pl.col("ctr_low").round(4), pl.col("ctr_high").round(4)
                ).alias("CTR"),
                pl.when(intact)
                .then(pl.lit("—"))
                .otherwise(
                    pl.format(
                        "{} [{}, {}]",
                        pl.col("difference").round(4),
                        pl.col("ci_low").round(4),
                        pl.col("ci_high").round(4),
                    )
                )
                .alias("vs intact lists"),
                pl.when(intact).then(pl.lit("—")).otherwise(_yes_no(pl.col("detected"))).alias("detected"),
            )
            .join(adjacent, on="slots", how="left")
            .drop("slots")
            .with_columns(pl.col("vs the rung before", "step separated", "step MDE").fill_null("—"))
        )

    def save(self, folder: Path) -> None:
        save_fields(folder, "Sensitivity", 1, self)

    @classmethod
    def load(cls, folder: Path) -> Sensitivity:
        return load_fields(cls, folder, "Sensitivity", 1, {"readout": ABReadout})


def _yes_no(flag: pl.Expr) -> pl.Expr:
    return pl.when(flag).then(pl.lit("yes")).otherwise(pl.lit("no"))


def skip_reason(brain: Brain, agents: int, metered_brain: bool = False) -> str | None:
    """Why the ladder does not run with `brain` (None: it runs): a brain that pays for every
    decision (`decides_offline` False, the LLM brain) would be asked the run's `agents` five
    times over, so it runs only when `metered_brain` asks for it."""
    if getattr(brain, "decides_offline", False) or metered_brain:
        return None
    return (
        f"the {getattr(brain, 'name', type(brain).__name__)} brain pays for every decision and the ladder simulates "
        f"the run's {agents} agents five times over; list_sensitivity.metered_brain runs it"
    )


def run_agents(readout: ABReadout, arm: str) -> dict[int, int]:
    """user -> sessions the arm's agents had in `readout` (the run's agents)."""
    if readout.per_session is not None and not readout.per_session.is_empty():
        rows = readout.per_session.filter(pl.col("arm") == arm).group_by("user_id").agg(pl.col("session").n_unique())
        return {int(u): int(n) for u, n in rows.iter_rows()}
    users = readout.per_agent.filter(pl.col("arm") == arm).get_column("user_id").to_list()
    return {int(u): 1 for u in users}


def sensitivity_study(
    brain: Brain,
    sessions: Sequence[AgentSession],
    sessions_per_agent: dict[int, int],
    control: str,
    control_lists: pl.DataFrame,
    seen: pl.DataFrame,
    catalogue: Catalogue,
    item_ids: np.ndarray,
    slots: Sequence[int] = LADDER_SLOTS,
    seed: int = 0,
    n_bootstrap: int = 1000,
    concurrency: int = 1,
    config: SimulationConfig | None = None,
) -> Sensitivity:
    """The ladder (module docstring) for the agents of `sessions_per_agent` (user ->
    sessions, `run_agents`) on `control`'s lists; `seen`: the train window's (user_id,
    item_id) pairs, never drawn; `item_ids`: the catalogue."""
    if 0 not in slots:
        raise ValueError("sensitivity ladder: the rungs must include 0 (the intact lists), the control")
    users = sorted(set(sessions_per_agent) & set(control_lists.get_column("user_id").to_list()))
    if not users:
        raise ValueError(f"sensitivity ladder: no agent of the run has a list of {control!r}")
    lists = ladder_lists(control_lists, seen, item_ids, slots, seed, users)
    events = simulate_lists(
        brain,
        sessions,
        lists,
        catalogue,
        config or SimulationConfig(progress=False),
        seed=seed,
        concurrency=concurrency,
        sessions_per_agent={u: sessions_per_agent[u] for u in users},
    )
    return ladder_readout(events, control, slots, seed, n_bootstrap, brain=getattr(brain, "name", ""))


def ladder_readout(
    events: pl.DataFrame,
    control: str,
    slots: Sequence[int] = LADDER_SLOTS,
    seed: int = 0,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    length: int = LIST_LENGTH,
    brain: str = "",
) -> Sensitivity:
    """The read-out of the ladder's events (one "arm" per rung, `step_name`)."""
    rungs = sorted(set(slots))
    intact = step_name(0, length)
    readout = ab_readout(
        events, control=intact, config=ReadoutConfig(n_bootstrap=n_bootstrap, seed=seed, confidence=confidence)
    )
    arms = {r["arm"]: r for r in readout.arms.filter(pl.col("metric") == METRIC).iter_rows(named=True)}
    comps = {r["arm"]: r for r in readout.comparisons.filter(pl.col("metric") == METRIC).iter_rows(named=True)}
    steps = []
    for s in rungs:
        name = step_name(s, length)
        a, c = arms.get(name, {}), comps.get(name)
        low, high = (0.0, 0.0) if c is None else (c["ci_low"], c["ci_high"])
        steps.append(
            {
                "slots": s,
                "step": name,
                "agents": a.get("n_agents"),
                "ctr": a.get("mean"),
                "ctr_low": a.get("ci_low"),
                "ctr_high": a.get("ci_high"),
                "difference": 0.0 if c is None else c["difference"],
                "ci_low": low,
                "ci_high": high,
                "detected": c is not None and low is not None and high is not None and interval_sign(low, high) < 0,
            }
        )
    adjacent = []
    wide = readout.per_agent.select("arm", "user_id", METRIC)
    for before, after in zip(rungs, rungs[1:]):
        x = wide.filter(pl.col("arm") == step_name(before, length)).select("user_id", pl.col(METRIC).alias("x"))
        y = wide.filter(pl.col("arm") == step_name(after, length)).select("user_id", pl.col(METRIC).alias("y"))
        both = x.join(y, on="user_id").drop_nulls()
        if both.height < 2:
            continue
        d = both.get_column("y").to_numpy() - both.get_column("x").to_numpy()
        diff, low, high = difference_interval(
            d, None, n_bootstrap, named_rng(seed, "ladder", before, after), confidence
        )
        mde = None
        if readout.per_session is not None:
            comp = variance_components(readout.per_session, step_name(after, length), step_name(before, length), METRIC)
            mde = minimum_detectable_difference(comp.variance_at(comp.sessions), comp.agents)
        adjacent.append(
            {
                "from_slots": before,
                "to_slots": after,
                "agents": both.height,
                "difference": diff,
                "ci_low": low,
                "ci_high": high,
                "separated": interval_sign(low, high) != 0,
                "minimum_detectable_difference": mde,
            }
        )
    sessions = readout.sessions_per_agent
    agents = int(readout.per_agent.filter(pl.col("arm") == intact).height)
    points = [(s["slots"], s["ctr"]) for s in steps if s["ctr"] is not None]
    slope = float(np.polyfit(*zip(*points), 1)[0]) if len(points) >= 2 else None
    first_mde = adjacent[0]["minimum_detectable_difference"] if adjacent else None
    detectable = first_mde / abs(slope) if slope and first_mde is not None else None
    return Sensitivity(
        readout,
        pl.DataFrame(steps, schema=STEPS),
        pl.DataFrame(adjacent, schema=ADJACENT),
        control,
        length,
        agents,
        sessions,
        seed,
        brain,
        slope,
        detectable,
    )

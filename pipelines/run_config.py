"""The one place where the `SIMAB_*` environment variables become Dagster run config.

Asset configs carry the papers' defaults; a team switches data source, arms or brain
without YAML by setting environment variables, which are read here once, when the
definitions are built (`pipelines.definitions`) or the lifecycle runner starts, and turned
into each job's run config (prefilled in the Dagster launchpad, used by the nightly
schedule, the read-out sensor and `python -m pipelines.lifecycle`).

| variable | run config |
| --- | --- |
| `SIMAB_SOURCE`, `SIMAB_LOCAL_PATH`, `SIMAB_DATASET` | `movielens`: source, local_path, dataset |
| `SIMAB_METADATA_SOURCE`, `SIMAB_METADATA_PATH`, `SIMAB_POSTER_DIRS` (`:`-separated), `SIMAB_LINKS_PATH` | `movie_metadata` |
| `SIMAB_ARMS` (comma-separated) | which arm partitions a full run, the schedule and the sensor use; `simulation_events.arms` |
| `SIMAB_MAX_EPOCHS` | `recommender_arm` and `augmentation_metrics`: max_epochs |
| `SIMAB_ARMS` also | the experiments' Table 2 and brain comparison: arms |
| `SIMAB_AGENTS` also | `experiment_simulation_events`: n_agents; `SIMAB_MAX_EPOCHS` also `ab_agent_table5`: max_epochs |
| `SIMAB_AGENTS`, `SIMAB_BRAIN`, `SIMAB_SESSIONS` | `simulation_events`: n_agents, brain, sessions_per_agent (`SIMAB_BRAIN` also the alignment assets' brain); `llm_cost_estimate`: n_agents, sessions_per_agent (in the jobs only with `SIMAB_BRAIN=llm`) |
| `SIMAB_PERSONA` | `simulation_events` and `llm_cost_estimate`: persona (`matched`: the LLM brain shows the persona `llm_personas` kept; job `simab_personas` matches them) |
| `SIMAB_CONTROL` | `ab_readout`: control |
| `SIMAB_ALIGNMENT_AGENTS` | the alignment assets: n_agents |
| `SIMAB_FIDELITY_TAU_FLOOR` | `fidelity_trust` check: tau_floor |
| `SIMAB_ROUNDS` | how many round partitions `agent_round` has (arm × round "0" … "R−1"; 4 by default) |
| `SIMAB_NIGHTLY` | `fresh` (default): the nightly schedule re-simulates `simulation_events`; `continue`: it runs each arm's next round of `agent_round`, from the last round's memories |
| `SIMAB_SHARDS` | user shards of the simulation (1: one partition per arm; N > 1: `simulation_shard` arm × shard, `simulation_events` combines them; the `simulation_events` settings go to `simulation_shard`) |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from assets.partitions import ARMS, DEFAULT_ARMS

# Each experiment of `python -m pipelines.experiments` and the asset that prints its table.
EXPERIMENT_ASSETS = {
    "table2": "ab_agent_table2",
    "table3": "ab_agent_table3",
    "table4": "ab_agent_table4",
    "table5": "ab_agent_table5",
    "thumbnails": "simuser_thumbnail_quality",
    "brains": "brain_comparison",
}
ALIGNMENT_OPS = ("taste_alignment", "rating_alignment", "list_quality_alignment", "social_traits_alignment")
# The ops (asset or multi-asset names) of each job, so a job's run config names only its own.
JOB_OPS: dict[str, tuple[str, ...]] = {
    "simab_prepare": ("movielens", "movie_metadata", "mm_ml_1m", "chronological_split", "agents", "embedded_brain"),
    "simab_arm": ("recommender_arm", "top20_lists", "offline_metrics", "llm_cost_estimate", "simulation_events", "augmentation_metrics"),
    "simab_readout": ("ab_readout", "simab_report", *ALIGNMENT_OPS, "ab_readout_fidelity_trust"),
    "simab_alignment": ALIGNMENT_OPS,
    "simab_resimulate": ("llm_cost_estimate", "simulation_events"),
    "simab_personas": ("llm_personas",),
    "simab_rounds": ("agent_round",),
    "simab_filter_bubble": ("filter_bubble",),
    # The papers' experiments (pipelines.experiments): an arm without its augmentation refits,
    # the experiments' own simulations (arm x condition), and one job per table.
    "experiment_arm": ("recommender_arm", "top20_lists", "offline_metrics", "llm_cost_estimate", "simulation_events"),
    "experiment_simulation": ("experiment_simulation_events",),
    **{f"experiment_{name}": (asset,) for name, asset in EXPERIMENT_ASSETS.items()},
}
# With user shards (SIMAB_SHARDS > 1) an arm is three jobs, because a job has one partitions
# definition: train (arm), simulate (arm × shard), combine and refit (arm).  `simulation_shard`
# takes the settings of `simulation_events`; the combining `simulation_events` has none.
SHARDED_JOB_OPS: dict[str, tuple[str, ...]] = {
    **JOB_OPS,
    "simab_arm": ("recommender_arm", "top20_lists", "offline_metrics", "llm_cost_estimate"),
    "simab_simulate": ("simulation_shard",),
    "simab_combine": ("augmentation_metrics",),
    "simab_resimulate": ("simulation_shard",),
}
OP_SETTINGS = {"simulation_shard": "simulation_events"}  # op -> whose settings it takes
# In a job only when the simulation uses the LLM brain: the bill before the run.
LLM_ONLY_OPS = ("llm_cost_estimate",)


class RunSettings(BaseModel):
    """What the environment asked for; None leaves the asset's own default."""

    arms: list[str] = Field(default_factory=lambda: list(DEFAULT_ARMS))
    # Round partitions of `agent_round` (Agent4Rec §4.1: four rounds).
    rounds: int = Field(4, ge=1)
    # The nightly re-simulation: "fresh" re-simulates every arm from the train-window
    # memories; "continue" runs every arm's next round from the last round's memories.
    nightly: Literal["fresh", "continue"] = "fresh"
    shards: int = Field(default=1, ge=1)  # user shards of the simulation ($SIMAB_SHARDS)
    ops: dict[str, dict[str, Any]] = Field(default_factory=dict)  # op name -> config fields


def settings_from_env(environ: Mapping[str, str] | None = None) -> RunSettings:
    """Read the `SIMAB_*` variables once; raises ValueError naming an unknown arm."""
    env = os.environ if environ is None else environ
    ops: dict[str, dict[str, Any]] = {}

    def put(op: str, field: str, variable: str, convert=str) -> None:
        value = env.get(variable)
        if value not in (None, ""):
            try:
                ops.setdefault(op, {})[field] = convert(value)
            except ValueError as exc:
                raise ValueError(f"${variable}={value!r}: {exc}") from None

    put("movielens", "source", "SIMAB_SOURCE")
    put("movielens", "local_path", "SIMAB_LOCAL_PATH")
    put("movielens", "dataset", "SIMAB_DATASET")
    put("movie_metadata", "source", "SIMAB_METADATA_SOURCE")
    put("movie_metadata", "metadata_path", "SIMAB_METADATA_PATH")
    put("movie_metadata", "poster_dirs", "SIMAB_POSTER_DIRS", lambda v: [p for p in v.split(os.pathsep) if p])
    put("movie_metadata", "links_path", "SIMAB_LINKS_PATH")
    put("recommender_arm", "max_epochs", "SIMAB_MAX_EPOCHS", int)
    put("augmentation_metrics", "max_epochs", "SIMAB_MAX_EPOCHS", int)
    put("simulation_events", "n_agents", "SIMAB_AGENTS", int)
    put("experiment_simulation_events", "n_agents", "SIMAB_AGENTS", int)
    put("ab_agent_table5", "max_epochs", "SIMAB_MAX_EPOCHS", int)
    put("llm_cost_estimate", "n_agents", "SIMAB_AGENTS", int)
    put("simulation_events", "brain", "SIMAB_BRAIN")
    put("simulation_events", "sessions_per_agent", "SIMAB_SESSIONS", int)
    put("llm_cost_estimate", "sessions_per_agent", "SIMAB_SESSIONS", int)
    put("simulation_events", "persona", "SIMAB_PERSONA")
    put("llm_cost_estimate", "persona", "SIMAB_PERSONA")
    put("ab_readout", "control", "SIMAB_CONTROL")
    for op in ALIGNMENT_OPS:
        if op != "social_traits_alignment":  # it reads the simulation's sessions, whatever their brain
            put(op, "brain", "SIMAB_BRAIN")
        put(op, "n_agents", "SIMAB_ALIGNMENT_AGENTS", int)
    put("ab_readout_fidelity_trust", "tau_floor", "SIMAB_FIDELITY_TAU_FLOOR", float)
    for op in ("agent_round", "filter_bubble"):
        put(op, "n_agents", "SIMAB_AGENTS", int)
        put(op, "max_epochs", "SIMAB_MAX_EPOCHS", int)
    put("agent_round", "brain", "SIMAB_BRAIN")

    arms = list(DEFAULT_ARMS)
    if env.get("SIMAB_ARMS"):
        arms = [a.strip() for a in env["SIMAB_ARMS"].split(",") if a.strip()]
    shards = env.get("SIMAB_SHARDS", "").strip() or "1"
    try:
        n_shards = int(shards)
    except ValueError:
        raise ValueError(f"$SIMAB_SHARDS={shards!r}: not a whole number of user shards (1: unsharded)") from None
    if n_shards < 1:
        raise ValueError(f"$SIMAB_SHARDS={shards!r}: at least 1 user shard (1: unsharded)")
    try:
        rounds = int(env.get("SIMAB_ROUNDS") or 4)
        settings = RunSettings(ops=ops, rounds=rounds, nightly=env.get("SIMAB_NIGHTLY") or "fresh", shards=n_shards)
    except ValueError as exc:
        raise ValueError(f"$SIMAB_ROUNDS / $SIMAB_NIGHTLY: {exc}") from None
    return with_arms(settings, arms)


def with_arms(settings: RunSettings, arms: list[str]) -> RunSettings:
    """The settings for another arm list (the lifecycle runner's --arms)."""
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise ValueError(f"unknown arm(s) {unknown}; known: {list(ARMS)}")
    ops = {op: dict(fields) for op, fields in settings.ops.items()}
    for op in ("simulation_events", "llm_cost_estimate", "ab_agent_table2", "brain_comparison"):
        ops.setdefault(op, {})["arms"] = list(arms)
    return RunSettings(arms=list(arms), ops=ops, rounds=settings.rounds, nightly=settings.nightly, shards=settings.shards)


def uses_llm(settings: RunSettings) -> bool:
    """Whether the simulation runs the LLM brain (then the jobs estimate its bill first)."""
    return settings.ops.get("simulation_events", {}).get("brain") == "llm"


def job_ops(job_name: str, settings: RunSettings) -> tuple[str, ...]:
    """The ops a job runs under these settings."""
    ops = (SHARDED_JOB_OPS if settings.shards > 1 else JOB_OPS).get(job_name, ())
    return ops if uses_llm(settings) else tuple(op for op in ops if op not in LLM_ONLY_OPS)


def run_config_for(job_name: str, settings: RunSettings) -> dict:
    """The run config of one job: the settings of the ops it runs, nothing else."""
    ops = {op: {"config": dict(settings.ops[OP_SETTINGS.get(op, op)])} for op in job_ops(job_name, settings) if settings.ops.get(OP_SETTINGS.get(op, op))}
    return {"ops": ops} if ops else {}

"""The settings (`ops.settings`, the one place that reads `SIMAB_*`) as Dagster run config.

Each setting declares the op config fields it fills; a job's run config is those of the ops
the job runs (`pipelines.jobs.job_ops` and `run_config_for`, derived from its asset selection), so membership is
written once, in the selections.  The result is each job's default run config: prefilled in
the Dagster launchpad (where a person's edits win), used by the nightly schedule, the
read-out sensor and `python -m pipelines.lifecycle`.  Settings that change the graph's shape
(arms, shards, rounds, executor) are read where the definitions are built.
"""

from __future__ import annotations

from collections.abc import Mapping

from ops.arms.registry import known_arm_names
from ops.preflight.arm_names import declare_arms, lifecycle_arms
from ops.preflight.bill import brain_of
from ops.settings import SettingError, Settings, declared, load
from pipelines.setting_ops import op_config, setting_name_of

# Each experiment of `python -m pipelines.experiments` and the asset that prints its table.
EXPERIMENT_ASSETS = {
    "table2": "ab_agent_table2",
    "table3": "ab_agent_table3",
    "table4": "ab_agent_table4",
    "table5": "ab_agent_table5",
    "thumbnails": "simuser_thumbnail_quality",
    "brains": "brain_comparison",
    "causal": "agent4rec_causal_graph",
    "believability": "simuser_believability",
}
# An op that takes another op's settings: the shards of the simulation take the simulation's.
OP_SETTINGS = {"simulation_shard": "simulation_events"}


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """The environment's settings with the arm list resolved; raises SettingError (a
    ValueError) naming the variable of the first bad value."""
    settings = load(environ)
    return with_arms(settings, settings.arms or lifecycle_arms(brain_of(settings).decides_offline))


def with_arms(settings: Settings, arms: list[str]) -> Settings:
    """The settings for another arm list (the lifecycle runner's --arms).  An entry is an arm
    name or a spec (`mine=lists:PATH`, `prod=mlflow:models:/prod/3`, `half=deepfm;train_fraction=0.5`,
    `ops.arms.registry`): specs are declared, so their names become arm partitions, and the
    settings carry the names."""
    if not arms:
        raise SettingError("SIMAB_ARMS='': at least one arm")
    try:
        names = declare_arms(list(arms))
    except ValueError as error:
        raise SettingError(f"SIMAB_ARMS={','.join(arms)!r}: {error}") from None
    known = known_arm_names()
    unknown = [a for a in names if a not in known]
    if unknown:
        raise SettingError(
            f"SIMAB_ARMS={','.join(arms)!r}: unknown arm(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )
    return settings.model_copy(update={"arms": names})


def op_config_for(op: str, accepts: set[str], settings: Settings) -> dict:
    """One op's run config: the settings of the fields it accepts, then its `--set` overrides."""
    fields = op_config(settings.model_copy(update={"overrides": {}}))
    config = {k: v for k, v in fields.get(OP_SETTINGS.get(op, op), {}).items() if k in accepts}
    config.update(settings.overrides.get(op, {}))
    return config


def uses_llm(settings: Settings) -> bool:
    """Whether the brain the settings name pays per decision (the LLM brain): then the jobs
    estimate its bill first and the endpoint is probed before the first step."""
    return not brain_of(settings).decides_offline


def setting_of(op: str, field: str) -> str | None:
    """The variable that fills `op.field`, to name it when Dagster rejects the value."""
    op = OP_SETTINGS.get(op, op)
    name = setting_name_of(op, field)
    return declared()[name].json_schema_extra["env"] if name is not None else None  # type: ignore[index]

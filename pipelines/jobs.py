"""Jobs, the nightly re-simulation schedule and the sensor that reads it out.

The lifecycle is three jobs because arms are partitions: `simab_prepare` (unpartitioned
data, contracts, split, agents), `simab_arm` once per arm (train, top-20, offline metrics,
simulation, augmentation) and `simab_readout` (A/B read-out, fidelity, the alignment
protocols, report); `simab_alignment` re-runs the alignment protocols alone.  In the Dagster UI,
"Materialize all" launches the same thing as one backfill.  Each job's default run config
comes from the environment (`pipelines.run_config`), read once when the definitions are built.
"""

from __future__ import annotations

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    schedule,
    sensor,
)

from pipelines.run_config import EXPERIMENT_ASSETS, RunSettings, run_config_for, uses_llm

JOB_SELECTIONS = {
    "simab_prepare": (
        AssetSelection.groups("ingestion", "mm_ml_1m", "split", "agents"),
        "MovieLens → MM-ML-1M → contracts → chronological split → agents and the embedded brain",
    ),
    "simab_arm": (
        AssetSelection.groups("recommenders", "simulation", "augmentation"),
        "one arm: train, top-20 lists, offline metrics, simulation, models refit on the simulated data",
    ),
    "simab_readout": (
        AssetSelection.groups("report", "alignment"),
        "A/B read-out over the simulated arms, fidelity (with its warning check), the agents' alignment protocols, report",
    ),
    "simab_alignment": (AssetSelection.groups("alignment"), "the alignment protocols alone: how far to trust the agents (e.g. for the LLM brain)"),
    "simab_resimulate": (AssetSelection.assets("simulation_events"), "re-simulate one arm against its current model and agents"),
    # The papers' experiments (`python -m pipelines.experiments <name>` runs each with what it needs).
    "experiment_arm": (
        AssetSelection.groups("recommenders") | AssetSelection.assets("simulation_events"),
        "one arm for the experiments' tables: train, top-20 lists, offline metrics, simulation (no augmentation refits)",
    ),
    "experiment_simulation": (
        AssetSelection.assets("experiment_simulation_events"),
        "an arm simulated under one condition (brain, with or without vision), beside the lifecycle's simulation",
    ),
    **{f"experiment_{name}": (
        AssetSelection.assets(asset),
        f"writes {asset} beside the paper from the stored arms and simulations it reads (materialise them first with experiment_arm / "
        f"experiment_simulation, or run `python -m pipelines.experiments {name}`, which does)",
    ) for name, asset in EXPERIMENT_ASSETS.items()},
}
# The jobs that simulate with `simulation_events`: with the LLM brain they estimate the bill first.
SIMULATING_JOBS = ("simab_arm", "simab_resimulate", "experiment_arm")


def build_jobs(settings: RunSettings) -> dict:
    """The lifecycle's jobs, each with the environment's run config as its default.  With
    the LLM brain, the jobs that simulate estimate the bill first (`llm_cost_estimate`)."""
    jobs = {}
    for name, (selection, description) in JOB_SELECTIONS.items():
        if uses_llm(settings) and name in SIMULATING_JOBS:
            selection = selection | AssetSelection.assets("llm_cost_estimate")
        jobs[name] = define_asset_job(name, selection=selection, description=description, config=run_config_for(name, settings) or None)
    return jobs


def build_schedules_and_sensors(settings: RunSettings, jobs: dict) -> tuple[list, list]:
    arms = list(settings.arms)
    resimulate_config = run_config_for("simab_resimulate", settings)
    readout_config = run_config_for("simab_readout", settings)

    @schedule(job=jobs["simab_resimulate"], cron_schedule="0 2 * * *", default_status=DefaultScheduleStatus.RUNNING)
    def nightly_resimulation(context: ScheduleEvaluationContext):
        """Every night, every configured arm ($SIMAB_ARMS) is simulated again."""
        night = context.scheduled_execution_time.strftime("%Y-%m-%d")
        for arm in arms:
            yield RunRequest(run_key=f"{night}-{arm}", partition_key=arm, tags={"simab/night": night}, run_config=resimulate_config)

    @sensor(job=jobs["simab_readout"], minimum_interval_seconds=300, default_status=DefaultSensorStatus.RUNNING)
    def readout_after_simulation(context: SensorEvaluationContext):
        """Read out once every configured arm has been simulated since the last read-out."""
        instance = context.instance
        last_readout = instance.get_latest_materialization_event(AssetKey("ab_readout"))
        since = last_readout.timestamp if last_readout else 0.0
        newest = []
        for arm in arms:
            event = _latest_partition_materialization(instance, arm)
            if event is None or event.timestamp <= since:
                return SkipReason(f"arm {arm!r} not simulated since the last read-out")
            newest.append(event.timestamp)
        # Millisecond run keys: a key repeated within one second would be dropped by Dagster
        # as a duplicate and the second round of simulations never read out.
        return RunRequest(run_key=f"readout-{max(newest) * 1000:.0f}", run_config=readout_config)

    return [nightly_resimulation], [readout_after_simulation]


def _latest_partition_materialization(instance, partition: str):
    result = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("simulation_events"), asset_partitions=[partition]), limit=1
    )
    return result.records[0] if result.records else None

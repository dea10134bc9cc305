"""Jobs, the nightly re-simulation schedule and the sensor that reads it out.

The lifecycle is three jobs because arms are partitions: `simab_prepare` (unpartitioned
data, contracts, split, agents), `simab_arm` once per arm (train, top-20, offline metrics,
simulation, augmentation) and `simab_readout` (A/B read-out, fidelity, report).  In the Dagster UI,
"Materialize all" launches the same thing as one backfill.
"""

from __future__ import annotations

from dagster import (
    AssetKey,
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

from assets.recommenders import configured_arms

prepare_job = define_asset_job(
    "simab_prepare",
    selection=AssetSelection.groups("ingestion", "mm_ml_1m", "split", "agents"),
    description="MovieLens → MM-ML-1M → contracts → chronological split → agents",
)
arm_job = define_asset_job(
    "simab_arm",
    selection=AssetSelection.groups("recommenders", "simulation", "augmentation"),
    description="one arm: train, top-20 lists, offline metrics, simulation, models refit on the simulated data",
)
readout_job = define_asset_job(
    "simab_readout",
    selection=AssetSelection.groups("report"),
    description="A/B read-out over the simulated arms, fidelity, report",
)
resimulate_job = define_asset_job(
    "simab_resimulate",
    selection=AssetSelection.assets("simulation_events"),
    description="re-simulate one arm against its current model and agents",
)


@schedule(job=resimulate_job, cron_schedule="0 2 * * *", default_status=DefaultScheduleStatus.RUNNING)
def nightly_resimulation(context: ScheduleEvaluationContext):
    """Every night, every configured arm ($SIMAB_ARMS) is simulated again."""
    night = context.scheduled_execution_time.strftime("%Y-%m-%d")
    for arm in configured_arms():
        yield RunRequest(run_key=f"{night}-{arm}", partition_key=arm, tags={"simab/night": night})


@sensor(job=readout_job, minimum_interval_seconds=300, default_status=DefaultSensorStatus.RUNNING)
def readout_after_simulation(context: SensorEvaluationContext):
    """Read out once every configured arm has been simulated since the last read-out."""
    instance = context.instance
    last_readout = instance.get_latest_materialization_event(AssetKey("ab_readout"))
    since = last_readout.timestamp if last_readout else 0.0
    newest = []
    for arm in configured_arms():
        event = _latest_partition_materialization(instance, arm)
        if event is None or event.timestamp <= since:
            return SkipReason(f"arm {arm!r} not simulated since the last read-out")
        newest.append(event.timestamp)
    # Millisecond run keys: a key repeated within one second would be dropped by Dagster
    # as a duplicate and the second round of simulations never read out.
    return RunRequest(run_key=f"readout-{max(newest) * 1000:.0f}")


def _latest_partition_materialization(instance, partition: str):
    from dagster import AssetRecordsFilter

    result = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("simulation_events"), asset_partitions=[partition]), limit=1
    )
    return result.records[0] if result.records else None


JOBS = [prepare_job, arm_job, readout_job, resimulate_job]
SCHEDULES = [nightly_resimulation]
SENSORS = [readout_after_simulation]

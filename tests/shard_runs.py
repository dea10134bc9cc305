"""A tiny lifecycle, unsharded, for the sharding tests to set their sharded runs beside:
the synthetic MovieLens (60 users), arms random and pop (no training), the embedded brain."""

from __future__ import annotations

from pathlib import Path

import polars as pl

ARMS = ("random", "pop")
PREPARE = {"ops": {"movielens": {"config": {"synthetic_users": 60, "synthetic_movies": 80, "seed": 3}}}}
SIMULATION = {"n_agents": 20, "sessions_per_agent": 2, "seed": 11}
# What differs between two runs of the same seed: the Dagster run, the measured latency.
RUN_COLUMNS = ["run_id", "latency_s"]


def environ(home: Path, **extra: str) -> dict[str, str]:
    return {
        "SIMAB_HOME": str(home),
        "SIMAB_ARMS": ",".join(ARMS),
        **extra,
    }


def prepare_and_simulate(home: Path, instance) -> dict[str, pl.DataFrame]:
    """Prepare, then each arm unsharded; the events of each arm (run columns dropped)."""
    from pipelines.definitions import build_definitions

    defs = build_definitions(environ=environ(home))
    run(defs, instance, "simab_prepare", PREPARE)
    arm_config = {"ops": {"simulation_events": {"config": SIMULATION}}}
    for arm in ARMS:
        run(defs, instance, "simab_arm", arm_config, arm)
    return {arm: stored_events(home, arm) for arm in ARMS}


def run(defs, instance, job: str, config: dict, partition: str | None = None, assets: list[str] | None = None):
    from dagster import AssetKey

    result = defs.resolve_job_def(job).execute_in_process(
        instance=instance,
        run_config=config,
        partition_key=partition,
        raise_on_error=False,
        asset_selection=[AssetKey(a) for a in assets] if assets else None,
    )
    if not result.success:
        errors = [
            e.event_specific_data.error.to_string()
            for e in result.all_events
            if e.is_failure and getattr(e.event_specific_data, "error", None)
        ]
        raise AssertionError(f"{job}[{partition}] failed:\n" + "\n".join(errors)[-4000:])
    return result


def stored_events(home: Path, arm: str) -> pl.DataFrame:
    return pl.read_parquet(home / "assets" / "simulation_events" / f"{arm}.parquet").drop(RUN_COLUMNS)

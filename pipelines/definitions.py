"""The simab code location: wires assets, checks, resources, jobs and schedules.

Nothing is defined here; each lifecycle stage lives in its own module under `assets/`,
the contracts under `data_contracts/`, the outside systems under `resources/`.  The
definitions are built lazily (`@definitions`), so the environment (`pipelines.run_config`,
`pipelines.resources`) is read when Dagster loads the code location, not at import.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from dagster import AssetKey, Definitions, definitions, load_assets_from_modules

from assets import agents, alignment, augmentation, experiments, ingestion, mm_ml_1m, recommenders, report, rounds, simulation, split
from data_contracts.checks import CONTRACT_CHECKS
from pipelines.jobs import build_jobs, build_schedules_and_sensors
from pipelines.resources import executor_for_deployment, resources_for_deployment
from pipelines.run_config import RunSettings, settings_from_env

ASSET_MODULES = [ingestion, mm_ml_1m, split, recommenders, agents, simulation, augmentation, alignment, report, experiments]


def build_definitions(settings: RunSettings | None = None, environ: Mapping[str, str] | None = None) -> Definitions:
    """The whole code location for these settings (default: read from `environ`)."""
    environ = os.environ if environ is None else environ
    settings = settings or settings_from_env(environ)
    jobs = build_jobs(settings)
    schedules, sensors = build_schedules_and_sensors(settings, jobs)
    assets = load_assets_from_modules(ASSET_MODULES)
    if settings.shards > 1:
        # The simulation in user shards: `simulation_events` becomes their combination.
        assets = [a for a in assets if AssetKey("simulation_events") not in a.keys] + simulation.sharded_simulation_assets(settings.shards)
    return Definitions(
        assets=[*assets, *rounds.build_round_assets(settings.rounds)],
        asset_checks=[*CONTRACT_CHECKS, *alignment.ALIGNMENT_CHECKS],
        jobs=list(jobs.values()),
        schedules=schedules,
        sensors=sensors,
        resources=resources_for_deployment(environ=environ),
        executor=executor_for_deployment(environ),
    )


@definitions
def defs() -> Definitions:
    return build_definitions()

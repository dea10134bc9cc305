"""The simab code location: wires assets, checks, resources, jobs and schedules.

Nothing is defined here; each lifecycle stage lives in its own module under `assets/`,
the contracts under `data_contracts/`, the outside systems under `resources/`.  The
definitions are built lazily (`@definitions`), so the environment (`pipelines.run_config`,
`pipelines.resources`) is read when Dagster loads the code location, not at import.
"""

from __future__ import annotations

from collections.abc import Mapping

from dagster import Definitions, definitions

from ops.environment import offline_defaults
from ops.settings import Settings, install
from pipelines.jobs import build_assets, build_jobs, build_schedules_and_sensors
from pipelines.resources import executor_for_deployment, executor_of, resources_for_deployment
from pipelines.run_config import settings_from_env


def build_definitions(
    settings: Settings | None = None, environ: Mapping[str, str] | None = None, home_locked: bool = True
) -> Definitions:
    """The whole code location for these settings (default: read from `environ`); `home_locked`
    False: the executor without the home's lock (the lifecycle runner's runs: it holds the home)."""
    offline_defaults()
    settings = install(settings or settings_from_env(environ))
    jobs = build_jobs(settings)
    schedules, sensors = build_schedules_and_sensors(settings, jobs)
    assets, checks = build_assets(settings)
    return Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=list(jobs.values()),
        schedules=schedules,
        sensors=sensors,
        resources=resources_for_deployment(settings),
        executor=executor_for_deployment(settings) if home_locked else executor_of(settings),
    )


@definitions
def defs() -> Definitions:
    return build_definitions()

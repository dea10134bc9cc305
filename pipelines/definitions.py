"""The simab code location: wires assets, checks, resources, jobs and schedules.

Nothing is defined here; each lifecycle stage lives in its own module under `assets/`,
the contracts under `data_contracts/`, the outside systems under `resources/`.
"""

from __future__ import annotations

from dagster import Definitions, load_assets_from_modules, multiprocess_executor

from assets import agents, augmentation, ingestion, mm_ml_1m, recommenders, report, simulation, split
from data_contracts.checks import CONTRACT_CHECKS
from pipelines.jobs import JOBS, SCHEDULES, SENSORS
from pipelines.resources import resources_for_deployment

defs = Definitions(
    assets=load_assets_from_modules([ingestion, mm_ml_1m, split, recommenders, agents, simulation, augmentation, report]),
    asset_checks=CONTRACT_CHECKS,
    jobs=JOBS,
    schedules=SCHEDULES,
    sensors=SENSORS,
    resources=resources_for_deployment(),
    # Two cores here: two steps at a time (the CTR arms train in parallel partitions).
    executor=multiprocess_executor.configured({"max_concurrent": 2}),
)

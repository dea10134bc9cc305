"""The lifecycle runner's jobs as Dagster rebuilds them in another process.

`simab run` executes each step of its plan as a Dagster run through the instance
(`dagster.execute_job`), with the executor the settings name (`SIMAB_EXECUTOR`).  An executor
that runs steps elsewhere — the multiprocess executor's processes, the Celery workers — rebuilds
the job there from a pointer (`dagster.reconstructable`): a module-level function, here one per
job of the plan, returning the job of the definitions the environment's settings build
(`pipelines.run_config.settings_from_env`, as the code location reads them).  The runner puts
its settings into that environment first (`--arms`: `pipelines.runner`), so a step's process
builds the definitions the runner planned with.

These definitions differ from the code location's (`pipelines.definitions`) in one thing: the
executor is the bare one, not wrapped in the home's lock, since the runner holds the home for
its runs.  They are built once per process and environment.
"""

from __future__ import annotations

import os

JOBS = ("simab_prepare", "simab_arm", "simab_simulate", "simab_combine", "simab_readout")
_built: dict[tuple, object] = {}


def lifecycle_definitions():
    """The definitions of the environment's settings, the executor without the home's lock."""
    key = _environment()
    if key not in _built:
        from pipelines.definitions import build_definitions

        _built.clear()  # one environment at a time: a test that changes it builds anew
        _built[key] = build_definitions(home_locked=False)
    return _built[key]


def keep(defs) -> None:
    """Use `defs` (the runner's, built from this environment's settings) for this environment."""
    _built.clear()
    _built[_environment()] = defs


def reconstructable_job(name: str):
    """The plan's job `name` as a pointer another process rebuilds it from."""
    from dagster import reconstructable

    return reconstructable(globals()[name])


def simab_prepare():
    return lifecycle_definitions().resolve_job_def("simab_prepare")


def simab_arm():
    return lifecycle_definitions().resolve_job_def("simab_arm")


def simab_simulate():
    return lifecycle_definitions().resolve_job_def("simab_simulate")


def simab_combine():
    return lifecycle_definitions().resolve_job_def("simab_combine")


def simab_readout():
    return lifecycle_definitions().resolve_job_def("simab_readout")


def _environment() -> tuple:
    """What the definitions are built from: the settings' variables as set here (and the instance's)."""
    from ops.settings import declared

    names = {info.json_schema_extra["env"] for info in declared().values()} | {"DAGSTER_HOME"}  # type: ignore[index]
    return tuple(sorted((name, os.environ[name]) for name in names if name in os.environ))

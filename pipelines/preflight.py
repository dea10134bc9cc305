"""What the lifecycle runner checks before its first step, beside `ops.preflight`: the
settings the environment names, every value checked, then the definitions built and each
step's run config checked against its job's config schema and its pydantic bounds, so that a
bad value stops the runner in one line naming the variable instead of failing a later step.

`checked_settings` imports neither Dagster nor MLflow (seconds of imports on a loaded
machine): a value that a setting or a file alone shows to be wrong is refused before them."""

from __future__ import annotations

import typing

from pydantic import ValidationError

from ops.preflight.checks import check_values
from ops.settings import SettingError
from pipelines.run_config import setting_of, settings_from_env, uses_llm, with_arms


def checked_settings(arms_arg: str | None = None, environ=None):
    """The environment's settings (with `--arms`), every value they name checked."""
    settings = settings_from_env(environ)
    if arms_arg:
        settings = with_arms(settings, [a.strip() for a in arms_arg.split(",") if a.strip()])
    # The store the tracking resource resolves to (`MlflowTracking.resolved_uri`), named without
    # importing the resource (Dagster) or making the home.
    check_values(settings, environ, uses_llm(settings), tracking_uri=settings.mlflow_store)
    return settings


def planned(settings, environ=None):
    """(settings, definitions, steps), every step's run config checked against its job."""
    # lazy: the asset graph (a second to import) only once the settings and the bill passed
    from pipelines.definitions import build_definitions
    from pipelines.plan import lifecycle_plan

    # The executor bare: the runner holds the home for its runs (`pipelines.lifecycle_jobs`).
    defs = build_definitions(settings, environ, home_locked=False)
    plan = lifecycle_plan(settings)
    check_run_configs(settings, defs, [step.job for step in plan])
    return settings, defs, plan


def check_run_configs(settings, defs, jobs: list[str]) -> None:
    """Each job's run config against its config schema; SettingError on the first refusal."""
    # lazy: the jobs import the asset graph (a second), loaded by `planned` only when needed
    from dagster import DagsterInvalidConfigError
    from dagster._core.execution.validate_run_config import validate_run_config

    from pipelines.jobs import run_config_for

    for job in dict.fromkeys(jobs):
        config = run_config_for(job, settings)
        job_def = defs.resolve_job_def(job)
        try:
            validate_run_config(job_def, config)
        except DagsterInvalidConfigError as exc:
            raise SettingError(_config_problem(exc, job, config)) from None
        # Dagster's schema has the fields and types; the bounds (ge=, le=) are the pydantic
        # Config class's, which Dagster only applies inside the step, after the steps before it.
        for op, fields in config.get("ops", {}).items():
            config_class = config_class_of(job_def.graph.node_named(op).definition)
            if config_class is None:
                continue
            try:
                config_class(**fields["config"])
            except ValidationError as exc:
                error = exc.errors()[0]
                field = str(error["loc"][0]) if error["loc"] else "?"
                variable = setting_of(op, field) or f"run config ops.{op}.config.{field}"
                raise SettingError(
                    f"{variable}={fields['config'].get(field)!r}: {op}.{field} refuses it ({error['msg']})"
                ) from None


def config_class_of(op_def):
    """The pythonic Config class an asset's function takes as `config`, or None."""
    fn = getattr(getattr(op_def, "compute_fn", None), "decorated_fn", None)
    try:
        return typing.get_type_hints(fn).get("config") if fn is not None else None
    except (NameError, TypeError):
        return None


def _config_problem(exc, job: str, config: dict) -> str:
    """A Dagster config error as one line naming the variable that set the field."""
    for error in exc.errors:
        path = [e.field_name for e in error.stack.entries if hasattr(e, "field_name")]
        if len(path) >= 4 and path[0] == "ops" and path[2] == "config":
            op, field = path[1], path[3]
            value = config.get("ops", {}).get(op, {}).get("config", {}).get(field)
            variable = setting_of(op, field) or f"run config ops.{op}.config.{field}"
            return f"{variable}={value!r}: {op}.{field} refuses it ({error.message})"
    return f"the run config of job {job} is not valid: {exc.errors[0].message if exc.errors else exc}"

"""One home for everything a run leaves behind: `$SIMAB_HOME` (`data/` in the project unless
set) holds the assets, the reports, the logs, the MLflow store (`mlflow.db`, `mlartifacts/`)
and the Dagster instance (`dagster_home/`, unless $DAGSTER_HOME names another).

Every entry point derives its stores from here — the lifecycle runner, `simab ui`,
`simab mlflow`, `simab viewer`, `simab report` — so a run started with one home is shown by
every UI started with the same home, and `--resume` finds it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ops.environment import OFFLINE_DEFAULTS

DAGSTER_FOLDER = "dagster_home"


def simab_home(environ: Mapping[str, str] | None = None) -> Path:
    """$SIMAB_HOME, resolved (SettingError on a bad settings environment)."""
    from ops.settings import load

    return Path(load(environ).home).expanduser().resolve()


def dagster_home(environ: Mapping[str, str] | None = None) -> Path:
    """$DAGSTER_HOME where the caller set one, else `dagster_home/` under the home."""
    env = os.environ if environ is None else environ
    given = env.get("DAGSTER_HOME", "").strip()
    return Path(given).expanduser().resolve() if given else simab_home(environ) / DAGSTER_FOLDER


def reports_folder(environ: Mapping[str, str] | None = None) -> Path:
    return simab_home(environ) / "reports"


def latest_report(environ: Mapping[str, str] | None = None, suffix: str = ".html") -> Path | None:
    """The newest `reports/<Dagster run>/report<suffix>` under the home, or None."""
    found = [p for p in reports_folder(environ).glob(f"*/report{suffix}") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def home_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment with DAGSTER_HOME pointing into the home (what the UIs are started with)."""
    env = dict(os.environ if environ is None else environ)
    env["DAGSTER_HOME"] = str(dagster_home(env))
    env.update({k: v for k, v in OFFLINE_DEFAULTS.items() if k not in env})
    return env

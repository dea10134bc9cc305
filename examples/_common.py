"""What the three examples share: a home, a small synthetic data set prepared in it, and the
arms simulated and read out there, on the home's Dagster instance (so `simab ui`, `simab mlflow`
and `simab report` with the same SIMAB_HOME show them)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pipelines.home import simab_home

# Small enough to run in a minute or two on a laptop: 150 users, 200 movies, 30 agents per arm.
# The tests' session world (tests/conftest.py PREPARED_SYNTHETIC) is this one, so the tests
# run the examples in a copy of it, and each skips preparing as below.
PREPARE = {"ops": {"ingestion": {"config": {"synthetic_users": 150, "synthetic_movies": 200, "seed": 3}}}}
RUN_SETTINGS = {"SIMAB_AGENTS": "30", "SIMAB_SESSIONS": "1", "SIMAB_MAX_EPOCHS": "1", "SIMAB_TRUST_PROTOCOLS": "off"}


def home_from_args(description: str) -> Path:
    """--home (default $SIMAB_HOME, else data/): exported as SIMAB_HOME for simab."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--home", help="the simab home (default: $SIMAB_HOME, else data/)")
    given = parser.parse_args().home
    # The home as simab itself resolves it, so the UIs started with the same SIMAB_HOME show the run.
    home = Path(given).resolve() if given else simab_home()
    os.environ.update({"SIMAB_HOME": str(home)})
    return home


def instance():
    """The home's Dagster instance ($SIMAB_HOME/dagster_home unless DAGSTER_HOME is set)."""
    from dagster import DagsterInstance

    from pipelines.home import dagster_home
    from pipelines.instance import write_instance_config

    write_instance_config(dagster_home())
    return DagsterInstance.from_config(str(dagster_home()))


def prepare(dagster) -> None:
    """Prepare the data set in the home, unless the home already holds it as this preparation
    makes it: the same code, settings and run config (Dagster's staleness and the stored run's
    config, what `simab run` asks before each step), so running a second example in the same
    home, or the same one again, recomputes nothing that did not change."""
    from pipelines.definitions import build_definitions
    from pipelines.versions import judge_step

    defs = build_definitions()
    stored = judge_step(dagster, defs, "simab_prepare", None, PREPARE)
    if stored.reused:
        print(f"prepare: unchanged, reused (Dagster run {stored.newest_run()})", flush=True)
        return
    _check(defs.resolve_job_def("simab_prepare").execute_in_process(instance=dagster, run_config=PREPARE))


def run_arms(dagster, specs: list[str], control: str) -> list[str]:
    """Declare the arm specs (what SIMAB_ARMS does), train/rank/simulate each, read out; the names."""
    from assets.partitions import declare_arms
    from pipelines.definitions import build_definitions

    names = declare_arms(specs)
    defs = build_definitions(
        environ={**os.environ, **RUN_SETTINGS, "SIMAB_ARMS": ",".join(names), "SIMAB_CONTROL": control}
    )
    for arm in names:
        _check(defs.resolve_job_def("simab_arm").execute_in_process(instance=dagster, partition_key=arm))
    _check(defs.resolve_job_def("simab_readout").execute_in_process(instance=dagster))
    return names


def summary(home: Path, names: list[str]) -> str:
    """Offline NDCG@20 and the simulated CTR per arm, and where the report is."""
    import polars as pl

    from pipelines.home import latest_report

    rows = []
    for arm in names:
        offline = pl.read_parquet(home / "assets" / "offline_metrics" / f"{arm}.parquet").row(0, named=True)
        events = pl.read_parquet(home / "assets" / "simulation_events" / f"{arm}.parquet")
        rows.append(f"{arm:8s} NDCG@20 {offline['ndcg_at_k']:.3f}  simulated events {events.height}")
    return "\n".join([*rows, f"report: {latest_report()}"])


def _check(result) -> None:
    if not result.success:
        failures = [e.message for e in result.all_events if e.is_failure]
        raise SystemExit(f"{result.dagster_run.job_name} failed: {failures[:3]}")

"""Run the whole lifecycle from the command line: `python -m pipelines.lifecycle`.

It executes the same jobs the Dagster UI launches, against the persistent Dagster instance
($DAGSTER_HOME), so `make ui` shows the runs afterwards: `simab_prepare`, `simab_arm` once
per arm ($SIMAB_ARMS), `simab_readout`, each with the run config the environment asks for
(`pipelines.run_config`).  At the end it prints where the results are.
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", help="comma-separated arms (default $SIMAB_ARMS or random,pop,fm,deepfm)")
    args = parser.parse_args(argv)
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from dagster import DagsterInstance

    from pipelines.definitions import build_definitions
    from pipelines.run_config import run_config_for, settings_from_env, with_arms
    from resources.mlflow_tracking import MlflowTracking
    from resources.storage import data_root

    settings = settings_from_env(os.environ)
    if args.arms:
        settings = with_arms(settings, [a.strip() for a in args.arms.split(",") if a.strip()])
    defs = build_definitions(settings)

    if os.environ.get("DAGSTER_HOME"):
        # A fresh $DAGSTER_HOME is created rather than refused: the runner is the first thing
        # people start, and Dagster insists the folder exists.
        os.makedirs(os.environ["DAGSTER_HOME"], exist_ok=True)
    instance = DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else DagsterInstance.ephemeral()
    arms = settings.arms
    started = time.time()
    runs = []

    def execute(job_name: str, partition_key: str | None = None) -> None:
        label = job_name + (f"[{partition_key}]" if partition_key else "")
        print(f"==> {label}", flush=True)
        result = defs.resolve_job_def(job_name).execute_in_process(
            instance=instance, partition_key=partition_key, run_config=run_config_for(job_name, settings), raise_on_error=False
        )
        runs.append((label, result.run_id, result.success))
        if not result.success:
            failed = [e for e in result.all_events if e.is_failure]
            for event in failed[:5]:
                print(f"    {event.step_key}: {event.message}", file=sys.stderr)
            raise SystemExit(f"{label} failed (Dagster run {result.run_id}); see the Dagster UI (make ui) for the whole log")

    execute("simab_prepare")
    for arm in arms:
        execute("simab_arm", arm)
    execute("simab_readout")

    tracking = MlflowTracking()
    client = tracking.client()
    report_run = client.search_runs([tracking.experiment_id()], f"tags.dagster_run_id = '{runs[-1][1]}' and tags.dagster_asset = 'simab_report'", max_results=1)
    print()
    print(f"simab lifecycle done in {time.time() - started:.0f} s on arms {', '.join(arms)}")
    print(f"  report:        {data_root() / 'reports' / runs[-1][1] / 'report.md'}")
    print(f"  MLflow store:  {tracking.resolved_uri()} (experiment '{tracking.experiment}')")
    if report_run:
        print(f"  MLflow run:    {report_run[0].info.run_id} (report); parent runs per Dagster run:")
    for label, run_id, _ in runs:
        print(f"    {label:22s} Dagster run {run_id}")
    print("  MLflow UI:     make mlflow-ui   → http://127.0.0.1:5000")
    print(f"  Dagster UI:    make ui          → http://127.0.0.1:3000 (DAGSTER_HOME={os.environ.get('DAGSTER_HOME', 'ephemeral')})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Run the whole lifecycle from the command line: `python -m pipelines.lifecycle`.

It executes the same jobs the Dagster UI launches, against the persistent Dagster instance
($DAGSTER_HOME), so `make ui` shows the runs afterwards: `simab_prepare`, `simab_arm` once
per arm ($SIMAB_ARMS), `simab_readout`, each with the run config the environment asks for
(`pipelines.run_config`).

The console shows one line per stage with a progress bar and its time, the LLM bill before
a simulation, and at the end the per-arm table, the fidelity verdict and where to look
(`pipelines.console`); the full log — Dagster's event log, library messages — goes to
$SIMAB_HOME/logs/lifecycle-<time>.log.  `--verbose` prints everything as it comes instead.
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", help="comma-separated arms (default $SIMAB_ARMS or random,pop,fm,deepfm)")
    parser.add_argument("--verbose", action="store_true", help="print the whole log on the console instead of the stage lines")
    args = parser.parse_args(argv)
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.verbose:
        return run_lifecycle(args.arms, None)
    from resources.storage import data_root

    log = data_root() / "logs" / f"lifecycle-{time.strftime('%Y%m%d-%H%M%S')}.log"
    from pipelines.console import to_log_file

    with to_log_file(log) as terminal:
        return run_lifecycle(args.arms, terminal, log)


def run_lifecycle(arms_arg: str | None, terminal, log=None) -> int:
    """The three jobs in order; `terminal` None: the plain, verbose output."""
    import uuid

    from dagster import DagsterInstance

    from pipelines.definitions import build_definitions
    from pipelines.run_config import run_config_for, settings_from_env, with_arms
    from pipelines.console import LifecycleConsole, failure_text
    from resources.mlflow_tracking import MlflowTracking
    from resources.storage import data_root

    console = LifecycleConsole(terminal) if terminal is not None else None
    settings = settings_from_env(os.environ)
    if arms_arg:
        settings = with_arms(settings, [a.strip() for a in arms_arg.split(",") if a.strip()])
    defs = build_definitions(settings)
    brain = settings.ops.get("simulation_events", {}).get("brain", "embedded")
    if console is not None:
        console.line(f"simab lifecycle: arms {', '.join(settings.arms)} · {brain} brain · full log {log}")

    if os.environ.get("DAGSTER_HOME"):
        # A fresh $DAGSTER_HOME is created rather than refused: the runner is the first thing
        # people start, and Dagster insists the folder exists.
        os.makedirs(os.environ["DAGSTER_HOME"], exist_ok=True)
    instance = DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else DagsterInstance.ephemeral()
    arms = settings.arms
    started = time.time()
    runs = []

    stage_names = {"simab_prepare": "prepare", "simab_arm": "arm", "simab_readout": "read-out"}

    def execute(job_name: str, partition_key: str | None = None):
        label = job_name + (f"[{partition_key}]" if partition_key else "")
        job = defs.resolve_job_def(job_name)
        # The run id is chosen here so that the console can follow the run's events as they come.
        run_id = str(uuid.uuid4())
        options = dict(instance=instance, partition_key=partition_key, run_config=run_config_for(job_name, settings), raise_on_error=False, run_id=run_id)
        if console is None:
            print(f"==> {label}", flush=True)
            result = job.execute_in_process(**options)
        else:
            with console.stage(f"{stage_names[job_name]} {partition_key or ''}".strip(), len(job.nodes)) as stage:
                stage.watch(instance, run_id)
                result = job.execute_in_process(**options)
                stage.succeeded = result.success
        runs.append((label, result.run_id, result.success))
        if not result.success:
            failed = [e for e in result.all_events if e.is_failure]
            out = terminal or sys.stderr
            for event in failed[:5]:
                print(f"    {event.step_key}: {failure_text(event)}", file=out)
            where = f"the full log {log}" if log else "the Dagster UI (make ui) for the whole log"
            print(f"{label} failed (Dagster run {result.run_id}); see {where}", file=out, flush=True)
            raise SystemExit(1)
        return result

    execute("simab_prepare")
    for arm in arms:
        execute("simab_arm", arm)
    readout = execute("simab_readout")

    tracking = MlflowTracking()
    client = tracking.client()
    report_run = client.search_runs([tracking.experiment_id()], f"tags.dagster_run_id = '{runs[-1][1]}' and tags.dagster_asset = 'simab_report'", max_results=1)
    if console is not None:
        from ops.links import dagster_ui_url, mlflow_run_url, viewer_url

        report = readout.asset_materializations_for_node("simab_report")[-1].metadata
        folder = data_root() / "reports" / runs[-1][1]
        places = [
            ("report", f"{folder / 'report.html'} (Markdown beside it)"),
            ("viewer", f"make viewer → {viewer_url('/')}"),
            ("MLflow run", f"{report_run[0].info.run_id} → make mlflow-ui → {mlflow_run_url(tracking.experiment_id(), report_run[0].info.run_id)}"
             if report_run else f"{tracking.resolved_uri()}"),
            ("Dagster UI", f"make ui → {dagster_ui_url()} (DAGSTER_HOME={os.environ.get('DAGSTER_HOME', 'ephemeral')})"),
            ("full log", str(log)),
        ]
        console.summary(report["summary"].value, places)
        console.line(f"done in {time.time() - started:.0f} s")
        return 0
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


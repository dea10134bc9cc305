"""The lifecycle runner: the plan's steps executed in order against the persistent Dagster
instance, each reused when its assets are as stored, re-run where they are not, resumed where
a killed lifecycle stopped, inside one MLflow run; and at the end where to look."""

from __future__ import annotations

import json
import sys
import time
import uuid

from dagster import AssetKey, DagsterInstance

from ops.links import dagster_ui_url, mlflow_run_url, viewer_url
from ops.preflight.bill import brain_of, lifecycle_bill
from ops.readout.report_markdown import bill_lines
from ops.simulation.budget import RunBudget, bill_path
from ops.storage.exhaustion import exhausted_line, exhaustion_at, named_exhaustion
from pipelines.console import LifecycleConsole, failure_lines
from pipelines.home import dagster_home
from pipelines.instance import RUNNER_TAG, mark_dead_runs_failed, runner_lock, write_instance_config
from pipelines.jobs import run_config_for
from pipelines.plan import PLAN_TAG, STEP_TAG, Step, plan_digest
from pipelines.resume import resume_point
from pipelines.versions import OUTSIDE_INPUTS_TAG, judge_step, latest_materialization, outside_inputs
from resources.lifecycle_run import lifecycle_params, lifecycle_run, resolved_values
from resources.llm import LIFECYCLE_TAG
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root


def run_lifecycle(prepared, resume: bool, terminal, log=None, bill=None, force: bool = False, held=None) -> int:
    """The three jobs in order; `terminal` None: the plain, verbose output; `bill` the
    lifecycle's LLM bill from its settings (`ops.preflight.bill`), shown first.  A step whose
    assets are all as stored (code, settings, inputs: `pipelines.versions.judge_step`) is
    reused, one with some changed re-runs those and what follows them; `force`: every step
    runs whole."""

    console = LifecycleConsole(terminal) if terminal is not None else None

    def say(text: str) -> None:
        if console is not None:
            console.line(text)
        else:
            print(text, flush=True)

    settings, defs, plan = prepared
    bill = bill or lifecycle_bill(settings)
    brain = brain_of(settings).name
    cap = bill.limit.usd or 0.0
    first = f"simab lifecycle: arms {', '.join(settings.arms)} · {brain} brain · {bill.limit.text()}"
    if console is not None:
        console.line(f"{first} · full log {log}")
    for line in [*([] if console is not None else [first]), *bill.lines()]:
        say(line)

    home = str(dagster_home())
    # A fresh $DAGSTER_HOME is created rather than refused: the runner is the first thing
    # people start, and Dagster insists the folder exists.
    write_instance_config(home)
    instance = DagsterInstance.from_config(home)
    for run_id in mark_dead_runs_failed(instance, home, MlflowTracking()):
        say(f"run {run_id}: its process is gone (killed or crashed); marked failed")

    digest = plan_digest(plan, {s.job: run_config_for(s.job, settings) for s in plan})
    lifecycle, done, left = (
        resume_point(instance, defs, plan, digest, say) if resume else (uuid.uuid4().hex[:12], {}, {})
    )
    if held is not None:  # the home's holder record names the lifecycle (`ops.storage.home_lock`)
        held.note(lifecycle=lifecycle)
    started = time.time()
    runs = []
    stage_names = {
        "simab_prepare": "prepare",
        "simab_arm": "arm",
        "simab_simulate": "shard",
        "simab_combine": "combine",
        "simab_readout": "read-out",
    }

    def execute(step: Step, runner: str):
        label = step.label
        stage_name = f"{stage_names[step.job]} {step.partition or ''}".strip()
        if label in done:
            say(f"{label}: done in run {done[label]}, skipped")
            runs.append((label, done[label], "done"))
            return None
        selection = left.get(label)
        note = f" (resuming: {', '.join(k.to_user_string() for k in sorted(selection))})" if selection else ""
        run_config = run_config_for(step.job, settings)
        changed = ""
        if selection is None and not force:
            judgement = judge_step(instance, defs, step.job, step.partition, run_config)
            if judgement.reused:
                say(f"{stage_name}: unchanged, reused")
                runs.append((label, judgement.newest_run(), "reused"))
                return None
            if judgement.stored_by:  # some kept: say what changed (a first run just runs)
                changed = judgement.text()
                selection = judgement.rerun if judgement.rerun != judgement.keys else None
        job = defs.resolve_job_def(step.job)
        # The run id is chosen here so that the console can follow the run's events as they come.
        run_id = str(uuid.uuid4())
        outside = outside_inputs(instance, defs, step.job, step.partition)
        tags = {
            LIFECYCLE_TAG: lifecycle,
            STEP_TAG: label,
            PLAN_TAG: digest,
            **({RUNNER_TAG: runner} if runner else {}),
            **({OUTSIDE_INPUTS_TAG: json.dumps(outside, sort_keys=True)} if outside else {}),
        }
        options = dict(
            instance=instance,
            partition_key=step.partition,
            run_config=run_config,
            raise_on_error=False,
            run_id=run_id,
            tags=tags,
            asset_selection=sorted(selection) if selection else None,
        )
        if console is None:
            print(f"==> {label}{note}", flush=True)
            if changed:
                print(f"    {changed}", flush=True)
            result = job.execute_in_process(**options)
        else:
            n_steps = len(selection) if selection else len(job.nodes)
            with console.stage(f"{stage_name}{note}", n_steps) as stage:
                if changed:
                    stage.notes.append(changed)
                stage.watch(instance, run_id)
                result = job.execute_in_process(**options)
                stage.succeeded = result.success
        runs.append((label, result.run_id, "ran" if result.success else "failed"))
        if not result.success:
            where = f"the full log {log}" if log else "the Dagster UI (simab ui) for the whole log"
            again = " Fix the cause, then `simab resume` re-runs only what is left."
            # The cause first, in the exit message (it reaches the terminal in either console
            # mode): each failed step's own error; what the stage noted, and the run, after it.
            notes = [f"    {n}" for n in stage.notes] if console is not None else []
            spent: list[str] = []
            _say_bill(spent.append, lifecycle, cap)  # what the run spent of its LLM cap, also when it stopped on it
            causes = failure_lines(result.all_events)
            # A full disk or a read-only home first, named (folder, space free, what the step writes).
            found = (exhaustion_at(cause, data_root()) for cause in causes)
            exhausted = next((f for f in found if f is not None), None)
            if exhausted is not None:
                causes = [exhausted_line(data_root(), *exhausted, stage=stage_name, agents=settings.agents), *causes]
            raise SystemExit(
                "\n".join(
                    [
                        *causes,
                        *notes,
                        *spent,
                        f"{label} failed (Dagster run {result.run_id}). See {where}.{again}",
                    ]
                )
            )
        return result

    tracking = MlflowTracking()
    configs = {job: run_config_for(job, settings) for job in dict.fromkeys(s.job for s in plan)}
    params = lifecycle_params(settings, resolved_values(defs, configs))
    with runner_lock(home) as runner, lifecycle_run(tracking, lifecycle, params) as tracked:
        for step in plan:
            stage = f"{stage_names[step.job]} {step.partition or ''}".strip()
            with named_exhaustion(data_root(), lambda: log, stage, settings.agents):
                execute(step, runner)
        # The report in force: this run's, or the one reused (its read-out was unchanged).
        stored = latest_materialization(instance, AssetKey("simab_report"), None)
        if stored is not None:
            tracked.finish(
                stored.event_log_entry.asset_materialization.metadata["summary"].value, _spent(lifecycle, cap)
            )
    report_run_id = stored.run_id if stored is not None else runs[-1][1]

    client = tracking.client()
    report_run = client.search_runs(
        [tracking.experiment_id()],
        f"tags.dagster_run_id = '{report_run_id}' and tags.dagster_asset = 'simab_report'",
        max_results=1,
    )
    if console is not None and stored is not None:
        report = stored.event_log_entry.asset_materialization.metadata
        folder = data_root() / "reports" / report_run_id
        places = [
            ("report", f"{folder / 'report.html'} (Markdown beside it)"),
            ("viewer", f"simab viewer → {viewer_url('/')}"),
            (
                "MLflow run",
                f"lifecycle {tracked.run_id} → simab mlflow → {mlflow_run_url(tracking.experiment_id(), tracked.run_id)}",
            ),
            ("Dagster UI", f"simab ui → {dagster_ui_url()} (DAGSTER_HOME={home})"),
            ("full log", str(log)),
        ]
        console.summary(report["summary"].value, places)
        _say_bill(console.line, lifecycle, cap)
        console.line(f"done in {time.time() - started:.0f} s")
        return 0
    out = terminal or sys.stdout
    print(file=out)
    print(f"simab lifecycle done in {time.time() - started:.0f} s on arms {', '.join(settings.arms)}", file=out)
    print(f"  report:        {data_root() / 'reports' / report_run_id / 'report.md'}", file=out)
    print(f"  MLflow store:  {tracking.resolved_uri()} (experiment '{tracking.experiment}')", file=out)
    print(f"  MLflow run:    {tracked.run_id} (the lifecycle; its Dagster runs nested under it)", file=out)
    if report_run:
        print(f"  report run:    {report_run[0].info.run_id}; Dagster runs:", file=out)
    for label, run_id, how in runs:
        print(f"    {label:22s} Dagster run {run_id}{'' if how == 'ran' else f' ({how})'}", file=out)
    _say_bill(lambda text: print(text, file=out), lifecycle, cap)
    print("  MLflow UI:     simab mlflow     → http://127.0.0.1:5000", file=out)
    print(f"  Dagster UI:    simab ui         → http://127.0.0.1:3000 (DAGSTER_HOME={home})", file=out)
    return 0


def _spent(lifecycle: str, cap: float) -> float:
    """What the lifecycle spent on the LLM, in dollars (0 where it never called one)."""

    path = bill_path(data_root(), lifecycle)
    return float(RunBudget(path, cap).bill()["spent"]) if path.exists() else 0.0


def _say_bill(say, lifecycle: str, cap: float) -> None:
    """The run's LLM bill, per asset and in all, where the LLM was called (the report has it too)."""

    path = bill_path(data_root(), lifecycle)
    if path.exists():
        for line in bill_lines(RunBudget(path, cap).bill()):
            if line:
                say(line)

"""Run the whole lifecycle from the command line: `python -m pipelines.lifecycle`.

It executes the same jobs the Dagster UI launches, against the persistent Dagster instance
of the home ($DAGSTER_HOME, by default `$SIMAB_HOME/dagster_home`: `pipelines.home`; it
writes its `dagster.yaml`: `pipelines.instance`), so `simab ui` shows the runs afterwards: `simab_prepare`, `simab_arm` once per arm ($SIMAB_ARMS) — with user
shards ($SIMAB_SHARDS > 1) followed by `simab_simulate` per shard and `simab_combine` —,
`simab_readout`, each with the run config the environment asks for
(`pipelines.run_config`).  In MLflow the lifecycle is one top-level run, with the Dagster
runs nested under it and the verdict as its metrics (`resources.lifecycle_run`).

Before the first step every value the settings name is checked and the whole LLM bill is
estimated from the settings alone (`ops.preflight`): a bad value, or a bill expected above
the spending limit in force, stops the runner in seconds with one line naming the variable
(or the steps and the settings that would bring the bill under), before anything is stored;
`--bill` prints the bill and runs nothing (docs/cost.md).

The console opens on the arms, the brain and the limit in force, then the bill; it shows
one line per stage with a progress bar and its time, the LLM bill before a simulation, and
at the end the per-arm table, the fidelity verdict and where to look
(`pipelines.console`); the full log — Dagster's event log, library messages — goes to
$SIMAB_HOME/logs/lifecycle-<time>.log.  `--verbose` prints everything as it comes instead.

Nothing changed, nothing recomputed.  Before each step the runner asks which of the step's
assets are stale or missing (`pipelines.versions.judge_step`: Dagster's data versions and
staleness, with each asset's code version covering its source and the settings it is
computed with): a step with none is skipped (`arm fm: unchanged, reused`), a step with some
re-runs those and what follows them in the step, saying why.  A changed read-out setting
re-runs the read-out; a new arm trains that arm (and the read-out reads it); a changed arm
setting retrains that arm; a code change re-runs the assets whose code it touches and what
depends on their output.  `--force` runs every step whole.

Killed and resumed.  The jobs run inside this process, where no Dagster daemon watches
them, so a killed runner would leave its run STARTED forever; at start the runner marks
the runs of dead runners failed (`pipelines.instance.mark_dead_runs_failed`).  Every run
carries the lifecycle's id and its step.  `--resume` continues the last lifecycle of this
$DAGSTER_HOME: steps that succeeded are skipped, an interrupted step re-runs only the
assets it had not stored (a multi-asset whole), the steps after it run as usual (reused where unchanged).  It
refuses when that lifecycle ran with other settings, when other runs came after it (they
may have replaced its assets), or when one of its runs is still going.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import uuid
from dataclasses import dataclass

from ops.environment import offline_defaults
from ops.settings import SettingError
from pipelines.home import dagster_home
from resources.llm import (
    LIFECYCLE_TAG,  # one id per invocation of the runner (kept by --resume); its steps share one LLM bill
)

STEP_TAG = "simab/step"  # e.g. "simab_arm[fm]"
PLAN_TAG = "simab/plan"  # digest of the steps and their run config


@dataclass(frozen=True)
class Step:
    job: str
    partition: str | None = None

    @property
    def label(self) -> str:
        return self.job + (f"[{self.partition}]" if self.partition else "")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--arms",
        help="comma-separated arms (default $SIMAB_ARMS or random,pop,fm,deepfm and, with the embedded brain, mirror)",
    )
    again = parser.add_mutually_exclusive_group()
    again.add_argument(
        "--resume", action="store_true", help="continue the last lifecycle of $DAGSTER_HOME after a kill or a failure"
    )
    again.add_argument(
        "--force",
        action="store_true",
        help="compute every step again; by default a step whose assets' code, settings and inputs are those stored "
        "is reused (`arm fm: unchanged, reused`), and a step re-runs only the assets that changed and those after them",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="print the whole log on the console instead of the stage lines"
    )
    parser.add_argument(
        "--bill",
        action="store_true",
        help="print the LLM bill of the lifecycle and of a night of the schedule at these settings, and run nothing",
    )
    args = parser.parse_args(argv)
    offline_defaults()
    from ops.preflight.bill import lifecycle_bill, night_bill

    try:
        settings = checked_settings(args.arms)
        # The whole bill from the settings, before the definitions are even built: a bill
        # above the limit stops the runner in seconds, with what would bring it under.
        bill = lifecycle_bill(settings)
        if args.bill:
            night = night_bill(settings)
            print("\n".join([bill.limit.text(), *(bill.lines() or ["no LLM bill"])]))
            print("\n".join(night.lines() or ["a night of the schedule: no LLM bill"]))
            return 0
        if not bill.fits:
            raise SystemExit("\n".join([*bill.lines(), bill.refusal(settings)]))
        prepared = planned(settings)
    except SettingError as exc:
        if args.verbose:
            raise
        # One line, before any work: the variable, its value and what is allowed.
        raise SystemExit(f"simab: {exc}") from None
    from pipelines.instance import DagsterStorageError, named_storage_errors
    from resources.mlflow_tracking import TrackingStoreError

    try:
        with named_storage_errors(dagster_home()):
            if args.verbose:
                return run_lifecycle(prepared, args.resume, None, bill=bill, force=args.force)
            from resources.storage import data_root

            log = data_root() / "logs" / f"lifecycle-{time.strftime('%Y%m%d-%H%M%S')}.log"
            from pipelines.console import to_log_file

            with to_log_file(log) as terminal:
                return run_lifecycle(prepared, args.resume, terminal, log, bill=bill, force=args.force)
    except (DagsterStorageError, TrackingStoreError) as exc:  # a store that cannot be read: one line, no traceback
        raise SystemExit(str(exc)) from None


def checked_settings(arms_arg: str | None = None, environ=None):
    """The environment's settings (with `--arms`), every value they name checked."""
    from ops.preflight.checks import check_values
    from pipelines.run_config import settings_from_env, uses_llm, with_arms
    from resources.mlflow_tracking import MlflowTracking

    settings = settings_from_env(environ)
    if arms_arg:
        settings = with_arms(settings, [a.strip() for a in arms_arg.split(",") if a.strip()])
    check_values(settings, environ, uses_llm(settings), tracking_uri=lambda: MlflowTracking().resolved_uri())
    return settings


def planned(settings, environ=None):
    """(settings, definitions, steps), every step's run config checked against its job."""
    from pipelines.definitions import build_definitions

    defs = build_definitions(settings, environ)
    plan = lifecycle_plan(settings)
    check_run_configs(settings, defs, [step.job for step in plan])
    return settings, defs, plan


def check_run_configs(settings, defs, jobs: list[str]) -> None:
    """Each job's run config against its config schema; SettingError on the first refusal."""
    from dagster import DagsterInvalidConfigError
    from dagster._core.execution.validate_run_config import validate_run_config
    from pydantic import ValidationError

    from pipelines.jobs import run_config_for
    from pipelines.run_config import setting_of

    for job in dict.fromkeys(jobs):
        config = run_config_for(job, settings)
        job_def = defs.resolve_job_def(job)
        try:
            validate_run_config(job_def, config)
        except DagsterInvalidConfigError as exc:
            raise SettingError(_config_problem(exc, job, config, setting_of)) from None
        # Dagster's schema has the fields and types; the bounds (ge=, le=) are the pydantic
        # Config class's, which Dagster only applies inside the step, after the steps before it.
        for op, fields in config.get("ops", {}).items():
            config_class = _config_class(job_def.graph.node_named(op).definition)
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


def _config_class(op_def):
    """The pythonic Config class an asset's function takes as `config`, or None."""
    import typing

    fn = getattr(getattr(op_def, "compute_fn", None), "decorated_fn", None)
    try:
        return typing.get_type_hints(fn).get("config") if fn is not None else None
    except (NameError, TypeError):
        return None


def _config_problem(exc, job: str, config: dict, setting_of) -> str:
    """A Dagster config error as one line naming the variable that set the field."""
    for error in exc.errors:
        path = [e.field_name for e in error.stack.entries if hasattr(e, "field_name")]
        if len(path) >= 4 and path[0] == "ops" and path[2] == "config":
            op, field = path[1], path[3]
            value = config.get("ops", {}).get(op, {}).get("config", {}).get(field)
            variable = setting_of(op, field) or f"run config ops.{op}.config.{field}"
            return f"{variable}={value!r}: {op}.{field} refuses it ({error.message})"
    return f"the run config of job {job} is not valid: {exc.errors[0].message if exc.errors else exc}"


def run_lifecycle(prepared, resume: bool, terminal, log=None, bill=None, force: bool = False) -> int:
    """The three jobs in order; `terminal` None: the plain, verbose output; `bill` the
    lifecycle's LLM bill from its settings (`ops.preflight.bill`), shown first.  A step whose
    assets are all as stored (code, settings, inputs: `pipelines.versions.judge_step`) is
    reused, one with some changed re-runs those and what follows them; `force`: every step
    runs whole."""
    from dagster import AssetKey, DagsterInstance

    from ops.preflight.bill import brain_of, lifecycle_bill
    from pipelines.console import LifecycleConsole, failure_lines
    from pipelines.instance import RUNNER_TAG, mark_dead_runs_failed, runner_lock, write_instance_config
    from pipelines.jobs import run_config_for
    from pipelines.versions import OUTSIDE_INPUTS_TAG, judge_step, latest_materialization, outside_inputs
    from resources.lifecycle_run import lifecycle_params, lifecycle_run, resolved_values
    from resources.mlflow_tracking import MlflowTracking
    from resources.storage import data_root

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

    digest = _plan_digest(plan, {s.job: run_config_for(s.job, settings) for s in plan})
    lifecycle, done, left = (
        resume_point(instance, defs, plan, digest, say) if resume else (uuid.uuid4().hex[:12], {}, {})
    )
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
            raise SystemExit(
                "\n".join(
                    [
                        *failure_lines(result.all_events),
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
        from ops.links import dagster_ui_url, mlflow_run_url, viewer_url

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
    from ops.simulation.budget import RunBudget, bill_path
    from resources.storage import data_root

    path = bill_path(data_root(), lifecycle)
    return float(RunBudget(path, cap).bill()["spent"]) if path.exists() else 0.0


def _say_bill(say, lifecycle: str, cap: float) -> None:
    """The run's LLM bill, per asset and in all, where the LLM was called (the report has it too)."""
    from ops.readout.report import bill_lines
    from ops.simulation.budget import RunBudget, bill_path
    from resources.storage import data_root

    path = bill_path(data_root(), lifecycle)
    if path.exists():
        for line in bill_lines(RunBudget(path, cap).bill()):
            if line:
                say(line)


def lifecycle_plan(settings) -> list[Step]:
    """The steps in order: prepare, each arm, the read-out.  With user shards an arm is
    trained, simulated shard by shard (`simab_simulate[<arm>|<shard>]`), then combined; the
    runner executes in its own process, so here the shards run one after another (an
    executor with workers runs them at once when launched as separate runs: README,
    "Beyond one machine")."""
    from assets.partitions import arm_shard_key

    arms = []
    for arm in settings.arms:
        if settings.shards > 1:
            arms += [
                Step("simab_arm", arm),
                *(Step("simab_simulate", arm_shard_key(arm, k)) for k in range(settings.shards)),
                Step("simab_combine", arm),
            ]
        else:
            arms.append(Step("simab_arm", arm))
    return [Step("simab_prepare"), *arms, Step("simab_readout")]


def resume_point(instance, defs, plan: list[Step], digest: str, say=print) -> tuple[str, dict, dict]:
    """Where the last lifecycle stopped: (its id, {step label: run id of the steps that
    succeeded}, {step label: the asset keys the interrupted step has still to store})."""
    from dagster import DagsterEventType, DagsterRunStatus, RunsFilter

    newest = instance.get_run_records(limit=1)
    if not newest:
        say("--resume: no run in this $DAGSTER_HOME yet; running the whole lifecycle")
        return uuid.uuid4().hex[:12], {}, {}
    last = newest[0].dagster_run
    lifecycle = last.tags.get(LIFECYCLE_TAG)
    if lifecycle is None:
        raise SystemExit(
            f"--resume: the newest run ({last.job_name} {last.run_id}) was not started by the lifecycle runner and may have "
            "replaced assets of the last lifecycle; run without --resume"
        )
    if last.tags.get(PLAN_TAG) != digest:
        raise SystemExit(
            f"--resume: the last lifecycle ({lifecycle}) ran with other arms or run config; run without --resume, or with its settings"
        )
    runs = [r.dagster_run for r in instance.get_run_records(filters=RunsFilter(tags={LIFECYCLE_TAG: lifecycle}))]
    going = [r.run_id for r in runs if not r.is_finished]
    if going:
        raise SystemExit(
            f"--resume: run(s) {', '.join(going)} of lifecycle {lifecycle} are still going; wait for them or stop them first"
        )
    done, left = {}, {}
    for step in plan:
        attempts = [r for r in runs if r.tags.get(STEP_TAG) == step.label]
        succeeded = [r.run_id for r in attempts if r.status == DagsterRunStatus.SUCCESS]
        if succeeded:
            done[step.label] = succeeded[0]
            continue
        stored = {
            entry.asset_materialization.asset_key
            for r in attempts
            for entry in instance.all_logs(r.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
        }
        if stored:
            left[step.label] = _still_to_store(defs, step.job, stored)
        break  # the steps after the first unfinished one never ran in this lifecycle
    say(f"--resume: lifecycle {lifecycle}: {len(done)} of {len(plan)} steps done")
    return lifecycle, done, left


def _still_to_store(defs, job: str, stored: set) -> set:
    """The job's asset keys not in `stored`, widened to whole multi-assets (they run as one op)."""
    keys = defs.resolve_job_def(job).asset_layer.selected_asset_keys
    graph = defs.resolve_asset_graph()
    missing = set()
    for key in keys - stored:
        missing |= set(graph.get(key).assets_def.keys) & keys
    return missing


def _plan_digest(plan: list[Step], configs: dict) -> str:
    text = json.dumps({"steps": [s.label for s in plan], "run_config": configs}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


if __name__ == "__main__":
    raise SystemExit(main())

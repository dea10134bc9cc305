"""The lifecycle runner: the plan's steps executed against the persistent Dagster instance, each
a Dagster run (`dagster.execute_job`) with the executor the settings name ($SIMAB_EXECUTOR:
in-process, multiprocess, Celery), each reused when its assets are as stored, re-run where they
are not, re-executed from its failure where a killed or failed lifecycle stopped
(`dagster.ReexecutionOptions.from_failure`), inside one MLflow run; and at the end where to look.

With an executor whose steps run elsewhere (multiprocess, Celery) the independent steps of a
lane — the arms (`pipelines.plan.lanes`) — run side by side, $SIMAB_CONCURRENCY at a time, each
its own run in a process of its own.  With multiprocess every run executes in a process of
its own and its steps in that process (an arm's job is a chain; a process per step, as
Dagster's multiprocess executor runs a launched run, costs the stack's imports per step).
In-process, every step runs after the one before (two runs in one process would
share its threads, its standard output and its memory)."""

from __future__ import annotations

import json
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

from dagster import AssetKey, DagsterInstance, ReexecutionOptions, execute_job

from ops.links import dagster_ui_url, mlflow_run_url, viewer_url
from ops.preflight.bill import brain_of, lifecycle_bill
from ops.readout.report_markdown import bill_lines
from ops.readout.verdict import Verdict
from ops.settings import exported
from ops.simulation.budget import RunBudget, bill_path
from ops.storage.exhaustion import exhausted_line, exhaustion_at, named_exhaustion
from pipelines.console import LifecycleConsole, failure_lines
from pipelines.home import dagster_home
from pipelines.instance import RUNNER_TAG, mark_dead_runs_failed, runner_lock, write_instance_config
from pipelines.jobs import run_config_for
from pipelines.lifecycle_jobs import keep, reconstructable_job
from pipelines.plan import PLAN_TAG, STEP_TAG, Step, lanes, plan_digest
from pipelines.resume import resume_point
from pipelines.setting_ops import resolved_values
from pipelines.versions import OUTSIDE_INPUTS_TAG, judge_step, latest_materialization, outside_inputs
from resources.lifecycle_run import lifecycle_params, lifecycle_run
from resources.llm import LIFECYCLE_TAG
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root

ATTEMPT_TAG = "simab/attempt"  # one run's own tag: the console finds the run by it as it starts
PARTITION_TAG = "dagster/partition"
STAGE_NAMES = {
    "simab_prepare": "prepare",
    "simab_arm": "arm",
    "simab_simulate": "shard",
    "simab_combine": "combine",
    "simab_readout": "read-out",
}


@dataclass
class Attempt:
    """A step about to run: how (`options` of `execute_job`), what the console shows of it."""

    step: Step
    stage_name: str
    options: dict
    n_steps: int
    note: str = ""
    changed: str = ""
    tags: dict = field(default_factory=dict)


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
    lifecycle, done, left = resume_point(instance, plan, digest, say) if resume else (uuid.uuid4().hex[:12], {}, {})
    if held is not None:  # the home's holder record names the lifecycle (`ops.storage.home_lock`)
        held.note(lifecycle=lifecycle)
    started = time.time()
    runs = []
    side_by_side = settings.executor != "in_process" and settings.concurrency > 1
    # Multiprocess: every run in a process of its own, its steps there (`_execute_here`).
    steps_here = settings.executor == "multiprocess"

    def attempt(step: Step, runner: str) -> Attempt | None:
        """What running `step` takes, or None where it is done or reused (said)."""
        label = step.label
        stage_name = f"{STAGE_NAMES[step.job]} {step.partition or ''}".strip()
        if label in done:
            say(f"{label}: done in run {done[label]}, skipped")
            runs.append((label, done[label], "done"))
            return None
        tags = {
            LIFECYCLE_TAG: lifecycle,
            STEP_TAG: label,
            PLAN_TAG: digest,
            ATTEMPT_TAG: uuid.uuid4().hex,
            **({RUNNER_TAG: runner} if runner else {}),
            **({PARTITION_TAG: step.partition} if step.partition else {}),
        }
        job = defs.resolve_job_def(step.job)
        if label in left:  # Dagster re-executes the failed run: what failed or never finished
            parent = instance.get_run_by_id(left[label])
            keys = _steps_left(instance, parent)
            outside = outside_inputs(instance, defs, step.job, step.partition)
            tags.update({OUTSIDE_INPUTS_TAG: json.dumps(outside, sort_keys=True)} if outside else {})
            options = dict(reexecution_options=ReexecutionOptions.from_failure(parent.run_id, instance))
            return Attempt(step, stage_name, options, len(keys), note=f" (resuming: {', '.join(keys)})", tags=tags)
        run_config = run_config_for(step.job, settings)
        changed, selection = "", None
        if not force:
            judgement = judge_step(instance, defs, step.job, step.partition, run_config)
            if judgement.reused:
                say(f"{stage_name}: unchanged, reused")
                runs.append((label, judgement.newest_run(), "reused"))
                return None
            if judgement.stored_by:  # some kept: say what changed (a first run just runs)
                changed = judgement.text()
                selection = judgement.rerun if judgement.rerun != judgement.keys else None
        outside = outside_inputs(instance, defs, step.job, step.partition)
        tags.update({OUTSIDE_INPUTS_TAG: json.dumps(outside, sort_keys=True)} if outside else {})
        options = dict(run_config=run_config, asset_selection=sorted(selection) if selection else None)
        n_steps = len(selection) if selection else len(job.nodes)
        return Attempt(step, stage_name, options, n_steps, changed=changed, tags=tags)

    def execute(todo: Attempt, lane=None, apart: bool = False) -> None:
        """Run `todo` as a Dagster run through the instance (`apart`: in a process of its own);
        a failure stops the lifecycle."""
        label = todo.step.label

        def run() -> tuple[str, bool]:
            if apart or steps_here:
                return _execute_apart(home, todo.step.job, todo.tags, todo.options, steps_here)
            recon = reconstructable_job(todo.step.job)
            result = execute_job(recon, instance=instance, tags=todo.tags, raise_on_error=False, **todo.options)
            return result.run_id, result.success

        if console is None:
            print(f"==> {label}{todo.note}", flush=True)
            if todo.changed:
                print(f"    {todo.changed}", flush=True)
            run_id, success = run()
            stage = None
        else:
            with _stage(console, lane, todo) as stage:
                if todo.changed:
                    stage.notes.append(todo.changed)
                with stage.follow(instance, {ATTEMPT_TAG: todo.tags[ATTEMPT_TAG]}):
                    run_id, success = run()
                stage.succeeded = success
        runs.append((label, run_id, "ran" if success else "failed"))
        if not success:
            raise SystemExit(_failed(instance, run_id, todo, stage, log, lifecycle, cap, settings))

    tracking = MlflowTracking()
    configs = {job: run_config_for(job, settings) for job in dict.fromkeys(s.job for s in plan)}
    params = lifecycle_params(settings, resolved_values(defs, configs))
    with (
        runner_lock(home) as runner,
        lifecycle_run(tracking, lifecycle, params) as tracked,
        _environment(settings, defs),
    ):
        for lane in lanes(plan):
            if not side_by_side or len(lane) == 1:
                for step in [s for chain in lane for s in chain]:
                    stage = f"{STAGE_NAMES[step.job]} {step.partition or ''}".strip()
                    with named_exhaustion(data_root(), lambda: log, stage, settings.agents):
                        todo = attempt(step, runner)
                        if todo is not None:
                            execute(todo)
                continue
            with named_exhaustion(data_root(), lambda: log, "arms", settings.agents):
                _side_by_side(lane, lambda step: attempt(step, runner), execute, console, settings.concurrency)
        # The report in force: this run's, or the one reused (its read-out was unchanged).
        stored = latest_materialization(instance, AssetKey("simab_report"), None)
        summary = stored.event_log_entry.asset_materialization.metadata["summary"] if stored is not None else None
        verdict = Verdict.from_dict(summary.value) if summary is not None else None
        if verdict is not None:
            tracked.finish(verdict, _spent(lifecycle, cap))
    report_run_id = stored.run_id if stored is not None else runs[-1][1]

    client = tracking.client()
    report_run = client.search_runs(
        [tracking.experiment_id()],
        f"tags.dagster_run_id = '{report_run_id}' and tags.dagster_asset = 'simab_report'",
        max_results=1,
    )
    if console is not None and verdict is not None:
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
        console.summary(verdict, places)
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


@contextmanager
def _stage(console, lane, todo: Attempt):
    """The console's stage of `todo`: a bar of `lane` (side by side), else a stage alone."""
    label = f"{todo.stage_name}{todo.note}"
    with lane.stage(label, todo.n_steps) if lane is not None else console.stage(label, todo.n_steps) as stage:
        yield stage


def _side_by_side(chains: list[list[Step]], attempt, execute, console, concurrency: int) -> None:
    """The chains of one lane at once, `concurrency` at a time, each chain's steps in order, each
    judged when the one before it in its chain has ended (a shard reads its arm's new lists).
    Each run executes in a process of its own (`_execute_apart`): Dagster sets up a run's
    logging for the whole process (`logging.config.dictConfig`), so two runs in one process
    deadlock or close each other's handlers.  The first failure stops the lifecycle once every
    chain started has ended."""
    with console.lane() if console is not None else nullcontext() as lane:

        def run_chain(chain: list[Step]) -> None:
            for step in chain:
                todo = attempt(step)
                if todo is not None:
                    execute(todo, lane, apart=True)

        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="simab-arm") as pool:
            futures = [pool.submit(run_chain, chain) for chain in chains]
        failures = [f.exception() for f in futures if f.exception() is not None]
        if failures:
            raise failures[0]


@contextmanager
def _environment(settings, defs):
    """The runner's settings in the environment, as a step's process reads them
    (`pipelines.lifecycle_jobs`): its arms (`--arms`) as specs; `defs` kept for this
    environment, so that the runner's own process builds them once."""
    from ops.arms.registry import spec_of

    with exported(arms=[spec_of(arm).text() for arm in settings.arms]):
        keep(defs)
        yield


def _execute_apart(home: str, job: str, tags: dict, options: dict, steps_here: bool) -> tuple[str, bool]:
    """`execute_job` of `job` in a fresh process (spawned: it imports and builds the
    definitions from the environment, `pipelines.lifecycle_jobs`), its standard output and error
    the runner's; (run id, success)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    answer, sender = context.Pipe(duplex=False)
    process = context.Process(target=_execute_here, args=(home, job, tags, options, sender, steps_here))
    process.start()
    sender.close()
    try:
        run_id, success = answer.recv()
    except EOFError:
        process.join()
        raise SystemExit(
            f"{tags[STEP_TAG]}: the process executing its run ended without a result (exit code {process.exitcode})"
        ) from None
    process.join()
    return run_id, success


def _execute_here(home: str, job: str, tags: dict, options: dict, sender, steps_here: bool) -> None:
    """`_execute_apart`'s process: killed with the runner (Linux), so that no run goes on
    after the runner that holds the home for it is gone; `steps_here`: the run's steps in this
    process (the in-process executor), whatever executor the settings name."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the run ends on its own
        pass
    # With multiprocess this process is the run's own (an arm's, beside the other arms'): its
    # steps execute here, not in a fresh interpreter each, which would import the stack and
    # build the definitions again per step: the tiny world's lifecycle took 276 s that way on two
    # cores, 117 s so (docs/findings/executors.md).
    with exported(executor="in_process") if steps_here else nullcontext():
        _execute_run(home, job, tags, options, sender)


def _execute_run(home: str, job: str, tags: dict, options: dict, sender) -> None:
    with DagsterInstance.from_config(home) as instance:
        result = execute_job(reconstructable_job(job), instance=instance, tags=tags, raise_on_error=False, **options)
    sender.send((result.run_id, result.success))
    sender.close()


def _steps_left(instance, parent) -> list[str]:
    """The steps of a failed run that its re-execution from failure runs: those of its plan
    without a success in its event log (what failed, and what never started or finished)."""
    from dagster import DagsterEventType

    plan = instance.get_execution_plan_snapshot(parent.execution_plan_snapshot_id)
    records = instance.get_records_for_run(parent.run_id, of_type=DagsterEventType.STEP_SUCCESS, limit=10_000)
    done = {record.event_log_entry.step_key for record in records.records}
    return sorted(step.key for step in plan.steps if step.key not in done)


def _failed(instance, run_id: str, todo: Attempt, stage, log, lifecycle: str, cap: float, settings) -> str:
    """The exit message of a failed step: each failed step's own error first, then what the
    stage noted, what the run spent of its LLM cap, and where to look."""
    where = f"the full log {log}" if log else "the Dagster UI (simab ui) for the whole log"
    again = " Fix the cause, then `simab resume` re-runs only what is left."
    notes = [f"    {n}" for n in stage.notes] if stage is not None else []
    spent: list[str] = []
    _say_bill(spent.append, lifecycle, cap)  # what the run spent of its LLM cap, also when it stopped on it
    events = [e.dagster_event for e in instance.all_logs(run_id) if e.dagster_event is not None]
    causes = failure_lines(events)
    # A full disk or a read-only home first, named (folder, space free, what the step writes).
    found = (exhaustion_at(cause, data_root()) for cause in causes)
    exhausted = next((f for f in found if f is not None), None)
    if exhausted is not None:
        causes = [exhausted_line(data_root(), *exhausted, stage=todo.stage_name, agents=settings.agents), *causes]
    return "\n".join([*causes, *notes, *spent, f"{todo.step.label} failed (Dagster run {run_id}). See {where}.{again}"])


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

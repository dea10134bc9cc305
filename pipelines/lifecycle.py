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

Each step is a Dagster run through the instance (`dagster.execute_job`) with the executor
$SIMAB_EXECUTOR names: in-process (default), multiprocess (the arms side by side,
$SIMAB_CONCURRENCY at once) or Celery (`pipelines.runner`, `pipelines.lifecycle_jobs`).

Killed and resumed.  The runner executes its runs itself, not through a run launcher, so no
Dagster daemon watches them and a killed runner would leave its run STARTED forever; at start
the runner marks the runs of dead runners failed (`pipelines.instance.mark_dead_runs_failed`).
Every run carries the lifecycle's id and its step.  `--resume` continues the last lifecycle of
this $DAGSTER_HOME: steps that succeeded are skipped, an interrupted step's run is re-executed
from its failure by Dagster (`ReexecutionOptions.from_failure`: what failed or never finished,
and what follows it), the steps after it run as usual (reused where unchanged).  It
refuses when that lifecycle ran with other settings, when other runs came after it (they
may have replaced its assets), or when one of its runs is still going.

One writer per home.  Once every value is checked (before Dagster and MLflow are even
imported: a refused value costs about a second of CPU) and before the definitions are built,
the runner takes `$SIMAB_HOME`
(`ops.storage.home_lock`: a kernel lock, released when the process ends however it ends)
and holds it to the end; a second lifecycle, or a run the Dagster instance launches (the
UI, a schedule tick: `pipelines.home_coordinator` at submission, `pipelines.resources.home_locked`
in its run worker), is refused at once in one line
naming the holder, or waits `$SIMAB_HOME_WAIT_S`.  `simab run` takes a home that exists
before its imports, so the refusal comes in seconds.  A full disk or a read-only home stops it with one line naming
the folder, the space free there and about what the step writes
(`ops.storage.exhaustion`); `simab resume` continues once space is freed.

This module is the command line: the steps are `pipelines.plan`, checked before the first
by `pipelines.preflight`, executed by `pipelines.runner`, picked up again by `pipelines.resume`.
"""

from __future__ import annotations

import argparse
import time

from ops.environment import offline_defaults
from ops.preflight.bill import lifecycle_bill, night_bill
from ops.settings import SettingError, current
from ops.storage.exhaustion import ResourceExhausted, named_exhaustion
from ops.storage.home_lock import HomeBusy, home_lock, runner_claim
from pipelines.console import to_log_file
from pipelines.home import dagster_home
from pipelines.preflight import checked_settings

# Dagster and MLflow (seconds of imports) are imported once the settings and the bill passed:
# a value refused by them, or a bill above the limit, is said before.


def main(argv: list[str] | None = None, held=None) -> int:
    """The lifecycle; `held`: the home, taken by the caller already (`simab run`), else taken here."""
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
    except SettingError as exc:
        if args.verbose:
            raise
        # One line, before any work: the variable, its value and what is allowed.
        raise SystemExit(f"simab: {exc}") from None
    # One writer per home: taken once every value is checked (nothing is written before) and
    # before the seconds of building the definitions, so that of two runs started seconds apart
    # the first takes it; held to the end.  `simab run` takes a home that exists before its
    # imports (`pipelines.cli`).
    claim = runner_claim(args.resume)
    home = _home()
    try:
        with named_exhaustion(home):
            if held is not None:
                _yield_to_a_launch(held)
                return _run(args, _planned(args, settings), bill, held)
            with home_lock(home, claim, settings.home_wait_s, on_wait=_say_now) as taken:
                _yield_to_a_launch(taken)
                return _run(args, _planned(args, settings), bill, taken)
    except HomeBusy as exc:
        raise SystemExit(f"simab: {exc}") from None
    except ResourceExhausted as exc:  # a disk that is full: one line, no traceback
        raise SystemExit(f"simab: {exc}") from None


def _yield_to_a_launch(held) -> None:
    """Stop, the home given back, where a run launched through the instance before this runner
    took the home has not taken it yet (`pipelines.home_coordinator.launched_first`): its worker
    takes it seconds after the launch, and waits for a runner that came after it to stop here.
    Checked before the definitions are built, so that the launch waits seconds, not the build."""
    from pipelines.home import dagster_home

    folder = dagster_home()
    if not (folder / "dagster.yaml").exists():  # no instance yet: nothing was launched through it
        return
    from dagster import DagsterInstance

    from pipelines.home_coordinator import launched_first

    with DagsterInstance.from_config(str(folder)) as instance:
        first = launched_first(instance, before=held.record["since"])
    if first is not None:
        raise SystemExit(f"simab: the home {_home()} is claimed: {first}")


def _planned(args, settings):
    """`pipelines.preflight.planned`: a run config its job refuses stops the runner in one line
    (the home, taken, holds then only its lock's files)."""
    from pipelines.preflight import planned

    try:
        return planned(settings)
    except SettingError as exc:
        if args.verbose:
            raise
        raise SystemExit(f"simab: {exc}") from None


def _run(args, prepared, bill, held) -> int:
    # lazy: the runner imports the asset graph (a second), which a refused value or bill never needs
    from pipelines.instance import DagsterStorageError, named_storage_errors
    from pipelines.runner import run_lifecycle
    from resources.mlflow_tracking import TrackingStoreError

    log = None
    try:
        with named_exhaustion(_home(), lambda: log), named_storage_errors(dagster_home()):
            if args.verbose:
                return run_lifecycle(prepared, args.resume, None, bill=bill, force=args.force, held=held)
            log = _home() / "logs" / f"lifecycle-{time.strftime('%Y%m%d-%H%M%S')}.log"
            with to_log_file(log) as terminal:
                return run_lifecycle(prepared, args.resume, terminal, log, bill=bill, force=args.force, held=held)
    except (DagsterStorageError, TrackingStoreError) as exc:  # a store that cannot be read: one line, no traceback
        raise SystemExit(str(exc)) from None


def _home():
    """The home ($SIMAB_HOME as the edge read it), as `resources.storage.data_root` gives it."""
    return current().home.resolve()


def _say_now(text: str) -> None:
    print(f"simab: {text}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())

"""What the lifecycle runner shows a person: one line per stage with a progress bar and its
time, the LLM bill before a simulation, the per-arm result and where to look.  Everything
else — Dagster's event log, library messages, inner progress bars — goes to the full log
under $SIMAB_HOME/logs/.

When a step fails, the cause comes first: the line after the bars is the failing step's
own error (`failure_lines`: the file, line and field where it names them), once.  What only
follows from it stays in the full log: Dagster's "Dependencies for step … failed … Not
executing" for each step after the failed one, and the run's failure, which repeats the
step's.

`to_log_file(path)` sends the process's standard output and error (file descriptors 1 and 2,
so C libraries and subprocesses too) to the log and yields a stream on the real terminal;
`LifecycleConsole` draws on that stream with rich: a stage alone, or the stages of a lane (the
arms, run side by side by an executor with workers: `pipelines.plan.lanes`) as bars of one
display.  `Stage.follow(instance, tags)` follows the Dagster run of a stage as it executes,
from the instance's event log: the run is executed by Dagster (`dagster.execute_job`), its
steps perhaps in other processes, so the console reads what the instance stores.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from ops.readout.verdict import Verdict


@contextmanager
def to_log_file(path: Path) -> Iterator[TextIO]:
    """Standard output and error go to `path` (appended) inside the block; the stream
    yielded writes to the terminal they went to before."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(saved[0]), "w", buffering=1, encoding="utf-8")
    streams = sys.stdout, sys.stderr
    log = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed below, after the terminal is back
    try:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        # Python's own streams too, wherever they pointed (a test runner's capture, say).
        sys.stdout = sys.stderr = log
        try:
            yield terminal
        finally:
            # The terminal first: on a full disk the log's last write fails, and the error
            # that stopped the run must still reach the person.
            sys.stdout, sys.stderr = streams
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            terminal.close()
    finally:
        try:
            log.close()
        except OSError:  # a full disk: what could not be written to the log is lost
            pass


class LifecycleConsole:
    """Stage lines, notes and the closing summary, drawn with rich on `stream`."""

    def __init__(self, stream: TextIO | None = None) -> None:
        from rich.console import Console

        self.console = Console(file=stream or sys.stdout, highlight=False)
        self.notes: list[str] = []

    def line(self, text: str = "", style: str | None = None) -> None:
        self.console.print(text, style=style, markup=False, soft_wrap=True)  # paths are never cut

    @contextmanager
    def stage(self, label: str, total: int) -> Iterator[Stage]:
        """A stage of `total` steps: a live bar on a terminal, one finished line in any case."""
        with self.lane() as lane, lane.stage(label, total) as stage:
            yield stage

    @contextmanager
    def lane(self) -> Iterator[Lane]:
        """Stages that run at once (`Lane.stage`, from any thread), one bar each; the notes of
        those that succeeded are printed under them once every one has ended."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(
            _mark_column(),
            TextColumn("{task.description:<22}", markup=False),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[step]}", markup=False),
            console=self.console,
        )
        lane = Lane(progress)
        with progress:
            yield lane
        # A failed stage's notes come after its cause (the runner prints both).
        for stage in lane.stages:
            if stage.succeeded:
                for note in stage.notes:
                    self.line(f"    {note}")

    def summary(self, verdict: Verdict, places: list[tuple[str, str]]) -> None:
        """The verdict — the same lines the report opens on (`verdict_lines`: the winning arm
        against the control, the fidelity verdict, the trust figures, warnings) — then the
        per-arm table (simulated CTR, CVR, AR and offline NDCG@20, each with its 95 %
        interval), and where everything is."""
        from rich.table import Table

        from ops.readout.verdict import verdict_lines

        table = Table(box=None, pad_edge=False)
        for column in ("arm", "CTR", "CVR", "AR", "NDCG@20"):
            table.add_column(column, no_wrap=True, min_width=14)
        for arm, cells in verdict.arms.items():
            table.add_row(
                arm,
                *(
                    _cell(c, d)
                    for c, d in ((cells.ctr, 3), (cells.cvr, 3), (cells.average_rating, 2), (cells.ndcg_at_k, 3))
                ),
            )
        self.line()
        for said in verdict_lines(verdict):
            self.line(said, style="bold red" if said.startswith("WARNING:") else None)
        self.line()
        self.line(
            f"A/B read-out against {verdict.control}: mean [95 % interval] over agents; NDCG@20 offline, "
            + verdict.offline_users
        )
        self.console.print(table)
        self.line()
        for name, where in places:
            self.line(f"  {name:<13}{where}")


def _mark_column():
    """The spinner of a stage, then ✓ or ✗ (each bar its own: a lane's stages end apart)."""
    from rich.progress import SpinnerColumn
    from rich.text import Text

    class Mark(SpinnerColumn):
        def render(self, task):
            if task.finished:
                return Text.from_markup("[red]✗[/]" if task.fields.get("failed") else "[green]✓[/]")
            return super().render(task)

    return Mark()


class Lane:
    """The stages of one display (`LifecycleConsole.lane`)."""

    def __init__(self, progress) -> None:
        self.progress = progress
        self.stages: list[Stage] = []
        self._lock = threading.Lock()

    @contextmanager
    def stage(self, label: str, total: int) -> Iterator[Stage]:
        with self._lock:
            stage = Stage(self.progress, self.progress.add_task(label, total=total, step=""), total)
            self.stages.append(stage)
        try:
            yield stage
        except BaseException:
            stage.succeeded = False
            raise
        finally:
            stage.finish() if stage.succeeded else stage.fail()


class Stage:
    """One stage's bar: advanced by the run's step events; notes are printed under it."""

    def __init__(self, progress, task, total: int) -> None:
        self.progress, self.task, self.total = progress, task, total
        self.notes: list[str] = []
        self.failed_steps: list[str] = []
        self.started_steps: set[str] = set()
        self.succeeded = True

    def watch(self, instance, run_id: str) -> None:
        """Follow a run executed in this process (`execute_in_process`, run id chosen before):
        the instance calls listeners synchronously as each event is stored.  Not every instance
        offers it (an old Dagster): then the bar just completes at the end."""
        add = getattr(instance, "add_event_listener", None)
        if add is not None:
            add(run_id, self._on_event)

    @contextmanager
    def follow(self, instance, tags: dict[str, str]) -> Iterator[None]:
        """Inside the block, the bar follows the run that carries `tags` (one run's own) as its
        events are stored; every event it stored is read by the end of the block."""
        follower = RunFollower(instance, tags, self._on_event)
        follower.start()
        try:
            yield
        finally:
            follower.stop()

    def _on_event(self, entry) -> None:
        event = entry.dagster_event
        if event is None:
            # A warning an asset logged for people, from a step that ran: Dagster's own line
            # for each step it does not execute after a failure names a step that never started.
            if entry.level >= 30 and entry.user_message and (entry.step_key or "") in self.started_steps:
                self.notes.append(f"{entry.step_key}: {entry.user_message}")
            return
        kind = event.event_type_value
        if kind == "STEP_START":
            self.started_steps.add(event.step_key or "")
            self.progress.update(self.task, step=event.step_key or "")
        elif kind in ("STEP_SUCCESS", "STEP_SKIPPED"):
            self.progress.advance(self.task)
        elif kind == "STEP_FAILURE":
            self.failed_steps.append(event.step_key or "?")
            self.progress.advance(self.task)
        elif (
            kind == "ASSET_MATERIALIZATION"
            and event.asset_key is not None
            and event.asset_key.to_user_string() == "llm_cost_estimate"
        ):
            metadata = event.event_specific_data.materialization.metadata
            self.notes.append(_bill(metadata))

    def finish(self) -> None:
        self.progress.update(self.task, completed=self.total, step="")

    def fail(self) -> None:
        step = "failed: " + ", ".join(self.failed_steps) if self.failed_steps else "failed"
        self.progress.update(self.task, completed=self.total, step=step, failed=True)


class RunFollower(threading.Thread):
    """Reads the events of the run carrying `tags` from the instance every `every_s` seconds,
    in order, each once, into `on_event`; `stop` reads the rest."""

    def __init__(self, instance, tags: dict[str, str], on_event, every_s: float = 0.5) -> None:
        super().__init__(daemon=True, name="simab-follow-run")
        self.instance, self.tags, self.on_event, self.every_s = instance, tags, on_event, every_s
        self.run_id: str | None = None
        self.cursor: str | None = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self._stopped.wait(self.every_s):
            try:
                self.read()
            except Exception:  # a storage busy a moment (SQLite): the next read catches up
                pass

    def stop(self) -> None:
        self._stopped.set()
        self.join()
        self.read()

    def read(self) -> None:
        from dagster import RunsFilter

        with self._lock:
            if self.run_id is None:
                found = self.instance.get_run_records(filters=RunsFilter(tags=self.tags), limit=1)
                if not found:
                    return
                self.run_id = found[0].dagster_run.run_id
            page = self.instance.get_records_for_run(self.run_id, cursor=self.cursor)
            for record in page.records:
                self.on_event(record.event_log_entry)
            self.cursor = page.cursor or self.cursor


def failure_lines(events, most: int = 5) -> list[str]:
    """The causes of a failed run, first first: `step: its error` for each step that failed
    (at most `most`), each said once; the run's own failure, which repeats them, only where
    no step failed (a run that could not start)."""
    events = list(events)
    failed = [e for e in events if e.is_step_failure] or [e for e in events if e.is_failure][:1]
    lines: list[str] = []
    for event in failed:
        text = failure_text(event)
        line = f"{event.step_key}: {text}" if event.step_key else text
        if line not in lines:
            lines.append(line)
    return lines[:most]


def failure_text(event) -> str:
    """What a failed step says to a person: the description an asset gave its `Failure`
    (e.g. the cost limit, naming the estimate), else the user's own exception — the
    innermost cause, since Dagster wraps it — in full (a broken contract lists every problem),
    its class named without its module (`DataFileError: …`)."""
    data = event.event_specific_data
    described = getattr(getattr(data, "user_failure_data", None), "description", None)
    if described:
        return described
    error = getattr(data, "error", None)
    while error is not None and error.cause is not None:
        error = error.cause
    if error is not None and error.message:
        message = error.message.strip()
        head, colon, rest = message.partition(": ")
        if colon and error.cls_name and head.endswith("." + error.cls_name) and " " not in head:
            return f"{error.cls_name}: {rest}"
        return message
    return event.message or "failed"


def _cell(values, digits: int) -> str:
    if not values or values[0] is None:
        return "n/a"
    mean, low, high = values
    if low is None or high is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f}\n[{low:.{digits}f}, {high:.{digits}f}]"  # two lines: fits 80 columns


def _bill(metadata) -> str:
    def value(key):
        found = metadata.get(key)
        return getattr(found, "value", found)

    limit = value("max_cost_usd")
    limit = f"limit ${limit:,.2f}" if isinstance(limit, (int, float)) and limit else "no cost limit"
    return (
        f"LLM bill before the simulation: {value('calls'):,} calls, {value('tokens'):,} tokens, ${value('cost (USD)'):,.2f} "
        f"(ceiling ${value('ceiling (USD)'):,.2f}, {limit}) on {value('model')}"
    )

"""One writer per home: a lifecycle, or a run launched through the Dagster instance, takes
`$SIMAB_HOME` for as long as it runs.

Two lifecycles on one home replace each other's assets under each other's feet (each
asset's write is atomic, but a run reads the assets it wrote a step earlier).  So the
lifecycle runner takes the home exclusively before its first step, and so does every run
the Dagster instance launches (a materialisation from the UI, a schedule tick, a sensor's
run: `pipelines.resources`, around the run's executor).  Runs that may share a home without
harm take it shared, in a group: the runs of one night of the schedule, or of one backfill
(tag `simab/lifecycle` / `dagster/backfill`), and the runs of one partitioned job on other
partitions (the shards of the Celery executor: different partitions of one asset).  A
shared holder is refused by an exclusive one and by one of another group, or of the same
partition.

The lock is the kernel's (`flock` on `<home>/.simab-home.lock`): it is released when its
process ends, however it ends (exit, exception, SIGKILL), so a killed holder leaves no lock
behind.  Beside it each holder keeps a record, `<home>/.simab-home.holders/<token>.json`
(what holds the home — a lifecycle's id, a Dagster run's id —, its pid, when it started and
how it was started), read to name the holder in a refusal.  A record whose process is gone
(no such pid, or a newer process that reused it) is stale: it is removed and never named.

A second taker is refused at once with one line naming the holder (its id, since when, how
to wait for it or stop it), or, with `wait_s` > 0 (`$SIMAB_HOME_WAIT_S`), waits up to that
long for the home, saying so once (`on_wait`).

The first to ask keeps its turn.  A run launched through the instance asks when it is
submitted, but takes the home only in its run worker, seconds later; a lifecycle runner that
took the home in between gives it back before its first step when it finds such a run
(`pipelines.home_coordinator.launched_first`).  So a taker that was submitted at `first_at`
and finds only runners that took the home after that waits up to `YIELD_WAIT_S` for them to
give it back.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

LOCK_NAME = ".simab-home.lock"
GATE_NAME = ".simab-home.gate"
HOLDERS_NAME = ".simab-home.holders"
POLL_S = 0.5
# How long a run that came first waits for a lifecycle runner that took the home after it to
# give it back: the runner checks before its definitions are built, seconds after it started.
YIELD_WAIT_S = 60.0
RUNNER_HOW = ("`simab run`", "`simab resume`")  # how a lifecycle runner's claim says it came


class HomeBusy(RuntimeError):
    """The home is held by another lifecycle or run (the message names it)."""


@dataclass
class HomeClaim:
    """What takes the home: `holder` (a lifecycle's or a Dagster run's id, shown), `how`
    (`simab run`, `Dagster run of simab_arm[pop]`, …); `group` None: exclusively, else shared
    with the holders of the same group whose `partition` differs."""

    holder: str
    how: str
    group: str | None = None
    partition: str | None = None
    extra: dict = field(default_factory=dict)


def runner_claim(resume: bool) -> HomeClaim:
    """The claim of a lifecycle runner, `simab run` or `simab resume` (`RUNNER_HOW`)."""
    return HomeClaim(holder="", how=RUNNER_HOW[1] if resume else RUNNER_HOW[0])


class HeldHome:
    """The home while held: `note(**fields)` adds to the holder's record (the lifecycle id
    once it is known)."""

    def __init__(self, home: Path, record_path: Path, record: dict) -> None:
        self.home, self.record_path, self.record = home, record_path, record

    def note(self, **fields) -> None:
        self.record.update(fields)
        _write_record(self.record_path, self.record)


@contextmanager
def home_lock(
    home: str | Path,
    claim: HomeClaim,
    wait_s: float = 0.0,
    on_wait: Callable[[str], None] | None = None,
    first_at: float | None = None,
) -> Iterator[HeldHome]:
    """Hold `home` for `claim` inside the block (module docstring); `HomeBusy` naming the
    holder when it is taken and stays taken past `wait_s` seconds (past `YIELD_WAIT_S` where
    every holder is a lifecycle runner that took it after `first_at`, the claim's submission)."""
    home = Path(home).expanduser().resolve()
    holders = home / HOLDERS_NAME
    holders.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    began = time.monotonic()
    deadline = began + max(0.0, wait_s)
    said = False
    try:
        while True:
            # The gate makes the check and the record one step: two shared takers of
            # different groups never both see an empty home.
            gate = os.open(home / GATE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                busy = _try_take(home, fd, claim)
                if busy is None:
                    path = holders / f"{secrets.token_hex(6)}.json"
                    record = {
                        "holder": claim.holder,
                        "how": claim.how,
                        "group": claim.group,
                        "partition": claim.partition,
                        "pid": os.getpid(),
                        "host": socket.gethostname(),
                        "since": time.time(),
                        **claim.extra,
                    }
                    _write_record(path, record)
                    break
            finally:
                os.close(gate)
            came_after = first_at is not None and all(
                h.get("how") in RUNNER_HOW and (h.get("since") or 0) > first_at for h in busy
            )
            limit = max(deadline, began + YIELD_WAIT_S) if came_after else deadline
            if time.monotonic() >= limit:
                raise HomeBusy(refusal(home, busy, wait_s))
            if not said and on_wait is not None:
                on_wait(
                    f"waiting up to {YIELD_WAIT_S:g} s for {describe(busy[0])} to give the home {home} back: "
                    "it took it after this run was launched"
                    if came_after and limit > deadline
                    else f"waiting up to {wait_s:g} s for the home {home}: {describe(busy[0])} (SIMAB_HOME_WAIT_S)"
                )
                said = True
            time.sleep(POLL_S)
        try:
            yield HeldHome(home, path, record)
        finally:
            path.unlink(missing_ok=True)
    finally:
        os.close(fd)  # closing the descriptor releases the flock, as the end of the process does


def refusal_now(home: str | Path, claim: HomeClaim) -> str | None:
    """The line `home_lock(home, claim)` would refuse with now, or None where it would take
    the home; nothing is taken or written (a home with no lock file yet is free)."""
    home = Path(home).expanduser().resolve()
    try:
        fd = os.open(home / LOCK_NAME, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        gate = os.open(home / GATE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            # Under the gate, as every taker checks: a lock taken here for an instant is
            # released before any other taker can look.
            busy = _try_take(home, fd, claim)
        finally:
            os.close(gate)
    finally:
        os.close(fd)
    return None if busy is None else refusal(home, busy, 0.0)


def _try_take(home: Path, fd: int, claim: HomeClaim) -> list[dict] | None:
    """Take the lock on `fd` for `claim` (the gate is held); None when taken, else the live
    holders in the way (never empty)."""
    mode = fcntl.LOCK_EX if claim.group is None else fcntl.LOCK_SH
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return _live_holders(home) or [{"holder": None, "how": "a process that left no record"}]
    live = _live_holders(home)
    if claim.group is None:
        return None
    # Shared: every live holder is of this group, and none writes this partition.
    blocking = [h for h in live if h.get("group") != claim.group or h.get("partition") == claim.partition]
    if blocking:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return blocking
    return None


def holders_of(home: str | Path) -> list[dict]:
    """The live holders of `home` (their records), oldest first."""
    return _live_holders(Path(home).expanduser().resolve())


def _live_holders(home: Path) -> list[dict]:
    """The records under the home whose process is alive; stale ones are removed."""
    live = []
    for path in sorted((home / HOLDERS_NAME).glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # being written (a taker holds the gate only while it writes), or gone
        if record.get("host") == socket.gethostname() and not process_alive(record.get("pid"), record.get("since")):
            path.unlink(missing_ok=True)  # stale: its process is gone
            continue
        live.append(record)
    return sorted(live, key=lambda r: r.get("since") or 0)


def describe(record: dict) -> str:
    """A holder in words: what, its id, its pid and since when."""
    if not record.get("holder") and record.get("pid") is None:
        return record.get("how") or "another process"
    since = record.get("since")
    when = (
        f", since {time.strftime('%H:%M:%S UTC', time.gmtime(since))} ({time.time() - since:.0f} s ago)"
        if isinstance(since, int | float)
        else ""
    )
    holder = f" {record['holder']}" if record.get("holder") else ""
    lifecycle = f" (lifecycle {record['lifecycle']})" if record.get("lifecycle") else ""
    return f"{record.get('how')}{holder}{lifecycle}, pid {record.get('pid')} on {record.get('host')}{when}"


def refusal(home: Path, busy: list[dict], wait_s: float) -> str:
    """The one line of a refused taker: who holds the home and how to wait for it or stop it."""
    first = busy[0]
    others = f" and {len(busy) - 1} more" if len(busy) > 1 else ""
    waited = f"waited {wait_s:g} s; " if wait_s > 0 else ""
    pid = first.get("pid")
    stop = (
        f"stop it (`kill {pid}`: `simab resume` continues it later)"
        if pid is not None and "simab" in (first.get("how") or "")
        else f"stop it (`kill {pid}`, or cancel the run in the Dagster UI)"
        if pid is not None
        else "stop it"
    )
    return (
        f"the home {home} is taken by {describe(first)}{others}; {waited}wait for it "
        f"(SIMAB_HOME_WAIT_S=SECONDS waits that long), {stop}, or use another SIMAB_HOME"
    )


def process_alive(pid, since: float | None = None) -> bool:
    """Whether process `pid` (of this machine) exists and is not a newer process that reused
    the id (one started after `since`)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, someone else's
        pass
    started = process_start_time(pid)
    # A second of slack for clock granularity.
    return started is None or since is None or started <= since + 1.0


def process_start_time(pid: int) -> float | None:
    """When process `pid` started (epoch seconds); None where it cannot be read (gone, or not ours to see)."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return None


def _write_record(path: Path, record: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, path)

"""A resource that ran out, named: a full disk or a read-only home.

A write into a full filesystem fails deep inside a library — `OSError: [Errno 28] No space
left on device` from Parquet or a rename, `sqlite3.OperationalError: database or disk is
full` from the Dagster instance or the MLflow store, `attempt to write a readonly database`
on a read-only home — and what a person sees first should be the resource, not the library:
which folder, how much was free there and about what the step needed.  `exhaustion_of`
finds such a cause in an exception's chain (or in a step's error text, which is all Dagster
keeps of it), `exhausted_line` says it in one line, `named_exhaustion` turns an exception
out of a block into `ResourceExhausted` with that line.

Nothing a failed write leaves looks whole: every asset is written atomically
(`ops.storage.atomic`: a temporary file renamed into place only once complete) and SQLite
rolls back a transaction it could not write, so after space is freed `simab resume`
re-runs what was not stored.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

FULL = "full"
READ_ONLY = "read-only"
IO_ERROR = "i/o error"
# Free space below this on the home's filesystem makes SQLite's "disk I/O error" a full disk.
NEARLY_FULL_MB = 1.0

# What the words of a library's error mean, for errors known only by their text.
_TEXTS = (
    ("no space left on device", FULL),
    ("[errno 28]", FULL),
    ("database or disk is full", FULL),
    ("disk quota exceeded", FULL),
    ("[errno 122]", FULL),
    ("read-only file system", READ_ONLY),
    ("[errno 30]", READ_ONLY),
    ("attempt to write a readonly database", READ_ONLY),
    # SQLite on a filesystem with no block left often says only this (SQLITE_IOERR): a full
    # disk when the home's filesystem has no room (`named_exhaustion` looks), else not ours.
    ("disk i/o error", IO_ERROR),
)
_ERRNOS = {errno.ENOSPC: FULL, errno.EDQUOT: FULL, errno.EROFS: READ_ONLY}

# About what a lifecycle writes into its home at the demo's defaults (synthetic source, five
# arms, 50 agents), per step, in MB, rounded up: measured on a demo home (posters, caches,
# agents and brain for prepare; lists, events, checkpoints and artefacts per arm:
# docs/findings/one_home.md), scaled by agents.
STEP_MB = {"prepare": 32.0, "arm": 3.0, "shard": 1.5, "combine": 1.5, "read-out": 10.0}
DEMO_AGENTS = 50
# A world smaller than the demo's (its users: `ops.data.synthetic.SyntheticConfig.n_users`)
# writes less: in proportion to its users, down to what any lifecycle writes (the MLflow
# store, the Dagster instance, the logs; the tests' 40-user world writes 6–9 MB).  A larger
# one is scaled by its agents only, as above.
DEMO_USERS = 1000
MIN_SCALE = 0.2


class ResourceExhausted(RuntimeError):
    """The disk under the home is full, or the home is read-only (the message says which and where)."""


def exhaustion_of(error: BaseException | str | None) -> tuple[str, str | None] | None:
    """(FULL or READ_ONLY, the file named where the error names one) when `error` — an
    exception, anywhere in its chain, or an error's text — says the disk is full or the
    filesystem read-only; else None."""
    seen: set[int] = set()
    while isinstance(error, BaseException) and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in _ERRNOS:
            return _ERRNOS[error.errno], error.filename if isinstance(error.filename, str) else None
        found = _by_text(str(error))
        if found is not None:
            return found
        error = getattr(error, "orig", None) or error.__cause__ or error.__context__
    return _by_text(error) if isinstance(error, str) else None


def exhaustion_at(error: BaseException | str | None, home: str | Path) -> tuple[str, str | None] | None:
    """`exhaustion_of`, with SQLite's "disk I/O error" taken for a full disk where the home's
    filesystem has less than `NEARLY_FULL_MB` free (and for nothing of ours elsewhere)."""
    found = exhaustion_of(error)
    if found is not None and found[0] == IO_ERROR:
        free = free_mb(home)
        return (FULL, found[1]) if free is not None and free < NEARLY_FULL_MB else None
    return found


def _by_text(text: str) -> tuple[str, str | None] | None:
    lowered = text.lower()
    for words, kind in _TEXTS:
        if words in lowered:
            named = None
            if ": '" in text:  # OSError's text: "[Errno 28] No space left on device: '/path'"
                named = text.rsplit(": '", 1)[1].split("'", 1)[0] or None
            return kind, named
    return None


def step_need_mb(stage: str | None, agents: int | None = None, users: int | None = None) -> float | None:
    """About how many MB the step `stage` (prepare, arm, shard, combine, read-out) writes;
    `users`, where known, the world's (a small world writes less)."""
    if not stage:
        return None
    base = STEP_MB.get(stage.split()[0])
    if base is None:
        return None
    size = min(1.0, max(MIN_SCALE, users / DEMO_USERS)) if users else 1.0
    return base * size * max(1.0, (agents or DEMO_AGENTS) / DEMO_AGENTS)


def exhausted_line(
    home: str | Path, kind: str, named: str | None = None, stage: str | None = None, agents: int | None = None
) -> str:
    """One line: the folder, what is free there, about what the step needed, what to do."""
    home = Path(home)
    folder = _existing(Path(named).parent if named else home)
    where = f"{folder}" if folder == home else f"{folder} (in the home {home})"
    step = f"{stage}: " if stage else ""
    if kind == READ_ONLY:
        return (
            f"{step}the home is read-only: {where} cannot be written. Make it writable (or set SIMAB_HOME to a "
            "writable folder), then `simab resume` re-runs what was not stored"
        )
    try:
        usage = shutil.disk_usage(folder)
        free = f"{_mb(usage.free)} free of {_mb(usage.total)}"
    except OSError:
        free = "free space unknown"
    need = step_need_mb(stage, agents)
    needs = f"; the step writes about {need:.0f} MB" if need else ""
    return (
        f"{step}the disk is full: {where} has {free}{needs}. Free space there (or set SIMAB_HOME to a larger "
        "disk), then `simab resume` re-runs what was not stored"
    )


def lifecycle_need_mb(arms: int, agents: int | None = None, shards: int = 1, users: int | None = None) -> float:
    """About what a whole lifecycle writes into a fresh home, in MB."""

    def need(stage: str) -> float:
        return step_need_mb(stage, agents, users) or 0.0

    per_arm = need("arm") + (shards * need("shard") + need("combine") if shards > 1 else 0.0)
    return need("prepare") + arms * per_arm + need("read-out")


def free_mb(folder: str | Path) -> float | None:
    """The MB free on the filesystem of `folder` (its nearest existing parent)."""
    try:
        return shutil.disk_usage(_existing(Path(folder))).free / 1e6
    except OSError:
        return None


@contextmanager
def named_exhaustion(
    home: str | Path, log: Callable[[], object] | None = None, stage: str | None = None, agents: int | None = None
) -> Iterator[None]:
    """An exception out of the block whose cause is a full disk or a read-only home becomes
    `ResourceExhausted` naming it (the step `stage` writing; the full log's path after it,
    where `log()` gives one)."""
    try:
        yield
    except ResourceExhausted:
        raise
    except Exception as exc:
        earlier = _named_in_chain(exc)
        if earlier is not None:  # named already, deeper in (a clean-up failed on the same full disk)
            raise earlier from exc
        found = exhaustion_at(exc, home)
        if found is None:
            raise
        where = log() if log is not None else None
        tail = f" (the full log: {where})" if where else ""
        raise ResourceExhausted(exhausted_line(home, *found, stage=stage, agents=agents) + tail) from exc


def _named_in_chain(error: BaseException) -> ResourceExhausted | None:
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ResourceExhausted):
            return error
        error = error.__cause__ or error.__context__
    return None


def _existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return path


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n < 10e9 else f"{n / 1e9:,.1f} GB"

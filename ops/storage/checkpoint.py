"""A JSON-lines checkpoint: one line per finished item, appended and fsynced at once.

A crawl killed at any moment leaves every finished item on disk and at most one torn
(half-written) last line.  On reopening, the torn line is cut off, lines are keyed by
their `key` field and the last line of a key wins, so a restarted crawl neither repeats
a finished item nor loses one.

A checkpoint has one writer: `partition_lock` keeps a second run of the same partition (a
nightly run and a manual re-execute) from simulating — and paying for — every agent again
and appending them to the same file; the second waits for the first, then finds its agents
done, or fails naming the partition and the run holding it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ops.settings import current

log = logging.getLogger(__name__)


class CheckpointError(ValueError):
    """A checkpoint line other than the last does not parse: the file is damaged."""


class PartitionBusy(RuntimeError):
    """Another run held the partition's lock for longer than the timeout."""


LOCK_NAME = ".partition.lock"
HOLDER_NAME = ".partition.holder.json"

# Folders this process holds, per thread: the runner takes the lock its asset already
# holds (the asset spans every session), and a second flock from the same process on a new
# descriptor would wait for itself.
_held: dict[tuple[str, int], int] = {}
_held_guard = threading.Lock()


@contextmanager
def partition_lock(
    folder: str | Path, partition: str, holder: str = "", timeout_s: float | None = None
) -> Iterator[None]:
    """Hold the lock of a partition's checkpoint `folder` while its run writes there.

    A second holder — another process, or another thread of this one — waits up to
    `timeout_s` (default `$SIMAB_PARTITION_LOCK_TIMEOUT_S`, 300 s) and then raises
    `PartitionBusy` naming `partition` and the holder (`holder`, e.g. a run id, its pid and
    host, since when).  Re-entrant within one thread.  An OS lock (flock): a killed holder
    frees it, so there is no stale lock to clean up."""
    from filelock import FileLock, Timeout

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = (str(folder.resolve()), threading.get_ident())
    with _held_guard:
        nested = key in _held
        if nested:
            _held[key] += 1
    if nested:
        try:
            yield
        finally:
            with _held_guard:
                _held[key] -= 1
        return
    if timeout_s is None:
        timeout_s = current().partition_lock_timeout_s
    # No soft-lock fallback: a soft lock (a file that exists) would outlive a killed process.
    lock = FileLock(folder / LOCK_NAME, fallback_to_soft=False)
    info = folder / HOLDER_NAME
    try:
        lock.acquire(timeout=timeout_s, poll_interval=0.2)
    except Timeout:
        raise PartitionBusy(
            f"partition {partition}: another run is simulating it ({_describe_holder(info)}); waited "
            f"{timeout_s:g} s for {folder / LOCK_NAME} (SIMAB_PARTITION_LOCK_TIMEOUT_S). Let that run finish or "
            "cancel it, then re-execute: agents it finished are kept in the checkpoint."
        ) from None
    try:
        with _held_guard:
            _held[key] = 1
        about = {
            "partition": partition,
            "holder": holder,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        info.write_text(json.dumps(about), encoding="utf-8")
        yield
    finally:
        with _held_guard:
            _held.pop(key, None)
        info.unlink(missing_ok=True)
        lock.release()


def _describe_holder(info: Path) -> str:
    try:
        about = json.loads(info.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "holder not recorded"
    run = f"run {about['holder']}, " if about.get("holder") else ""
    return f"{run}pid {about.get('pid')} on {about.get('host')}, since {about.get('since')}"


class JsonlCheckpoint:
    """Thread-safe append-only record store keyed by `key` (e.g. "item_id")."""

    def __init__(self, path: str | Path, key: str) -> None:
        self.path = Path(path)
        self.key = key
        self._lock = threading.Lock()
        self.records: dict[Any, dict] = self._load()

    def __contains__(self, key: Any) -> bool:
        return key in self.records

    def __len__(self) -> int:
        return len(self.records)

    def get(self, key: Any) -> dict | None:
        return self.records.get(key)

    def append(self, record: dict) -> None:
        """Write one record durably (flush + fsync) before returning."""
        self.append_many([record])

    def append_many(self, records: list[dict]) -> None:
        """Write several records with one flush + fsync (a group commit: many writers that
        finish together pay for one disk sync).  A kill during the write leaves whole lines
        and at most one torn last line, which reopening drops."""
        for record in records:
            if self.key not in record:
                raise KeyError(f"checkpoint record lacks key field {self.key!r}")
        if not records:
            return
        text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True, default=str) + "\n" for r in records)
        with self._lock:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            for record in records:
                self.records[record[self.key]] = record

    def _load(self) -> dict[Any, dict]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            return {}
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        records: dict[Any, dict] = {}
        good_end = 0
        offset = 0
        for number, line in enumerate(lines, start=1):
            end = offset + len(line) + 1
            is_last = number == len(lines)
            if line.strip():
                try:
                    if is_last:  # no newline after it: it was being written when the crawl died
                        raise ValueError("line not terminated")
                    rec = json.loads(line.decode("utf-8"))
                    if not isinstance(rec, dict) or self.key not in rec:
                        raise ValueError(f"not an object with field {self.key!r}")
                except ValueError as exc:
                    if is_last or (number == len(lines) - 1 and lines[-1] == b""):
                        log.warning("checkpoint %s: dropping torn last line %d (%s)", self.path, number, exc)
                        break
                    raise CheckpointError(f"checkpoint {self.path} line {number} is damaged: {exc}") from exc
                records[rec[self.key]] = rec
            offset = end
            good_end = min(offset, len(raw))
        if good_end < len(raw):
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
                fh.flush()
                os.fsync(fh.fileno())
        return records

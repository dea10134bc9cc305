"""A JSON-lines checkpoint: one line per finished item, appended and fsynced at once.

A crawl killed at any moment leaves every finished item on disk and at most one torn
(half-written) last line.  On reopening, the torn line is cut off, lines are keyed by
their `key` field and the last line of a key wins, so a restarted crawl neither repeats
a finished item nor loses one.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class CheckpointError(ValueError):
    """A checkpoint line other than the last does not parse: the file is damaged."""


class JsonlCheckpoint:
    """Thread-safe append-only record store keyed by `key` (e.g. "movie_id")."""

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

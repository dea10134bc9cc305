"""The LLM response cache: one SQLite row per request, keyed by `request_key` — the endpoint
without credentials plus the whole request (model, messages, sampling, seed, format) — so a
re-run is free and identical.  The client never stores on its own: the brain stores an
answer (`LLMClient.remember`) only once it has passed the schema and page checks, and drops a
cached one that no longer passes (`forget`).  `python -m ops.simulation.brains.llm` shows
what a cache holds or empties it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from ops.web import safe_endpoint

log = logging.getLogger(__name__)


def request_key(request: Mapping, endpoint: str = "") -> str:
    """SHA-256 of the endpoint (without credentials: `ops.web.safe_endpoint`) and the whole
    request as canonical JSON: the same request to the same endpoint has the same key."""
    canonical = json.dumps(
        {"endpoint": endpoint, "request": request}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class CacheError(ValueError):
    """The response cache file cannot be used (not a database, a damaged page, locked): names
    the file and what to do."""


class ResponseCache:
    """Chat completions by request key in one SQLite file.

    Each write is one transaction in WAL mode with synchronous=NORMAL: a killed process
    (kill -9) keeps every committed row and never a half row (only a power cut may lose the
    last ones).  The first answer stored for a key is kept, so parallel processes sharing
    the file agree.  Only the reply text, token counts, endpoint (without credentials) and
    model are stored — no request, header or key.

    A file SQLite cannot read raises `CacheError` naming it and the way out (`clear`, which
    moves a damaged file aside, or moving it aside by hand): the cache only saves repeated
    calls, so starting a new one loses nothing else.  A row that is not a reply (not JSON, or
    JSON of another shape) is a miss, logged, and the next answer for its key replaces it.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._unusable: set[str] = set()  # keys whose row is not a reply: replaced, not kept
        self._db = None
        try:
            with self._named("cannot be opened"):
                self._db = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, "
                    "model TEXT NOT NULL, response TEXT NOT NULL, created_at REAL NOT NULL)"
                )
        except CacheError:
            self.close()  # a half-open connection would hold the file
            raise

    def get(self, key: str) -> dict | None:
        with self._lock, self._named("cannot be read"):
            row = self._db.execute("SELECT response FROM completions WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            reply = json.loads(row[0])
            problem = _reply_shape_problem(reply)
        except (TypeError, ValueError) as exc:
            problem = f"not JSON ({type(exc).__name__}: {str(exc)[:80]})"
        if problem is None:
            return reply
        log.warning(
            "LLM response cache %s: entry %s is not a cached reply (%s); treated as a miss",
            self.path,
            key[:16],
            problem,
        )
        self._unusable.add(key)
        return None

    def put(self, key: str, endpoint: str, model: str, response: Mapping) -> None:
        verb = "INSERT OR REPLACE" if key in self._unusable else "INSERT OR IGNORE"
        with self._lock, self._named("cannot be written"):
            self._db.execute(
                f"{verb} INTO completions (key, endpoint, model, response, created_at) VALUES (?, ?, ?, ?, ?)",
                (key, endpoint, model, json.dumps(response, sort_keys=True), time.time()),
            )
        self._unusable.discard(key)

    def delete(self, key: str) -> None:
        with self._lock, self._named("cannot be written"):
            self._db.execute("DELETE FROM completions WHERE key = ?", (key,))

    def clear(self, model: str | None = None, endpoint: str | None = None) -> int:
        """Delete the entries of one model and/or endpoint (all without either); returns how many."""
        where, args = [], []
        if model is not None:
            where.append("model = ?")
            args.append(model)
        if endpoint is not None:
            where.append("endpoint = ?")
            args.append(safe_endpoint(endpoint))
        sql = "DELETE FROM completions" + (" WHERE " + " AND ".join(where) if where else "")
        with self._lock, self._named("cannot be cleared"):
            deleted = self._db.execute(sql, args).rowcount
            self._db.execute("VACUUM")
        return int(deleted)

    def stats(self) -> list[tuple[str, str, int]]:
        """(endpoint, model, entries) for every endpoint and model in the cache."""
        with self._lock, self._named("cannot be read"):
            return self._db.execute(
                "SELECT endpoint, model, COUNT(*) FROM completions GROUP BY endpoint, model ORDER BY 1, 2"
            ).fetchall()

    def __len__(self) -> int:
        with self._lock, self._named("cannot be read"):
            return int(self._db.execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()

    @contextlib.contextmanager
    def _named(self, what: str):
        try:
            yield
        except sqlite3.DatabaseError as exc:  # OperationalError (locked, I/O) included
            raise CacheError(
                f"LLM response cache {self.path} {what}: {exc}. The cache only saves repeated calls: run "
                f"`python -m ops.simulation.brains.llm clear --cache {self.path}` (a damaged file is moved "
                "aside), or move the file aside yourself, and run again"
            ) from exc


def move_aside(path: str | os.PathLike) -> Path:
    """Rename a cache file (and its WAL and shared-memory files) to `<name>.damaged-<time>`; returns the new name."""
    path = Path(path)
    target = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{path}{suffix}")
        if source.exists():
            source.rename(Path(f"{target}{suffix}"))
    return target


def _reply_shape_problem(reply) -> str | None:
    """What makes a decoded cache row not a reply (None when it is one)."""
    if not isinstance(reply, dict):
        return f"a JSON {type(reply).__name__}, not an object"
    if not isinstance(reply.get("content"), str):
        return "no text content"
    for name in ("prompt_tokens", "completion_tokens"):
        value = reply.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"{name} is {value!r}"
    if not isinstance(reply.get("usage_known", True), bool):
        return f"usage_known is {reply.get('usage_known')!r}"
    return None

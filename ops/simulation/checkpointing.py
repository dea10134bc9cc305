"""How a killed simulation resumes: each finished agent's rows are appended to the
request's checkpoint (`ops.storage.checkpoint.JsonlCheckpoint`, fsynced) as soon as its session
ends, and a request asked again with the same inputs takes those agents' rows back and
simulates only the others.

The checkpoint is named by a key that digests everything that determines the events
(`checkpoint_key`), so a changed input never reuses stale rows; checkpoints of other keys in
the folder are superseded (deleted) when a request starts, and a complete one is kept, so an
unchanged re-run simulates nothing.  Each session number has its own folder.  Rows read back
take the request's run id.  Agents that finish while a write is in flight share the next
one (`GroupCommit`: one fsync for many, off the event loop).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from ops.schema import EVENTS
from ops.simulation.brains.protocol import Brain
from ops.simulation.request import SimulationRequest
from ops.storage.atomic import atomic_write_bytes
from ops.storage.checkpoint import JsonlCheckpoint

log = logging.getLogger(__name__)

# Bump when the checkpoint's record layout or what the key covers changes.
CHECKPOINT_FORMAT = 1


def resume(request: SimulationRequest) -> tuple[JsonlCheckpoint, dict[int, list[tuple]]]:
    """The request's checkpoint, opened in its folder (checkpoints of other keys there are
    superseded), and the rows of the request's agents it already holds, by user id."""
    key = checkpoint_key(request)
    # Each session its own folder: a checkpoint supersedes the others in its folder.
    folder = request.checkpoint_dir / f"session-{request.session}" if request.session else request.checkpoint_dir
    checkpoint = _open(folder, key, request)
    wanted = set(request.users)
    done = {u: [(request.run_id, *row) for row in rec["rows"]] for u, rec in checkpoint.records.items() if u in wanted}
    if done:
        log.info(
            "simulation of arm %r: %d of %d agents resumed from checkpoint %s",
            request.arm,
            len(done),
            len(request.sessions),
            checkpoint.path,
        )
    return checkpoint, done


def record(user_id: int, rows: list[tuple]) -> dict:
    """One finished agent's checkpoint record: its rows without the run id (re-stamped on resume)."""
    return {"user_id": user_id, "rows": [list(row[1:]) for row in rows]}


def checkpoint_key(request: SimulationRequest) -> str:
    """SHA-256 of everything that determines a request's events: the event schema, arm, seed,
    session number, the simulation config, the brain (name and `brain.fingerprint()`, or its
    pydantic `config` / `params`), the catalogue, and per agent its user id, fatigue budget,
    top-k list, profile and long-term memory."""
    h = hashlib.sha256()

    def put(*parts) -> None:
        for part in parts:
            h.update(part if isinstance(part, bytes) else str(part).encode("utf-8"))
            h.update(b"\x1f")

    put(CHECKPOINT_FORMAT, json.dumps({k: str(v) for k, v in EVENTS.items()}), request.arm, request.seed)
    if request.session:  # session 0 keeps the keys of single-session runs
        put("session", request.session)
    put(request.config.model_dump_json(exclude={"progress", "max_failed_agents_share"}))
    put(request.brain.name, brain_fingerprint(request.brain))
    catalogue = request.catalogue
    for item_id in sorted(catalogue.item_ids()):
        put(repr(catalogue[item_id]))
    for session in sorted(request.sessions, key=lambda s: s.user_id):
        put(session.user_id, session.fatigue_budget, list(request.lists[session.user_id]), repr(session.profile))
        memory = session.memory
        arrays = [getattr(memory, name, None) for name in ("rows", "ratings", "timestamps")]
        if all(isinstance(a, np.ndarray) for a in arrays):
            put(
                getattr(getattr(memory, "vectors", None), "digest", ""),
                *(np.ascontiguousarray(a).tobytes() for a in arrays),
            )
        else:
            put(repr(memory))
    return h.hexdigest()


def brain_fingerprint(brain: Brain) -> str:
    """What distinguishes two brains of one name: `brain.fingerprint()` when the brain has
    one, else its class and its pydantic `config` and `params`."""
    own = getattr(brain, "fingerprint", None)
    if callable(own):
        return str(own())
    parts = [f"{type(brain).__module__}.{type(brain).__qualname__}"]
    for name in ("config", "params"):
        value = getattr(brain, name, None)
        if isinstance(value, BaseModel):
            parts.append(value.model_dump_json())
    return "|".join(parts)


class GroupCommit:
    """Checkpoint appends from coroutines: agents that finish while a write is in flight
    share the next one (one fsync for many), and the disk wait runs off the event loop."""

    def __init__(self, checkpoint: JsonlCheckpoint) -> None:
        self.checkpoint = checkpoint
        self.pending: list[tuple[dict, object]] = []
        self.flushing = None

    async def add(self, record: dict) -> None:
        done = asyncio.get_running_loop().create_future()
        self.pending.append((record, done))
        if self.flushing is None:
            self.flushing = asyncio.ensure_future(self._flush())
        await done

    async def _flush(self) -> None:
        try:
            while self.pending:
                batch, self.pending = self.pending, []
                try:
                    await asyncio.to_thread(self.checkpoint.append_many, [record for record, _ in batch])
                except BaseException as exc:
                    for _, done in batch + self.pending:
                        if not done.done():
                            done.set_exception(exc)
                    self.pending = []
                    raise
                for _, done in batch:
                    if not done.done():
                        done.set_result(None)
        finally:
            self.flushing = None


def _open(folder: Path, key: str, request: SimulationRequest) -> JsonlCheckpoint:
    """This key's checkpoint in `folder`; checkpoints of other keys there are superseded."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key[:32]}.jsonl"
    for stale in folder.glob("*.jsonl"):
        if stale != path:
            log.info("simulation checkpoint %s superseded (its inputs differ): removed", stale)
            stale.unlink(missing_ok=True)
            stale.with_suffix(".json").unlink(missing_ok=True)
    # What the key stands for, for a person wondering why a checkpoint was (not) reused.
    about = {
        "key": key,
        "arm": request.arm,
        "seed": request.seed,
        "brain": request.brain.name,
        "agents": len(request.sessions),
        "format": CHECKPOINT_FORMAT,
    }
    atomic_write_bytes(path.with_suffix(".json"), json.dumps(about, indent=1).encode("utf-8"))
    return JsonlCheckpoint(path, key="user_id")

"""Writes that never leave a half-written file: a temporary file beside the target,
fsynced, renamed over it (a rename within a folder is atomic on POSIX), then the folder
fsynced so the rename itself survives a crash.

A writer killed between the write and the rename leaves its temporary file
(`.<name>.tmp-…`) behind; `clean_stale=True` removes those of the same target before
writing.  Only pass it where one writer per target is guaranteed (Dagster runs an asset
partition once at a time); with concurrent writers of one target it would delete a live
temporary file.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes, clean_stale: bool = False) -> None:
    """Write to a temporary file beside `path`, fsync, then rename over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name}.tmp-"
    if clean_stale:
        for stale in path.parent.glob(prefix + "*"):
            stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_parquet(frame, path: Path, clean_stale: bool = False, **write_options) -> None:
    """A Polars frame as Parquet, atomically; `write_options` go to `write_parquet`."""
    buf = io.BytesIO()
    frame.write_parquet(buf, **write_options)
    atomic_write_bytes(Path(path), buf.getvalue(), clean_stale=clean_stale)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open a folder; the rename is still atomic
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""Writes that never leave a half-written file: a temporary file beside the target,
fsynced, then renamed over it (a rename within a folder is atomic on POSIX)."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, fsync, then rename over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_parquet(frame, path: Path) -> None:
    """A Polars frame as Parquet, atomically."""
    buf = io.BytesIO()
    frame.write_parquet(buf)
    atomic_write_bytes(Path(path), buf.getvalue())

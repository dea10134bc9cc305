"""Writes that never leave a half-written file: a temporary file beside the target,
fsynced, renamed over it (a rename within a folder is atomic on POSIX), then the folder
fsynced so the rename itself survives a crash.

A writer killed between the write and the rename leaves its temporary file
(`.<name>.tmp-…`) behind; `clean_stale=True` removes those of the same target before
writing.  Only pass it where one writer per target is guaranteed (Dagster runs an asset
partition once at a time); with concurrent writers of one target it would delete a live
temporary file.

A value of several files (`atomic_write_folder`) cannot be swapped by one rename: POSIX
renames a folder only onto an empty one.  It is written into a temporary folder, fsynced,
renamed to a name of its own (`<name>.<token>.d`), and a small JSON pointer file
(`<name>.json`) naming it is then replaced atomically; older folders are removed last.  A
writer killed at any moment leaves the previous pointer and the folder it names intact.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable
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


def atomic_write_folder(pointer: Path, write: Callable[[Path], None], record: dict) -> Path:
    """Make a multi-file value visible at once (module docstring): `write(folder)` fills a
    fresh folder; `pointer` (a `.json` path) then holds `record` plus `"folder"`, the
    folder's name beside it.  Returns the folder.  One writer per pointer (clean-up of the
    folders of earlier or killed writes assumes it)."""
    pointer = Path(pointer)
    if pointer.suffix != ".json":
        raise ValueError(f"{pointer}: the pointer of a folder value is a .json file")
    parent, name = pointer.parent, pointer.stem
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{name}.", suffix=".tmp"))
    final = parent / f"{name}.{secrets.token_hex(6)}.d"
    try:
        write(staging)
        _fsync_tree(staging)
        os.rename(staging, final)
        _fsync_dir(parent)
        atomic_write_bytes(pointer, json.dumps({**record, "folder": final.name}, indent=1).encode("utf-8"))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if final.exists() and read_folder_pointer(pointer)[1] != final:
            shutil.rmtree(final, ignore_errors=True)
        raise
    for old in [*parent.glob(f"{name}.*.d"), *parent.glob(f".{name}.*.tmp")]:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def read_folder_pointer(pointer: Path) -> tuple[dict, Path | None]:
    """The record of a pointer written by `atomic_write_folder` and the folder it names
    (None when the record names none, or the pointer does not exist)."""
    pointer = Path(pointer)
    try:
        record = json.loads(pointer.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, None
    folder = record.get("folder")
    return record, (pointer.parent / folder if folder else None)


def remove_folder_value(pointer: Path, folders_only: bool = False) -> None:
    """Remove a pointer and every folder of its name (a value replaced by one of another
    kind); `folders_only` keeps the pointer file."""
    pointer = Path(pointer)
    if not folders_only:
        pointer.unlink(missing_ok=True)
    for old in [*pointer.parent.glob(f"{pointer.stem}.*.d"), *pointer.parent.glob(f".{pointer.stem}.*.tmp")]:
        shutil.rmtree(old, ignore_errors=True)


def _fsync_tree(folder: Path) -> None:
    for root, _, files in os.walk(folder):
        for name in files:
            with open(os.path.join(root, name), "rb") as fh:
                os.fsync(fh.fileno())
        _fsync_dir(Path(root))


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open a folder; the rename is still atomic
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

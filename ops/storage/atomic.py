"""Writes that never leave a half-written file: a temporary file beside the target,
fsynced, renamed over it (a rename within a folder is atomic on POSIX), then the folder
fsynced so the rename itself survives a crash.

A writer killed between the write and the rename leaves its temporary file
(`.<name>.tmp-<pid>-…`) behind; `clean_stale=True` removes those of the same target before
writing, but only those whose writer (the pid in the name) is gone or is this process: a
concurrent writer's live temporary file is never deleted.  Temporary folders and the
folders of folder values carry the writer's pid the same way (`.<name>.<pid>.….tmp`,
`<name>.<pid>-<token>.d`), and a writer removes only its own and those of writers that are
gone (two runs on one home once took each other's `.agents.XXXX.tmp`).

Stored data proves itself: `checksum=True` also writes `<name>.sha256` beside the file (the
`sha256sum` format, so `sha256sum -c` checks it by hand), after the file itself; a folder
value's pointer lists the SHA-256 of every file in its folder (`folder_digests`).
`read_verified` and `verify_folder` read them back and raise `ChecksumError` on a mismatch.
A file with no `.sha256` beside it (written before checksums existed) is read unverified;
its next write adds one.  A writer killed between the file and its checksum leaves a pair
that disagrees: read as a mismatch, never as silently wrong data.

A value of several files (`atomic_write_folder`) cannot be swapped by one rename: POSIX
renames a folder only onto an empty one.  It is written into a temporary folder, fsynced,
renamed to a name of its own (`<name>.<token>.d`), and a small JSON pointer file
(`<name>.json`) naming it is then replaced atomically; older folders are removed last.  A
writer killed at any moment leaves the previous pointer and the folder it names intact.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ops.storage.home_lock import process_alive


class ChecksumError(ValueError):
    """A stored file whose bytes are not the ones written (its SHA-256 differs from the one recorded)."""


def atomic_write_bytes(path: Path, data: bytes, clean_stale: bool = False, checksum: bool = False) -> None:
    """Write to a temporary file beside `path`, fsync, then rename over it; with `checksum`,
    then `<path>.sha256` the same way (module docstring)."""
    path = Path(path)
    _write_one(path, data, clean_stale)
    if checksum:
        line = f"{hashlib.sha256(data).hexdigest()}  {path.name}\n"
        _write_one(checksum_path(path), line.encode("ascii"), clean_stale)
    else:  # a checksum of an earlier write would no longer match
        checksum_path(path).unlink(missing_ok=True)


def checksum_path(path: Path) -> Path:
    """Where the SHA-256 of `path` is kept."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def read_verified(path: Path) -> bytes:
    """The bytes of `path`, checked against `<path>.sha256` when there is one (`ChecksumError`)."""
    path = Path(path)
    data = path.read_bytes()
    try:
        recorded = checksum_path(path).read_text(encoding="ascii").split()
    except FileNotFoundError:
        return data  # written before checksums: read as it is, its next write adds one
    except (OSError, UnicodeDecodeError) as exc:
        raise ChecksumError(f"{checksum_path(path)}: the checksum file cannot be read ({exc})") from exc
    actual = hashlib.sha256(data).hexdigest()
    if not recorded or recorded[0] != actual:
        recorded_text = " ".join(recorded)[:16]
        raise ChecksumError(f"{path}: SHA-256 {actual[:16]}… differs from the one recorded ({recorded_text}…)")
    return data


def folder_digests(folder: Path) -> dict[str, str]:
    """The SHA-256 of every file under `folder`, by path relative to it."""
    folder = Path(folder)
    files = (p for p in sorted(folder.rglob("*")) if p.is_file())
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def verify_folder(folder: Path, digests: dict[str, str]) -> None:
    """Every file `digests` lists is in `folder` with that SHA-256 (`ChecksumError` naming the first that is not)."""
    folder = Path(folder)
    for name, expected in digests.items():
        path = folder / name
        if not path.is_file():
            raise ChecksumError(f"{path}: missing from its folder")
        if hashlib.sha256(path.read_bytes()).hexdigest() != expected:
            raise ChecksumError(f"{path}: SHA-256 differs from the one its pointer recorded")


def _write_one(path: Path, data: bytes, clean_stale: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name}.tmp-"
    if clean_stale:
        for stale in path.parent.glob(prefix + "*"):
            if _writer_gone(stale.name[len(prefix) :].split("-", 1)[0]):
                stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{prefix}{os.getpid()}-")
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


def atomic_write_parquet(frame, path: Path, clean_stale: bool = False, checksum: bool = False, **write_options) -> None:
    """A Polars frame as Parquet, atomically; `write_options` go to `write_parquet`."""
    buf = io.BytesIO()
    frame.write_parquet(buf, **write_options)
    atomic_write_bytes(Path(path), buf.getvalue(), clean_stale=clean_stale, checksum=checksum)


def atomic_write_folder(pointer: Path, write: Callable[[Path], None], record: dict, checksum: bool = False) -> Path:
    """Make a multi-file value visible at once (module docstring): `write(folder)` fills a
    fresh folder; `pointer` (a `.json` path) then holds `record` plus `"folder"`, the
    folder's name beside it (and with `checksum`, `"sha256"`: every file's digest, and the
    pointer's own digest beside it).  Returns the folder.  One writer per pointer (clean-up
    of the folders of earlier or killed writes assumes it)."""
    pointer = Path(pointer)
    if pointer.suffix != ".json":
        raise ValueError(f"{pointer}: the pointer of a folder value is a .json file")
    parent, name = pointer.parent, pointer.stem
    parent.mkdir(parents=True, exist_ok=True)
    # The writer's pid in both names: a concurrent writer never removes a live one's folders.
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{name}.{os.getpid()}.", suffix=".tmp"))
    final = parent / f"{name}.{os.getpid()}-{secrets.token_hex(6)}.d"
    try:
        write(staging)
        _fsync_tree(staging)
        if checksum:
            record = {**record, "sha256": folder_digests(staging)}
        os.rename(staging, final)
        _fsync_dir(parent)
        text = json.dumps({**record, "folder": final.name}, indent=1)
        atomic_write_bytes(pointer, text.encode("utf-8"), checksum=checksum)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if final.exists() and _named_folder(pointer) != final:
            shutil.rmtree(final, ignore_errors=True)
        raise
    named = _named_folder(pointer)
    for old in parent.glob(f"{name}.*.d"):
        writer = old.name[len(name) + 1 : -2].split("-", 1)[0] if "-" in old.name[len(name) + 1 :] else ""
        if old not in (final, named) and (writer in ("", str(os.getpid())) or _writer_gone(writer)):
            shutil.rmtree(old, ignore_errors=True)
    for old in parent.glob(f".{name}.*.tmp"):
        if _writer_gone(old.name[len(name) + 2 :].split(".", 1)[0]):
            shutil.rmtree(old, ignore_errors=True)
    return final


def _writer_gone(pid_text: str) -> bool:
    """Whether the writer whose pid a temporary name carries has ended (a name without
    one, from before names carried it, counts as ended)."""
    if not pid_text.isdigit():
        return True
    if int(pid_text) == os.getpid():
        return True  # this process's own leftovers: it writes one value of a name at a time
    return not process_alive(int(pid_text))


def read_folder_pointer(pointer: Path) -> tuple[dict, Path | None]:
    """The record of a pointer written by `atomic_write_folder` and the folder it names
    (None when the record names none, or the pointer does not exist)."""
    pointer = Path(pointer)
    try:
        record = json.loads(read_verified(pointer).decode("utf-8"))
    except FileNotFoundError:
        return {}, None
    folder = record.get("folder")
    return record, (pointer.parent / folder if folder else None)


def _named_folder(pointer: Path) -> Path | None:
    try:
        return read_folder_pointer(pointer)[1]
    except ValueError:  # a damaged pointer names no folder of ours
        return None


def remove_folder_value(pointer: Path, folders_only: bool = False) -> None:
    """Remove a pointer and every folder of its name (a value replaced by one of another
    kind); `folders_only` keeps the pointer file (and its checksum)."""
    pointer = Path(pointer)
    if not folders_only:
        pointer.unlink(missing_ok=True)
        checksum_path(pointer).unlink(missing_ok=True)
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

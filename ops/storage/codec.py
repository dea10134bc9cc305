"""Values on disk without pickle: the three formats every stored asset value is made of.

- JSON (`save_json`) for configuration and small scalars: pydantic models as
  `model_dump(mode="json")`, floats written with `repr` precision so they read back exactly;
  NaN and infinities are refused (`allow_nan=False`) rather than written as non-standard JSON.
- Parquet (`save_table`) for tables: one row per agent, per movie, per arm.
- NumPy `.npz` (`save_arrays`) for matrices and vectors, written and read with
  `allow_pickle=False`.  An `.npy` member is a documented header (dtype, shape, order)
  followed by the raw bytes, so dtype, shape and every bit (NaN payloads included) come
  back as written, which Parquet only offers through nested fixed-size lists; and with
  pickling off, numpy refuses object arrays on both sides, so reading never runs code.

A value type saves itself into a folder (`save(folder)`) and loads from one
(`load(folder)`); making that folder appear atomically is the caller's business
(`ops.storage.atomic.atomic_write_folder`).  `CodecError` names the file and what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl


class CodecError(ValueError):
    """A stored value that cannot be read back; names the file and the reason."""


def save_json(path: Path, obj: Any) -> None:
    """`obj` as UTF-8 JSON; NaN or infinity anywhere is an error (it would not read back as JSON)."""
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=1)
    except (TypeError, ValueError) as exc:
        raise CodecError(f"{path}: cannot be written as JSON: {exc}") from exc
    Path(path).write_text(text, encoding="utf-8")


def load_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CodecError(f"{path}: missing") from None
    except ValueError as exc:
        raise CodecError(f"{path}: not valid JSON: {exc}") from exc


def save_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Plain (non-object) arrays into one `.npz`; an object array is refused by name."""
    for name, array in arrays.items():
        if not isinstance(array, np.ndarray):
            raise CodecError(f"{path}: {name!r} is a {type(array).__name__}, not a numpy array")
        if array.dtype.hasobject:
            raise CodecError(f"{path}: array {name!r} holds Python objects (dtype object); store it as JSON or a table")
    with open(path, "wb") as fh:
        np.savez(fh, allow_pickle=False, **arrays)


# Before December 2026 simab's own tables named the item `movie_id`, after the MovieLens files
# they were first read from; what a home stored then is read with the item named as now.
ITEM_BEFORE = {"movie_id": "item_id", "movie_ids": "item_ids"}


def current_names(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with an older home's item column named `item_id` (stored-home compatibility)."""
    old = {a: b for a, b in ITEM_BEFORE.items() if a in frame.columns and b not in frame.columns}
    return frame.rename(old) if old else frame


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of an `.npz` written by `save_arrays`, read with pickling off (an older
    home's `movie_ids` read as `item_ids`)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {ITEM_BEFORE.get(name, name): npz[name] for name in npz.files}
    except FileNotFoundError:
        raise CodecError(f"{path}: missing") from None
    except ValueError as exc:  # an object array inside: numpy refuses to unpickle it
        raise CodecError(f"{path}: {exc}") from exc


def save_table(path: Path, frame: pl.DataFrame) -> None:
    frame.write_parquet(path)


def load_table(path: Path) -> pl.DataFrame:
    try:
        return current_names(pl.read_parquet(path))
    except FileNotFoundError:
        raise CodecError(f"{path}: missing") from None


def check_format(meta: dict, kind: str, version: int, path: Path) -> None:
    """Refuse a folder written for another type or by another format version."""
    if meta.get("kind") != kind or meta.get("format_version") != version:
        raise CodecError(
            f"{path}: holds {meta.get('kind')!r} format {meta.get('format_version')!r}, expected {kind!r} format {version}; "
            "materialise the asset again"
        )


def save_fields(folder: Path, kind: str, version: int, obj: Any) -> None:
    """A dataclass of results into `folder`: its DataFrame fields as Parquet, fields with a
    codec of their own (`save(folder)`) into sub-folders, pydantic models and plain JSON
    values into `fields.json` beside `kind` and `version`."""
    import dataclasses

    from pydantic import BaseModel

    folder.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "kind": kind,
        "format_version": version,
        "tables": [],
        "folders": [],
        "models": {},
        "values": {},
    }
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, pl.DataFrame):
            save_table(folder / f"{f.name}.parquet", value)
            meta["tables"].append(f.name)
        elif isinstance(value, BaseModel):
            meta["models"][f.name] = value.model_dump(mode="json")
        elif value is not None and callable(getattr(value, "save", None)):
            value.save(folder / f.name)
            meta["folders"].append(f.name)
        else:
            meta["values"][f.name] = value
    save_json(folder / "fields.json", meta)


def load_fields(cls: type, folder: Path, kind: str, version: int, types: dict[str, type] | None = None) -> Any:
    """The `cls` instance `save_fields` wrote; `types` names the class of each field stored
    as a pydantic model or a sub-folder (nothing is resolved from names in the files)."""
    meta = load_json(folder / "fields.json")
    check_format(meta, kind, version, folder / "fields.json")
    types = types or {}
    missing = [name for name in (*meta["models"], *meta["folders"]) if name not in types]
    if missing:
        raise CodecError(f"{folder / 'fields.json'}: no type given for field(s) {missing} of {kind}")
    values = dict(meta["values"])
    values |= {name: load_table(folder / f"{name}.parquet") for name in meta["tables"]}
    values |= {name: types[name].model_validate(value) for name, value in meta["models"].items()}
    values |= {name: types[name].load(folder / name) for name in meta["folders"]}
    return cls(**values)

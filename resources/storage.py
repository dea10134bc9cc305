"""Where simab keeps what it makes, and the IO manager that writes asset values there.

Everything lives under one data folder: `$SIMAB_HOME` when set, else `data/` in the
project.  Under `<root>/assets/`, one name per asset (`<asset>`, `<asset>/<partition>`, or
`<asset>/<arm>/<shard>` for an arm × shard partition `arm|shard`):

- a Polars frame is `<name>.parquet`;
- a value of one of the types in `VALUE_TYPES` (the agents, the fitted embedded brain, a
  trained arm, the A/B read-out) is a folder of Parquet / JSON / `.npz` / safetensors files
  written by the type's own codec, and `<name>.json` names that folder;
- a plain JSON value (the report's path) sits in `<name>.json` itself, when it reads back
  exactly (str, int, float, bool, None, lists and str-keyed dicts of them).

Nothing is pickled and nothing is unpickled: any other type is refused when stored, with
the asset and the type named, and a `<name>.pkl` (left by an older simab or dropped there)
is refused when read, never loaded — unpickling runs whatever code the file names.

A stored frame's materialisation carries its row count and its columns (`table_metadata`:
`dagster/row_count`, `dagster/column_schema`), which the Dagster catalogue shows for every table.

Writes are atomic (`ops.storage.atomic`): a file goes to a temporary name and is renamed; a folder
value is written whole into a fresh folder before its pointer file is replaced.  A killed
run leaves the previous complete value.

Stored data proves itself: beside `<name>.parquet` and `<name>.json` lie `<name>.parquet.sha256`
and `<name>.json.sha256`, and a folder value's pointer lists the SHA-256 of every file in its
folder.  Every read checks them before decoding anything, so a flipped byte or a truncated file is
never read back as other data (nor handed to the Parquet reader, which a damaged file can
crash).  A mismatch, or any error reading or decoding a value, raises one `StoredDataError`
naming the asset, the partition, the path and "materialise it again".  Files written before
checksums existed (no `.sha256` beside them, no digests in the pointer) are still read,
unverified, with their read errors named the same way; the next materialisation writes the
checksums.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
from dagster import ConfigurableIOManager, InputContext, OutputContext, TableColumn, TableSchema

from ops.settings import current
from ops.storage.atomic import (
    atomic_write_bytes,
    atomic_write_folder,
    atomic_write_parquet,
    checksum_path,
    read_folder_pointer,
    read_verified,
    remove_folder_value,
    verify_folder,
)
from ops.storage.codec import current_names

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# The non-frame values simab stores, by their qualified class name: how to save one into a
# folder and load it back ("module:function", or "" for the class's own `save` / `load`).
# The name read from a pointer file is only ever looked up here, never imported as given.
VALUE_TYPES: dict[str, tuple[str, str]] = {
    "ops.agents.build.Agents": ("", ""),
    "ops.simulation.brains.embedded.fitting.EmbeddedBrainModel": ("", ""),
    "ops.readout.ab_readout.ABReadout": ("", ""),
    "ops.studies.alignment.taste.TasteDiscrimination": ("", ""),
    "ops.studies.alignment.rating.RatingAlignment": ("", ""),
    "ops.studies.alignment.list_quality.ListQuality": ("", ""),
    "ops.studies.alignment.sensitivity.Sensitivity": ("", ""),
    # Random, Pop and the DeepCTR family (ops/arms/kinds/): its class is named in the folder.
    "ops.arms.trained.TrainedArm": ("ops.arms.model_registry:save_arm", "ops.arms.model_registry:load_arm"),
    # Any other arm (a plug-in, a lists file, an MLflow model): its spec and its own save/load.
    "ops.arms.registry.PluggedArm": ("", ""),
}
# Types stored under an earlier module path, read as the type they became (the alignment
# protocols moved from the read-out to `ops.studies`; the arm kinds' registry was `catalog`;
# TrainedArm lived in `ops.arms.recommenders`).
RENAMED_TYPES = {
    **{
        f"ops.readout.alignment.{name}": f"ops.studies.alignment.{name}"
        for name in ("taste.TasteDiscrimination", "rating.RatingAlignment", "list_quality.ListQuality")
    },
    "ops.arms.catalog.PluggedArm": "ops.arms.registry.PluggedArm",
    "ops.arms.recommenders.TrainedArm": "ops.arms.trained.TrainedArm",
}
FORMAT = "simab.asset/1"


class StoredValueError(ValueError):
    """A stored asset value that simab will not read (a pickle, an unknown type, a broken pointer)."""


class StoredDataError(StoredValueError):
    """A stored value whose files fail their checksum or cannot be read back: names the asset,
    the partition, the path and what to do."""

    def __init__(self, asset: str, partition: str | None, path: Path, problem: str) -> None:
        self.asset, self.partition, self.path = asset, partition, Path(path)
        where = f"asset {asset}" + (f", partition {partition}" if partition is not None else "")
        super().__init__(f"{where}: stored value at {path} is damaged ({problem}); materialise it again")


def data_root() -> Path:
    """The data folder: $SIMAB_HOME as the edge read it (`ops.settings.current`), or `data/`
    in the project."""
    return current().home.resolve()


def frame_digest(df: pl.DataFrame) -> str:
    """A content digest of a frame (order-sensitive), used as Dagster data version and
    MLflow dataset digest.  Schema is part of it so a cast changes the version."""
    h = hashlib.sha256(str(df.schema).encode())
    if df.height:
        h.update(df.hash_rows(seed=0, seed_1=1, seed_2=2, seed_3=3).to_numpy().tobytes())
    return h.hexdigest()[:16]


def table_metadata(frame: pl.DataFrame) -> dict[str, Any]:
    """What the Dagster catalogue shows of a stored table: its row count (`dagster/row_count`)
    and its columns with their Polars types (`dagster/column_schema`)."""
    columns = [TableColumn(name=name, type=str(dtype)) for name, dtype in frame.schema.items()]
    return {"dagster/row_count": frame.height, "dagster/column_schema": TableSchema(columns=columns)}


class SimabIOManager(ConfigurableIOManager):
    """Parquet for Polars frames, a codec folder for the types of `VALUE_TYPES`, JSON for plain
    values, under `<root>/assets/`; never pickle (module docstring)."""

    root: str = ""  # empty: data_root()

    def _base(self) -> Path:
        return (Path(self.root) if self.root else data_root()) / "assets"

    def _stem(self, context: OutputContext | InputContext) -> Path:
        stem = self._base().joinpath(*context.asset_key.path)
        if context.has_asset_partitions:
            keys = context.asset_partition_keys
            if len(keys) != 1:
                raise ValueError(f"{context.asset_key.to_user_string()}: one partition at a time, got {keys}")
            stem = stem.joinpath(*_partition_parts(keys[0]))
        return stem

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        if obj is None:
            return
        stem = self._stem(context)
        asset = context.asset_key.to_user_string()
        parquet, pointer = _files(stem)
        if isinstance(obj, pl.DataFrame):
            # Dagster materialises a partition once at a time: temp files of a killed
            # earlier run can go.
            atomic_write_parquet(obj, parquet, clean_stale=True, checksum=True)
            remove_folder_value(pointer)
            context.add_output_metadata({"path": str(parquet), "rows": obj.height, **table_metadata(obj)})
        else:
            type_name = _type_name(obj)
            if type_name in VALUE_TYPES:
                save = _codec(type_name, 0)
                record = {"format": FORMAT, "asset": asset, "type": type_name}
                folder = atomic_write_folder(pointer, lambda staging: save(obj, staging), record, checksum=True)
                context.add_output_metadata({"path": str(folder), "type": type_name})
            elif _exact_json(obj):
                text = json.dumps({"format": FORMAT, "asset": asset, "type": "json", "value": obj}, ensure_ascii=False)
                atomic_write_bytes(pointer, text.encode("utf-8"), clean_stale=True, checksum=True)
                remove_folder_value(pointer, folders_only=True)  # of an earlier folder value
                context.add_output_metadata({"path": str(pointer)})
            else:
                raise StoredValueError(
                    f"asset {asset}: cannot store a value of type {type_name}. simab stores Polars DataFrames as Parquet, "
                    f"{', '.join(t.rsplit('.', 1)[1] for t in VALUE_TYPES)} through their codecs, and JSON values "
                    "(str, int, float, bool, None, lists and str-keyed dicts of them); never pickle. Return one of those, "
                    "or give the type save(folder)/load(folder) and add it to VALUE_TYPES in resources/storage.py."
                )
            parquet.unlink(missing_ok=True)
            checksum_path(parquet).unlink(missing_ok=True)
        Path(f"{stem}.pkl").unlink(missing_ok=True)  # the previous value in the old pickle format

    def stored(self, asset: str, partition: str | None = None) -> Any:
        """The stored value of `asset` (one partition of it), read as `load_input` reads it;
        for an asset that reads an earlier partition of its own (a round reads the round
        before), which Dagster's partition mappings allow only along time."""
        stem = self._base() / asset
        return _load(stem.joinpath(*_partition_parts(partition)) if partition is not None else stem, asset, partition)

    def has_stored(self, asset: str, partition: str | None = None) -> bool:
        stem = self._base() / asset
        return _exists(_former(stem.joinpath(*_partition_parts(partition)) if partition is not None else stem))

    def load_input(self, context: InputContext) -> Any:
        if context.has_asset_partitions and len(context.asset_partition_keys) > 1:
            # An unpartitioned asset reading every arm gets a dict of the arms materialised
            # so far; arms never run are simply absent (the read-out says which it used).
            stems = {
                key: self._base().joinpath(*context.asset_key.path, *_partition_parts(key))
                for key in context.asset_partition_keys
            }
            asset = context.asset_key.to_user_string()
            return {key: _load(stem, asset, key) for key, stem in stems.items() if _exists(stem)}
        partition = context.asset_partition_key if context.has_asset_partitions else None
        return _load(self._stem(context), context.asset_key.to_user_string(), partition)


# Assets renamed since homes were first written (new: former): a home written before reads back.
RENAMED_ASSETS = {"catalogue": "mm_ml_1m"}


def _former(stem: Path) -> Path:
    """`stem`, or the same asset's file under its former name where only that one is stored."""
    former = RENAMED_ASSETS.get(stem.name)
    if former is None or _exists(stem) or not _exists(stem.with_name(former)):
        return stem
    return stem.with_name(former)


def _load(stem: Path, asset: str, partition: str | None = None) -> Any:
    stem = _former(stem)
    parquet, pointer = _files(stem)
    pickled = Path(f"{stem}.pkl")
    if pickled.exists():
        raise StoredValueError(
            f"asset {asset}: {pickled} is a pickle file. simab never loads pickle (unpickling runs whatever code the file "
            f"names); delete it and materialise {asset} again."
        )
    if parquet.exists() and (not pointer.exists() or parquet.stat().st_mtime_ns >= pointer.stat().st_mtime_ns):
        with _named(asset, partition, parquet):
            return current_names(pl.read_parquet(read_verified(parquet)))
    if pointer.exists():
        with _named(asset, partition, pointer):
            record, folder = read_folder_pointer(pointer)
            if not isinstance(record, dict):
                raise ValueError(f"holds a JSON {type(record).__name__}, not a pointer record")
        if record.get("format") != FORMAT:
            raise StoredValueError(
                f"asset {asset}: {pointer} is not a simab asset pointer (format {record.get('format')!r})"
            )
        type_name = record.get("type")
        if type_name == "json":
            return record["value"]
        type_name = RENAMED_TYPES.get(type_name, type_name)
        if type_name not in VALUE_TYPES:
            raise StoredValueError(
                f"asset {asset}: {pointer} names type {type_name!r}, which simab does not load; known: {sorted(VALUE_TYPES)}"
            )
        if folder is None or not folder.is_dir():
            raise StoredDataError(asset, partition, pointer, f"it names folder {folder}, which is missing")
        with _named(asset, partition, folder):
            if isinstance(record.get("sha256"), dict):
                verify_folder(folder, record["sha256"])
            return _codec(type_name, 1)(folder)
    raise FileNotFoundError(f"no stored value at {parquet} or {pointer}: materialise the upstream asset first")


@contextmanager
def _named(asset: str, partition: str | None, path: Path) -> Iterator[None]:
    """Any error reading or decoding the value at `path` becomes one `StoredDataError`: a
    damaged file can fail in the decoder in many ways (Polars, numpy, safetensors, JSON, a
    Rust panic), none of them naming the asset or what to do."""
    try:
        yield
    except StoredValueError:
        raise
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # pyo3's PanicException (a Polars panic) is not an Exception
        raise StoredDataError(asset, partition, path, f"{type(exc).__name__}: {str(exc)[:300]}") from exc


def _partition_parts(key: str) -> list[str]:
    # A multi-dimensional key (`fm|0`: arm × user shard) is a folder per dimension, so one
    # arm's shards sit together (`simulation_shard/fm/0.parquet`).
    return str(key).split("|")


def _files(stem: Path) -> tuple[Path, Path]:
    return Path(f"{stem}.parquet"), Path(f"{stem}.json")


def _exists(stem: Path) -> bool:
    # A pickle counts, so that loading it is refused loudly rather than the arm silently skipped.
    return any(Path(f"{stem}{suffix}").exists() for suffix in (".parquet", ".json", ".pkl"))


def _type_name(obj: Any) -> str:
    """The qualified name of the value's class, or of the nearest base class in VALUE_TYPES
    (every trained built-in arm, Random's class or DeepFM's, is stored as a TrainedArm)."""
    names = [f"{cls.__module__}.{cls.__qualname__}" for cls in type(obj).__mro__]
    return next((name for name in names if name in VALUE_TYPES), names[0])


def _codec(type_name: str, which: int):
    """`which` 0: save(obj, folder); 1: load(folder) -> obj, for a name of VALUE_TYPES."""
    target = VALUE_TYPES[type_name][which]
    if target:
        module, function = target.split(":")
        fn = getattr(importlib.import_module(module), function)
        # save_arm / load_arm own their folder: give them one inside ours.
        return (lambda obj, folder: fn(obj, folder / "value")) if which == 0 else (lambda folder: fn(folder / "value"))
    module, cls_name = type_name.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), cls_name)
    return (lambda obj, folder: obj.save(folder)) if which == 0 else cls.load


def _exact_json(value: Any) -> bool:
    """Whether `value` survives a JSON round trip unchanged, types included (no tuples,
    no int keys, no NaN, no subclasses of str or float)."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return _same(json.loads(text), value)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b

"""Where simab keeps what it makes, and the IO manager that writes asset values there.

Everything lives under one data folder: `$SIMAB_HOME` when set, else `data/` in the
project.  Polars frames become Parquet (one file per asset, one per partition); any other
value (a trained arm, a dict of profiles) is pickled beside them.  Files are written to a
temporary name and renamed, so a killed run never leaves a half-written asset behind.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

import polars as pl
from dagster import ConfigurableIOManager, InputContext, OutputContext

from ops.atomic import atomic_write_bytes, atomic_write_parquet

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def data_root() -> Path:
    """The data folder: $SIMAB_HOME, or `data/` in the project."""
    return Path(os.environ.get("SIMAB_HOME", PROJECT_ROOT / "data")).resolve()


def frame_digest(df: pl.DataFrame) -> str:
    """A content digest of a frame (order-sensitive), used as Dagster data version and
    MLflow dataset digest.  Schema is part of it so a cast changes the version."""
    h = hashlib.sha256(str(df.schema).encode())
    if df.height:
        h.update(df.hash_rows(seed=0, seed_1=1, seed_2=2, seed_3=3).to_numpy().tobytes())
    return h.hexdigest()[:16]


class SimabIOManager(ConfigurableIOManager):
    """Parquet for Polars frames, pickle for everything else, under `<root>/assets/`."""

    root: str = ""  # empty: data_root()

    def _base(self) -> Path:
        return (Path(self.root) if self.root else data_root()) / "assets"

    def _stem(self, context: OutputContext | InputContext) -> Path:
        stem = self._base().joinpath(*context.asset_key.path)
        if context.has_asset_partitions:
            keys = context.asset_partition_keys
            if len(keys) != 1:
                raise ValueError(f"{context.asset_key.to_user_string()}: one partition at a time, got {keys}")
            stem = stem / keys[0]
        return stem

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        if obj is None:
            return
        stem = self._stem(context)
        if isinstance(obj, pl.DataFrame):
            path, stale = Path(f"{stem}.parquet"), Path(f"{stem}.pkl")
            # Dagster materialises a partition once at a time: temp files of a killed
            # earlier run can go.
            atomic_write_parquet(obj, path, clean_stale=True)
            context.add_output_metadata({"path": str(path), "rows": obj.height})
        else:
            path, stale = Path(f"{stem}.pkl"), Path(f"{stem}.parquet")
            atomic_write_bytes(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), clean_stale=True)
            context.add_output_metadata({"path": str(path)})
        stale.unlink(missing_ok=True)

    def load_input(self, context: InputContext) -> Any:
        if context.has_asset_partitions and len(context.asset_partition_keys) > 1:
            # An unpartitioned asset reading every arm gets a dict of the arms materialised
            # so far; arms never run are simply absent (the read-out says which it used).
            stems = {key: self._base().joinpath(*context.asset_key.path) / key for key in context.asset_partition_keys}
            return {key: self._load(stem) for key, stem in stems.items() if _exists(stem)}
        return self._load(self._stem(context))

    @staticmethod
    def _load(stem: Path) -> Any:
        parquet, pkl = Path(f"{stem}.parquet"), Path(f"{stem}.pkl")
        if parquet.exists():
            return pl.read_parquet(parquet)
        if pkl.exists():
            with open(pkl, "rb") as fh:
                return pickle.load(fh)
        raise FileNotFoundError(f"no stored value at {parquet} or {pkl}: materialise the upstream asset first")


def _exists(stem: Path) -> bool:
    return Path(f"{stem}.parquet").exists() or Path(f"{stem}.pkl").exists()

"""Every stored file of a home read back: each file with a `.sha256` against it
(ops.storage.atomic.read_verified), each folder value's files against its pointer
(read_folder_pointer + verify_folder), every Parquet file read whole (polars), every SQLite
file passing PRAGMA quick_check (mlflow.db, the Dagster instance's), every JSON file parsed;
and no temporary file or folder left.  python bench/one_home/readback.py HOME"""

import json
import sqlite3
import sys
from pathlib import Path

import polars as pl

from ops.storage.atomic import read_folder_pointer, read_verified, verify_folder

home = Path(sys.argv[1])
counts = {"sha256": 0, "folders": 0, "parquet": 0, "sqlite": 0, "json": 0}
bad = []
for p in sorted(home.rglob("*")):
    if not p.is_file():
        continue
    try:
        if p.name.endswith(".sha256"):
            read_verified(p.with_name(p.name[: -len(".sha256")]))
            counts["sha256"] += 1
        elif p.suffix == ".parquet":
            pl.read_parquet(p)
            counts["parquet"] += 1
        elif p.suffix == ".db" or p.name.endswith(".sqlite"):
            with sqlite3.connect(f"file:{p}?mode=ro", uri=True) as db:
                ok = db.execute("PRAGMA quick_check").fetchone()[0]
            if ok != "ok":
                raise RuntimeError(ok)
            counts["sqlite"] += 1
        elif p.suffix == ".json":
            record = json.loads(p.read_text())
            counts["json"] += 1
            if isinstance(record, dict) and record.get("folder") and isinstance(record.get("sha256"), dict):
                rec, folder = read_folder_pointer(p)
                verify_folder(folder, rec["sha256"])
                counts["folders"] += 1
    except Exception as exc:  # noqa: BLE001
        bad.append(f"{p}: {type(exc).__name__}: {exc}")
tmp = [str(p) for p in home.rglob("*") if ".tmp" in p.name]
print(f"{home}: read back {counts}; unreadable {len(bad)}; temporary names left {len(tmp)}")
for line in bad + tmp:
    print("  ", line)
sys.exit(1 if bad else 0)

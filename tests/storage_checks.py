"""Checks shared by the storage tests: exact sameness of stored values, pickles on disk."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import numpy as np
import polars as pl


class Touch:
    """Unpickling this creates a file: proof that a pickle was (or was not) loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def contains_pickle(path: Path) -> bool:
    """A pickle stream (protocol 2+ starts with PROTO) or an archive with a pickle member
    (torch.save writes `data.pkl` into a zip; np.savez of object arrays pickles them)."""
    import zipfile

    head = path.read_bytes()[:2]
    if len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return True
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if member.endswith(".pkl"):
                    return True
                if member.endswith(".npy"):
                    with archive.open(member) as fh:
                        version = np.lib.format.read_magic(fh)
                        read_header = (
                            np.lib.format.read_array_header_1_0
                            if version == (1, 0)
                            else np.lib.format.read_array_header_2_0
                        )
                        if read_header(fh)[2].hasobject:
                            return True
    return False


def assert_same(a, b, where: str = "value") -> None:
    """Equal values of identical types all the way down: arrays by dtype, shape and bytes,
    floats bit for bit, dicts in the same key order, frames with the same schema."""
    from scipy import sparse

    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        if a.dtype.hasobject:
            for i, (x, y) in enumerate(zip(a.ravel(), b.ravel())):
                assert_same(x, y, f"{where}[{i}]")
        else:
            assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), f"{where}: values differ"
    elif sparse.issparse(a):
        assert a.shape == b.shape, where
        for part in ("data", "indices", "indptr"):
            assert_same(getattr(a, part), getattr(b, part), f"{where}.{part}")
    elif isinstance(a, pl.DataFrame):
        assert a.schema == b.schema, f"{where}: {a.schema} != {b.schema}"
        assert a.equals(b, null_equal=True), f"{where}: rows differ"
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), f"{where}: {a!r} != {b!r}"
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys differ"
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif hasattr(a, "model_fields"):  # pydantic
        for name in type(a).model_fields:
            assert_same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif hasattr(a, "state_dict"):  # a torch module: same class, same weights
        sa, sb = a.state_dict(), b.state_dict()
        assert list(sa) == list(sb), f"{where}: parameters differ"
        for k in sa:
            assert sa[k].dtype == sb[k].dtype and bool((sa[k].cpu() == sb[k].cpu()).all()), f"{where}.{k}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"

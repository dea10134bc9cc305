"""Shared fixtures: where the reference data lives, and a skip when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# ../shared beside the checkout holds real MovieLens copies for tests and benchmarks only
# (never committed: the MovieLens licence forbids redistribution).
SHARED_DATA = Path(os.environ.get("SIMAB_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data not found at {SHARED_DATA} (set SIMAB_SHARED_DATA or put ../shared beside the checkout)")
    return SHARED_DATA


def shared_path(*parts: str) -> Path:
    """A path under the reference data, or a skip naming what is missing."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference data {path} is absent")
    return path

"""Shared fixtures: the reference data (located by `fakes.shared_data`), and a skip when it
is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.shared_data import SHARED_DATA
from ops.environment import offline_defaults
from ops.settings import uninstall

offline_defaults()


@pytest.fixture(autouse=True)
def _no_installed_settings():
    """Each test starts without the settings an earlier test's (or a module's) edge installed."""
    uninstall()
    yield
    uninstall()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"reference data not found at {SHARED_DATA} (set SIMAB_SHARED_DATA or put ../shared beside the checkout)"
        )
    return SHARED_DATA


def shared_path(*parts: str) -> Path:
    """A path under the reference data, or a skip naming what is missing."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference data {path} is absent")
    return path

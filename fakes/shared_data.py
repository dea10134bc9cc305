"""Where the real MovieLens reference copies live, for the tests and the benchmarks."""

from __future__ import annotations

import os
from pathlib import Path

# ../shared beside the checkout holds real MovieLens copies for tests and benchmarks only
# (never committed: the MovieLens licence forbids redistribution).
SHARED_DATA = Path(os.environ.get("SIMAB_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))

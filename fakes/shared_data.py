"""Where the real MovieLens reference copies live, for the tests and the benchmarks."""

from __future__ import annotations

from ops.settings import load

# ../shared beside the checkout holds real MovieLens copies for tests and benchmarks only
# (never committed: the MovieLens licence forbids redistribution); $SIMAB_SHARED_DATA moves it.
SHARED_DATA = load().shared_data

"""How fast `ops.data.movielens.load_local` reads ML-1M, against the usual way of reading it.

Baseline, measured in the same run: pandas `read_csv(sep="::", engine="python")` of the
ratings file alone (what most MovieLens loaders do; it parses but validates nothing).
Data: the reference copy in ../shared/data/ml-1m (339,444 ratings) and a 1M-rating folder
built from it in a temporary directory (users 1-1999 repeated as 2000-3998 and 4000-5998,
1,018,332 ratings, about the size of the full ML-1M ratings.dat).  Nothing is written to the repo.

    .venv/bin/python -m bench.bench_movielens_load
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from fakes.shared_data import SHARED_DATA
from ops.data.movielens import load_local

REPEATS = 3  # best of: the machine is shared


def main() -> None:
    source = SHARED_DATA / "ml-1m"
    if not source.is_dir():
        sys.exit(f"reference data {source} is absent")
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp)
        for name in ("users.dat", "movies.dat"):
            shutil.copy(source / name, big / name)
        ratings = (source / "ratings_users_1-1999.dat").read_bytes()
        with (big / "ratings.dat").open("wb") as fh:
            for offset in (0, 2000, 4000):
                for line in ratings.splitlines(keepends=True):
                    user, rest = line.split(b"::", 1)
                    fh.write(b"%d::%s" % (int(user) + offset, rest))
        for label, folder, ratings_file in (
            ("ml-1m reference copy", source, source / "ratings_users_1-1999.dat"),
            ("ml-1m, 1M ratings", big, big / "ratings.dat"),
        ):
            ours, n = best(lambda: load_local(folder).ratings.height)
            base, m = best(lambda: pandas_ratings(ratings_file))
            assert n == m, (n, m)
            print(
                f"{label}: {n:,} ratings; load_local {ours:.3f} s (users+movies+ratings, validated); "
                f"pandas python-engine ratings only {base:.3f} s; ratio {base / ours:.1f}x"
            )


def pandas_ratings(path: Path) -> int:
    import pandas as pd

    return len(pd.read_csv(path, sep="::", engine="python", header=None, encoding="latin-1"))


def best(call):
    times, result = [], None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return min(times), result


if __name__ == "__main__":
    main()

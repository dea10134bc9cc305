"""Each line of stdin with the seconds since argv[1] (epoch seconds)."""

import sys
import time

t0 = float(sys.argv[1])
for line in sys.stdin:
    print(f"{time.time() - t0:7.1f}s {line}", end="", flush=True)

"""What an extra adds to an install: the packages reachable from simab's core dependencies
together with the extra's, less those reachable from the core alone, with their installed
size (the files each distribution's RECORD lists), read from the environment it runs in.

    .venv/bin/python -m tools.extra_size [PACKAGE ...]   (default: dagster-celery celery redis)

The core is read from the installed simab's metadata: run it in an environment installed
from the commit to measure (celery, redis and dagster-celery were core until the `celery`
extra; pass them to measure what the extra takes off).
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import distributions
from pathlib import Path

from packaging.requirements import Requirement


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def main(argv: list[str] | None = None) -> int:
    extra = {_name(p) for p in (argv if argv is not None else sys.argv[1:]) or ("dagster-celery", "celery", "redis")}
    dists = {_name(d.metadata["Name"]): d for d in distributions()}

    def closure(roots) -> set[str]:
        seen, todo = set(), [_name(r) for r in roots]
        while todo:
            name = todo.pop()
            if name in seen or name not in dists:
                continue
            seen.add(name)
            for text in dists[name].requires or []:
                req = Requirement(text)
                if req.marker is None or req.marker.evaluate({"extra": ""}):
                    todo.append(_name(req.name))
        return seen

    def size(name: str) -> int:
        dist = dists[name]
        return sum(p.stat().st_size for f in dist.files or [] if (p := Path(dist.locate_file(f))).is_file())

    core = [Requirement(r).name for r in dists["simab"].requires or [] if "extra ==" not in r]
    without = closure([c for c in core if _name(c) not in extra])
    added = sorted((closure(core) | closure(extra)) - without)
    for name in added:
        print(f"{name:24s} {size(name) / 1e6:7.2f} MB")
    total, base = sum(size(n) for n in added), sum(size(n) for n in without)
    print(
        f"{len(added)} packages, {total / 1e6:.1f} MB, beside {base / 1e6:.0f} MB in {len(without)} packages without them"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

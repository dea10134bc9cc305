"""The verdict block of a lifecycle's console output (from the Winner/No arm line to the end of
the per-arm table), stamps stripped; with several files, whether each equals the first's."""

import re
import sys


def verdict(path):
    lines = [re.sub(r"^\s*[0-9.]+s ?", "", line.rstrip()) for line in open(path)]
    start = next(i for i, line in enumerate(lines) if line.startswith(("Winner", "No arm")))
    end = next(i for i, line in enumerate(lines) if line.strip().startswith("report"))
    return "\n".join(line.rstrip() for line in lines[start:end] if line.strip())


ref = verdict(sys.argv[1])
for p in sys.argv[2:]:
    try:
        v = verdict(p)
    except StopIteration:
        print(f"{p}: no verdict")
        continue
    print(f"{p}: {'the same verdict' if v == ref else 'DIFFERENT'} ({len(v.splitlines())} lines)")
    if v != ref:
        import difflib

        print("\n".join(difflib.unified_diff(ref.splitlines(), v.splitlines(), lineterm="")))

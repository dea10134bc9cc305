"""`python -m ops.simulation.brains.llm stats|clear`: the LLM response cache's command line —
what it holds per endpoint and model, or delete (some of) it; a damaged file is moved aside."""

from __future__ import annotations

import argparse
from pathlib import Path

from ops.settings import current
from ops.simulation.brains.llm.cache import CacheError, ResponseCache, move_aside


def main(argv: list[str] | None = None) -> None:
    """`python -m ops.simulation.brains.llm stats|clear [--cache PATH] [--model M]
    [--endpoint URL]`: what the response cache holds, or delete (some of) it."""
    default = current().home / "cache" / "llm" / "responses.sqlite"
    parser = argparse.ArgumentParser(
        prog="python -m ops.simulation.brains.llm", description=main.__doc__.split(":", 1)[1].strip()
    )
    parser.add_argument("command", choices=("stats", "clear"))
    parser.add_argument("--cache", default=str(default), help=f"the cache file (default: {default})")
    parser.add_argument("--model")
    parser.add_argument("--endpoint")
    args = parser.parse_args(argv)
    if not Path(args.cache).exists():
        raise SystemExit(f"no LLM response cache at {args.cache}")
    try:
        cache = ResponseCache(args.cache)
        try:
            if args.command == "clear":
                print(f"deleted {cache.clear(args.model, args.endpoint)} entries from {args.cache}")
            for endpoint, model, n in cache.stats():
                print(f"{endpoint}\t{model}\t{n}")
        finally:
            cache.close()
    except CacheError as exc:
        if args.command != "clear" or args.model or args.endpoint:
            # Only a whole clear may drop the file: a damaged file cannot be cleared in part.
            raise SystemExit(f"{exc}\n(`clear` without --model/--endpoint moves it aside)") from None
        moved = move_aside(args.cache)
        print(f"{args.cache} is damaged ({exc.__cause__}); moved it aside to {moved}: the next run starts a new cache")


if __name__ == "__main__":
    main()

"""Serve the trajectory viewer: `python -m viewer [--host 127.0.0.1] [--port 8050] [--allow-host NAME]` (`make viewer`).

It reads the assets stored under $SIMAB_HOME (`data/` by default) once, at start: restart it
after a new run.  Bound to 127.0.0.1 unless --host says otherwise: the pages show the
simulated users' profiles and every reason the brain gave.
"""

from __future__ import annotations

import sys

from ops.environment import offline_defaults


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    offline_defaults()

    import uvicorn

    from resources.storage import StoredDataError
    from viewer.app import create_app
    from viewer.store import ExperimentStore

    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"viewer: serving on {args.host}, reachable from other machines; the viewer has no login", file=sys.stderr
        )
    try:
        store = ExperimentStore.from_definitions()
    except StoredDataError as exc:
        print(f"viewer: {exc}", file=sys.stderr)
        return 1
    except (FileNotFoundError, ValueError) as exc:
        print(
            f"viewer: nothing to show yet: {exc}\nRun `make demo` (or materialise the simulation) first.",
            file=sys.stderr,
        )
        return 1
    print(f"simab viewer on http://{args.host}:{args.port} (arms: {', '.join(store.arms)})", flush=True)
    if args.host in ("0.0.0.0", "::") and not args.allow_host:
        print(
            "viewer: only requests addressed to localhost are answered; name this machine with --allow-host",
            file=sys.stderr,
        )
    uvicorn.run(create_app(store, [args.host, *args.allow_host]), host=args.host, port=args.port, log_level="warning")
    return 0


def parser():
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8050)
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the pages may be requested by (the Host header), besides 127.0.0.1, localhost and the "
        "--host address; repeatable. Any other Host is refused (DNS rebinding)",
    )
    return parser


if __name__ == "__main__":
    raise SystemExit(main())

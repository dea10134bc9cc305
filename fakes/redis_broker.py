"""A throwaway broker for the Celery executor in the tests and the benchmarks: Debian's
`redis-server` on a free 127.0.0.1 port, persisting nothing."""

from __future__ import annotations

import socket
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_command(server: str, port: int, folder: Path | str) -> list[str]:
    """`server` (the redis-server binary) on 127.0.0.1:`port`, no snapshot, no append-only
    file, its working folder `folder`."""
    return [
        server,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(folder),
    ]

"""An audit hook (PEP 578) that refuses every socket operation reaching beyond the loopback —
a name lookup, a connection, a datagram — and records it, so a test can say that a process
asked nothing of the network that its settings did not ask for.  Refused, not only recorded:
even when the test fails, no request has left the machine.

`command(AUDIT_FILE, MODULE)` is the command line that runs a module as `python -m` would,
under the hook, one line per refused operation appended to AUDIT_FILE (created empty first):
the event, its target and the thread that asked.
"""

from __future__ import annotations

import ipaddress
import runpy
import socket
import sys
import threading
from pathlib import Path

# The audit events of the socket module that reach a host (docs.python.org, "Audit events table").
REACHING = {
    "socket.connect": 1,  # (socket, address)
    "socket.sendto": 1,
    "socket.sendmsg": 1,
    "socket.getaddrinfo": 0,  # (host, port, family, type, flags)
    "socket.gethostbyname": 0,
    "socket.gethostbyaddr": 0,
    "socket.getnameinfo": 0,  # ((host, port), flags)
}


class OutboundSocket(OSError):
    """A socket operation beyond the loopback, refused by the audit hook."""


def loopback(event: str, args: tuple) -> bool:
    """Whether the operation stays on this machine: a Unix socket, the loopback addresses,
    `localhost`, no host at all."""
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        sock, address = args[0], args[1]
        if getattr(sock, "family", None) == getattr(socket, "AF_UNIX", None) or address is None:
            return True
        host = address[0] if isinstance(address, tuple) else address
    else:
        host = args[0][0] if event == "socket.getnameinfo" else args[0]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False  # a name other than localhost: a lookup that may leave the machine


def install(record: Path | str) -> None:
    """Refuse every operation of `REACHING` beyond the loopback from now on in this process,
    one line appended to `record` for each."""
    path = Path(record)

    def hook(event: str, args: tuple) -> None:
        if event not in REACHING or loopback(event, args):
            return
        target = args[REACHING[event]]
        with path.open("a", encoding="utf-8") as out:
            out.write(f"{event} {target!r} (thread {threading.current_thread().name})\n")
        raise OutboundSocket(f"{event} {target!r}: beyond 127.0.0.1, refused by tests/socket_audit.py")

    sys.addaudithook(hook)


# What libraries read to tell a test runner or a CI service from a person's machine (MLflow's
# telemetry keeps quiet under either): an audited run goes without them, as a person's would.
TEST_OR_CI = ("PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE")


def as_a_person_runs(environ: dict[str, str]) -> dict[str, str]:
    """`environ` without the variables that say a test or CI service runs it (`TEST_OR_CI`)."""
    return {k: v for k, v in environ.items() if k not in TEST_OR_CI}


def command(record: Path | str, module: str) -> list[str]:
    """`python -m module` under the hook, recording into `record` (arguments follow)."""
    return [sys.executable, "-c", "from tests.socket_audit import run; run()", str(record), module]


def run() -> None:
    """`AUDIT_FILE MODULE [ARGS...]` from the command line: the module run as `python -m` would."""
    record, module, *args = sys.argv[1:]
    Path(record).touch()  # its presence says the hook was installed
    install(record)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)

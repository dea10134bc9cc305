"""The `simab` command: the lifecycle and every UI over one home.

    simab run [--arms …] [--bill] [--verbose]   the whole lifecycle (`pipelines.lifecycle`); what is
                                                 unchanged is reused, `--force` computes it all again
    simab resume                                 continue the last lifecycle after a kill or a failure
    simab ui [dagster dev options]               the Dagster UI on workspace.yaml
    simab mlflow [mlflow ui options]             the MLflow UI on the home's tracking store
    simab viewer [--port …]                      the trajectory viewer over the stored assets
    simab settings [--markdown]                  every SIMAB_* setting: its value here, or the table
    simab report [--markdown] [--open]           the path of the latest report (or open it)

All of them read `$SIMAB_HOME` (`data/` in the project unless set): the Dagster instance
($DAGSTER_HOME, by default `$SIMAB_HOME/dagster_home`), the MLflow store
($MLFLOW_TRACKING_URI, by default `$SIMAB_HOME/mlflow.db`), the reports and the logs live
there (`pipelines.home`), so a run started with one home is shown by every UI started with
the same home.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ops.settings import PROJECT_ROOT, SettingError
from pipelines.home import dagster_home, home_environ, latest_report, simab_home

COMMANDS = {
    "run": "the whole lifecycle: prepare, each arm, the read-out (options: simab run --help)",
    "resume": "continue the last lifecycle of this home: skip the steps that succeeded",
    "ui": "the Dagster UI (dagster dev) on workspace.yaml, over this home's instance",
    "mlflow": "the MLflow UI over this home's tracking store",
    "viewer": "the trajectory viewer over this home's stored assets",
    "settings": "every SIMAB_* setting and its value here (--markdown: the table of all of them)",
    "report": "the path of the latest report of this home (--open: open it in a browser)",
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog="simab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=list(COMMANDS), help="; ".join(f"{k}: {v}" for k, v in COMMANDS.items()))
    if not args or args[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if args else 2
    command, rest = parser.parse_args(args[:1]).command, args[1:]
    try:
        return {
            "run": run,
            "resume": resume,
            "ui": ui,
            "mlflow": mlflow_ui,
            "viewer": viewer,
            "settings": settings,
            "report": report,
        }[command](rest)
    except SettingError as exc:
        raise SystemExit(f"simab: {exc}") from None


def run(rest: list[str]) -> int:
    return _lifecycle(rest)


def resume(rest: list[str]) -> int:
    return _lifecycle(["--resume", *rest])


def _lifecycle(argv: list[str]) -> int:
    """The lifecycle (`pipelines.lifecycle`).  A home that exists is taken here, before the
    seconds of imports and checks a lifecycle needs, and held to its end: a second run on it is
    refused (or waits) at once, however long the first one's checks take.  A home not made yet
    is taken by the lifecycle once its checks pass (a refused value leaves no home behind)."""
    home = simab_home()
    if any(a in ("-h", "--help", "--bill") for a in argv) or not home.is_dir():
        from pipelines.lifecycle import main as lifecycle

        return lifecycle(argv)
    from ops.settings import load
    from ops.storage.exhaustion import ResourceExhausted, named_exhaustion
    from ops.storage.home_lock import HomeBusy, home_lock, runner_claim

    claim = runner_claim(resume="--resume" in argv)
    try:
        with named_exhaustion(home), home_lock(home, claim, load().home_wait_s, on_wait=_say) as held:
            from pipelines.lifecycle import main as lifecycle  # seconds of imports, the home held

            return lifecycle(argv, held=held)
    except (HomeBusy, ResourceExhausted) as exc:
        raise SystemExit(f"simab: {exc}") from None


def _say(text: str) -> None:
    print(f"simab: {text}", flush=True)


def ui(rest: list[str]) -> int:
    """`dagster dev` with DAGSTER_HOME in the home, after writing its config and marking the
    runs of dead runners failed (`pipelines.instance`)."""
    from pipelines.instance import main as prepare_instance

    home = dagster_home()
    prepare_instance([str(home)])
    print(f"simab ui: Dagster instance {home}", flush=True)
    return _serve([_tool("dagster"), "dev", "-w", str(PROJECT_ROOT / "workspace.yaml"), *rest])


def mlflow_ui(rest: list[str]) -> int:
    """`mlflow ui` on the store the runs of this home were tracked in."""
    from resources.mlflow_tracking import MlflowTracking

    uri = MlflowTracking().resolved_uri()
    print(f"simab mlflow: tracking store {uri} (experiment 'simab')", flush=True)
    env = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    return _serve([_tool("mlflow"), "ui", "--workers", "1", "--backend-store-uri", uri, *rest], env)


def viewer(rest: list[str]) -> int:
    """The viewer in a process of its own (the layering keeps `viewer` out of `pipelines`)."""
    print(f"simab viewer: assets of {simab_home()}", flush=True)
    return _serve([sys.executable, "-m", "viewer", *rest])


def settings(rest: list[str]) -> int:
    """The current value of every setting (URLs without their user and password), with the
    stores they lead to; `--markdown`: the settings table of docs/settings.md."""
    from ops.settings import _extra, declared, load
    from pipelines.settings_page import markdown_table
    from resources.mlflow_tracking import MlflowTracking

    if rest == ["--markdown"]:
        print(markdown_table())
        return 0
    if rest:
        raise SystemExit("usage: simab settings [--markdown]")
    current = load()
    width = max(len(_extra(info)["env"]) for info in declared().values())
    for name, info in declared().items():
        value = getattr(current, name)
        shown = "" if value is None else ",".join(map(str, value)) if isinstance(value, list) else str(value)
        print(f"{_extra(info)['env']:<{width}}  {_without_password(shown)}")
    print()
    print(f"{'home':<{width}}  {simab_home()}")
    print(f"{'Dagster instance':<{width}}  {dagster_home()}")
    print(f"{'MLflow store':<{width}}  {_without_password(MlflowTracking().resolved_uri())}")
    return 0


def report(rest: list[str]) -> int:
    """The latest report's path under the home (HTML, or Markdown with --markdown)."""
    parser = argparse.ArgumentParser(prog="simab report")
    parser.add_argument("--markdown", action="store_true", help="the Markdown report instead of the HTML page")
    parser.add_argument("--open", action="store_true", help="open it in the default browser")
    args = parser.parse_args(rest)
    path = latest_report(suffix=".md" if args.markdown else ".html")
    if path is None:
        raise SystemExit(f"simab report: no report under {simab_home() / 'reports'} yet; `simab run` writes one")
    print(path)
    if args.open:
        import webbrowser

        webbrowser.open(path.as_uri())
    return 0


def _tool(name: str) -> str:
    """A console script of this environment (beside its python), else from PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def _serve(command: list[str], extra_env: dict[str, str] | None = None) -> int:
    """Run a server in the foreground with the home's environment until it stops, ^C, or a
    SIGTERM / SIGHUP (a service manager, `kill PID`): then the server's whole tree stops, as
    on ^C — `dagster dev` stops its webserver, daemon and code servers on SIGINT (`_stop_tree`)."""
    env = {**home_environ(), **(extra_env or {})}
    child = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env)

    def stop(signum, _frame):
        _stop_tree(child.pid, interrupt=True)
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return child.wait()
    except KeyboardInterrupt:  # ^C reached the whole foreground group, the server too
        _stop_tree(child.pid, interrupt=False)
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


STOP_GRACE_S = 20.0  # what `dagster dev` takes to stop its processes after a SIGINT


def _stop_tree(pid: int, interrupt: bool, grace_s: float = STOP_GRACE_S) -> None:
    """Stop process `pid` and every process under it: SIGINT to it (`interrupt`: it did not
    get the terminal's), up to `grace_s` for it to stop its own, then SIGTERM and SIGKILL to
    whatever of the tree is left."""
    import time

    tree = [pid, *_descendants(pid)]  # taken first: children are re-parented once their parent ends
    if interrupt:
        _signal(pid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in tree):
        time.sleep(0.2)
        tree += [p for p in _descendants(pid) if p not in tree]
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 1.0)):
        left = [p for p in tree if _alive(p)]
        if not left:
            return
        for p in left:
            _signal(p, sig)
        end = time.monotonic() + wait_s
        while time.monotonic() < end and any(_alive(p) for p in left):
            time.sleep(0.1)


def _descendants(pid: int) -> list[int]:
    """The processes under `pid` (none where it has ended)."""
    import psutil

    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # reaps our own child once it ended
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    import psutil

    try:  # a zombie has ended
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _without_password(text: str) -> str:
    """A URL with user:password@ replaced by ***@ (settings can name an endpoint with credentials)."""
    if "://" not in text or "@" not in text:
        return text
    parts = urlsplit(text)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


if __name__ == "__main__":
    raise SystemExit(main())

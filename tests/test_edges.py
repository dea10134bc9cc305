"""Settings are read once, at the edges, and the environment fixes live in one module.

The edges read `SIMAB_*` with `ops.settings.load` and install the result; every place below
them takes the values as parameters or from `ops.settings.current()`, so they see what the
code location, the lifecycle runner, the experiments runner and the viewer built.  Tests are
edges of their own (they build settings from the mappings they choose) and are not scanned.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from ops.environment import OFFLINE_DEFAULTS, offline_defaults
from ops.settings import Settings, current, install, uninstall
from tests import socket_audit

ROOT = Path(__file__).resolve().parents[1]

# The modules allowed to call `ops.settings.load()` (besides ops/settings.py, which defines it
# and falls back on it in `current()` where no edge ran): the one reader behind the code
# location and the lifecycle and experiments runners (`settings_from_env`), the Celery
# worker's config, the `simab` command and its home (read before any code location is built), and
# the reference data's locator that tests and benchmarks share.
LOAD_CALLERS = {
    "pipelines/run_config.py",
    "pipelines/home.py",
    "pipelines/cli.py",
    "deploy/dagster_celery_config.py",
    "fakes/shared_data.py",
}


def _sources() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / p for p in listed if (ROOT / p).is_file()]


def _calls_load(tree: ast.AST) -> bool:
    """Whether a module imports `load` from ops.settings or calls `<ops.>settings.load`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "ops.settings":
            if any(alias.name == "load" for alias in node.names):
                return True
        if isinstance(node, ast.Attribute) and node.attr == "load":
            owner = node.value
            if isinstance(owner, ast.Attribute) and owner.attr == "settings":
                owner = owner.value
                if isinstance(owner, ast.Name) and owner.id == "ops":
                    return True
            if isinstance(owner, ast.Name) and owner.id == "settings":
                # `from ops import settings` then `settings.load()`
                imported = any(
                    isinstance(n, ast.ImportFrom) and n.module == "ops" and any(a.name == "settings" for a in n.names)
                    for n in ast.walk(tree)
                )
                if imported:
                    return True
    return False


def load_callers() -> set[str]:
    out = set()
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        if path.suffix != ".py" or rel.startswith("tests/"):
            continue
        if _calls_load(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
            out.add(rel)
    return out


def test_only_the_edges_read_the_settings():
    callers = load_callers()
    deep = sorted(callers - LOAD_CALLERS)
    assert not deep, (
        f"ops.settings.load() called in {deep}: take the value as a parameter or from ops.settings.current() "
        "(what the edge installed), or add the module to LOAD_CALLERS if it is an edge"
    )
    # The list is exact: an edge that stopped reading is taken off it.
    assert callers == LOAD_CALLERS


def test_the_scan_sees_every_way_of_calling_load():
    forms = [
        "from ops.settings import load\nload()",
        "from ops.settings import load as read\nread()",
        "import ops.settings\nops.settings.load()",
        "from ops import settings\nsettings.load()",
    ]
    assert all(_calls_load(ast.parse(code)) for code in forms)
    assert not _calls_load(ast.parse("import json\njson.load(f)\nfrom ops.settings import current\ncurrent()"))


def test_the_edge_installs_what_it_read(tmp_path, monkeypatch):
    from pipelines.definitions import build_definitions
    from resources.storage import data_root

    monkeypatch.setenv("SIMAB_HOME", str(tmp_path / "env"))
    build_definitions(environ={"SIMAB_HOME": str(tmp_path)})  # the mapping it is given wins
    settings = current()
    assert settings.home == tmp_path
    assert data_root() == tmp_path.resolve()
    install(settings.model_copy(update={"home": tmp_path / "other"}))
    assert data_root() == (tmp_path / "other").resolve()
    # Without an edge (a function called directly), the environment as it is now.
    uninstall()
    monkeypatch.setenv("SIMAB_HOME", str(tmp_path / "env"))
    assert current().home == tmp_path / "env"
    monkeypatch.delenv("SIMAB_HOME")
    assert current().home == Settings().home


def test_offline_defaults_are_set_in_one_module_only():
    names = tuple(OFFLINE_DEFAULTS)
    setters = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("ops/environment.py", "tests/test_edges.py") or path.suffix == ".md":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if any(name in text for name in names):
            setters.append(rel)
    assert not setters, f"{names} set outside ops/environment.py in {setters}: call offline_defaults() instead"


def test_offline_defaults_keep_what_a_person_set(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("GX_ANALYTICS_ENABLED", raising=False)
    offline_defaults()
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert os.environ["GX_ANALYTICS_ENABLED"] == "False"


def test_deepctr_torch_and_mlflow_ask_no_one_anything(tmp_path):
    # deepctr-torch 0.3.0's __init__ starts a thread that asks PyPI for its newest release;
    # MLflow 3's first run, a thread that asks its telemetry service for a config (quiet only
    # under a test runner or CI, so the process runs without their variables).  A fresh
    # interpreter with the edges' fixes, every socket beyond 127.0.0.1 refused and recorded
    # (tests/socket_audit.py), both used, then every thread they started waited for.
    record = tmp_path / "outbound.txt"
    script = (
        "import sys, threading\n"
        "from tests.socket_audit import install\n"
        "install(sys.argv[1])\n"
        "from ops.environment import offline_defaults\n"
        "offline_defaults()\n"
        "import deepctr_torch, mlflow\n"
        "mlflow.set_tracking_uri(sys.argv[2])\n"
        "with mlflow.start_run():\n"
        "    mlflow.log_param('a', 1)\n"
        "for thread in threading.enumerate():\n"
        "    if thread is not threading.current_thread():\n"
        "        thread.join(10)\n"
        "print(deepctr_torch.utils.check_version.__module__)\n"
    )
    env = {**socket_audit.as_a_person_runs(dict(os.environ)), "MLFLOW_ALLOW_FILE_STORE": "true"}
    out = subprocess.run(
        [sys.executable, "-c", script, str(record), (tmp_path / "mlruns").as_uri()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["ops.environment"]  # the installed package's own check_version replaced
    assert not record.exists(), record.read_text()
    assert "check the latest version" not in out.stdout + out.stderr

"""Screenshot of MLflow's compare view of two lifecycles, in headless Chromium.

    SIMAB_HOME=data/compare-demo .venv/bin/python bench/mlflow_screenshot.py [--out docs/img/mlflow-compare.png]

It starts `mlflow ui` on the home's tracking store (as `simab mlflow` does), opens the
compare-runs page of the two newest lifecycle runs (tag `simab_role=lifecycle`, or the run
ids given with --runs) in /usr/bin/chromium --headless, and writes the page as a PNG
reduced to a 256-colour palette (a screenshot of text and tables loses nothing by it).
docs/tracking.md shows the result and the commands that made the two lifecycles.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from resources.mlflow_tracking import LIFECYCLE_ROLE, MlflowTracking  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(PROJECT / "docs" / "img" / "mlflow-compare.png"))
    parser.add_argument("--runs", nargs=2, metavar="RUN_ID", help="the two MLflow runs (default: the newest lifecycles)")
    parser.add_argument("--size", default="1500,1300", help="the browser window, WIDTH,HEIGHT in pixels")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()

    tracking = MlflowTracking()
    uri, experiment = tracking.resolved_uri(), tracking.experiment_id()
    runs = args.runs or [
        r.info.run_id
        for r in tracking.client().search_runs(
            [experiment], f"tags.simab_role = '{LIFECYCLE_ROLE}'", order_by=["attributes.start_time DESC"], max_results=2
        )
    ]
    if len(runs) != 2:
        raise SystemExit(f"{uri}: {len(runs)} lifecycle run(s); run two lifecycles in this home first (docs/tracking.md)")
    port = _free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlflow"), "ui", "--workers", "1", "--port", str(port)]
        + ["--backend-store-uri", uri],
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(f"{base}/health", server)
        query = urllib.parse.urlencode({"runs": json.dumps(runs), "experiments": json.dumps([experiment])})
        url = f"{base}/#/compare-runs?{query}"
        with tempfile.TemporaryDirectory() as tmp:
            shot = Path(tmp) / "shot.png"
            subprocess.run(
                [args.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
                + [f"--user-data-dir={tmp}/profile", f"--window-size={args.size}", "--virtual-time-budget=20000"]
                + [f"--screenshot={shot}", url],
                check=True,
                capture_output=True,
                timeout=180,
            )
            out = Path(args.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            _palette_png(shot, out)
        print(f"{out}: {out.stat().st_size / 1024:.0f} kB, runs {runs[0]} and {runs[1]}\n{url}")
    finally:
        server.terminate()
        server.wait(30)
    return 0


def _palette_png(source: Path, target: Path) -> None:
    from PIL import Image

    with Image.open(source) as image:
        image.convert("RGB").quantize(colors=256).save(target, optimize=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, server: subprocess.Popen, deadline_s: float = 120) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if server.poll() is not None:
            raise SystemExit(f"mlflow ui stopped (exit {server.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"mlflow ui did not answer {url} in {deadline_s:.0f} s")


if __name__ == "__main__":
    raise SystemExit(main())

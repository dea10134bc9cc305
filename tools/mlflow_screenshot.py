"""Screenshot of MLflow's compare view of two lifecycles, in headless Chromium.

    SIMAB_HOME=data/compare-demo .venv/bin/python -m tools.mlflow_screenshot [--out docs/img/mlflow-compare.png]

It starts `mlflow ui` on the home's tracking store (as `simab mlflow` does), opens the
compare-runs page of the two newest lifecycle runs (tag `simab_role=lifecycle`, or the run
ids given with --runs) in headless Chromium, and writes the page as a PNG reduced to a
256-colour palette (a screenshot of text and tables loses nothing by it).  Through
chromedriver (selenium, a test dependency) it first closes the assistant panel and the
plots, turns on "Show diff only" for the metrics and tags, and lets the metrics table grow
to all its rows; without selenium it takes the page as `chromium --headless --screenshot`
shows it.
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

from resources.mlflow_tracking import LIFECYCLE_ROLE, MlflowTracking

PROJECT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(PROJECT / "docs" / "img" / "mlflow-compare.png"))
    parser.add_argument(
        "--runs", nargs=2, metavar="RUN_ID", help="the two MLflow runs (default: the newest lifecycles)"
    )
    parser.add_argument("--size", default="1400,1200", help="the browser window, WIDTH,HEIGHT (the least) in pixels")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()

    tracking = MlflowTracking()
    uri, experiment = tracking.resolved_uri(), tracking.experiment_id()
    runs = args.runs or [
        r.info.run_id
        for r in tracking.client().search_runs(
            [experiment],
            f"tags.simab_role = '{LIFECYCLE_ROLE}'",
            order_by=["attributes.start_time DESC"],
            max_results=2,
        )
    ]
    if len(runs) != 2:
        raise SystemExit(
            f"{uri}: {len(runs)} lifecycle run(s); run two lifecycles in this home first (docs/tracking.md)"
        )
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
            width, height = (int(v) for v in args.size.split(","))
            try:
                _driven_shot(url, shot, width, height, args.chromium)
            except ImportError:
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


# Every virtualised table (react-virtualized, 300 px high) as tall as its rows, its wrappers
# resized with it.  The grid still renders only the rows its own height prop and overscan
# reach (about 17 of them): the metrics shown are the first ones, alphabetically, that differ.
GROW_TABLES = """
for (const grid of document.querySelectorAll("div[aria-label='grid']")) {
  const height = grid.scrollHeight + 'px';
  let e = grid;
  for (let i = 0; i < 3 && e; i++) { e.style.height = height; e.style.maxHeight = 'none'; e = e.parentElement; }
}
window.dispatchEvent(new Event('resize'));
"""
# The bottom of the last section, in page pixels (the screenshot is cut there).
CONTENT_BOTTOM = """
const grids = [...document.querySelectorAll("div[aria-label='grid']")];
return Math.max(...grids.map(g => g.getBoundingClientRect().bottom + window.scrollY));
"""


def _driven_shot(url: str, shot: Path, width: int, height: int, chromium: str) -> None:
    """The compare page through chromedriver: the assistant and the plots closed, the
    metrics and tags showing only what differs, every table at full height."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},3000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 60)
        for label in ("Close", "collapse Visualizations", "collapse Artifacts", "Metrics - Show diff only"):
            wait.until(expected_conditions.element_to_be_clickable((By.XPATH, f"//*[@aria-label='{label}']"))).click()
            time.sleep(0.5)
        driver.execute_script(GROW_TABLES)
        time.sleep(2)
        driver.execute_script("window.scrollTo(0, 0)")
        bottom = int(driver.execute_script(CONTENT_BOTTOM)) + 24
        driver.save_screenshot(str(shot))
    finally:
        driver.quit()
    from PIL import Image

    with Image.open(shot) as image:
        image.crop((0, 0, image.width, min(image.height, max(bottom, height)))).save(shot)


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

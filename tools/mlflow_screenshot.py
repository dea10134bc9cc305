"""Screenshot of MLflow's compare view of two lifecycles, or of one LLM agent session's trace,
in headless Chromium.

    SIMAB_HOME=data/compare-demo .venv/bin/python -m tools.mlflow_screenshot [--out docs/img/mlflow-compare.png]
    SIMAB_HOME=data/traces .venv/bin/python -m tools.mlflow_screenshot --traces [--out docs/img/mlflow-trace.png]

It starts `mlflow ui` on the home's tracking store (as `simab mlflow` does), opens the
compare-runs page of the two newest lifecycle runs (tag `simab_role=lifecycle`, or the run
ids given with --runs) in headless Chromium, and writes the page as a PNG reduced to a
256-colour palette (a screenshot of text and tables loses nothing by it).  Through
chromedriver (selenium, a test dependency) it first closes the assistant panel and the
plots, turns on "Show diff only" for the metrics and tags, and lets the metrics table grow
to all its rows; without selenium it takes the page as `chromium --headless --screenshot`
shows it.
docs/tracking.md shows the result and the commands that made the two lifecycles.

`--traces`: the experiment's Traces tab with the newest agent session's trace opened (its
span tree: the pages, each chat completion under its page, the exit interview), after a
lifecycle with the LLM brain in the home (docs/tracking.md#traces-of-the-llm-brain).
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
    parser.add_argument(
        "--out", default=None, help="default docs/img/mlflow-compare.png (mlflow-trace.png with --traces)"
    )
    parser.add_argument("--traces", action="store_true", help="the Traces tab, one agent session's trace open")
    parser.add_argument(
        "--runs", nargs=2, metavar="RUN_ID", help="the two MLflow runs (default: the newest lifecycles)"
    )
    parser.add_argument("--size", default="1400,1200", help="the browser window, WIDTH,HEIGHT (the least) in pixels")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()

    tracking = MlflowTracking()
    uri, experiment = tracking.resolved_uri(), tracking.experiment_id()
    args.out = args.out or str(PROJECT / "docs" / "img" / ("mlflow-trace.png" if args.traces else "mlflow-compare.png"))
    if args.traces:
        return _serve(uri, lambda base: _trace_page(tracking, base, experiment, uri), args, _driven_trace_shot)
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

    def compare_page(base: str) -> tuple[str, str]:
        query = urllib.parse.urlencode({"runs": json.dumps(runs), "experiments": json.dumps([experiment])})
        return f"{base}/#/compare-runs?{query}", f"runs {runs[0]} and {runs[1]}"

    return _serve(uri, compare_page, args, _driven_shot)


def _trace_page(tracking, base: str, experiment: str, uri: str) -> tuple[str, str]:
    """The Traces tab of the experiment, its newest agent session's trace selected."""
    traces = tracking.client().search_traces(
        locations=[experiment],
        filter_string="trace.name LIKE 'agent session%'",
        max_results=1,
        order_by=["timestamp_ms DESC"],
    )
    if not traces:
        raise SystemExit(
            f"{uri}: no agent session traced; run a lifecycle with the LLM brain in this home first "
            "(docs/tracking.md#traces-of-the-llm-brain)"
        )
    trace_id = traces[0].info.trace_id
    return f"{base}/#/experiments/{experiment}/traces?selectedEvaluationId={trace_id}", f"trace {trace_id}"


def _serve(uri: str, page, args, driven) -> int:
    """`mlflow ui` on `uri`, the page `page(base)` names shot through `driven` (or chromium's
    own --screenshot without selenium), written to args.out as a palette PNG."""
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
        url, what = page(base)
        with tempfile.TemporaryDirectory() as tmp:
            shot = Path(tmp) / "shot.png"
            width, height = (int(v) for v in args.size.split(","))
            try:
                driven(url, shot, width, height, args.chromium)
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
        print(f"{out}: {out.stat().st_size / 1024:.0f} kB, {what}\n{url}")
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


def _driver(chromium: str, width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)


def _driven_trace_shot(url: str, shot: Path, width: int, height: int, chromium: str) -> None:
    """The Traces tab through chromedriver: the assistant's panel closed, the selected trace's
    first chat completion chosen in its span tree and its Attributes tab shown."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _driver(chromium, width, height)
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 90)
        call = (By.XPATH, "//*[normalize-space(text())='chat completion']")
        wait.until(expected_conditions.element_to_be_clickable(call))
        click = "arguments[0].click()"  # the drawer's resize handle lies over the span list
        for close in driver.find_elements(By.XPATH, "//button[@aria-label='Close']"):  # the assistant's panel
            driver.execute_script(click, close)
        time.sleep(1)
        # The first call (found again: the list is drawn anew once the panel closed): its
        # tokens, cost, cache and latency.
        driver.execute_script(click, driver.find_element(*call))
        time.sleep(1)
        attributes = wait.until(
            expected_conditions.presence_of_element_located((By.XPATH, "//*[@role='tab'][contains(., 'Attributes')]"))
        )
        attributes.click()  # a tab of Radix's, which answers a pointer's press, not a script's click
        time.sleep(2)
        driver.save_screenshot(str(shot))
    finally:
        driver.quit()


def _driven_shot(url: str, shot: Path, width: int, height: int, chromium: str) -> None:
    """The compare page through chromedriver: the assistant and the plots closed, the
    metrics and tags showing only what differs, every table at full height."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _driver(chromium, width, 3000)
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

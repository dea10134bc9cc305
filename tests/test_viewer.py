"""The trajectory viewer: served on 127.0.0.1 over a small seeded experiment (two arms, the
same agents), read over HTTP and in headless Chromium (Debian's chromium driven by selenium
through chromedriver)."""

from __future__ import annotations

import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import polars as pl
import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """Eight agents of the planted world browse two arms (the world's list and its reverse)
    with a seeded brain; the read-out and its figures are written as the report asset does."""
    from fakes.agents import llm_world
    from ops.readout.ab_readout import ab_readout
    from ops.readout.readout_config import ReadoutConfig
    from ops.readout.readout_figures import write_ab_figures
    from ops.simulation.brains.random_policy import UniformRandomBrain
    from ops.simulation.request import SimulationConfig
    from ops.simulation.runner import simulate

    root = tmp_path_factory.mktemp("viewer")
    world = llm_world(root / "world", n_agents=8)
    top_k = world["top_k"]
    reverse = top_k.with_columns(arm=pl.lit("random"), rank=(pl.col("rank").max().over("user_id") + 1 - pl.col("rank")))
    config = SimulationConfig(progress=False)
    events = {
        arm: simulate(UniformRandomBrain(), world["agents"], lists, world["catalogue"], config, arms=[arm], seed=3)
        for arm, lists in (("pop", top_k), ("random", reverse))
    }
    readout = ab_readout(pl.concat(list(events.values())), control="pop", config=ReadoutConfig(n_bootstrap=200))
    report = root / "reports" / "run-1"
    write_ab_figures(readout, report / "plots")
    (report / "report.md").write_text("# simab report\n\n" + readout.to_markdown() + "\n![ab_ctr](plots/ab_ctr.png)\n")
    return dict(world=world, events=events, readout=readout, reports=root / "reports")


@pytest.fixture(scope="module")
def served(experiment):
    """The viewer on 127.0.0.1 at a free port, for the module."""
    import anyio
    import uvicorn

    from viewer.app import create_app
    from viewer.store import ExperimentStore, newest_report

    store = ExperimentStore(
        experiment["events"],
        experiment["world"]["catalogue_frame"],
        experiment["world"]["profiles"],
        experiment["readout"],
        newest_report(experiment["reports"]),
    )
    server = uvicorn.Server(uvicorn.Config(create_app(store), host="127.0.0.1", port=0, log_level="warning"))
    # anyio imports its file module on first use; done in the server's thread it raced pytest's
    # assertion rewriter parsing a module in this one (CPython 3.11: "AST constructor recursion
    # depth mismatch"), so it is imported here, before the thread starts.
    anyio.open_file  # noqa: B018
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the viewer did not start"
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    yield dict(url=f"http://{host}:{port}", store=store, **experiment)
    server.should_exit = True
    thread.join(10)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - 127.0.0.1 only
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def test_filters_pick_the_agents_the_events_say(served):
    events = served["events"]["pop"]
    exits = events.filter(pl.col("action") == "exit").select("user_id", "page_number")
    page_1 = set(exits.filter(pl.col("page_number") == 1).get_column("user_id"))
    clickers = set(events.filter(pl.col("action") == "click_movie").get_column("user_id"))
    everyone = set(events.get_column("user_id"))
    store = served["store"]
    assert set(store.agents("pop", "exited_page_1").get_column("user_id")) == page_1
    assert set(store.agents("pop", "never_clicked").get_column("user_id")) == everyone - clickers
    assert page_1 and everyone - page_1, "the seeded world should give both kinds of agents"
    status, page = get(f"{served['url']}/agents?arm=pop&filter=never_clicked")
    assert status == 200 and f"{len(everyone - clickers)} of {len(everyone)} agents" in page
    for user in everyone - clickers:
        assert f'href="/agent/{user}?arm=pop"' in page


def test_the_viewer_is_read_only_and_serves_catalogue_files_only(served):
    url = served["url"]
    assert get(f"{url}/agents?arm=fm")[0] == 404  # an arm never simulated
    assert get(f"{url}/poster/999999")[0] == 404  # not in the catalogue
    assert get(f"{url}/report/plots/..%2F..%2Freport.md")[0] == 404  # only the report's own figures
    status, _ = get(f"{url}/report/plots/ab_ctr.png")
    assert status == 200
    request = urllib.request.Request(f"{url}/agents?arm=pop", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)  # noqa: S310
    assert refused.value.code == 405
    status, report = get(f"{url}/report")
    assert status == 200 and "data:image/png;base64," in report and "<table>" in report


def test_only_loopback_and_the_started_host_are_answered_as_host(served):
    """DNS rebinding: a page from evil.example whose name now resolves to 127.0.0.1 sends Host: evil.example."""
    import http.client

    from viewer.app import allowed_hosts

    port = int(served["url"].rsplit(":", 1)[1])

    def status(host: str) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            connection.putrequest("GET", "/agents?arm=pop", skip_host=True)
            connection.putheader("Host", host)
            connection.endheaders()
            return connection.getresponse().status
        finally:
            connection.close()

    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
        assert status(host) == 200, host
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", "10.0.0.5", "", "[::2]"):
        assert status(host) == 400, host
    expected = ["127.0.0.1", "localhost", "[::1]", "viewer.lan", "[fe80::1]"]
    assert allowed_hosts(["0.0.0.0", "viewer.lan", "::1", "fe80::1"]) == expected


def test_a_host_the_viewer_was_started_with_is_answered(served):
    from starlette.testclient import TestClient

    from viewer.app import create_app

    client = TestClient(create_app(served["store"], ["viewer.lan"]), base_url="http://viewer.lan:8050")
    assert client.get("/agents?arm=pop").status_code == 200
    assert client.get("/agents?arm=pop", headers={"host": "evil.example"}).status_code == 400


def test_the_cli_binds_loopback_by_default():
    from viewer.__main__ import parser

    assert parser().parse_args([]).host == "127.0.0.1"
    assert parser().parse_args(["--host", "0.0.0.0"]).host == "0.0.0.0"
    assert parser().parse_args(["--allow-host", "a.lan", "--allow-host", "b.lan"]).allow_host == ["a.lan", "b.lan"]


def _browser(tmp_path: Path):
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        reason = f"Debian's chromium and chromium-driver are not installed ({CHROMIUM}, {CHROMEDRIVER}); .ci/run installs them"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1800",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def test_an_agent_under_two_arms_in_headless_chromium(served, tmp_path):
    from PIL import Image
    from selenium.webdriver.common.by import By

    events = served["events"]
    user = int(events["pop"].filter(pl.col("action") == "click_movie").get_column("user_id")[0])
    driver = _browser(tmp_path)
    try:
        driver.get(f"{served['url']}/agent/{user}?arm=pop&compare=random")
        sessions = driver.find_elements(By.CSS_SELECTOR, "section.session")
        assert [s.get_attribute("data-arm") for s in sessions] == ["pop", "random"]
        for section in sessions:
            arm = section.get_attribute("data-arm")
            rows = events[arm].filter(pl.col("user_id") == user).sort("step")
            steps = section.find_elements(By.CSS_SELECTOR, "div.step")
            # Every event row is a step on the page, in order, with its action.
            assert [s.get_attribute("data-action") for s in steps] == rows.get_column("action").to_list()
            for step, row in zip(steps, rows.iter_rows(named=True)):
                if row["action"] == "exit_interview":
                    assert f"satisfaction {row['satisfaction']}" in step.text
                    continue
                shown = [int(c.get_attribute("data-movie")) for c in step.find_elements(By.CSS_SELECTOR, "figure.card")]
                assert shown == row["shown"]
                assert row["action"] in step.text and row["reason"] in step.text
        # The posters really loaded (decoded by the browser), and the titles are the catalogue's.
        posters = driver.find_elements(By.CSS_SELECTOR, "img.poster")
        assert posters and all(
            driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", p) for p in posters
        )
        catalogue = served["world"]["catalogue_frame"]
        first = events["pop"].filter((pl.col("user_id") == user) & (pl.col("step") == 1)).row(0, named=True)
        titles = dict(catalogue.select("item_id", "title").iter_rows())
        page_text = driver.find_element(By.ID, "session-pop").text
        assert all(titles[m] in page_text for m in first["shown"])
        profile = served["world"]["profiles"][user]
        assert profile.occupation_label in driver.find_element(By.ID, "profile").text
        shot = tmp_path / "agent.png"
        assert driver.save_screenshot(str(shot))
    finally:
        driver.quit()
    image = np.asarray(Image.open(shot).convert("RGB"), dtype=float)
    assert image.shape[0] > 500 and image.std() > 10  # a rendered page, not a blank one
    out = os.environ.get("SIMAB_SCREENSHOTS")
    if out:  # keep the screenshot for a person to look at
        shutil.copy(shot, Path(out) / "viewer_agent.png")


def test_the_agents_filter_form_in_headless_chromium(served, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import staleness_of
    from selenium.webdriver.support.ui import Select, WebDriverWait

    store = served["store"]
    driver = _browser(tmp_path)
    try:
        driver.get(f"{served['url']}/agents?arm=pop")
        Select(driver.find_element(By.NAME, "filter")).select_by_value("exited_page_1")
        before = driver.find_element(By.ID, "agents")
        driver.find_element(By.CSS_SELECTOR, "form button").click()
        # The click only starts the navigation: read the table once the old page is gone and
        # the new one has finished loading, not while Chromium is still parsing its rows (CI
        # caught a half-parsed row without its link).
        wait = WebDriverWait(driver, 20)
        wait.until(staleness_of(before))
        wait.until(lambda d: d.execute_script("return document.readyState") == "complete")
        rows = driver.find_elements(By.CSS_SELECTOR, "#agents tr")[1:]
        listed = sorted(int(r.find_element(By.TAG_NAME, "a").text) for r in rows)
        assert listed == sorted(store.agents("pop", "exited_page_1").get_column("user_id").to_list())
        assert "filter=exited_page_1" in driver.current_url
        driver.get(served["url"] + "/")
        assert driver.find_element(By.ID, "metrics").text.count("\n") >= 2  # header + one row per arm
        figures = driver.find_elements(By.CSS_SELECTOR, "figure.plot img")
        assert figures and all(driver.execute_script("return arguments[0].naturalWidth > 0", f) for f in figures)
    finally:
        driver.quit()

"""The report opens on its verdict: the winning arm against the control
with its interval, the fidelity verdict, the trust figures and the warnings come first, then
the arms' figure, then the detailed tables; in headless Chromium the verdict block lies in
the first screen."""

from __future__ import annotations

import polars as pl
import pytest

from ops.readout.ab_readout import ab_readout
from ops.readout.readout_config import ReadoutConfig
from ops.readout.readout_figures import write_ab_figures
from ops.readout.report_html import report_html
from ops.readout.report_markdown import report_markdown
from ops.readout.verdict import report_summary, verdict_lines
from tests.test_ab_readout import shifted_world
from tests.test_viewer import _browser


@pytest.fixture
def report(tmp_path):
    """A real read-out of two arms (B clicks one more item per agent than the control A) with
    its figures, and long detailed tables after the verdict, as a run's report has."""
    readout = ab_readout(shifted_world(n=60), control="A", config=ReadoutConfig(n_bootstrap=300, seed=0))
    folder = tmp_path / "run"
    plots = write_ab_figures(readout, folder / "plots")
    fid = pl.DataFrame({"simulated": ["ctr"], "offline": ["ndcg_at_k"], "kendall_tau": [0.33], "same_best_arm": [True]})
    summary = {"pairs": 1, "agree": 1, "disagree": 0, "missed": 0, "offline tie": 0, "separated": 1, "agreement": 1.0}
    headline = report_summary(
        readout, pl.DataFrame(), fid, summary, warnings=["Kendall τ(ctr, ndcg_at_k) = 0.330 is below the floor 0.60."]
    )
    filler = ["## A detailed section", "", "| a | b |", "|---|---|"] + [f"| {i} | {i * i} |" for i in range(80)]
    text = report_markdown(
        readout,
        pl.DataFrame({"arm": []}),
        fid,
        plots,
        folder,
        pl.DataFrame(),
        pl.DataFrame(),
        summary,
        trust=filler,
        headline=headline,
    )
    page = folder / "report.html"
    page.write_text(report_html(text, folder), encoding="utf-8")
    return {"readout": readout, "headline": headline, "markdown": text, "page": page}


def test_the_report_opens_on_the_verdict_then_the_arms_figure_then_the_tables(report):
    text, headline = report["markdown"], report["headline"]
    said = verdict_lines(headline)
    ctr = report["readout"].comparisons.filter(pl.col("metric") == "ctr").row(0, named=True)
    assert ctr["ci_low"] > 0  # B really wins
    assert said[0] == (
        f"Winner on CTR: B, {ctr['difference']:+.4f} [{ctr['ci_low']:+.4f}, {ctr['ci_high']:+.4f}] "
        "against the control A "
        f"(95 % interval; Holm p = {ctr['p_holm']:.3g})"
    )
    assert said[1].startswith("fidelity: Kendall τ(CTR, NDCG@20) = 0.33")
    assert said[-1] == "WARNING: Kendall τ(ctr, ndcg_at_k) = 0.330 is below the floor 0.60."
    # The first section is the verdict: the same lines the console prints, then one figure.
    first = text.split("\n## ")[1]
    assert first.startswith("Verdict") and all(line in first for line in said)
    assert "![arms on ctr](plots/ab_ctr.png)" in first
    assert text.index("## Verdict") < text.index("plots/ab_ctr.png") < text.index("## A detailed section")


def test_the_verdict_block_fills_the_first_screen_in_headless_chromium(report, tmp_path):
    from selenium.webdriver.common.by import By

    browser = _browser(tmp_path)
    try:
        browser.set_window_size(1280, 900)
        browser.get(report["page"].as_uri())
        viewport = browser.execute_script("return window.innerHeight")
        block = browser.find_element(By.ID, "verdict")
        box = block.rect
        assert box["y"] < 150 and box["y"] + box["height"] <= viewport, (box, viewport)
        assert "Winner on CTR: B" in block.text and "WARNING: Kendall" in block.text
        figure = block.find_element(By.TAG_NAME, "img")
        assert figure.get_attribute("src").startswith("data:image/png;base64,")
        assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", figure)
        browser.save_screenshot(str(tmp_path / "first-screen.png"))
        # The detailed tables start below the first screen.
        assert browser.find_element(By.XPATH, "//h2[text()='A detailed section']").rect["y"] > box["y"] + box["height"]
    finally:
        browser.quit()


def test_a_click_decision_left_uncalibrated_is_said_in_the_verdict_and_a_calibrated_one_is_named(report):
    readout = report["readout"]
    fid = pl.DataFrame({"simulated": ["ctr"], "offline": ["ndcg_at_k"], "kendall_tau": [0.33], "same_best_arm": [True]})
    summary = {"pairs": 1, "agree": 1, "disagree": 0, "offline tie": 0, "missed": 0, "agreement": 1.0}
    why = "list-response calibration: 0 agents have liked validation items and a memory; need >= 2"
    blind = report_summary(
        readout,
        pl.DataFrame(),
        fid,
        summary,
        warnings=["a fidelity warning"],
        list_response={"calibrated": False, "reason": why},
    )
    said = verdict_lines(blind)
    assert "click decision NOT calibrated to list quality" in said[2]
    # The first warning, before the checks' own.
    assert said[3].startswith("WARNING: the embedded brain's click decision is not calibrated") and why in said[3]
    assert said[4] == "WARNING: a fidelity warning"

    calibrated = {
        "calibrated": True,
        "agents": 245,
        "list_length": 6,
        "ratios": [5, 2, 1],
        "real": 1.0,
        "before": 0.327,
        "after": 0.668,
    }
    seeing = verdict_lines(report_summary(readout, pl.DataFrame(), fid, summary, list_response=calibrated))
    assert (
        "click decision calibrated to list quality on 245 agents (lists of 6 at 1:5, 1:2, 1:1; "
        "elasticity 0.33 -> 0.67, real 1.00)"
    ) in seeing[2]
    assert not any(line.startswith("WARNING") for line in seeing)
    lowered = verdict_lines(
        report_summary(readout, pl.DataFrame(), fid, summary, list_response={**calibrated, "level": 0.25})
    )
    assert "elasticity 0.33 -> 0.67, real 1.00; click level × 0.25)" in lowered[2]

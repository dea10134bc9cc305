"""The report opens on its verdict: the winning arm against the control
with its interval, the fidelity verdict, the trust figures and the warnings come first, then
the arms' figure, then the detailed tables; in headless Chromium the verdict block lies in
the first screen.  The verdict is one frozen value, stored as plain data and read back whole."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import polars as pl
import pytest

from ops.readout.ab_readout import ab_readout
from ops.readout.readout_config import ReadoutConfig
from ops.readout.readout_figures import write_ab_figures
from ops.readout.report_html import report_html
from ops.readout.report_markdown import report_markdown
from ops.readout.truth import TruthJudgement
from ops.readout.verdict import Verdict, verdict_lines
from ops.simulation.brains.embedded.config import EmbeddedBrainParams, ListResponse
from ops.studies.verdict import Trust, VerdictInputs, build_verdict
from tests.test_ab_readout import shifted_world
from tests.test_viewer import _browser

# τ(CTR, NDCG@20) 0.33, below the floor 0.6; one pair of arms, in agreement.
FID = pl.DataFrame({"simulated": ["ctr"], "offline": ["ndcg_at_k"], "kendall_tau": [0.33], "same_best_arm": [True]})
AGREE = pl.DataFrame({"arm_a": ["B"], "arm_b": ["A"], "verdict": ["agree"]})
LOW_TAU = "WARNING: Do not trust this simulated A/B result as it stands: Kendall τ(ctr, ndcg_at_k) = 0.330 is below the floor 0.60."


@pytest.fixture
def report(tmp_path):
    """A real read-out of two arms (B clicks one more item per agent than the control A) with
    its figures, and long detailed tables after the verdict, as a run's report has."""
    readout = ab_readout(shifted_world(n=60), control="A", config=ReadoutConfig(n_bootstrap=300, seed=0))
    folder = tmp_path / "run"
    plots = write_ab_figures(readout, folder / "plots")
    verdict = build_verdict(VerdictInputs(readout, FID, AGREE, tau_floor=0.6, spread_floor=0.02))
    filler = ["## A detailed section", "", "| a | b |", "|---|---|"] + [f"| {i} | {i * i} |" for i in range(80)]
    text = report_markdown(
        readout,
        pl.DataFrame({"arm": []}),
        FID,
        plots,
        folder,
        pl.DataFrame(),
        pl.DataFrame(),
        verdict,
        trust=filler,
    )
    page = folder / "report.html"
    page.write_text(report_html(text, folder), encoding="utf-8")
    return {"readout": readout, "verdict": verdict, "markdown": text, "page": page}


def test_the_report_opens_on_the_verdict_then_the_arms_figure_then_the_tables(report):
    text = report["markdown"]
    said = verdict_lines(report["verdict"])
    ctr = report["readout"].comparisons.filter(pl.col("metric") == "ctr").row(0, named=True)
    assert ctr["ci_low"] > 0  # B really wins
    assert said[0] == (
        f"Winner on CTR: B, {ctr['difference']:+.4f} [{ctr['ci_low']:+.4f}, {ctr['ci_high']:+.4f}] "
        "against the control A "
        f"(95 % interval; Holm p = {ctr['p_holm']:.3g})"
    )
    assert said[1].startswith(
        "fidelity: Kendall τ(CTR, NDCG@20) = 0.33; same best arm; arm against arm, of the 1 pairs"
    )
    assert said[-1] == LOW_TAU
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
        assert "Winner on CTR: B" in block.text and "WARNING: Do not trust" in block.text
        figure = block.find_element(By.TAG_NAME, "img")
        assert figure.get_attribute("src").startswith("data:image/png;base64,")
        assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", figure)
        browser.save_screenshot(str(tmp_path / "first-screen.png"))
        # The detailed tables start below the first screen.
        assert browser.find_element(By.XPATH, "//h2[text()='A detailed section']").rect["y"] > box["y"] + box["height"]
    finally:
        browser.quit()


def _with_brain(readout, **params) -> Verdict:
    """The verdict beside an embedded brain whose parameters say how its click decision was calibrated."""
    brain = SimpleNamespace(params=EmbeddedBrainParams.model_construct(**params))
    return build_verdict(
        VerdictInputs(readout, FID, AGREE, tau_floor=0.6, spread_floor=0.02, trust=Trust(embedded_brain=brain))
    )


def test_a_click_decision_left_uncalibrated_is_said_in_the_verdict_and_a_calibrated_one_is_named(report):
    readout = report["readout"]
    why = "list-response calibration: 0 agents have liked validation items and a memory; need >= 2"
    said = verdict_lines(_with_brain(readout, list_response_skipped=why))
    assert "click decision NOT calibrated to list quality" in said[2]
    # The first warning, before the checks' own.
    warnings = [line for line in said if line.startswith("WARNING:")]
    assert (
        warnings[0].startswith("WARNING: the embedded brain's click decision is not calibrated") and why in warnings[0]
    )
    assert warnings[1:] == [LOW_TAU]

    calibrated = {
        "metric": "ctr",
        "real_elasticity": 1.0,
        "elasticity_before": 0.327,
        "elasticity_after": 0.668,
        "click_scale": 1.0,
        "click_shift": 0.0,
        "agents": 245,
        "seed": 0,
        "list_length": 6,
        "ratios": [5, 2, 1],
    }
    seeing = verdict_lines(_with_brain(readout, list_response=ListResponse(**calibrated)))
    assert (
        "click decision calibrated to list quality on 245 agents (lists of 6 at 1:5, 1:2, 1:1; "
        "elasticity 0.33 -> 0.67, real 1.00)"
    ) in seeing[2]
    assert [line for line in seeing if line.startswith("WARNING")] == [LOW_TAU]
    lowered = verdict_lines(_with_brain(readout, list_response=ListResponse(**calibrated, level=0.25)))
    assert "elasticity 0.33 -> 0.67, real 1.00; click level × 0.25)" in lowered[2]


def test_a_stored_verdict_reads_back_into_the_same_lines_and_a_built_one_cannot_be_changed(report):
    brain = SimpleNamespace(params=EmbeddedBrainParams.model_construct(list_response_skipped="not run"))
    trust = Trust(embedded_brain=brain)
    verdict = build_verdict(
        VerdictInputs(report["readout"], FID, AGREE, 0.6, 0.02, trust=trust, truth=TruthJudgement(None))
    )
    # Stored as the `simab_report` asset stores it (JSON), in the shape stored homes hold, and read back.
    stored = json.loads(json.dumps(verdict.to_dict()))
    assert list(stored) == "control verdict trust warnings arms fidelity offline_users list_quality_seen truth".split()
    assert list(stored["verdict"]) == "metric arm control difference ci_low ci_high p_holm significant".split()
    assert (
        list(stored["arms"]["B"]) == ["ctr", "cvr", "average_rating", "ndcg_at_k"]
        and stored["fidelity"]["misses"] == []
    )
    assert list(stored["fidelity"])[:3] == ["kendall_tau_ctr_ndcg", "same_best_arm", "pairs"]
    assert stored["trust"] == {"list_response": {"calibrated": False, "reason": "not run"}}
    again = Verdict.from_dict(stored)
    assert again == verdict and verdict_lines(again) == verdict_lines(verdict)
    assert json.dumps(again.to_dict()) == json.dumps(stored)  # the same keys in the same order
    # A verdict stored by an older home, without the parts added since, reads too.
    older = {k: v for k, v in stored.items() if k not in ("offline_users", "list_quality_seen", "truth")}
    assert verdict_lines(Verdict.from_dict(older))[:3] == verdict_lines(verdict)[:3]
    # Nothing patches it once built: neither its fields nor what they hold.
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.simulator_bias = "patched"
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.winner.arm = "A"
    with pytest.raises(TypeError):
        verdict.list_quality_seen["line"] = "patched"
    with pytest.raises(TypeError):
        verdict.fidelity.counts["agree"] = 0
    with pytest.raises(AttributeError):
        verdict.warnings.append("patched")

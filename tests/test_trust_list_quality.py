"""Whether the agents see list quality, said from one figure (ops.studies.alignment.trust.
list_quality_seen): the sensitivity ladder when it ran with more agents, else the list-quality
spread; a spread too noisy to rule out the response the ladder implies is "underpowered
(N agents)", never "cannot tell lists apart", and a real flat response still warns."""

from __future__ import annotations

import math
from types import SimpleNamespace

import polars as pl
import pytest

from ops.readout.ab_readout import ab_readout
from ops.readout.readout_config import ReadoutConfig
from ops.readout.verdict import verdict_lines
from ops.studies.alignment.trust import implied_spread, ladder_elasticity, list_quality_seen
from ops.studies.verdict import Trust, VerdictInputs, build_verdict
from tests.test_ab_readout import shifted_world

FLOOR = 0.02
Z = 1.959964


def _spread(difference: float, low: float, high: float, agents: int, worst_mean: float = 0.032) -> SimpleNamespace:
    """A list-quality result as the trust figures read it: Steam's lists of 6 at 1:5 … 1:1,
    the agent variance the interval implies."""
    variance = ((high - low) / (2 * Z)) ** 2 * agents
    figure = {
        "metric": "ctr",
        "label": "CTR",
        "best": "1:1",
        "worst": "1:5",
        "agents": agents,
        "difference": difference,
        "ci_low": low,
        "ci_high": high,
        "best_mean": worst_mean + difference,
        "worst_mean": worst_mean,
        "best_share": 1 / 2,
        "worst_share": 1 / 6,
        "agent_variance": variance,
    }
    return SimpleNamespace(spread=lambda: figure)


def _ladder(agents: int, ctrs: tuple[float, ...], detected: int | None) -> dict:
    """The ladder's headline (`Sensitivity.headline`) over rungs 0, 5, 10, 15, 20 of 20, each
    rung's difference against the intact lists within ±0.05."""
    steps = [
        {
            "slots": 5 * i,
            "ctr": c,
            "difference": c - ctrs[0],
            "ci_low": c - ctrs[0] - 0.05,
            "ci_high": c - ctrs[0] + 0.05,
        }
        for i, c in enumerate(ctrs)
    ]
    return {
        "measured": True,
        "control": "pop",
        "list_length": 20,
        "agents": agents,
        "smallest_detected": detected,
        "steps": steps,
    }


STEAM_LADDER = _ladder(300, (0.663, 0.539, 0.38, 0.20, 0.002), 5)


def test_the_steam_run_that_warned_cannot_tell_lists_apart_now_says_underpowered():
    spread = _spread(0.022, -0.007, 0.051, 69)
    # Alone (no ladder): the interval holds 0 and the floor, so the protocol cannot say "blind".
    alone = list_quality_seen(spread, None, FLOOR)
    assert alone["warning"] is None and alone["source"] == "list-quality spread" and alone["sees"] is None
    assert alone["spread"]["status"] == "underpowered"
    assert alone["line"].startswith(
        "the agents see list quality: not established, the list-quality spread is underpowered (69 agents: "
        "its interval holds 0 and the 0.020 floor; about 581 agents would tell the two apart)"
    )
    # Beside the ladder (300 agents): the ladder decides, and the spread is underpowered against the
    # spread the ladder's response implies for lists of 6 at 1:5 and 1:1.
    e = ladder_elasticity(STEAM_LADDER)
    implied = implied_spread(spread.spread(), e)
    assert 0.5 < e < 1.0 and implied == pytest.approx(0.032 * (3**e - 1))
    seen = list_quality_seen(spread, STEAM_LADDER, FLOOR)
    assert seen["source"] == "sensitivity ladder" and seen["sees"] is True and seen["warning"] is None
    assert seen["spread"]["status"] == "underpowered" and seen["spread"]["reference"] == pytest.approx(implied)
    assert seen["line"].startswith(
        "the agents see list quality: yes, by the sensitivity ladder (300 agents, more than the list-quality "
        "protocol's): it detects 5 of 20 slots of pop's lists replaced; the list-quality spread is underpowered (69 agents"
    )
    assert f"the {implied:.3f} the ladder's response implies for these lists" in seen["line"]
    # The verdict: one line names the figure, the trust line says underpowered, no warning contradicts the ladder.
    readout = ab_readout(shifted_world(n=20), control="A", config=ReadoutConfig(n_bootstrap=50, seed=0))
    ladder = SimpleNamespace(headline=lambda: STEAM_LADDER)
    trust = Trust(list_quality=spread, sensitivity=ladder)
    said = verdict_lines(build_verdict(VerdictInputs(readout, pl.DataFrame(), pl.DataFrame(), 0.6, FLOOR, trust=trust)))
    trust = next(line for line in said if line.startswith("trust in the agents"))
    assert trust.endswith("list-quality spread CTR 1:1 − 1:5 +0.022 [-0.007, +0.051] (underpowered: 69 agents)")
    assert said[said.index(trust) + 1] == seen["line"]
    assert not any("cannot tell lists apart" in line for line in said)


def test_a_real_flat_response_still_warns_whichever_figure_decides():
    # Many agents, a tight interval about 0, below the floor and the ladder's implied spread: blind.
    flat = _spread(-0.001, -0.006, 0.004, 400)
    few_ladder = _ladder(120, (0.663, 0.539, 0.38, 0.20, 0.002), 5)
    for ladder in (None, few_ladder):  # the ladder with fewer agents does not decide
        seen = list_quality_seen(flat, ladder, FLOOR)
        assert seen["source"] == "list-quality spread" and seen["sees"] is False
        assert seen["line"] == (
            "the agents see list quality: no, by the list-quality spread (400 agents): -0.001 [-0.006, +0.004]"
        )
        assert seen["warning"].startswith(
            "the brain cannot tell lists apart: its CTR on the list-quality protocol's best lists (1:1) minus on "
            "the worst (1:5) is -0.001 [-0.006, +0.004] over 400 agents, its interval holding 0 and lying below the"
        )
    # The ladder deciding, and detecting nothing even at 20 of 20 slots replaced: warned from the ladder.
    blind_ladder = _ladder(600, (0.40, 0.40, 0.401, 0.399, 0.40), None)
    assert ladder_elasticity(blind_ladder) == pytest.approx(0.0, abs=0.01)
    seen = list_quality_seen(_spread(0.0, 0.0, 0.0, 50), blind_ladder, FLOOR)
    assert seen["source"] == "sensitivity ladder" and seen["sees"] is False
    assert seen["warning"].startswith(
        "the brain cannot tell lists apart: at 600 agents the sensitivity ladder detects no degradation of pop's "
        "lists, even 20 of 20 slots replaced"
    )
    # A brain that sees: no warning, the spread named as the figure.
    sees = list_quality_seen(_spread(0.181, 0.145, 0.215, 131, worst_mean=0.12), None, FLOOR)
    assert sees["sees"] is True and sees["warning"] is None
    assert (
        sees["line"]
        == "the agents see list quality: yes, by the list-quality spread (131 agents): +0.181 [+0.145, +0.215]"
    )
    assert list_quality_seen(None, None, FLOOR) == {
        "source": None,
        "sees": None,
        "line": "the agents see list quality: not measured (neither the list-quality protocol nor the ladder ran)",
        "warning": None,
        "spread": None,
    }


def test_the_ladders_elasticity_is_the_slope_of_log_ctr_on_log_share_kept():
    ladder = _ladder(100, tuple(0.5 * ((20 - k) / 20) ** 0.8 if k < 20 else 0.0 for k in (0, 5, 10, 15, 20)), 5)
    assert ladder_elasticity(ladder) == pytest.approx(0.8)
    assert implied_spread({"worst_share": 0.1, "best_share": 0.5, "worst_mean": 0.1}, 0.8) == pytest.approx(
        0.1 * (5**0.8 - 1)
    )
    assert ladder_elasticity({"measured": False}) is None and implied_spread({"worst_share": 0.1}, -0.2) is None
    assert math.isclose(ladder_elasticity(_ladder(10, (0.3, 0.3, 0.3, 0.3, 0.3), None)), 0.0, abs_tol=1e-12)

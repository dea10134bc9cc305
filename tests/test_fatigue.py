"""Fatigue system: A/B Agent Table 8 costs, Eq. 1 interest modifiers, budgets by tier."""

import pytest

from ops.simulation.fatigue import FatigueConfig, fatigue_budget, fatigue_cost, interest_modifier


def test_table_8_gpt_4o_mini_costs_at_neutral_interest():
    c = FatigueConfig()
    expected = {"click_movie": 2, "watch_and_rate": 10, "previous_page": 2, "next_page": 2, "back": 5, "exit": 0}
    assert {a: fatigue_cost(a, 3, c) for a in expected} == expected


def test_table_8_gpt_4o_preset():
    c = FatigueConfig.preset("gpt-4o")
    expected = {"click_movie": 15, "watch_and_rate": 40, "previous_page": 2, "next_page": 2, "back": 2, "exit": 0}
    assert {a: fatigue_cost(a, 3, c) for a in expected} == expected
    with pytest.raises(ValueError, match="unknown fatigue preset"):
        FatigueConfig.preset("gpt-5")


def test_interest_modifiers_are_linear_from_1_5_to_0_5():
    c = FatigueConfig()
    assert [interest_modifier(i, c) for i in range(1, 6)] == [1.5, 1.25, 1.0, 0.75, 0.5]
    assert fatigue_cost("watch_and_rate", 1, c) == 15.0
    assert fatigue_cost("watch_and_rate", 5, c) == 5.0
    assert fatigue_cost("back", 2, c) == 6.25


def test_modifiers_follow_configuration():
    c = FatigueConfig(phi_min=0.2, phi_max=2.2)
    assert interest_modifier(1, c) == pytest.approx(2.2)
    assert interest_modifier(5, c) == pytest.approx(0.2)
    assert interest_modifier(3, c) == pytest.approx(1.2)


@pytest.mark.parametrize("bad", [0, 6, 2.5, None, True])
def test_interest_out_of_scale_is_an_error(bad):
    with pytest.raises(ValueError, match="interest must be an integer in 1..5"):
        fatigue_cost("click_movie", bad, FatigueConfig())


def test_unknown_action_is_an_error():
    with pytest.raises(ValueError, match="unknown action 'rate'"):
        fatigue_cost("rate", 3, FatigueConfig())


def test_budget_by_activity_tier():
    c = FatigueConfig()
    assert [fatigue_budget(t, c) for t in ("low", "medium", "high")] == [20, 30, 45]
    assert fatigue_budget("high", FatigueConfig(budgets={"low": 1, "medium": 2, "high": 3})) == 3
    with pytest.raises(ValueError, match="unknown activity tier 'extreme'"):
        fatigue_budget("extreme", c)


def test_config_rejects_incomplete_costs_and_tiers():
    with pytest.raises(ValueError, match="missing \\['exit'\\]"):
        FatigueConfig(
            base_costs={"click_movie": 2, "watch_and_rate": 10, "previous_page": 2, "next_page": 2, "back": 5}
        )
    with pytest.raises(ValueError, match="lack the activity tier"):
        FatigueConfig(budgets={"low": 20, "high": 45})
    with pytest.raises(ValueError, match="phi_min <= phi_max"):
        FatigueConfig(phi_min=2.0, phi_max=1.0)

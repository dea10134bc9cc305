"""Power of the simulated A/B test: the formulas and the variance split on hand-worked
cases, and the minimum detectable difference checked against simulated experiments."""

import math

import numpy as np
import polars as pl
import pytest

from ops.readout.power import (
    PowerConfig,
    achieved_power,
    agents_needed,
    minimum_detectable_difference,
    power_analysis,
    sessions_needed,
    variance_components,
    z_sum,
)

Z = 1.959964 + 0.841621  # z_{0.975} + z_{0.80}


def per_session(rows):
    """(arm, user_id, session, ctr) rows."""
    return pl.DataFrame(
        rows, schema={"arm": pl.Utf8, "user_id": pl.Int64, "session": pl.Int64, "ctr": pl.Float64}, orient="row"
    )


def hand_worked():
    """Three agents, two sessions each.  Arm b has CTR 0.2 in every session; arm a adds
    the session differences d_is below:
        agent 1: 0.1, 0.3  -> mean 0.2, sample variance 0.02
        agent 2: 0.0, 0.2  -> mean 0.1, sample variance 0.02
        agent 3: 0.3, 0.3  -> mean 0.3, sample variance 0
    so Var_i(mean) = 0.01, σ²_within = 0.04 / 3, σ²_between = 0.01 − σ²_within / 2 = 0.01 / 3."""
    d = {1: (0.1, 0.3), 2: (0.0, 0.2), 3: (0.3, 0.3)}
    rows = []
    for user, diffs in d.items():
        for session, di in enumerate(diffs):
            rows += [("a", user, session, 0.2 + di), ("b", user, session, 0.2)]
    return per_session(rows)


def test_the_formulas_on_hand_worked_numbers():
    assert z_sum(0.05, 0.8) == pytest.approx(Z, abs=1e-5)
    # sd 0.1 over 100 agents: 2.8016 × 0.1 / 10.
    assert minimum_detectable_difference(0.01, 100) == pytest.approx(0.0280158, abs=1e-6)
    # 7.8489 × 0.0025 / 0.0001 = 196.2 -> 197 agents.
    assert agents_needed(0.01, 0.0025) == 197
    assert agents_needed(-0.01, 0.0025) == 197 and agents_needed(0.0, 0.0025) is None
    # At the MDE the power is the one asked for, by construction; at half of it much less.
    mde = minimum_detectable_difference(0.04, 250)
    assert achieved_power(mde, 0.04, 250) == pytest.approx(0.8, abs=1e-9)
    assert achieved_power(mde / 2, 0.04, 250) == pytest.approx(0.2880, abs=1e-3)  # Φ(1.4008 − 1.9600) = Φ(−0.5592)
    with pytest.raises(ValueError, match="at least one agent"):
        minimum_detectable_difference(0.01, 0)


def test_variance_split_and_plan_on_a_hand_worked_case():
    comp = variance_components(hand_worked(), "a", "b")
    assert (comp.agents, comp.sessions) == (3, 2)
    assert comp.mean_difference == pytest.approx(0.2) and (comp.mean_a, comp.mean_b) == (
        pytest.approx(0.4),
        pytest.approx(0.2),
    )
    assert comp.agent_variance == pytest.approx(0.01)
    assert comp.within == pytest.approx(0.04 / 3)
    assert comp.between == pytest.approx(0.01 / 3)
    assert comp.variance_at(2) == pytest.approx(0.01)  # the run's own sessions: the observed variance
    assert comp.variance_at(1) == pytest.approx(0.05 / 3)
    assert comp.variance_at(10) == pytest.approx(0.01 / 3 + 0.04 / 30)
    # 3 agents: the variance still enough is (0.2 / Z)² × 3 = 0.015289; sessions needed =
    # ceil(σ²_within / (0.015289 − σ²_between)) = ceil(1.115) = 2.
    assert sessions_needed(0.2, comp, 3, PowerConfig()) == 2
    # One agent: (0.2 / Z)² = 0.005096, less σ²_between leaves 0.001763 for σ²_within / S:
    # ceil(0.01333 / 0.001763) = 8 sessions.
    assert sessions_needed(0.2, comp, 1, PowerConfig()) == 8
    # A difference so small that the agents' own spread swamps it: no number of sessions helps.
    assert sessions_needed(0.01, comp, 3, PowerConfig()) is None


def test_agents_with_different_numbers_of_sessions_split_the_variance_by_their_mean_inverse():
    """Visits by activity tier: agent 4 comes once (difference 0.5), the hand-worked three
    twice.  Agent means 0.2, 0.1, 0.3, 0.5 (mean 0.275): Var_i = 0.0875 / 3; σ²_within from
    the agents with two sessions, 0.04 / 3; mean 1/n = (3 × 1/2 + 1) / 4 = 5/8, so
    σ²_between = 0.0875 / 3 − 0.04 / 3 × 5/8 = 0.0625 / 3 (with 1/2 for every agent, as if
    all had two sessions: 0.0675 / 3)."""
    rows = hand_worked().vstack(per_session([("a", 4, 0, 0.7), ("b", 4, 0, 0.2)]))
    comp = variance_components(rows, "a", "b")
    assert (comp.agents, comp.sessions) == (4, 2)
    assert comp.agent_variance == pytest.approx(0.0875 / 3)
    assert comp.within == pytest.approx(0.04 / 3)
    assert comp.between == pytest.approx(0.0625 / 3)


def test_power_analysis_per_pair_on_a_hand_worked_case():
    frame = hand_worked()
    # Arm c: the simulation prefers it to a (CTR 0.5 everywhere) while the offline metric
    # ranks a above c; arm e ties with b offline.
    frame = pl.concat(
        [
            frame,
            per_session([("c", u, s, 0.5) for u in (1, 2, 3) for s in (0, 1)]),
            per_session([("e", u, s, 0.2) for u in (1, 2, 3) for s in (0, 1)]),
        ]
    )
    pairs = pl.DataFrame(
        {
            "arm_a": ["a", "a", "b"],
            "arm_b": ["b", "c", "e"],
            "offline": ["ndcg_at_k"] * 3,
            "offline_ci_low": [0.01, 0.001, -0.01],
            "offline_ci_high": [0.05, 0.02, 0.02],
        }
    )
    offline = {"a": 0.12, "b": 0.10, "c": 0.11, "e": 0.10}
    result = power_analysis(frame, pairs, offline)
    ab, ac, be = result.pairs.sort("arm_b").iter_rows(named=True)
    # a vs b: MDE = Z × sqrt(0.01 / 3) = 0.16175 < 0.2: powered.
    assert ab["minimum_detectable_difference"] == pytest.approx(Z * math.sqrt(0.01 / 3), rel=1e-5)
    assert ab["verdict"] == "powered" and ab["power_at_observed"] > 0.8
    # Sensitivity: CTR +100 % relative (0.2 on 0.2) for NDCG +20 % (0.02 on 0.10) -> 5.
    assert (ab["relative_simulated"], ab["relative_offline"], ab["sensitivity_ratio"]) == (
        pytest.approx(1.0),
        pytest.approx(0.2),
        pytest.approx(5.0),
    )
    # Agents needed for 0.2: Z² × 0.01 / 0.04 = 1.96 -> 2; at one session Z² × (0.05/3) / 0.04 = 3.27 -> 4.
    assert (ab["agents_needed"], ab["agents_needed_one_session"], ab["sessions_needed"]) == (2, 4, 2)
    plan = result.plan.filter(pl.col("arm_b") == "b").sort("sessions")
    assert plan.get_column("sessions").to_list() == [1, 2, 5, 10]
    assert plan.get_column("agents_needed").to_list() == [4, 2, 2, 2]
    assert plan.get_column("agent_sessions").to_list() == [4, 4, 10, 20]
    # a vs c: the simulation goes the other way: a disagreement, not a matter of power.
    assert ac["verdict"] == "opposite direction" and ac["agents_needed"] is None and ac["simulated_difference"] < 0
    # b vs e: the offline interval holds 0: nothing to separate.
    assert be["verdict"] == "offline tie" and be["agents_needed"] is None
    assert set(result.plan.get_column("arm_b").to_list()) == {"b"}
    text = result.to_markdown()
    assert "3 agents × 2 session(s)" in text and "agents at 10 sess." in text
    assert "all of them at once: 4 agents × 1; 2 agents × 2; 2 agents × 5; 2 agents × 10 sessions" in text
    assert "| powered" in text and "| opposite direction" in text and "| offline tie" in text


def test_one_session_gives_the_run_figures_and_says_what_it_cannot_tell():
    frame = hand_worked().filter(pl.col("session") == 0)  # d = 0.1, 0.0, 0.3
    pairs = pl.DataFrame(
        {"arm_a": ["a"], "arm_b": ["b"], "offline": ["ndcg_at_k"], "offline_ci_low": [0.01], "offline_ci_high": [0.05]}
    )
    result = power_analysis(frame, pairs, {"a": 0.12, "b": 0.10})
    row = result.pairs.row(0, named=True)
    variance = np.var([0.1, 0.0, 0.3], ddof=1)
    assert row["sessions"] == 1 and row["between_variance"] is None and row["sessions_needed"] is None
    assert row["minimum_detectable_difference"] == pytest.approx(Z * math.sqrt(variance / 3), rel=1e-5)
    assert row["agents_needed"] == row["agents_needed_one_session"] == math.ceil(Z**2 * variance / (0.4 / 3) ** 2)
    assert result.plan.get_column("sessions").to_list() == [1]
    assert "cannot be told apart" in result.to_markdown()


def test_the_minimum_detectable_difference_has_the_stated_power_in_simulated_experiments():
    """2,000 paired experiments of 200 agents whose true mean difference is the MDE: the
    paired t-test at 5 % rejects in about 80 % of them (normal approximation vs t: < 1 %)."""
    from scipy import stats

    rng = np.random.default_rng(11)
    n, sd = 200, 0.15
    mde = minimum_detectable_difference(sd**2, n)
    d = rng.normal(mde, sd, size=(2000, n))
    rejected = stats.ttest_1samp(d, 0.0, axis=1).pvalue < 0.05
    assert rejected.mean() == pytest.approx(0.8, abs=0.03)
    # And the agents_needed for a difference gives at least the stated power.
    needed = agents_needed(0.03, sd**2)
    d = rng.normal(0.03, sd, size=(2000, needed))
    assert stats.ttest_1samp(d, 0.0, axis=1).pvalue.__lt__(0.05).mean() >= 0.77


def test_a_missed_pair_is_put_down_to_too_few_agents_only_below_the_mde():
    from ops.readout.power import MISS_AGENTS, MISS_RESPONSE, response_elasticity
    from ops.readout.verdict import misses_verdict

    rng = np.random.default_rng(5)
    n = 200
    means = {"a": 0.44, "b": 0.40, "c": 0.44, "d": 0.40}  # a > b seen; a ≈ c and b ≈ d missed
    frame = per_session([(arm, u, 0, mu + rng.normal(0, 0.01)) for arm, mu in means.items() for u in range(n)])
    offline = {"a": 0.20, "b": 0.10, "c": 0.19, "d": 0.02}
    pairs = pl.DataFrame(
        {
            "arm_a": ["a", "a", "b"],
            "arm_b": ["b", "c", "d"],
            "offline": ["ndcg_at_k"] * 3,
            "offline_ci_low": [0.05, 0.001, 0.05],
            "offline_ci_high": [0.15, 0.02, 0.11],
            "verdict": ["agree", "missed", "missed"],
        }
    )
    result = power_analysis(frame, pairs, offline)
    rows = {(r["arm_a"], r["arm_b"]): r for r in result.pairs.iter_rows(named=True)}
    # The elasticity is fitted over every pair the offline metric separates, misses included.
    fitted = response_elasticity(
        [(offline[a], offline[b], r["simulated_a"], r["simulated_b"]) for (a, b), r in rows.items()]
    )
    assert result.elasticity == pytest.approx(fitted) and 0 < fitted < 0.05
    for (a, b), r in rows.items():
        assert r["expected_difference"] == pytest.approx(r["simulated_b"] * ((offline[a] / offline[b]) ** fitted - 1))
    # NDCG 0.20 against 0.19 implies a CTR difference far below what 200 agents detect ...
    near = rows[("a", "c")]
    assert near["expected_difference"] < near["minimum_detectable_difference"] and near["miss"] == MISS_AGENTS
    assert near["expected_agents_needed"] > n
    # ... NDCG five times higher implies one above it: not a matter of agents.
    far = rows[("b", "d")]
    assert far["expected_difference"] > far["minimum_detectable_difference"] and far["miss"] == MISS_RESPONSE
    assert rows[("a", "b")]["miss"] is None  # seen: nothing to explain
    said = misses_verdict(result.misses())
    assert said.startswith("missed pairs: a vs c too few agents (MDE ")
    assert f"about {near['expected_agents_needed']:,} agents" in said and "b vs d not for want of agents" in said
    assert "| missed pair" in result.to_markdown() and "elasticity" in result.to_markdown()

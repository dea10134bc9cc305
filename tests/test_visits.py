"""Visits (ops/simulation/visits.py): what the activity tier changes — the session's budget
(A/B Agent) or how often the agent comes back."""

import polars as pl
import pytest

from ops.simulation.brains.random_policy import UniformRandomBrain
from ops.simulation.fatigue import FatigueConfig
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate
from ops.simulation.visits import (
    VisitsConfig,
    agents_by_session,
    mean_sessions,
    session_budget,
    sessions_of,
    visits_config,
)
from ops.studies.alignment.social import simulated_behaviour, simulated_session_behaviour
from tests.test_simulation import Scripted, world

VISITS = VisitsConfig(activity_drives="visits", visits={"low": 1, "medium": 2, "high": 4})


def test_the_default_design_gives_each_tier_its_budget_and_one_session_per_agent():
    fatigue, default = FatigueConfig(), VisitsConfig()
    assert [session_budget(t, fatigue, default) for t in ("low", "medium", "high")] == [20.0, 30.0, 45.0]
    assert [sessions_of(t, 2, default) for t in ("low", "medium", "high")] == [2, 2, 2]
    # visits: the medium budget for every session, the sessions by tier (times sessions_per_agent)
    assert [session_budget(t, fatigue, VISITS) for t in ("low", "medium", "high")] == [30.0, 30.0, 30.0]
    assert [sessions_of(t, 2, VISITS) for t in ("low", "medium", "high")] == [2, 4, 8]
    assert mean_sessions(["low", "high", "high"], 1, VISITS) == 3.0


def test_agents_by_session_numbers_each_agents_sessions_from_zero():
    tiers = {1: "low", 2: "medium", 3: "high", 4: "medium"}
    assert agents_by_session(tiers, tiers, 1, VISITS) == [[1, 2, 3, 4], [2, 3, 4], [3], [3]]
    assert agents_by_session(tiers, tiers, 1, VisitsConfig()) == [[1, 2, 3, 4]]


def test_bad_visits_are_errors_that_name_the_tier():
    with pytest.raises(ValueError, match="high"):
        VisitsConfig(visits={"low": 1, "medium": 2})
    with pytest.raises(ValueError, match=">= 1"):
        VisitsConfig(visits={"low": 0, "medium": 2, "high": 3})
    with pytest.raises(ValueError, match="one number per activity tier"):
        visits_config("visits", [1, 2])
    assert visits_config("visits", [1, 3, 5]).visits == {"low": 1, "medium": 3, "high": 5}
    with pytest.raises(ValueError, match="unknown activity tier 'huge'"):
        sessions_of("huge", 1, VISITS)


def test_visits_give_active_agents_more_sessions_of_the_same_budget():
    cat, top_k, agents = world(12)  # user u's tier: ("low", "medium", "high")[u % 3]
    config = SimulationConfig(progress=False, visits=VISITS)
    events = simulate(Scripted(interest=3), agents, top_k, cat, config, seed=2, run_id="r")
    sessions = events.group_by("user_id").agg(pl.col("session").n_unique().alias("n"), pl.col("session").max())
    by_user = {u: (n, last) for u, n, last in sessions.iter_rows()}
    assert by_user[3] == (1, 0) and by_user[1] == (2, 1) and by_user[2] == (4, 3)
    # Every session is the same length: the scripted brain at one interest spends the medium budget alike.
    lengths = events.group_by("user_id", "session").len().get_column("len").unique().to_list()
    assert len(lengths) == 1
    # Session s of an agent is the same however many sessions the others have: two for everyone alike.
    twice = simulate(
        Scripted(interest=3),
        agents,
        top_k,
        cat,
        config,
        seed=2,
        run_id="r",
        sessions_per_agent=dict.fromkeys(range(1, 13), 2),
    )
    returning = pl.col("user_id").is_in([1, 2, 4, 5, 7, 8, 10, 11])
    assert events.filter(pl.col("session") == 1).equals(twice.filter((pl.col("session") == 1) & returning))
    # The default design: one session each, a longer one for a higher tier.
    default = simulate(Scripted(interest=3), agents, top_k, cat, CFG_DEFAULT, seed=2, run_id="r")
    assert default.get_column("session").unique().to_list() == [0]
    per_agent = dict(default.group_by("user_id").len().iter_rows())
    assert per_agent[2] > per_agent[1] > per_agent[3]


CFG_DEFAULT = SimulationConfig(progress=False)


def test_session_behaviour_separates_how_often_from_how_much():
    cat, top_k, agents = world(12)
    genres = pl.DataFrame({"item_id": list(range(1, 101)), "genres": [["Drama"]] * 100})
    movie_mean = pl.DataFrame({"item_id": list(range(1, 101)), "mean": [3.5] * 100})
    config = SimulationConfig(progress=False, visits=VISITS)
    both = pl.concat([top_k.with_columns(pl.lit(arm).alias("arm")) for arm in ("A", "B")])
    events = simulate(UniformRandomBrain(), agents, both, cat, config, seed=4)
    per_session = {r["user_id"]: r for r in simulated_session_behaviour(events, genres).iter_rows(named=True)}
    window = {r["user_id"]: r for r in simulated_behaviour(events, movie_mean, genres).iter_rows(named=True)}
    assert per_session[2]["sessions"] == 4.0 and per_session[3]["sessions"] == 1.0
    # The window sums the sessions of an arm; per session is its mean.
    for u in (2, 5):
        assert window[u]["interactions"] == pytest.approx(per_session[u]["interactions"] * per_session[u]["sessions"])
    assert per_session[3]["interactions"] == pytest.approx(window[3]["interactions"])
    assert all(0.0 <= r["genres"] <= 1.0 for r in per_session.values())


def test_the_cost_ceiling_follows_the_design_budget():
    from ops.simulation.cost import _ceiling_calls

    _, _, agents = world(3)  # users 1, 2, 3: medium, high, low
    default = [_ceiling_calls(a, CFG_DEFAULT) for a in agents]
    visits = [_ceiling_calls(a, SimulationConfig(progress=False, visits=VISITS)) for a in agents]
    assert default[1] > default[0] > default[2]
    assert visits == [default[0]] * 3  # every session the medium budget

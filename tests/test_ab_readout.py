"""A/B read-out: metrics against hand-worked event logs, bootstrap coverage, tests, Holm."""

import numpy as np
import polars as pl
import pytest
from scipy import stats

from ops.readout.ab_readout import ab_readout
from ops.readout.agent_metrics import per_agent_metrics
from ops.readout.readout_config import ReadoutConfig
from ops.readout.statistics import bootstrap_means, holm
from ops.schema import EVENTS
from tests.tables import unpadded

P1, P2 = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10]


def row(arm, user, step, page_type, page, action, shown=(), movie=None, rating=None, satisfaction=None):
    return {
        "run_id": "r",
        "arm": arm,
        "user_id": user,
        "step": step,
        "page_type": page_type,
        "page_number": page,
        "action": action,
        "item_id": movie,
        "position": None,
        "shown": list(shown),
        "caught_eye": [],
        "interest": 3,
        "fatigue_before": 0.0,
        "fatigue_after": 0.0,
        "fatigue_budget": 30.0,
        "rating": rating,
        "satisfaction": satisfaction,
        "forced": False,
        "reason": "",
        "brain": "hand",
        "latency_s": 0.0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": 0.0,
    }


def hand_log(arm="A"):
    return [
        # user 1: click 1, watch it (5), next page, back to page 1, next again, exit on page 2
        row(arm, 1, 1, "home", 1, "click_movie", P1, movie=1),
        row(arm, 1, 2, "detail", 1, "watch_and_rate", [1], movie=1, rating=5),
        row(arm, 1, 3, "home", 1, "next_page", P1),
        row(arm, 1, 4, "home", 2, "previous_page", P2),
        row(arm, 1, 5, "home", 1, "next_page", P1),
        row(arm, 1, 6, "home", 2, "exit", P2),
        row(arm, 1, 7, "home", 2, "exit_interview", satisfaction=8),
        # user 2: click 1, back, click 2, watch it (2), exit on page 1
        row(arm, 2, 1, "home", 1, "click_movie", P1, movie=1),
        row(arm, 2, 2, "detail", 1, "back", [1], movie=1),
        row(arm, 2, 3, "home", 1, "click_movie", P1, movie=2),
        row(arm, 2, 4, "detail", 1, "watch_and_rate", [2], movie=2, rating=2),
        row(arm, 2, 5, "home", 1, "exit", P1),
        row(arm, 2, 6, "home", 1, "exit_interview", satisfaction=3),
        # user 3: exits at once
        row(arm, 3, 1, "home", 1, "exit", P1),
        row(arm, 3, 2, "home", 1, "exit_interview", satisfaction=1),
    ]


def frame(rows):
    return pl.DataFrame(rows, schema=EVENTS)


def test_per_agent_metrics_against_a_hand_worked_log():
    m = per_agent_metrics(frame(hand_log())).sort("user_id")
    assert m.get_column("impressions").to_list() == [10, 5, 5]  # page 1 seen three times, counted once
    assert m.get_column("clicks").to_list() == [1, 2, 0]
    assert m.get_column("ctr").to_list() == [0.1, 0.4, 0.0]
    assert m.get_column("cvr").to_list() == [0.1, 0.2, 0.0]
    assert m.get_column("click_to_watch").to_list() == [1.0, 0.5, None]
    assert m.get_column("average_rating").to_list() == [5.0, 2.0, None]
    assert m.get_column("view_ratio").to_list() == [0.1, 0.2, 0.0]
    assert m.get_column("likes").to_list() == [1, 0, 0]
    assert m.get_column("like_ratio").to_list() == [0.1, 0.0, 0.0]
    assert m.get_column("exit_page").to_list() == [2, 1, 1]
    assert m.get_column("satisfaction").to_list() == [8, 3, 1]


def test_arm_means_pooled_ratios_and_undefined_metrics():
    r = ab_readout(frame(hand_log()), control="A", config=ReadoutConfig(n_bootstrap=200))
    arms = {x["metric"]: x for x in r.arms.iter_rows(named=True)}
    assert arms["ctr"]["mean"] == pytest.approx(0.5 / 3) and arms["ctr"]["pooled"] == pytest.approx(3 / 20)
    assert arms["click_to_watch"]["mean"] == pytest.approx(0.75) and arms["click_to_watch"]["n_agents"] == 2
    assert arms["click_to_watch"]["pooled"] == pytest.approx(2 / 3)
    assert arms["average_rating"]["mean"] == pytest.approx(3.5) and arms["average_rating"]["pooled"] == pytest.approx(
        3.5
    )
    assert arms["exit_page"]["mean"] == pytest.approx(4 / 3) and arms["exit_page"]["pooled"] is None
    assert arms["satisfaction"]["mean"] == pytest.approx(4.0)
    for x in arms.values():
        assert x["ci_low"] <= x["mean"] <= x["ci_high"]
    assert r.comparisons.is_empty()
    assert "| A |" in unpadded(r.to_markdown())


def test_several_sessions_per_agent_are_averaged_per_agent():
    """Session 0 is the hand-worked log; in session 1 user 1 exits at once, user 2 clicks
    movie 1 only and user 3 clicks and watches movie 1 (rating 4) on page 1."""
    second = [
        row("A", 1, 1, "home", 1, "exit", P1),
        row("A", 1, 2, "home", 1, "exit_interview", satisfaction=2),
        row("A", 2, 1, "home", 1, "click_movie", P1, movie=1),
        row("A", 2, 2, "detail", 1, "back", [1], movie=1),
        row("A", 2, 3, "home", 1, "exit", P1),
        row("A", 2, 4, "home", 1, "exit_interview", satisfaction=5),
        row("A", 3, 1, "home", 1, "click_movie", P1, movie=1),
        row("A", 3, 2, "detail", 1, "watch_and_rate", [1], movie=1, rating=4),
        row("A", 3, 3, "home", 1, "exit", P1),
        row("A", 3, 4, "home", 1, "exit_interview", satisfaction=9),
    ]
    events = frame([{**r, "session": 0} for r in hand_log()] + [{**r, "session": 1} for r in second])
    m = per_agent_metrics(events).sort("user_id")
    assert m.get_column("sessions").to_list() == [2, 2, 2]
    # CTR per session: user 1 0.1 and 0.0, user 2 0.4 and 0.2, user 3 0.0 and 0.2.
    assert m.get_column("ctr").to_list() == pytest.approx([0.05, 0.3, 0.1])
    assert m.get_column("average_rating").to_list() == pytest.approx([5.0, 2.0, 4.0])  # undefined sessions left out
    assert m.get_column("satisfaction").to_list() == pytest.approx([5.0, 4.0, 5.0])
    assert m.get_column("impressions").to_list() == pytest.approx([7.5, 5.0, 5.0])  # per session
    r = ab_readout(events, control="A", config=ReadoutConfig(n_bootstrap=200))
    ctr = r.arms.filter(pl.col("metric") == "ctr").row(0, named=True)
    assert ctr["n_agents"] == 3 and ctr["mean"] == pytest.approx(0.15)  # the agent is the unit
    assert ctr["pooled"] == pytest.approx(
        (0.5 + 1.5 + 0.5) / 17.5
    )  # mean clicks ÷ mean impressions per session, summed over agents
    assert r.sessions_per_agent == 2 and "2 sessions per agent, averaged per agent" in r.to_markdown()
    assert r.per_session.height == 6 and set(r.per_session.get_column("session").to_list()) == {0, 1}
    # Visits by activity: agents with different numbers of sessions, each still one unit.
    uneven = events.filter(~((pl.col("user_id") == 1) & (pl.col("session") == 1)))
    u = ab_readout(uneven, control="A", config=ReadoutConfig(n_bootstrap=200))
    assert "1–2 sessions per agent, averaged per agent" in u.to_markdown()
    assert per_agent_metrics(uneven).sort("user_id").get_column("ctr").to_list() == pytest.approx([0.1, 0.3, 0.1])
    # Events written before sessions existed (no column) read as one session: today's figures.
    old = per_agent_metrics(frame(hand_log()).drop("session")).sort("user_id")
    assert old.equals(per_agent_metrics(frame(hand_log())).sort("user_id")) and "sessions" not in old.columns
    assert old.get_column("ctr").to_list() == [0.1, 0.4, 0.0]


def shifted_world(n=60, seed=0, users_b=None):
    """Arm B clicks more: per agent, A clicks 0..2 items, B one more (paired by user)."""
    rng = np.random.default_rng(seed)
    rows = []
    users_b = users_b or range(1, n + 1)
    for arm, users, extra in (("A", range(1, n + 1), 0), ("B", users_b, 1)):
        for u in users:
            clicks = int(rng.integers(0, 3)) + extra
            step = 0
            for i in range(clicks):
                step += 1
                rows.append(row(arm, u, step, "home", 1, "click_movie", P1, movie=P1[i]))
                step += 1
                rows.append(row(arm, u, step, "detail", 1, "back", [P1[i]], movie=P1[i]))
            rows.append(row(arm, u, step + 1, "home", 1, "exit", P1))
            rows.append(row(arm, u, step + 2, "home", 1, "exit_interview", satisfaction=int(rng.integers(1, 11))))
    return frame(rows)


def test_paired_comparison_matches_scipy_and_holm():
    ev = shifted_world()
    r = ab_readout(ev, control="A", config=ReadoutConfig(n_bootstrap=500, seed=1))
    assert r.design == "paired"
    per = r.per_agent
    a = per.filter(pl.col("arm") == "A").sort("user_id").get_column("ctr").to_numpy()
    b = per.filter(pl.col("arm") == "B").sort("user_id").get_column("ctr").to_numpy()
    ctr = r.comparisons.filter(pl.col("metric") == "ctr").row(0, named=True)
    assert ctr["difference"] == pytest.approx((b - a).mean())
    assert ctr["p_value"] == pytest.approx(stats.ttest_rel(b, a).pvalue)
    assert ctr["ci_low"] < ctr["difference"] < ctr["ci_high"] and ctr["ci_low"] > 0 and ctr["significant"]
    p = r.comparisons.get_column("p_value").to_numpy().astype(float)
    assert np.allclose(r.comparisons.get_column("p_holm").to_numpy().astype(float), holm(p), equal_nan=True)
    # satisfaction was drawn independently of the arm
    assert not r.comparisons.filter(pl.col("metric") == "satisfaction").row(0, named=True)["significant"]
    # same seed, same read-out
    again = ab_readout(ev, control="A", config=ReadoutConfig(n_bootstrap=500, seed=1))
    assert again.arms.equals(r.arms) and again.comparisons.equals(r.comparisons)
    wil = ab_readout(ev, control="A", config=ReadoutConfig(n_bootstrap=100, paired_test="wilcoxon"))
    w = wil.comparisons.filter(pl.col("metric") == "ctr").row(0, named=True)
    assert w["p_value"] == pytest.approx(stats.wilcoxon(b, a, zero_method="zsplit").pvalue)


def test_random_design_uses_welch():
    ev = shifted_world(n=40, users_b=range(41, 81))
    r = ab_readout(ev, control="A", config=ReadoutConfig(n_bootstrap=300))
    assert r.design == "random"
    per = r.per_agent
    a = per.filter(pl.col("arm") == "A").get_column("ctr").to_numpy()
    b = per.filter(pl.col("arm") == "B").get_column("ctr").to_numpy()
    ctr = r.comparisons.filter(pl.col("metric") == "ctr").row(0, named=True)
    assert ctr["test"] == "welch" and ctr["n"] == 80
    assert ctr["p_value"] == pytest.approx(stats.ttest_ind(b, a, equal_var=False).pvalue)
    assert ctr["difference"] == pytest.approx(b.mean() - a.mean())


def test_holm_against_a_hand_worked_example():
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> monotone 0.06
    assert np.allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    out = holm([0.5, np.nan, 0.2])
    assert np.isnan(out[1]) and np.allclose(out[[0, 2]], [0.5, 0.4])
    assert np.allclose(holm([0.9, 0.8]), [1.0, 1.0]) and holm([0.6, 0.7]).max() <= 1.0
    try:
        from statsmodels.stats.multitest import multipletests
    except ImportError:
        return
    p = np.random.default_rng(0).uniform(0, 0.2, 30)
    assert np.allclose(holm(p), multipletests(p, method="holm")[1])


def test_bootstrap_interval_covers_the_truth_about_95_percent():
    rng = np.random.default_rng(2024)
    truth, n, repeats = 0.3, 200, 300
    cover = 0
    for _ in range(repeats):
        x = (rng.random(n) < truth).astype(float)
        boot = bootstrap_means(x, 1000, rng)[:, 0]
        lo, hi = np.quantile(boot, [0.025, 0.975])
        cover += lo <= truth <= hi
    assert 0.90 <= cover / repeats <= 0.985


def test_bootstrap_ignores_undefined_values_per_column():
    x = np.array([[1.0, np.nan], [3.0, 2.0], [5.0, 4.0]])
    boot = bootstrap_means(x, 400, np.random.default_rng(0))
    assert boot.shape == (400, 2)
    assert np.nanmin(boot[:, 1]) >= 2.0 and np.nanmax(boot[:, 1]) <= 4.0
    assert abs(np.nanmean(boot[:, 0]) - 3.0) < 0.2


def test_figures_and_bad_input(tmp_path):
    r = ab_readout(
        shifted_world(n=20), control="A", config=ReadoutConfig(n_bootstrap=100, metrics=("ctr", "satisfaction"))
    )
    from ops.readout.readout_figures import write_ab_figures

    paths = write_ab_figures(r, tmp_path)
    assert [p.name for p in paths] == ["ab_ctr.png", "ab_satisfaction.png"] and all(
        p.stat().st_size > 1000 for p in paths
    )
    # Figures the read-out's asset drew into the report folder are kept; a missing one is drawn.
    stamps = {p: p.stat().st_mtime_ns for p in paths}
    paths[1].unlink()
    again = write_ab_figures(r, tmp_path, drawn=True)
    assert again == paths and paths[0].stat().st_mtime_ns == stamps[paths[0]] and paths[1].stat().st_size > 1000
    assert r.table().columns == ["arm", "CTR", "satisfaction"]
    with pytest.raises(ValueError, match="control arm 'Z'"):
        ab_readout(shifted_world(n=5), control="Z")
    with pytest.raises(ValueError, match="unknown metric"):
        ab_readout(shifted_world(n=5), control="A", config=ReadoutConfig(metrics=("dwell",)))


def test_fallbacks_are_counted_per_arm_in_the_readout_and_its_table():
    rows = hand_log("A") + hand_log("B")
    # Arm B: user 2 fell back once on an invalid answer; user 3's endpoint kept failing
    # (its exit and its interview are fallbacks).  Arm A has none (False / null as the
    # embedded brain writes them).
    for r in rows:
        r["fallback"], r["fallback_reason"] = False, None
        if r["arm"] == "B" and r["user_id"] == 2 and r["step"] == 2:
            r["fallback"], r["fallback_reason"] = True, "invalid_answer: the model's answer was invalid 2 times"
        if r["arm"] == "B" and r["user_id"] == 3:
            r["fallback"], r["fallback_reason"] = (
                True,
                "transport: LLM endpoint http://127.0.0.1:1/v1 still failing after 5 attempts",
            )
    r = ab_readout(frame(rows), control="A", config=ReadoutConfig(n_bootstrap=200))
    counts = {row["arm"]: row for row in r.fallbacks.iter_rows(named=True)}
    assert counts["A"] == {"arm": "A", "agents": 3, "fallback_events": 0, "fallback_agents": 0, "failed_agents": 0}
    # Both failed: an answer invalid after its re-ask is an agent failure, as the endpoint's is.
    assert counts["B"] == {"arm": "B", "agents": 3, "fallback_events": 3, "fallback_agents": 2, "failed_agents": 2}
    markdown = unpadded(r.to_markdown())
    header = next(line for line in markdown.splitlines() if line.startswith("| arm |"))
    assert header.endswith("| fallbacks |")
    assert "| 2 agents (3 events), 2 failed |" in markdown and "| 0 agents (0 events), 0 failed |" in markdown
    # Events without the columns (written before they existed) count as no fallback.
    old = ab_readout(
        frame(hand_log("A")).drop("fallback", "fallback_reason"), control="A", config=ReadoutConfig(n_bootstrap=50)
    )
    assert old.fallbacks.row(0, named=True)["fallback_events"] == 0

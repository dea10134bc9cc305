"""Gap sizes (ops.readout.gaps): each arm's simulated CTR ratio to the control beside the
logged ratio of what users took of the same lists, and the run's factor, on small frames
whose ratios are planted."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ops.readout.gaps import MIN_HITS, gap_sizes


def _world(hits: dict[str, float], ctr: dict[str, float], n: int = 200, seed: int = 0):
    """Per-agent CTR (`ctr[arm]` ± a little seeded noise), top-20 lists holding on average
    `hits[arm]` of the user's 10 window items, and the window itself (one rating each)."""
    rng = np.random.default_rng(seed)
    users = np.arange(n)
    window = pl.DataFrame(
        {"user_id": np.repeat(users, 10), "item_id": (1000 * users[:, None] + np.arange(10)).ravel(), "rating": 3}
    )
    lists, per_agent = {}, []
    for arm, mean in hits.items():
        # floor(mean) hits for every user, one more for the first share of them: the mean is exact.
        per_user = np.floor(mean).astype(int) + (users < round((mean - np.floor(mean)) * n))
        rows = []
        for u, h in zip(users, per_user):
            movies = np.r_[1000 * u + np.arange(h), 10**6 + 100 * u + np.arange(20 - h)]
            rows.append(pl.DataFrame({"user_id": u, "rank": np.arange(1, 21), "item_id": movies}))
        lists[arm] = pl.concat(rows).with_columns(arm=pl.lit(arm))
        per_agent.append(pl.DataFrame({"arm": arm, "user_id": users, "ctr": ctr[arm] + rng.normal(0, 0.02, n)}))
    return pl.concat(per_agent), lists, window


def test_each_arm_gets_its_simulated_and_logged_ratio_and_the_median_factor_is_not_decided_by_random():
    # Control 2 hits a user; a and b as the log says (s = r), random's gap shrunk (s = r^0.3),
    # tie logged level with the control.
    hits = {"pop": 2.0, "a": 3.0, "b": 1.2, "random": 0.1, "tie": 2.0}
    r = {a: h / hits["pop"] for a, h in hits.items()}
    ctr = {"pop": 0.3, "a": 0.3 * r["a"], "b": 0.3 * r["b"], "random": 0.3 * r["random"] ** 0.3, "tie": 0.36}
    per_agent, lists, window = _world(hits, ctr)
    gaps = gap_sizes(per_agent, lists, window, "pop", ["a", "b", "random", "tie"], n_bootstrap=300)
    table = {row["arm"]: row for row in gaps.arms.iter_rows(named=True)}
    assert table["pop"]["role"] == "control" and table["pop"]["simulated_ratio"] == pytest.approx(1.0)
    assert table["a"]["logged_ratio"] == pytest.approx(1.5) and table["random"]["logged_ratio"] == pytest.approx(0.05)
    assert table["a"]["simulated_ratio"] == pytest.approx(1.5, rel=0.02)
    assert table["a"]["factor"] == pytest.approx(1.0, abs=0.06) and table["b"]["factor"] == pytest.approx(1.0, abs=0.1)
    assert table["random"]["factor"] == pytest.approx(0.3, abs=0.02)
    assert table["a"]["logged_ratio_ci_low"] < 1.5 < table["a"]["logged_ratio_ci_high"]
    # Level with the control in the log: shown, its factor left out (noise over log r = 0).
    assert not table["tie"]["in_fit"] and table["tie"]["factor"] is None and "logged tie" in table["tie"]["note"]
    # The median of a, b, random: 1, where a least-squares slope through the origin follows random.
    x = np.log([r["a"], r["b"], r["random"]])
    y = np.log([table[a]["simulated_ratio"] for a in ("a", "b", "random")])
    assert (x @ y) / (x @ x) < 0.4
    assert gaps.fitted == 3 and gaps.factor == pytest.approx(1.0, abs=0.1)
    assert gaps.ci_low < 1.0 < gaps.ci_high and gaps.warning is None
    shown = f"{gaps.factor:.1f}" if gaps.factor >= 1 else f"{gaps.factor:.2f}"  # two figures
    assert gaps.verdict_line().startswith(f"gap sizes: simulated gaps ≈ {shown} × the logged ones [")
    assert "over 3 arms" in gaps.verdict_line() and "test window" in gaps.verdict_line()
    assert gaps.metrics()["gap_factor"] == gaps.factor and "| tie " in gaps.to_markdown()


def test_stretched_gaps_warn_and_so_do_shrunk_ones():
    hits = {"pop": 2.0, "a": 3.0, "b": 1.0}
    stretched = {"pop": 0.3, "a": 0.3 * 1.5**3, "b": 0.3 * 0.5**3}
    gaps = gap_sizes(*_world(hits, stretched), "pop", ["a", "b"], n_bootstrap=300)
    assert gaps.factor == pytest.approx(3.0, abs=0.2) and gaps.ci_low > 2
    assert gaps.warning.startswith("the simulation's gaps between arms stretch the logged ones: simulated gaps ≈ 3")
    assert "(outside [0.5, 2])" in gaps.warning
    shrunk = {"pop": 0.3, "a": 0.3 * 1.5**0.25, "b": 0.3 * 0.5**0.25}
    quiet = gap_sizes(*_world(hits, shrunk), "pop", ["a", "b"], n_bootstrap=300)
    assert quiet.factor == pytest.approx(0.25, abs=0.1) and "shrink the logged ones" in quiet.warning


def test_a_window_too_sparse_for_a_logged_gap_is_not_measured_with_its_reason():
    n = 100
    hits = {"pop": 5 / n, "a": 0.5}  # five logged interactions on the control's lists
    per_agent, lists, window = _world(hits, {"pop": 0.3, "a": 0.4}, n=n)
    gaps = gap_sizes(per_agent, lists, window, "pop", ["a"], window_name="validation", n_bootstrap=100)
    assert gaps.factor is None and gaps.warning is None and gaps.metrics() == {}
    assert gaps.verdict_line() == (
        "gap sizes: not measured (the control pop's lists hold 5 logged interactions in the validation window over "
        f"the {n} agents' users; a logged gap needs {MIN_HITS})"
    )
    # A candidate with too few: its r is not a number, the others still count.
    hits = {"pop": 2.0, "a": 3.0, "sparse": 4 / 200}
    per_agent, lists, window = _world(hits, {"pop": 0.3, "a": 0.45, "sparse": 0.1})
    gaps = gap_sizes(per_agent, lists, window, "pop", ["a", "sparse"], n_bootstrap=100)
    sparse = gaps.arms.filter(pl.col("arm") == "sparse").row(0, named=True)
    assert sparse["logged_ratio"] is None and sparse["factor"] is None and sparse["hits"] == 4
    assert sparse["note"] == f"r not measured: 4 logged interactions on its lists (needs {MIN_HITS})"
    assert gaps.fitted == 1 and gaps.factor == pytest.approx(1.0, abs=0.1)


def test_under_a_random_design_each_arms_agents_are_resampled_on_their_own():
    hits = {"pop": 2.0, "a": 3.0}
    per_agent, lists, window = _world(hits, {"pop": 0.3, "a": 0.45})
    # Each agent saw one arm: the even users pop, the odd ones a.
    split = per_agent.filter((pl.col("user_id") % 2 == 0) == (pl.col("arm") == "pop"))
    gaps = gap_sizes(split, lists, window, "pop", ["a"], paired=False, n_bootstrap=200)
    row = gaps.arms.filter(pl.col("arm") == "a").row(0, named=True)
    assert row["agents"] == 100 and row["logged_ratio"] == pytest.approx(1.5)
    assert row["simulated_ratio"] == pytest.approx(1.5, rel=0.03) and gaps.factor == pytest.approx(1.0, abs=0.1)

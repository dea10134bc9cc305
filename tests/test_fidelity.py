import polars as pl
import pytest

from ops.readout.fidelity import fidelity


def _simulated(values: dict[str, tuple[float, float, float]]) -> pl.DataFrame:
    rows = []
    for arm, (ctr, cvr, ar) in values.items():
        rows += [
            {"arm": arm, "metric": "ctr", "mean": ctr},
            {"arm": arm, "metric": "cvr", "mean": cvr},
            {"arm": arm, "metric": "average_rating", "mean": ar},
        ]
    return pl.DataFrame(rows)


OFFLINE = pl.DataFrame(
    {
        "arm": ["random", "pop", "fm", "deepfm"],
        "ndcg_at_k": [0.02, 0.09, 0.10, 0.11],
        "recall_at_k": [0.01, 0.02, 0.035, 0.043],
        "test_auc": [0.5, 0.6, 0.7, 0.75],
    }
)


def test_same_order_gives_tau_one():
    sim = _simulated(
        {"random": (0.1, 0.05, 4.0), "pop": (0.2, 0.1, 4.1), "fm": (0.25, 0.2, 4.5), "deepfm": (0.3, 0.21, 4.6)}
    )
    table = fidelity(sim, OFFLINE)
    row = table.filter((pl.col("simulated") == "ctr") & (pl.col("offline") == "ndcg_at_k")).row(0, named=True)
    assert row["kendall_tau"] == pytest.approx(1.0) and row["arms"] == 4 and row["same_best_arm"]


def test_one_swap_in_four_arms_gives_tau_two_thirds():
    # Pairs: 6; one discordant (fm vs deepfm) → τ = (5 − 1) / 6.
    sim = _simulated(
        {"random": (0.1, 0.05, 4.0), "pop": (0.2, 0.1, 4.1), "fm": (0.31, 0.2, 4.5), "deepfm": (0.3, 0.21, 4.6)}
    )
    row = (
        fidelity(sim, OFFLINE)
        .filter((pl.col("simulated") == "ctr") & (pl.col("offline") == "ndcg_at_k"))
        .row(0, named=True)
    )
    assert row["kendall_tau"] == pytest.approx(4 / 6)
    assert not row["same_best_arm"]


def test_arms_missing_on_one_side_are_left_out():
    sim = _simulated({"random": (0.1, 0.05, 4.0), "deepfm": (0.3, 0.21, 4.6), "afn": (0.5, 0.3, 4.7)})
    row = (
        fidelity(sim, OFFLINE)
        .filter((pl.col("simulated") == "cvr") & (pl.col("offline") == "recall_at_k"))
        .row(0, named=True)
    )
    assert row["arms"] == 2 and row["kendall_tau"] == pytest.approx(1.0)


# -- arm against arm, with intervals on both sides ------------------------------------------

import numpy as np  # noqa: E402

from ops.readout.fidelity import agreement_summary, pairwise_agreement  # noqa: E402


def _per_unit(means: dict[str, float], metric: str, n: int, sd: float, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.normal(0.0, sd, n)  # a per-user component shared by the arms: pairing removes it
    frames = [
        pl.DataFrame({"arm": arm, "user_id": np.arange(n), metric: mu + base + rng.normal(0.0, sd / 4, n)})
        for arm, mu in means.items()
    ]
    return pl.concat(frames)


def test_pairs_get_verdicts_from_both_intervals():
    offline = _per_unit({"random": 0.02, "pop": 0.15, "fm": 0.19, "deepfm": 0.19}, "ndcg_at_k", 300, 0.1, 1)
    # The simulation orders pop above random (agrees), fm below pop (disagrees), and cannot
    # separate deepfm from random; fm and deepfm are tied offline.
    simulated = _per_unit({"random": 0.30, "pop": 0.40, "fm": 0.35, "deepfm": 0.30}, "ctr", 500, 0.2, 2)
    pairs = pairwise_agreement(simulated, offline, n_bootstrap=500)
    verdict = {frozenset((r["arm_a"], r["arm_b"])): r["verdict"] for r in pairs.iter_rows(named=True)}
    assert verdict[frozenset(("pop", "random"))] == "agree"
    assert verdict[frozenset(("fm", "pop"))] == "disagree"
    assert verdict[frozenset(("deepfm", "random"))] == "missed"
    assert verdict[frozenset(("fm", "deepfm"))] == "offline tie"
    row = pairs.filter((pl.col("arm_a") == "pop") & (pl.col("arm_b") == "random")).row(0, named=True)
    assert row["offline_ci_low"] < row["offline_difference"] < row["offline_ci_high"]
    assert row["offline_difference"] == pytest.approx(0.13, abs=0.01) and row["offline_users"] == 300
    summary = agreement_summary(pairs)
    assert (
        summary["pairs"] == 6
        and summary["agree"] + summary["disagree"] + summary["missed"] + summary["offline tie"] == 6
    )
    assert (
        summary["separated"] == summary["agree"] + summary["disagree"] + summary["missed"] == 6 - summary["offline tie"]
    )
    assert summary["agreement"] == pytest.approx(summary["agree"] / (summary["agree"] + summary["disagree"]))
    # A miss counts against the simulation: a tie, between an agreement and a disagreement.
    assert summary["pair_tau"] == pytest.approx((summary["agree"] - summary["disagree"]) / summary["separated"])
    assert summary["recovered"] == pytest.approx(summary["agree"] / summary["separated"])


def test_a_simulation_that_ties_every_arm_misses_every_pair_offline_separates():
    from ops.readout.verdict import Fidelity, fidelity_verdict

    offline = _per_unit({"random": 0.02, "pop": 0.10, "fm": 0.18}, "ndcg_at_k", 300, 0.1, 1)
    flat = _per_unit({"random": 0.30, "pop": 0.30, "fm": 0.30}, "ctr", 300, 0.2, 2)
    summary = agreement_summary(pairwise_agreement(flat, offline, n_bootstrap=500))
    assert (summary["separated"], summary["agree"], summary["disagree"], summary["missed"]) == (3, 0, 0, 3)
    assert summary["pair_tau"] == 0 and summary["recovered"] == 0 and summary["agreement"] is None
    said = fidelity_verdict(Fidelity(1.0, True, summary))
    assert "of the 3 pairs the offline metric separates: 0 agree, 0 disagree, 3 missed; 0 offline ties" in said
    none = agreement_summary(pairwise_agreement(flat, _per_unit({"pop": 0.1, "fm": 0.1}, "ndcg_at_k", 300, 0.1, 1)))
    assert none["separated"] == 0 and none["pair_tau"] is None
    assert "separates none (1 offline tie)" in fidelity_verdict(Fidelity(0.0, counts=none))


def test_pairing_narrows_the_interval_and_unpaired_designs_still_work():
    offline = _per_unit({"pop": 0.15, "fm": 0.17}, "ndcg_at_k", 200, 0.1, 3)
    simulated = _per_unit({"pop": 0.40, "fm": 0.43}, "ctr", 400, 0.2, 4)
    paired = pairwise_agreement(simulated, offline, n_bootstrap=500).row(0, named=True)
    unpaired = pairwise_agreement(simulated, offline, paired=False, n_bootstrap=500).row(0, named=True)
    assert (paired["arm_a"], paired["arm_b"]) == ("fm", "pop")
    width = lambda r: r["simulated_ci_high"] - r["simulated_ci_low"]  # noqa: E731
    # The shared per-agent component cancels only when the same agents are compared.
    assert width(paired) < 0.5 * width(unpaired)
    assert paired["verdict"] == "agree" and unpaired["simulated_agents"] == 800


def test_offline_intervals_cover_the_mean_and_shrink_with_more_users():
    from ops.readout.fidelity import offline_intervals

    few = offline_intervals(
        _per_unit({"pop": 0.15}, "ndcg_at_k", 50, 0.1, 5).with_columns(recall_at_k=pl.col("ndcg_at_k")), n_bootstrap=500
    )
    many = offline_intervals(
        _per_unit({"pop": 0.15}, "ndcg_at_k", 2000, 0.1, 5).with_columns(recall_at_k=pl.col("ndcg_at_k")),
        n_bootstrap=500,
    )
    for table in (few, many):
        r = table.filter(pl.col("metric") == "ndcg_at_k").row(0, named=True)
        assert r["ci_low"] < r["mean"] < r["ci_high"]
    width = lambda t: t.filter(pl.col("metric") == "ndcg_at_k").select(pl.col("ci_high") - pl.col("ci_low")).item()  # noqa: E731
    assert width(many) < 0.3 * width(few)


def test_offline_per_user_ranks_only_the_users_who_have_a_list():
    from ops.readout.fidelity import offline_per_user

    lists = {"pop": pl.DataFrame({"user_id": [1, 1, 2], "item_id": [10, 11, 10], "rank": [1, 2, 1]})}
    # user 3 was first seen in the test window: no list, so no agent and no row here.
    test = pl.DataFrame({"user_id": [1, 2, 3], "item_id": [11, 12, 10], "rating": [5, 4, 5]})
    table = offline_per_user(lists, test).sort("user_id")
    assert table["user_id"].to_list() == [1, 2] and table["arm"].to_list() == ["pop", "pop"]
    assert table["recall_at_k"].to_list() == [1.0, 0.0]
    assert table["ndcg_at_k"][0] == pytest.approx(1 / np.log2(3))


def test_tau_compares_the_same_users_as_the_pairs():
    """offline_metrics ranks cold-start test users too, whom no agent represents; τ is taken
    over the users with a list, as the arm pairs are (on ML-100K the
    two populations ordered FM and DeepFM differently)."""
    from ops.readout.fidelity import offline_for_fidelity

    # Over every ranked user DeepFM edges FM; over the users with a list (the agents') FM leads.
    offline = OFFLINE.with_columns(
        pl.when(pl.col("arm") == "fm")
        .then(0.2028)
        .when(pl.col("arm") == "deepfm")
        .then(0.2030)
        .otherwise(pl.col("ndcg_at_k"))
        .alias("ndcg_at_k")
    )
    per_user = pl.DataFrame(
        {
            "arm": [a for a in ("random", "pop", "fm", "deepfm") for _ in range(2)],
            "user_id": [1, 2] * 4,
            "recall_at_k": [0.0, 0.02, 0.02, 0.04, 0.06, 0.08, 0.05, 0.07],
            "ndcg_at_k": [0.0, 0.02, 0.08, 0.10, 0.12, 0.14, 0.10, 0.12],
        }
    )
    sim = _simulated(
        {"random": (0.1, 0.05, 4.0), "pop": (0.2, 0.1, 4.1), "fm": (0.31, 0.2, 4.5), "deepfm": (0.3, 0.21, 4.6)}
    )
    ctr_ndcg = (pl.col("simulated") == "ctr") & (pl.col("offline") == "ndcg_at_k")
    assert fidelity(sim, offline).filter(ctr_ndcg)["kendall_tau"][0] == pytest.approx(
        4 / 6
    )  # all users: FM and DeepFM swapped
    fixed = offline_for_fidelity(offline, per_user)
    assert (
        fixed.filter(pl.col("arm") == "fm")["ndcg_at_k"][0] == pytest.approx(0.13)
        and fixed["test_auc"].to_list() == offline["test_auc"].to_list()
    )
    row = fidelity(sim, fixed).filter(ctr_ndcg).row(0, named=True)
    assert row["kendall_tau"] == pytest.approx(1.0) and row["same_best_arm"]

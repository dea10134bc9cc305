import polars as pl
import pytest

from ops.fidelity import fidelity


def _simulated(values: dict[str, tuple[float, float, float]]) -> pl.DataFrame:
    rows = []
    for arm, (ctr, cvr, ar) in values.items():
        rows += [{"arm": arm, "metric": "ctr", "mean": ctr}, {"arm": arm, "metric": "cvr", "mean": cvr}, {"arm": arm, "metric": "average_rating", "mean": ar}]
    return pl.DataFrame(rows)


OFFLINE = pl.DataFrame({"arm": ["random", "pop", "fm", "deepfm"], "ndcg_at_k": [0.02, 0.09, 0.10, 0.11], "recall_at_k": [0.01, 0.02, 0.035, 0.043], "test_auc": [0.5, 0.6, 0.7, 0.75]})


def test_same_order_gives_tau_one():
    sim = _simulated({"random": (0.1, 0.05, 4.0), "pop": (0.2, 0.1, 4.1), "fm": (0.25, 0.2, 4.5), "deepfm": (0.3, 0.21, 4.6)})
    table = fidelity(sim, OFFLINE)
    row = table.filter((pl.col("simulated") == "ctr") & (pl.col("offline") == "ndcg_at_k")).row(0, named=True)
    assert row["kendall_tau"] == pytest.approx(1.0) and row["arms"] == 4 and row["same_best_arm"]


def test_one_swap_in_four_arms_gives_tau_two_thirds():
    # Pairs: 6; one discordant (fm vs deepfm) → τ = (5 − 1) / 6.
    sim = _simulated({"random": (0.1, 0.05, 4.0), "pop": (0.2, 0.1, 4.1), "fm": (0.31, 0.2, 4.5), "deepfm": (0.3, 0.21, 4.6)})
    row = fidelity(sim, OFFLINE).filter((pl.col("simulated") == "ctr") & (pl.col("offline") == "ndcg_at_k")).row(0, named=True)
    assert row["kendall_tau"] == pytest.approx(4 / 6)
    assert not row["same_best_arm"]


def test_arms_missing_on_one_side_are_left_out():
    sim = _simulated({"random": (0.1, 0.05, 4.0), "deepfm": (0.3, 0.21, 4.6), "afn": (0.5, 0.3, 4.7)})
    row = fidelity(sim, OFFLINE).filter((pl.col("simulated") == "cvr") & (pl.col("offline") == "recall_at_k")).row(0, named=True)
    assert row["arms"] == 2 and row["kendall_tau"] == pytest.approx(1.0)

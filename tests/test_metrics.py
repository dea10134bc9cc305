"""Offline metrics against hand-worked cases and scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import log_loss as sk_log_loss
from sklearn.metrics import roc_auc_score

from ops.arms.metrics import auc, log_loss, ndcg_at_k, recall_at_k, relevant_items


def test_auc_hand_worked():
    # Positives 0.9 and 0.3; negatives 0.8 and 0.1: 0.9 beats both, 0.3 beats only 0.1.
    assert auc(np.array([1, 0, 1, 0]), np.array([0.9, 0.8, 0.3, 0.1])) == pytest.approx(3 / 4)
    # A tie between a positive and a negative counts one half.
    assert auc(np.array([1, 0, 0]), np.array([0.5, 0.5, 0.2])) == pytest.approx(0.75)
    assert auc(np.array([0, 1]), np.array([0.2, 0.1])) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_matches_scikit_learn_with_ties(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, 5000)
    # Rounding makes many ties, the case where a naive rank AUC goes wrong.
    scores = np.round(labels * 0.3 + rng.normal(0, 1, 5000), 1)
    assert auc(labels, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


def test_auc_needs_both_classes():
    with pytest.raises(ValueError, match="both classes"):
        auc(np.ones(4), np.arange(4.0))


def test_log_loss_hand_worked_and_scikit_learn():
    expected = -(math.log(0.8) + math.log(0.6)) / 2
    assert log_loss(np.array([1, 0]), np.array([0.8, 0.4])) == pytest.approx(expected)
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 1000)
    p = rng.uniform(0, 1, 1000)
    p[:3] = [0.0, 1.0, 0.5]  # clipped, as scikit-learn clips
    assert log_loss(labels, p) == pytest.approx(sk_log_loss(labels, p), rel=1e-9)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        log_loss(np.array([1]), np.array([1.5]))
    # Labels of one class (a validation slice of positives only) still have a log loss.
    only_positives = np.array([0.9, 0.8, 0.5])
    assert log_loss(np.ones(3), only_positives) == pytest.approx(-np.log(only_positives).mean())
    assert log_loss(np.zeros(1), np.array([0.25])) == pytest.approx(-math.log(0.75))


def _lists(rows):
    return pl.DataFrame(rows, schema=["user_id", "rank", "item_id"], orient="row")


def test_recall_and_ndcg_hand_worked():
    relevant = pl.DataFrame({"user_id": [1, 1, 1, 2], "item_id": [10, 20, 30, 5]})
    # User 1: hits at ranks 1 and 3 of 3 relevant; user 2 has a relevant item but no list.
    lists = _lists([(1, 1, 10), (1, 2, 11), (1, 3, 20), (1, 4, 12)])
    assert recall_at_k(lists, relevant, k=20) == pytest.approx((2 / 3 + 0) / 2)
    dcg = 1 / math.log2(2) + 1 / math.log2(4)
    idcg = 1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(lists, relevant, k=20) == pytest.approx((dcg / idcg + 0) / 2)


def test_cut_off_at_k():
    relevant = pl.DataFrame({"user_id": [1, 1, 1], "item_id": [10, 20, 30]})
    lists = _lists([(1, 1, 99), (1, 2, 10), (1, 3, 20)])
    # k = 2: only the hit at rank 2 counts, and the ideal DCG has 2 slots, not 3.
    assert recall_at_k(lists, relevant, k=2) == pytest.approx(1 / 3)
    assert ndcg_at_k(lists, relevant, k=2) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    # A perfect list scores 1 even when the user has more relevant items than k.
    perfect = _lists([(1, 1, 30), (1, 2, 10)])
    assert ndcg_at_k(perfect, relevant, k=2) == pytest.approx(1.0)
    assert recall_at_k(perfect, relevant, k=2) == pytest.approx(2 / 3)


def test_users_without_relevant_items_are_not_averaged():
    relevant = pl.DataFrame({"user_id": [1], "item_id": [10]})
    lists = _lists([(1, 1, 10), (2, 1, 10), (3, 1, 7)])
    assert recall_at_k(lists, relevant) == 1.0
    assert ndcg_at_k(lists, relevant) == 1.0


def test_relevant_items_threshold_and_one_arm_only():
    test = pl.DataFrame(
        {"user_id": [1, 1, 2, 2], "item_id": [1, 2, 1, 1], "rating": [4, 3, 5, 5], "timestamp": [0] * 4}
    )
    assert relevant_items(test).rows() == [(1, 1), (2, 1)]
    two_arms = _lists([(1, 1, 1), (1, 1, 2)]).with_columns(arm=pl.Series(["a", "b"]))
    with pytest.raises(ValueError, match="several arms"):
        recall_at_k(two_arms, relevant_items(test))
    with pytest.raises(ValueError, match="lacks column"):
        ndcg_at_k(pl.DataFrame({"user_id": [1]}), relevant_items(test))

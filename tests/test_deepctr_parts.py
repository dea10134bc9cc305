"""Scoring the DeepCTR arms from per-user and per-item parts (ops.arms.deepctr_parts) gives
the scores of the model's own forward on encoded pairs, and ranking by them (or by FM's and
Pop's factors) gives the lists the pair-by-pair path gave."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fakes.planted_data import planted_metadata, planted_movielens
from ops.arms.deepctr import DeepCTRArm, build_model, rows_per_forward
from ops.arms.kinds.pop import _popularity
from ops.arms.kinds.random import _uniform_hash
from ops.arms.recommenders import TrainedArm, arm_config, trained_arm
from ops.arms.registry import kind_class, kind_names
from ops.arms.top_k import _best_columns, rank_by_score, rank_shared_order
from ops.data.catalogue import build_catalogue
from ops.data.split import chronological_split

torch = pytest.importorskip("torch")

from ops.arms.deepctr_parts import PartsScorer, forward_scores  # noqa: E402
from ops.arms.features import FeatureConfig, fit_encoder  # noqa: E402
from ops.arms.kinds import afn as afn_kind  # noqa: E402

UNKNOWN = 10**6  # an id the encoder never saw: the all-unseen row


@pytest.fixture(scope="module")
def world():
    torch.set_num_threads(1)
    users, movies, ratings = planted_movielens(seed=7, n_users=80, n_movies=70, ratings_per_user=20)
    split = chronological_split(ratings)
    # A train window without the last users and movies: they score through the unseen rows.
    train = split.train.filter((pl.col("user_id") <= 70) & (pl.col("item_id") <= 60))
    return users, movies, train, split.test


def _arm(world, name: str, metadata: bool = True, seed: int = 3, **overrides) -> TrainedArm:
    """An arm built on the world's encoder with seeded random weights and batch-norm
    statistics of a few units (an untrained deepctr model scores every pair alike)."""
    users, movies, train, _ = world
    config = arm_config(name, embedding_dim=8, **overrides)
    catalogue = build_catalogue(movies, planted_metadata(movies) if metadata else None)
    encoder = fit_encoder(
        FeatureConfig(feature_set=config.feature_set, use_metadata=config.use_metadata), train, users, catalogue
    )
    model = build_model(kind_class(config.model), config, encoder, "cpu")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter_name, tensor in model.named_parameters():
            scale = 0.4 if "embedding" in parameter_name else 0.05 if "afn_dnn" in parameter_name else 0.15
            tensor.copy_(torch.randn(tensor.shape, generator=generator) * scale)
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.running_mean.copy_(torch.randn(module.running_mean.shape, generator=generator) * 0.3)
                module.running_var.copy_(torch.rand(module.running_var.shape, generator=generator) + 0.5)
    model.eval()
    return trained_arm(config, encoder=encoder, model=model, train_rows=train.height)


def _grid(world):
    users, movies, _, _ = world
    user_ids = np.append(users.get_column("user_id").to_numpy()[::3], UNKNOWN)
    item_ids = np.append(movies.get_column("item_id").to_numpy(), UNKNOWN)
    return user_ids, item_ids


def _reference(arm: TrainedArm, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
    """The model's forward on every encoded pair, (users, movies)."""
    u, m = np.repeat(user_ids, item_ids.size), np.tile(item_ids, user_ids.size)
    return forward_scores(arm.model, arm.encoder, u, m, 997).reshape(user_ids.size, item_ids.size)


DEEPCTR_KINDS = [k for k in kind_names() if issubclass(kind_class(k), DeepCTRArm)]
CASES = [
    *((kind, "all") for kind in DEEPCTR_KINDS),
    *(("deepfm", "user_id_only"), ("deepfm", "movie_id_only"), ("afn", "movie_id_only"), ("nfm", "user_id_only")),
]


@pytest.mark.parametrize(("name", "feature_set"), CASES)
def test_parts_give_the_forward_scores(world, name, feature_set):
    """Every model, feature sets without user or item side features, unknown users and items."""
    arm = _arm(world, name, feature_set=feature_set)
    user_ids, item_ids = _grid(world)
    expected = _reference(arm, user_ids, item_ids)
    assert expected.std() > 0.05  # the weights make scores differ, so the comparison means something
    # Small passes: blocks split across users and across items, pairs across both.
    scorer = PartsScorer(arm.model, arm.encoder, max_pairs=50, head=arm.parts_head())
    assert scorer.head is not None  # every DeepCTR kind gives its head
    np.testing.assert_allclose(scorer.score_matrix(user_ids, item_ids), expected, rtol=2e-5, atol=2e-6)
    rng = np.random.default_rng(0)
    u, m = rng.choice(user_ids, 300), rng.choice(item_ids, 300)
    reference = forward_scores(arm.model, arm.encoder, u, m, 64)
    np.testing.assert_allclose(arm.score(u, m), reference, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(scorer.score_pairs(u, m), reference, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["fm", "deepfm", "nfm", "afn", "wdl", "pnn"])
def test_parts_without_dense_features(world, name):
    """No metadata: no dense column (the dense split of the first layer is empty)."""
    arm = _arm(world, name, metadata=False)
    assert not arm.encoder.dense_stats
    user_ids, item_ids = _grid(world)
    np.testing.assert_allclose(
        arm.score_matrix(user_ids, item_ids), _reference(arm, user_ids, item_ids), rtol=2e-5, atol=2e-6
    )


def test_fm_and_pop_are_ranked_by_factors(world):
    user_ids, item_ids = _grid(world)
    fm = _arm(world, "fm")
    factors = fm.factors(user_ids, item_ids)
    assert factors is not None and factors.users.shape == (user_ids.size, 8 + 3)
    np.testing.assert_allclose(factors.scores(), _reference(fm, user_ids, item_ids), rtol=2e-5, atol=2e-6)
    assert _arm(world, "deepfm").factors(user_ids, item_ids) is None  # a DNN does not decompose
    _, _, train, _ = world
    config = arm_config("pop")
    pop = trained_arm(config, popularity=_popularity(train, config))
    expected = pop.score(np.repeat(user_ids, item_ids.size), np.tile(item_ids, user_ids.size))
    np.testing.assert_array_equal(pop.factors(user_ids, item_ids).scores().ravel(), expected)


def test_random_matrix_is_its_pair_hash(world):
    user_ids, item_ids = _grid(world)
    arm = trained_arm(arm_config("random"))
    expected = _uniform_hash(arm.config.seed, np.repeat(user_ids, item_ids.size), np.tile(item_ids, user_ids.size))
    np.testing.assert_array_equal(arm.score_matrix(user_ids, item_ids).ravel(), expected)


@pytest.mark.parametrize("name", ["fm", "deepfm", "afn", "nfm"])
def test_top_20_lists_are_those_of_the_pair_by_pair_ranking(world, name):
    _, _, train, _ = world
    arm = _arm(world, name)
    user_ids, item_ids = _grid(world)
    exclude = train.select("user_id", "item_id")
    lists = arm.rank(user_ids, item_ids, exclude, 20)
    forward = _reference(arm, user_ids, item_ids)
    reference = rank_by_score(arm.name, lambda u, m: _reference(arm, u, m), user_ids, item_ids, exclude, 20, 512.0)
    joined = lists.join(reference, on=["user_id", "rank"], suffix="_ref")
    assert joined.height == reference.height == lists.height > 0
    np.testing.assert_allclose(joined["score"], joined["score_ref"], rtol=2e-5, atol=2e-6)
    # A different item at a rank only where the forward scores both items alike (a tie).
    row = {u: k for k, u in enumerate(user_ids)}
    col = {m: k for k, m in enumerate(item_ids)}
    for user, mine, theirs in (
        joined.filter(pl.col("item_id") != pl.col("item_id_ref"))
        .select("user_id", "item_id", "item_id_ref")
        .iter_rows()
    ):
        assert abs(forward[row[user], col[mine]] - forward[row[user], col[theirs]]) <= 2e-6
    # No train item in a user's list.
    assert lists.join(exclude, on=["user_id", "item_id"], how="semi").height == 0


@pytest.mark.parametrize("overflowing", ["both", "items"])
def test_afn_exact_path_when_a_factor_would_overflow(world, monkeypatch, overflowing):
    """AFN's per-side factors exp(share) are used only where float32 holds them; otherwise
    the logarithmic layer's exp is taken of the summed shares, pair by pair."""
    arm = _arm(world, "afn")
    user_ids, item_ids = _grid(world)
    expected = _reference(arm, user_ids, item_ids)
    factors_of = afn_kind._afn_factors_of
    monkeypatch.setattr(
        afn_kind,
        "_afn_factors_of",
        lambda side: None if overflowing == "both" or not side.is_user else factors_of(side),
    )
    np.testing.assert_allclose(arm.score_matrix(user_ids, item_ids), expected, rtol=2e-5, atol=2e-6)
    u, m = np.repeat(user_ids[:5], 7), np.tile(item_ids[:7], 5)
    np.testing.assert_allclose(arm.score(u, m), expected[:5, :7].ravel(), rtol=2e-5, atol=2e-6)


def test_a_kind_without_a_head_is_scored_by_its_forward(world, monkeypatch):
    arm = _arm(world, "deepfm")
    user_ids, item_ids = _grid(world)
    expected = _reference(arm, user_ids, item_ids)
    monkeypatch.setattr(type(arm), "parts_head", classmethod(DeepCTRArm.parts_head.__func__))
    scorer = PartsScorer(
        arm.model, arm.encoder, rows_per_forward(type(arm), arm.model, arm.config), head=arm.parts_head()
    )
    assert scorer.head is None and scorer.factors(user_ids, item_ids) is None
    np.testing.assert_allclose(arm.score_matrix(user_ids, item_ids), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(scorer.score_matrix(user_ids, item_ids), expected, rtol=1e-6, atol=1e-7)


def test_best_columns_give_ties_at_the_cut_to_the_lower_column():
    """The partial sort's top k, ties across the cut settled by column, against a full
    stable sort by (-score, column), on rows full of ties and rows with too few finite scores."""
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 6, size=(200, 40)).astype(np.float64)
    scores[:20] = rng.random((20, 40))  # no ties
    scores[20:30, 3:] = -np.inf  # three finite scores, then a tie of -inf
    for kk in (1, 5, 20, 39, 40):
        best = _best_columns(scores.copy(), kk)
        expected = np.sort(np.argsort(-scores, axis=1, kind="stable")[:, :kk], axis=1)
        np.testing.assert_array_equal(np.sort(best, axis=1), expected)


@pytest.mark.parametrize("k", [1, 5, 20, 60])
def test_one_order_for_everyone_ranks_as_the_users_x_items_matrix_does(k):
    """`rank_shared_order` (Pop: one order, each user's first k unseen items) against the
    block ranking of the same scores for every user: ties (scores in 0..5), users who have
    seen most of the catalogue or all of it, an item that never ranks, users without pairs."""
    rng = np.random.default_rng(11)
    item_ids = np.sort(rng.choice(10_000, 50, replace=False))
    scores = rng.integers(0, 6, 50).astype(np.float64)
    scores[7] = -np.inf
    user_ids = np.arange(1, 121)
    seen = rng.random((120, 50)) < np.linspace(0.0, 1.0, 120)[:, None]  # from nothing to everything seen
    rows, cols = np.nonzero(seen)
    exclude = pl.DataFrame({"user_id": user_ids[rows], "item_id": item_ids[cols]}).vstack(
        pl.DataFrame({"user_id": [10**6, 1], "item_id": [item_ids[0], 99_999]})  # a user, an item not ranked
    )
    shared = rank_shared_order("pop", scores, user_ids, item_ids, exclude, k)
    matrix = rank_by_score("pop", lambda u, m: np.tile(scores, (u.size, 1)), user_ids, item_ids, exclude, k, 512.0)
    assert shared.height > 0 and shared.equals(matrix)
    assert shared.join(exclude, on=["user_id", "item_id"], how="semi").height == 0

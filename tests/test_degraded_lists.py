"""An arm's lists degraded on purpose (`ops.arms.degraded`): random unseen items in a share of
the slots, nested rungs, and the `pop@5` arm kind through the catalogue and storage."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fakes.planted_data import planted_movielens
from ops.arms.base import FitData, ScoresNotAvailable
from ops.arms.degraded import degrade_lists
from ops.arms.ranking import metrics_from_lists, rank_once, ranking_users
from ops.arms.registry import PluggedArm, declare, forget, make_arm, parse_arm_spec
from ops.data.catalogue import build_catalogue
from ops.data.split import chronological_split


@pytest.fixture(scope="module")
def data():
    users, movies, ratings = planted_movielens(seed=11, n_users=80, n_movies=120, ratings_per_user=30)
    split = chronological_split(ratings)
    return users, build_catalogue(movies), split


@pytest.fixture(scope="module")
def pop_lists(data):
    users, catalogue, split = data
    pop = make_arm("pop")
    pop.fit(FitData(split.train, split.valid, users, catalogue))
    pop.lists = rank_once(pop, split.train, split.test, catalogue.get_column("item_id").to_numpy())
    return pop


def test_degraded_lists_replace_exactly_the_slots_asked_with_unseen_items_and_nest(data, pop_lists):
    _, catalogue, split = data
    # degrade_lists works in the arm API's words (item_id), as the degraded arm calls it.
    pop_lists = pop_lists.lists
    items = catalogue.get_column("item_id").to_numpy()
    seen = split.train.select("user_id", "item_id")
    rungs = {s: degrade_lists(pop_lists, s, seen, items, seed=3) for s in (0, 5, 10, 20)}
    assert rungs[0].select("user_id", "rank", "item_id").equals(pop_lists.select("user_id", "rank", "item_id"))
    train = {(u, m) for u, m in seen.iter_rows()}
    base = pop_lists.select("user_id", "rank", pl.col("item_id").alias("base"))
    replaced = {}
    for s, frame in rungs.items():
        assert frame.height == pop_lists.height and frame.get_column("arm").unique().to_list() == ["pop"]
        joined = frame.join(base, on=["user_id", "rank"])
        changed = joined.filter(pl.col("item_id") != pl.col("base"))
        # Every list loses exactly `s` slots (the catalogue leaves enough unseen items) ...
        assert changed.group_by("user_id").len().get_column("len").to_list() in (
            [],
            [s] * changed["user_id"].n_unique(),
        )
        assert changed.get_column("user_id").n_unique() == (pop_lists.get_column("user_id").n_unique() if s else 0)
        # ... to items the user never rated in train and that were not in its list, none twice.
        originals = pop_lists.group_by("user_id").agg("item_id")
        in_list = {(u, m) for u, ms in originals.iter_rows() for m in ms}
        assert not any(
            (u, m) in train or (u, m) in in_list for u, m in changed.select("user_id", "item_id").iter_rows()
        )
        assert frame.group_by("user_id").agg(pl.col("item_id").n_unique()).get_column("item_id").min() == 20
        replaced[s] = {(u, r, m) for u, r, m in changed.select("user_id", "rank", "item_id").iter_rows()}
    # Nested: the slots and items replaced at 5 are among those replaced at 10, and those at 20.
    assert replaced[5] < replaced[10] < replaced[20]
    # Seeded: the same seed gives the same lists, another seed others.
    assert degrade_lists(pop_lists, 5, seen, items, seed=3).equals(rungs[5])
    assert not degrade_lists(pop_lists, 5, seen, items, seed=4).equals(rungs[5])
    with pytest.raises(ValueError, match="slots must be >= 0"):
        degrade_lists(pop_lists, -1, seen, items)


def test_pop_at_5_is_an_arm_with_the_rungs_lists_that_stores_and_ranks_worse_offline(data, pop_lists, tmp_path):
    users, catalogue, split = data
    pop, pop_lists = pop_lists, pop_lists.lists
    spec = parse_arm_spec("pop@5")
    assert (spec.name, spec.kind, spec.params) == ("pop-at-5", "degraded", {"base": "pop", "slots": 5})
    assert parse_arm_spec(spec.text()) == spec
    items = catalogue.get_column("item_id").to_numpy()
    fit = FitData(split.train, split.valid, users, catalogue, rank_users=ranking_users(split.train, split.test))
    declare(spec)
    try:
        rungs = {}
        for slots in (5, 20):
            arm = make_arm(f"pop@{slots}" if slots != 5 else "pop-at-5")
            assert isinstance(arm, PluggedArm) and not arm.can_refit
            arm.fit(fit)
            rungs[slots] = rank_once(arm, split.train, split.test, items)
        expected = degrade_lists(pop_lists, 5, split.train.select("user_id", "item_id"), items, seed=0)
        assert rungs[5].drop("score").equals(expected.drop("score").with_columns(pl.lit("pop-at-5").alias("arm")))
        with pytest.raises(ScoresNotAvailable):
            arm.score(np.array([1]), np.array([1]))
        # Stored without pickle and read back to the same lists.
        arm.save(tmp_path / "arm")
        again = PluggedArm.load(tmp_path / "arm")
        assert rank_once(again, split.train, split.test, items).equals(rungs[20])
        # A list of random unseen items ranks the test window worse than Pop's.
        intact = metrics_from_lists(pop, pop_lists, split.test)
        worst = metrics_from_lists(arm, rungs[20], split.test)
        assert worst.ndcg_at_k < intact.ndcg_at_k and worst.test_auc is None
    finally:
        forget(spec.name)
    with pytest.raises(ValueError, match="slots must be a whole number from 0 to 20"):
        make_arm("pop@21")

"""The arm API says `item_id` on every domain (docs/arms.md): a plug-in kind written against
it trains, ranks and is stored on the bookshop (examples/bookshop) without ever being handed
simab's internal `item_id`, and simab gets its ranking back as its own TOP_K table."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import polars as pl
import pytest

from ops.arms import registry
from ops.arms.base import RANKING, ArmBase, FitData
from ops.arms.ranking import metrics_from_lists, rank_once, ranking_users
from ops.arms.registry import PluggedArm, make_arm
from ops.data.catalogue import build_catalogue
from ops.data.domain import load_files
from ops.data.split import chronological_split
from ops.schema import TOP_K
from ops.settings import PROJECT_ROOT
from ops.storage.codec import current_names, load_arrays, load_table

BOOKSHOP = PROJECT_ROOT / "examples" / "bookshop"


class ShelfArm(ArmBase):
    """Books by their shrunk mean rating, written as a bookshop's team would: item_id only.
    It keeps every column name simab handed it, to show which word it was given."""

    can_refit: ClassVar[bool] = False

    def __init__(self, name: str, shrinkage: float = 3.0):
        super().__init__(name, shrinkage=float(shrinkage))
        self.item_ids = np.zeros(0, np.int64)
        self.means = np.zeros(0)
        self.columns_seen: set[str] = set()

    def fit(self, data: FitData) -> None:
        for frame in (data.train, data.valid, data.catalogue):
            self.columns_seen |= set(frame.columns)
        stats = data.train.group_by("item_id").agg(pl.col("rating").sum().alias("s"), pl.len().alias("n"))
        stats = stats.sort("item_id")
        prior, k = float(data.train.get_column("rating").mean()), self.params["shrinkage"]
        self.item_ids = stats.get_column("item_id").to_numpy().astype(np.int64)
        self.means = (stats.get_column("s").to_numpy() + k * prior) / (stats.get_column("n").to_numpy() + k)

    def score(self, user_ids, item_ids) -> np.ndarray:
        item_ids = np.asarray(item_ids, dtype=np.int64)
        at = np.clip(np.searchsorted(self.item_ids, item_ids), 0, max(self.item_ids.size - 1, 0))
        return np.where(self.item_ids[at] == item_ids, self.means[at], 0.0)

    def rank(self, user_ids, item_ids, exclude=None, k: int = 20) -> pl.DataFrame:
        if exclude is not None:
            self.columns_seen |= set(exclude.columns)
        ranking = super().rank(user_ids, item_ids, exclude, k)
        assert dict(ranking.schema) == RANKING
        return ranking

    def save(self, folder) -> None:
        np.savez(folder / "shelf.npz", allow_pickle=False, item_ids=self.item_ids, means=self.means)

    @classmethod
    def load(cls, name, params, folder) -> ShelfArm:
        arm = cls(name, **params)
        with np.load(folder / "shelf.npz", allow_pickle=False) as arrays:
            arm.item_ids, arm.means = arrays["item_ids"], arrays["means"]
        return arm


@pytest.fixture
def shelf(monkeypatch):
    monkeypatch.setitem(registry.KINDS, "shelf", ShelfArm)
    return "shelf"


def test_a_plug_in_kind_written_against_item_id_trains_and_ranks_on_the_bookshop(shelf, tmp_path):
    tables = load_files(BOOKSHOP)
    split = chronological_split(tables.ratings)
    catalogue = build_catalogue(tables.movies, tables.metadata)
    assert "item_id" in split.train.columns and "item_id" in catalogue.columns  # simab's own tables
    items = catalogue.get_column("item_id").to_numpy()
    arm = make_arm(f"books={shelf};shrinkage=2")
    assert isinstance(arm, PluggedArm)
    data = FitData(split.train, split.valid, tables.users, catalogue, rank_users=ranking_users(split.train, split.test))
    arm.fit(data)
    ranking = rank_once(arm, split.train, split.test, items, k=10)

    # The arm was handed item_id everywhere (train, valid, catalogue, the excluded pairs) ...
    assert "item_id" in arm.arm.columns_seen
    assert "title" in arm.arm.columns_seen  # ... and the catalogue's side features beside it.
    # ... and simab got its ranking back as its own table: every ranked user, no train book.
    assert dict(ranking.schema) == TOP_K
    assert set(ranking.get_column("user_id")) == set(ranking_users(split.train, split.test).tolist())
    assert ranking.join(split.train, on=["user_id", "item_id"], how="semi").height == 0
    assert set(ranking.get_column("item_id")) <= set(items.tolist())
    # The lists are the shrunk means, best first, ties by item id, of the books unread in train.
    user = int(split.train.get_column("user_id")[0])
    read = set(split.train.filter(pl.col("user_id") == user).get_column("item_id"))
    unread = np.array([i for i in items if i not in read])
    scores = arm.score(np.full(unread.size, user), unread)
    expected = unread[np.lexsort((unread, -scores))][:10].tolist()
    assert ranking.filter(pl.col("user_id") == user).sort("rank").get_column("item_id").to_list() == expected
    assert metrics_from_lists(arm, ranking, split.test).test_auc is not None
    # Stored without pickle, loaded by its kind's name, it ranks the same.
    arm.save(tmp_path / "shelf")
    assert rank_once(PluggedArm.load(tmp_path / "shelf"), split.train, split.test, items, k=10).equals(ranking)


def test_an_older_homes_movie_id_is_read_as_item_id(tmp_path):
    """simab's own tables named the item `movie_id` before December 2026: what a home stored
    then (tables, arrays, an arm's lists) reads back with the item named `item_id`."""
    pl.DataFrame({"user_id": [1], "movie_id": [7], "rating": [4]}).write_parquet(tmp_path / "old.parquet")
    assert load_table(tmp_path / "old.parquet").columns == ["user_id", "item_id", "rating"]
    both = pl.DataFrame({"item_id": [1], "movie_id": [2]})  # a frame that has both is left as it is
    assert current_names(both).equals(both)
    np.savez(tmp_path / "old.npz", movie_ids=np.array([1, 2]), text=np.zeros((2, 3)))
    assert sorted(load_arrays(tmp_path / "old.npz")) == ["item_ids", "text"]
    assert list(RANKING) == list(TOP_K) and "item_id" in RANKING

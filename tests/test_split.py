import numpy as np
import polars as pl
import pytest

from ops.data.split import chronological_split, split_statistics


def _ratings(n: int, seed: int = 0, ties: bool = False) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    ts = rng.integers(0, 50 if ties else 10**9, n)
    return pl.DataFrame(
        {
            "user_id": rng.integers(1, 40, n),
            "item_id": np.arange(n),  # unique pairs
            "rating": rng.integers(1, 6, n),
            "timestamp": ts,
        }
    )


@pytest.mark.parametrize("n", [10, 11, 999, 1000, 12345])
def test_sizes_are_70_20_10_to_the_row(n):
    s = chronological_split(_ratings(n))
    assert (s.train.height, s.valid.height, s.test.height) == (
        int(n * 0.7),
        int(n * 0.9) - int(n * 0.7),
        n - int(n * 0.9),
    )
    assert s.train.height + s.valid.height + s.test.height == n


def test_no_train_timestamp_after_validation_and_no_validation_after_test():
    s = chronological_split(_ratings(5000, ties=True))
    assert s.train["timestamp"].max() <= s.valid["timestamp"].min()
    assert s.valid["timestamp"].max() <= s.test["timestamp"].min()


def test_ties_are_broken_deterministically_whatever_the_input_order():
    r = _ratings(3000, ties=True)
    a = chronological_split(r)
    b = chronological_split(r.sample(fraction=1.0, shuffle=True, seed=3))
    for x, y in zip(a.frames().values(), b.frames().values()):
        assert x.equals(y)


def test_every_rating_lands_in_exactly_one_split():
    r = _ratings(777)
    s = chronological_split(r)
    together = pl.concat(list(s.frames().values()))
    assert together.sort("item_id").equals(r.sort("item_id"))


def test_statistics_count_cold_users_and_items():
    r = pl.DataFrame(
        {
            "user_id": [1, 1, 1, 1, 1, 1, 1, 2, 2, 3],
            "item_id": [1, 2, 3, 4, 5, 6, 7, 1, 8, 9],
            "rating": [4] * 10,
            "timestamp": list(range(10)),
        }
    )
    stats = {row["split"]: row for row in split_statistics(chronological_split(r)).iter_rows(named=True)}
    assert stats["train"]["rows"] == 7 and stats["train"]["cold_users"] == 0
    assert stats["valid"]["users"] == 1 and stats["valid"]["cold_users"] == 1  # user 2 first seen in valid
    assert stats["valid"]["cold_items"] == 1  # movie 8 (movie 1 is in train)
    assert stats["test"]["cold_users"] == 1 and stats["test"]["cold_items"] == 1


def test_bad_fractions_are_refused():
    with pytest.raises(ValueError, match="sum"):
        chronological_split(_ratings(10), (0.5, 0.2, 0.1))

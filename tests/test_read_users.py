"""The users a run reads (`ops.studies.read_users`): the simulated sample the simulation
draws, the trust protocols' agents as `open_protocol` draws them, the embedded brain's
fitting and calibration users; everyone when every user is simulated."""

from __future__ import annotations

import numpy as np
import polars as pl

from fakes.planted_data import planted_movielens
from ops.agents.profile import population_ids
from ops.data.split import chronological_split
from ops.simulation.assignment import sample_agents
from ops.studies.alignment.protocols import ProtocolSettings, list_quality_ladder, protocol_users
from ops.studies.read_users import ROLES, ReadUsersConfig, read_users


def _split():
    _, _, ratings = planted_movielens(seed=3, n_users=400, n_movies=120, ratings_per_user=30)
    return chronological_split(ratings)


def test_every_user_is_read_when_every_user_is_simulated():
    split = _split()
    population = population_ids(split.train)
    read = read_users(split.train, split.valid, split.test, population, ReadUsersConfig(n_agents=0))
    assert read.get_column("user_id").to_list() == population.tolist() and read.get_column("simulated").all()


def test_the_samples_read_are_those_the_steps_draw():
    split = _split()
    population = population_ids(split.train)
    config = ReadUsersConfig(n_agents=40, seed=2, protocol_agents=25, calibration_agents=30)
    read = read_users(split.train, split.valid, split.test, population, config)
    users = read.get_column("user_id").to_numpy()
    assert set(users) <= set(population) and read.columns == ["user_id", *ROLES]
    simulated = read.filter(pl.col("simulated")).get_column("user_id").to_list()
    assert simulated == sample_agents(population, 40, 2)
    settings = ProtocolSettings(n_agents=25, seed=0)
    liked, ladder = list_quality_ladder(split.test, 4, population)
    asked = set(protocol_users(split.test, population, settings)) | set(
        protocol_users(liked, population, settings, ladder.need)
    )
    assert set(read.filter(pl.col("judged")).get_column("user_id").to_list()) == asked
    assert 0 < read.get_column("calibrated").sum() <= 30
    # The embedded brain fits on up to 3,000 validation users: here every one of them.
    fitted = read.filter(pl.col("fitted")).get_column("user_id").to_numpy()
    np.testing.assert_array_equal(fitted, np.intersect1d(split.valid.get_column("user_id").unique(), population))
    off = read_users(split.train, split.valid, split.test, population, config.model_copy(update={"protocols": False}))
    assert not off.get_column("judged").any() and np.isin(simulated, off.get_column("user_id").to_numpy()).all()


def test_the_random_buckets_calibration_half_is_built_where_it_calibrates():
    split = _split()
    population = population_ids(split.train)
    config = ReadUsersConfig(n_agents=20, seed=2, calibration_agents=0, protocols=False)
    bucket = [int(u) for u in population[-30:]] + [10_000]  # one not in the population: never built
    plain = read_users(split.train, split.valid, split.test, population, config)
    read = read_users(split.train, split.valid, split.test, population, config, exposure_users=bucket)
    calibrated = set(read.filter(pl.col("calibrated")).get_column("user_id").to_list())
    assert calibrated == set(bucket[:-1]) and not plain.get_column("calibrated").any()
    assert set(read.get_column("user_id").to_list()) == set(plain.get_column("user_id").to_list()) | calibrated


def test_the_evaluated_test_users_are_a_seeded_sample_and_the_metrics_say_over_whom():
    """SIMAB_EVAL_USERS: the same seeded sample for every arm; the offline metrics and their
    ranking count only its users; 0 (or a sample as large as the window) is every test user."""
    from ops.arms.ranking import evaluation_users, metrics_from_lists, rank_once
    from ops.arms.recommenders import arm_config, trained_arm
    from ops.data.catalogue import build_catalogue

    users, movies, ratings = planted_movielens(seed=3, n_users=400, n_movies=120, ratings_per_user=30)
    split = chronological_split(ratings)
    every = evaluation_users(split.test)
    sample = evaluation_users(split.test, 50)
    assert every.tolist() == sorted(split.test.get_column("user_id").unique().to_list())
    assert sample.size == 50 and set(sample) <= set(every) and np.array_equal(sample, evaluation_users(split.test, 50))
    assert np.array_equal(evaluation_users(split.test, every.size + 1), every)
    arm = trained_arm(arm_config("pop"))
    from ops.arms.base import FitData

    arm.fit(FitData(split.train, split.valid, users, build_catalogue(movies)))
    items = movies.get_column("item_id").to_numpy()
    ranking = rank_once(arm, split.train, split.test, items, users=sample)
    assert set(ranking.get_column("user_id").unique().to_list()) == set(sample)  # nobody else is ranked
    sampled = metrics_from_lists(arm, ranking, split.test, evaluated=sample)
    full = metrics_from_lists(arm, rank_once(arm, split.train, split.test, items), split.test)
    assert 0 < sampled.users_ranked <= 50 < full.users_ranked


def test_the_evaluated_test_users_default_to_what_a_hundredth_wide_interval_needs():
    """Without SIMAB_EVAL_USERS the offline metrics and the social traits' real side read a
    sample sized as the protocols are, for ±0.01 on a per-user figure in [0, 1], not every
    test user of the log; a test window with fewer users is read whole."""
    from ops.arms.ranking import evaluation_users
    from ops.settings import config_default
    from ops.studies.alignment.sizing import agents_for_half_width

    assert config_default("eval_users") == agents_for_half_width(0.01) == 9604
    test = pl.DataFrame({"user_id": np.arange(1, 20_001), "item_id": 1, "rating": 4})
    assert evaluation_users(test, config_default("eval_users")).size == 9604
    split = _split()
    assert np.array_equal(
        evaluation_users(split.test, config_default("eval_users")),
        np.unique(split.test.get_column("user_id").to_numpy()),
    )

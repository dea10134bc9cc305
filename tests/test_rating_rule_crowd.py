"""The rating rule "crowd": a synthetic case where independent users
stray further from the crowd than conformists, as real ML-1M users do (Agent4Rec Fig. 4)."""

import numpy as np
import pytest

from ops.simulation.brains.embedded.rating_rule import (
    choose_crowd_rule,
    crowd_cuts,
    crowd_stars,
    gap_rho,
    star_wasserstein,
)

TIERS = np.array(["low", "medium", "high"])


def _world(seed=0, users=240, per_user=12):
    rng = np.random.default_rng(seed)
    conformity = np.repeat(rng.uniform(-1, 1, users), per_user)
    user = np.repeat(np.arange(users), per_user)
    tier = TIERS[np.digitize(conformity, [-1 / 3, 1 / 3])]
    crowd = rng.uniform(2.8, 4.2, users * per_user)
    taste = rng.normal(0.0, 0.5, users * per_user)  # what the rating model predicts beyond the crowd
    mean = crowd + taste
    # Real users: the independent ones stray further than predicted, conformists less.
    real = np.clip(np.round(crowd + (1.0 - 0.7 * conformity) * taste + rng.normal(0, 0.4, taste.size)), 1, 5)
    return mean, crowd, conformity, real, user, tier


def test_the_gap_to_the_crowd_falls_with_conformity_as_the_weight_grows():
    mean, crowd, conformity, _, user, tier = _world()
    rank = np.array([{"low": 0, "medium": 1, "high": 2}[t] for t in tier])
    cuts = crowd_cuts(None, 0.0, (1, 5))
    rhos = {w: gap_rho(user, rank, crowd_stars(mean, crowd, conformity, w, cuts, (1, 5)), crowd) for w in (0, 0.5, 1)}
    assert abs(rhos[0]) < 0.15  # weight 0 is rounding μ: no trait in the gap
    assert rhos[1] < rhos[0.5] < -0.3
    # A conformist with weight 1 gives the crowd's rounded rating whatever the model says.
    assert crowd_stars(np.array([4.9]), np.array([3.2]), np.array([1.0]), 1.0, cuts, (1, 5)).tolist() == [3]


def test_the_cuts_move_from_rounding_to_the_matched_ones_and_the_distance_is_on_stars():
    assert crowd_cuts([1.0, 2.0, 3.0, 4.0], 0.5, (1, 5)) == pytest.approx([1.25, 2.25, 3.25, 4.25])
    assert star_wasserstein(np.array([3, 3]), np.array([4, 4]), (1, 5)) == pytest.approx(1.0)


def test_the_fit_chooses_a_weight_that_brings_the_rho_near_the_real_one_within_the_rmse_budget():
    mean, crowd, conformity, real, user, tier = _world(seed=1)
    weight, spread, grid = choose_crowd_rule(mean, crowd, conformity, real, user, list(tier), crowd, None, (1, 5), 0.01)
    chosen = next(g for g in grid if (g["weight"], g["spread"]) == (weight, spread))
    plain = next(g for g in grid if g["weight"] == 0.0)
    assert weight > 0 and chosen["within_budget"]
    assert chosen["rho_real"] < -0.2
    assert abs(chosen["rho"] - chosen["rho_real"]) < abs(plain["rho"] - plain["rho_real"])
    assert chosen["rmse"] <= np.sqrt(np.mean((np.clip(np.round(mean), 1, 5) - real) ** 2)) * 1.01 + 1e-12
    with pytest.raises(ValueError, match="differ in length"):
        choose_crowd_rule(mean, crowd[:-1], conformity, real, user, list(tier), crowd, None)

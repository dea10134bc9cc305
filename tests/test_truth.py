"""The verdict judged by the truth (ops/readout/truth.py) and the planted world's truth and
logging policy (ops/data/synthetic_truth.py, ops/data/synthetic.py: `exposure_bias`)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ops.data.synthetic import SyntheticConfig, SyntheticData, generate
from ops.data.synthetic_posters import PosterConfig
from ops.readout.truth import PLANTED, RANDOM_EXPOSURE, judge_against_truth, truth_per_user
from ops.schema import GROUND_TRUTH
from ops.simulation.brains.embedded.fitting import _propensity_weights

# Tiny posters: these tests read the log and the truth, never the pictures.
SMALL = dict(
    n_users=120, n_movies=160, mean_ratings_per_user=30.0, posters=PosterConfig(small_size=(8, 12), large_size=(8, 12))
)


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> dict[float, SyntheticData]:
    posters = tmp_path_factory.mktemp("posters")
    return {
        s: generate(SyntheticConfig(seed=2, exposure_bias=s, random_exposure_share=1.0, **SMALL), posters / f"{s:g}")
        for s in (0.0, 1.0, 2.5)
    }


def test_planted_truth_covers_every_pair_and_is_a_probability(worlds) -> None:
    truth = worlds[1.0].truth
    assert truth.schema == pl.Schema(GROUND_TRUTH)
    planted = truth.filter(pl.col("judge") == PLANTED)
    assert planted.height == SMALL["n_users"] * SMALL["n_movies"]
    assert planted.select("user_id", "item_id").is_unique().all()
    for column in ("clicked", "liked"):
        assert planted.get_column(column).is_between(0, 1).all()
    # The planted uptake's intercept makes a uniformly random item clicked at the base rate.
    assert planted.get_column("clicked").mean() == pytest.approx(SyntheticConfig().click_base_rate, abs=1e-3)


def test_the_random_bucket_agrees_with_the_exact_truth(worlds) -> None:
    """The random bucket's ratings are drawn from the planted model: over its thousands of
    draws the share liked and clicked matches the mean exact probability of the same pairs."""
    truth = worlds[1.0].truth
    bucket = truth.filter(pl.col("judge") == RANDOM_EXPOSURE)
    assert bucket.height == SMALL["n_users"] * SyntheticConfig().random_exposure_items
    exact = bucket.join(
        truth.filter(pl.col("judge") == PLANTED).select("user_id", "item_id", p_like="liked", p_click="clicked"),
        on=["user_id", "item_id"],
    )
    n = exact.height
    for observed, expected in (("liked", "p_like"), ("clicked", "p_click")):
        p = exact.get_column(expected).mean()
        se = np.sqrt(p * (1 - p) / n)
        assert abs(exact.get_column(observed).mean() - p) < 4 * se
    assert (bucket.get_column("liked") == (bucket.get_column("rating") >= 4).cast(pl.Float64)).all()
    # Shown items the user had not rated: a random bucket shows what the log did not.
    logged = worlds[1.0].ratings.select("user_id", "item_id")
    assert bucket.join(logged, on=["user_id", "item_id"], how="semi").height == 0


def test_the_logging_policy_leads_with_the_popular_as_its_strength_rises(worlds) -> None:
    """The share of the log on the catalogue's most liked-by-all items (highest mean planted
    like probability is not what exposure follows; the log's own head is): the top decile of
    movies by the planted popularity proxy, vote_count, takes more of the log as the
    exposure strength rises, while the planted truth itself does not move."""
    shares = []
    for s in (0.0, 1.0, 2.5):
        data = worlds[s]
        head = data.metadata.sort("vote_count", descending=True).head(SMALL["n_movies"] // 10).get_column("item_id")
        shares.append(data.ratings.get_column("item_id").is_in(head.implode()).mean())
    assert shares[0] < shares[1] < shares[2]
    like = [worlds[s].truth.filter(pl.col("judge") == PLANTED).get_column("liked").to_numpy() for s in (0.0, 2.5)]
    # The users' tastes and rating scale are the same in every world: so is what they would like.
    assert np.allclose(like[0], like[1])


def test_default_strength_leaves_the_log_as_it_was(tmp_path) -> None:
    """exposure_bias 1 multiplies the popularity terms by 1: the default world is unchanged
    (the same ratings with the field left out as with it set to its default)."""
    tiny = dict(SMALL, n_users=40, n_movies=60, mean_ratings_per_user=25)
    a = generate(SyntheticConfig(seed=4, **tiny), tmp_path / "a")
    b = generate(SyntheticConfig(seed=4, exposure_bias=1.0, **tiny), tmp_path / "b")
    assert a.ratings.equals(b.ratings)
    c = generate(SyntheticConfig(seed=4, exposure_bias=0.0, **tiny), tmp_path / "c")
    assert not a.ratings.equals(c.ratings)


def _toy(judge: str = PLANTED, flip: bool = False, mirror_ctr: float | None = None):
    """Three candidate arms over 200 users: 'good' lists items the users like most, 'mid'
    middling ones, 'bad' the least; the simulated CTR orders them as the truth does (or
    the reverse with `flip`).  NDCG@20 orders good > bad > mid."""
    rng = np.random.default_rng(0)
    users, items = np.arange(1, 201), np.arange(1, 61)
    p = {"good": 0.6, "mid": 0.4, "bad": 0.2}
    block = {"good": items[:20], "mid": items[20:40], "bad": items[40:], "mirror": items[:20]}
    arms = ["good", "mid", "bad"] + (["mirror"] if mirror_ctr is not None else [])
    lists = {
        a: pl.DataFrame(
            {
                "arm": a,
                "user_id": np.repeat(users, 20),
                "rank": np.tile(np.arange(1, 21), len(users)),
                "item_id": np.tile(block[a], len(users)),
                "score": 0.0,
            }
        )
        for a in arms
    }
    like = np.zeros((len(users), len(items)))
    for a in ("good", "mid", "bad"):
        like[:, block[a] - 1] = p[a]
    if judge == PLANTED:
        uu, ii = np.meshgrid(users, items, indexing="ij")
        truth = pl.DataFrame(
            {
                "user_id": uu.ravel(),
                "item_id": ii.ravel(),
                "judge": PLANTED,
                "clicked": like.ravel() / 2,
                "liked": like.ravel(),
                "rating": None,
            },
            schema=GROUND_TRUTH,
        )
    else:
        shown = np.array([rng.choice(items, 30, replace=False) for _ in users])
        uu = np.repeat(users, 30)
        liked = rng.random(uu.size) < like[uu - 1, shown.ravel() - 1]
        truth = pl.DataFrame(
            {"user_id": uu, "item_id": shown.ravel(), "judge": RANDOM_EXPOSURE, "liked": liked.astype(float)},
        ).with_columns(clicked=pl.lit(None, pl.Float64), rating=pl.lit(None, pl.Float64))
        truth = truth.select(list(GROUND_TRUTH)).cast(GROUND_TRUTH)
    ctr = {"good": 0.3, "mid": 0.2, "bad": 0.1} | ({"mirror": mirror_ctr} if mirror_ctr is not None else {})
    if flip:
        ctr = {"good": 0.1, "mid": 0.2, "bad": 0.3} | ({"mirror": mirror_ctr} if mirror_ctr is not None else {})
    per_agent = pl.concat(
        [
            pl.DataFrame(
                {
                    "arm": a,
                    "user_id": users,
                    "ctr": np.clip(ctr[a] + 0.05 * rng.standard_normal(len(users)), 0, 1),
                    "like_ratio": np.clip(ctr[a] / 2 + 0.02 * rng.standard_normal(len(users)), 0, 1),
                    "cvr": ctr[a] / 2,
                    "average_rating": 3.0 + ctr[a],
                }
            )
            for a in arms
        ]
    )
    ndcg = {"good": 0.3, "mid": 0.1, "bad": 0.2, "mirror": 0.3}
    offline = pl.concat([pl.DataFrame({"arm": a, "user_id": users, "ndcg_at_k": ndcg[a] + 0.0 * users}) for a in arms])
    return truth, lists, per_agent, offline


def test_a_simulation_that_orders_as_the_truth_beats_the_offline_metric() -> None:
    truth, lists, per_agent, offline = _toy()
    judged = judge_against_truth(truth, lists, per_agent, offline, n_bootstrap=200)
    assert judged.judge == PLANTED and judged.kinds() == ["click", "like"]
    assert judged.tau("ctr", "click") == pytest.approx(1.0)
    assert judged.tau("ndcg_at_k", "click") == pytest.approx(1 / 3)
    assert judged.pairs["click"] == {"metric": "ctr", "separated": 3, "simulated_alike": 3, "offline_alike": 2}
    good = judged.arms.filter(pl.col("arm") == "good").row(0, named=True)
    assert good["like_truth"] == pytest.approx(0.6) and good["click_truth"] == pytest.approx(0.3)
    assert not judged.warnings()
    # CVR, the like ratio and AR order the toy's arms as CTR does: the primary metric is named.
    assert judged.tracking() == "ctr"
    lines = judged.lines()
    assert "against the truth (planted, exact, click truth): τ(simulated CTR, truth) = 1.00" in lines[0]
    assert "of the 3 pairs the truth separates, the simulation orders 3 alike, the offline metric 2" in lines[0]


def test_a_simulation_worse_than_the_offline_metric_is_warned() -> None:
    truth, lists, per_agent, offline = _toy(flip=True)
    judged = judge_against_truth(truth, lists, per_agent, offline, n_bootstrap=200)
    assert judged.tau("ctr", "click") == pytest.approx(-1.0)
    assert any("does worse than the offline metric" in w for w in judged.warnings())


def test_a_random_bucket_estimates_the_like_share_of_each_list() -> None:
    truth, lists, per_agent, offline = _toy(judge=RANDOM_EXPOSURE)
    judged = judge_against_truth(truth, lists, per_agent, offline, n_bootstrap=400)
    assert judged.judge == RANDOM_EXPOSURE and judged.kinds() == ["like"]  # no clicks recorded
    for arm, p in (("good", 0.6), ("mid", 0.4), ("bad", 0.2)):
        row = judged.arms.filter(pl.col("arm") == arm).row(0, named=True)
        assert row["like_truth_low"] < p < row["like_truth_high"], (arm, row)
    per_user = truth_per_user(truth.filter(pl.col("judge") == RANDOM_EXPOSURE), lists, RANDOM_EXPOSURE)
    # Only the sampled items that fall in a list count: about 30 × 20 / 60 = 10 per user.
    assert 8 < per_user.get_column("items").mean() < 12
    assert "random-exposure sample" in judged.lines()[0]


def test_the_mirror_is_read_against_its_true_outcome() -> None:
    """A mirror whose lists are the good arm's (the same true outcome) but simulated at twice
    its CTR is favoured beyond its truth; one simulated at the good arm's CTR is not."""
    truth, lists, per_agent, offline = _toy(mirror_ctr=0.6)
    favoured = judge_against_truth(truth, lists, per_agent, offline, mirrors=["mirror"], n_bootstrap=100)
    assert favoured.mirror["click"].excess > 0.2
    assert any("favours the brain's own ranking" in w for w in favoured.warnings())
    truth, lists, per_agent, offline = _toy(mirror_ctr=0.05)
    shunned = judge_against_truth(truth, lists, per_agent, offline, mirrors=["mirror"], n_bootstrap=100)
    assert any("disfavours the brain's own ranking" in w for w in shunned.warnings())
    truth, lists, per_agent, offline = _toy(mirror_ctr=0.3)
    fair = judge_against_truth(truth, lists, per_agent, offline, mirrors=["mirror"], n_bootstrap=100)
    assert abs(fair.mirror["click"].excess) < 0.03
    assert not any("favours" in w for w in fair.warnings())


def test_no_truth_is_said_not_measured() -> None:
    _, lists, per_agent, offline = _toy()
    judged = judge_against_truth(pl.DataFrame(schema=GROUND_TRUTH), lists, per_agent, offline)
    assert not judged.measured and judged.lines() == [] and judged.headline()["measured"] is False
    assert "Not measured" in judged.to_markdown()


def test_propensity_weights_take_the_logs_exposure_out_of_the_positives() -> None:
    counts = np.array([0, 9, 99, 0, 5])
    y = np.array([1, 1, 1, 0, 0])
    assert np.array_equal(_propensity_weights(counts, y, 0.0), np.ones(5))
    w = _propensity_weights(counts, y, 1.0)
    assert np.array_equal(w[3:], [1, 1])
    assert w[:3].sum() == pytest.approx(3)
    assert w[0] / w[1] == pytest.approx(10) and w[1] / w[2] == pytest.approx(10)

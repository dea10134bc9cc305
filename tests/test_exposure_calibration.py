"""The click decision calibrated on a random-exposure sample (ops/studies/alignment/
exposure_calibration.py) and the split that keeps it apart from the judge
(ops/data/random_exposure.py: `calibration_users`, ops/readout/truth.py)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fakes.agents import synthetic_agents
from ops.data.random_exposure import MIN_CALIBRATION_CLICKS, calibration_rows, calibration_users
from ops.readout.truth import PLANTED, RANDOM_EXPOSURE, judge_against_truth
from ops.schema import GROUND_TRUTH


def _bucket(n_users: int, items: int = 10, rate: float = 0.2, clicks: bool = True, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(1, n_users + 1), items)
    return pl.DataFrame(
        {
            "user_id": users,
            "item_id": np.tile(np.arange(1, items + 1), n_users),
            "judge": RANDOM_EXPOSURE,
            "clicked": (rng.random(users.size) < rate).astype(float) if clicks else None,
            "liked": (rng.random(users.size) < 0.5).astype(float),
            "rating": None,
        },
        schema=GROUND_TRUTH,
    )


def test_half_the_bucket_calibrates_seeded_and_only_where_it_records_enough_clicks() -> None:
    bucket = _bucket(100)
    held = calibration_users(bucket)
    assert len(held) == 50 and held <= set(range(1, 101))
    assert calibration_users(bucket) == held  # a function of the sample alone
    assert calibration_users(bucket.sample(fraction=1.0, shuffle=True, seed=3)) == held  # not of its row order
    assert calibration_users(bucket, seed=1) != held
    rows = calibration_rows(bucket)
    assert set(rows.get_column("user_id").unique().to_list()) == held and rows.height == 500
    assert rows.columns == ["user_id", "item_id", "clicked"]
    # A team's file with likes only, or too few clicks in the half: nothing calibrates, all judges.
    assert calibration_users(_bucket(100, clicks=False)) == frozenset()
    few = _bucket(100, rate=(MIN_CALIBRATION_CLICKS - 10) / 1000)
    assert calibration_users(few) == frozenset() and calibration_rows(few).height == 0


def test_the_planted_truth_never_reaches_the_calibration_rows() -> None:
    bucket = _bucket(40)
    uu, ii = np.meshgrid(np.arange(1, 41), np.arange(1, 31), indexing="ij")
    planted = pl.DataFrame(
        {"user_id": uu.ravel(), "item_id": ii.ravel(), "judge": PLANTED, "clicked": 0.5, "liked": 0.5, "rating": None},
        schema=GROUND_TRUTH,
    )
    rows = calibration_rows(pl.concat([planted, bucket]))
    assert rows.height == 200  # 20 users x their 10 random items, none of the 1,200 planted pairs
    assert rows.join(bucket, on=["user_id", "item_id"], how="anti").height == 0


def test_the_judge_reads_only_the_users_that_did_not_calibrate() -> None:
    """Three arms over 200 users, a planted truth beside a random bucket with clicks: where the
    half calibrated, the judge reads the 100 users outside it, by either judge."""
    users, items = np.arange(1, 201), np.arange(1, 61)
    block = {"good": items[:20], "bad": items[40:]}
    lists = {
        a: pl.DataFrame(
            {
                "arm": a,
                "user_id": np.repeat(users, 20),
                "rank": np.tile(np.arange(1, 21), users.size),
                "item_id": np.tile(b, users.size),
                "score": 0.0,
            }
        )
        for a, b in block.items()
    }
    uu, ii = np.meshgrid(users, items, indexing="ij")
    p = np.where(ii <= 20, 0.6, 0.2)
    planted = pl.DataFrame(
        {"user_id": uu.ravel(), "item_id": ii.ravel(), "judge": PLANTED, "clicked": p.ravel() / 2, "liked": p.ravel()},
    ).with_columns(rating=pl.lit(None, pl.Float64))
    truth = pl.concat([planted.select(list(GROUND_TRUTH)).cast(GROUND_TRUTH), _bucket(200)])
    per_agent = pl.concat(
        [
            pl.DataFrame({"arm": a, "user_id": users, "ctr": c, "like_ratio": c / 2})
            for a, c in (("good", 0.3), ("bad", 0.1))
        ]
    )
    offline = pl.concat([pl.DataFrame({"arm": a, "user_id": users, "ndcg_at_k": 0.1}) for a in block])
    held = calibration_users(truth)
    judged = judge_against_truth(truth, lists, per_agent, offline, n_bootstrap=100, held_out=held)
    assert len(held) == 100 and judged.judge == PLANTED
    assert judged.arms.get_column("users").to_list() == [100, 100]
    # Where the half calibrated nothing (the list response did), every user judges.
    whole = judge_against_truth(truth, lists, per_agent, offline, n_bootstrap=100)
    assert whole.arms.get_column("users").to_list() == [200, 200]
    bucket = judge_against_truth(
        truth.filter(pl.col("judge") == RANDOM_EXPOSURE), lists, per_agent, offline, n_bootstrap=100, held_out=held
    )
    assert bucket.judge == RANDOM_EXPOSURE
    assert not set(bucket.arms.get_column("users").to_list()) - set(range(101))  # the other 100 at most


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A planted world whose every user was shown 10 random items, split 7:2:1, agents at the
    simulation clock and the embedded brain fitted on train + validation."""
    from ops.data.synthetic import SyntheticConfig
    from ops.simulation.brains.embedded import fit_embedded_brain

    config = SyntheticConfig(n_users=160, n_movies=200, mean_ratings_per_user=40, seed=7, random_exposure_share=1.0)
    world = synthetic_agents(tmp_path_factory.mktemp("exposure-calibration"), config, valid=True)
    data, split, agents = world["data"], world["split"], world["agents"]
    model = fit_embedded_brain(agents, split.train, split.valid, data.users)
    return dict(data=data, agents=agents, model=model)


def _first_look(model, agents, rows: pl.DataFrame) -> np.ndarray:
    """The calibrated decision's P(a card catches the eye at the first slot) for each row."""
    brain = model.brain()
    sessions = {s.user_id: s for s in agents.sessions(sorted(rows.get_column("user_id").unique().to_list()))}
    out = []
    for (uid,), part in rows.partition_by("user_id", as_dict=True, maintain_order=True).items():
        out.append(brain.click_probability(sessions[int(uid)], part.get_column("item_id").to_list()))
    return np.concatenate(out)


def test_the_calibrated_decision_clicks_random_items_as_the_held_out_users_do(world) -> None:
    """Fitted on the log, the decision's level answers "taken up next"; calibrated on one half
    of the bucket, its first-look click probability on the other half's random items is their
    click rate (within 4 standard errors), and the ranking is the click model's (scale > 0)."""
    from ops.studies.alignment.exposure_calibration import calibrate_on_random_exposure

    truth, agents, model = world["data"].truth, world["agents"], world["model"]
    held = calibration_users(truth)
    assert held
    calibrated = calibrate_on_random_exposure(model, agents, calibration_rows(truth))
    record = calibrated.params.exposure_calibration
    assert record.users == len(held) and record.scale > 0
    assert record.mean_probability == pytest.approx(record.click_rate, abs=2e-3)
    assert calibrated.params.click_scale == record.scale and calibrated.params.list_response is None
    judging = (
        truth.filter(
            (pl.col("judge") == RANDOM_EXPOSURE)
            & ~pl.col("user_id").is_in(sorted(held))
            & pl.col("user_id").is_in(sorted(agents.profiles))
        )
        .select("user_id", "item_id", "clicked")
        .sort("user_id", "item_id")
    )
    rate = judging.get_column("clicked").mean()
    se = np.sqrt(rate * (1 - rate) / judging.height)
    assert abs(_first_look(calibrated, agents, judging).mean() - rate) < 4 * se
    # As fitted (1 positive per 4 negatives), the level is the log's uptake, not the bucket's.
    assert abs(_first_look(model, agents, judging).mean() - rate) > 4 * se

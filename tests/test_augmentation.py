"""Data augmentation with simulated interactions (A/B Agent §3.4, Table 5): the signals as
rows, the augmented train set, the refit of original vs augmented models, and that the
content of the simulated data — not only its amount — moves test AUC."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fakes.planted_data import planted_movielens
from ops.data.catalogue import build_catalogue
from ops.data.split import chronological_split
from ops.readout.augmentation_summary import AUGMENTATION_METRICS, table_5
from ops.readout.readout_figures import augmentation_figure
from ops.schema import EVENTS, RATINGS
from ops.studies.augmentation import AugmentationConfig, augment, refit_and_evaluate, simulated_interactions

# Small, fast settings for the 2-core machine (as tests/test_recommenders.py); no sampled
# negatives, so test AUC is over rated pairs as in Table 5.
FAST = dict(batch_size=256, learning_rate=0.01, max_epochs=4, patience=2, embedding_dim=16, sampled_negatives=0.0)
QUIET = AugmentationConfig(progress=False)


def events_frame(rows: list[dict], arm: str = "deepfm", brain: str = "embedded") -> pl.DataFrame:
    """Rows in the ops.schema.EVENTS schema; unnamed columns are null."""
    full = [{**{c: None for c in EVENTS}, "arm": arm, "brain": brain, **r} for r in rows]
    return pl.DataFrame(full, schema=EVENTS)


def train_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {"user_id": [1, 1, 2], "item_id": [5, 6, 5], "rating": [3, 4, 1], "timestamp": [100, 250, 200]}, schema=RATINGS
    )


def session_events() -> pl.DataFrame:
    # user 1: clicks 10, watches it (2 stars), back; clicks 11 and backs out; clicks 5 (in train) and watches it.
    # user 2: clicks 12 twice, watching it with 3 then 5 stars.
    return events_frame(
        [
            dict(user_id=1, step=1, action="click_movie", item_id=10),
            dict(user_id=1, step=2, action="watch_and_rate", item_id=10, rating=2),
            dict(user_id=1, step=3, action="back", item_id=10),
            dict(user_id=1, step=4, action="click_movie", item_id=11),
            dict(user_id=1, step=5, action="back", item_id=11),
            dict(user_id=1, step=6, action="click_movie", item_id=5),
            dict(user_id=1, step=7, action="watch_and_rate", item_id=5, rating=5),
            dict(user_id=1, step=8, action="exit"),
            dict(user_id=1, step=9, action="exit_interview", satisfaction=6),
            dict(user_id=2, step=1, action="next_page"),
            dict(user_id=2, step=2, action="click_movie", item_id=12),
            dict(user_id=2, step=3, action="watch_and_rate", item_id=12, rating=3),
            dict(user_id=2, step=4, action="back", item_id=12),
            dict(user_id=2, step=5, action="click_movie", item_id=12),
            dict(user_id=2, step=6, action="watch_and_rate", item_id=12, rating=5),
            dict(user_id=2, step=7, action="exit"),
        ]
    )


def rows(frame: pl.DataFrame) -> list[tuple]:
    return frame.select("user_id", "item_id", "rating", "timestamp").rows()


def test_views_keep_the_agents_rating_after_the_last_train_timestamp():
    views = simulated_interactions(session_events(), "view", train_frame())
    assert views.schema == pl.Schema(RATINGS)
    # (1, 5) is a train pair: dropped.  User 2 watched 12 twice: one row, the last rating.
    # Stamped after train's last timestamp (250), one second apart, user then step order.
    assert rows(views) == [(1, 10, 2, 251), (2, 12, 5, 252)]


def test_clicks_are_positives_or_take_the_watch_outcome():
    clicks = simulated_interactions(session_events(), "click", train_frame())
    assert rows(clicks) == [(1, 10, 4, 251), (1, 11, 4, 252), (2, 12, 4, 253)]
    watched = simulated_interactions(
        session_events(), "click", train_frame(), AugmentationConfig(click_label="watched", unwatched_click_rating=1)
    )
    assert rows(watched) == [(1, 10, 2, 251), (1, 11, 1, 252), (2, 12, 5, 253)]
    later = simulated_interactions(session_events(), "click", train_frame(), AugmentationConfig(timestamp_step_s=60))
    assert later["timestamp"].to_list() == [310, 370, 430]


def test_bad_events_are_named():
    with pytest.raises(ValueError, match=r"lack column\(s\) \['rating'\]"):
        simulated_interactions(session_events().drop("rating"), "view", train_frame())
    # Clicks labelled as positives need no rating column.
    assert simulated_interactions(session_events().drop("rating"), "click", train_frame()).height == 3
    with pytest.raises(ValueError, match=r"\['action'\]"):
        simulated_interactions(session_events().drop("action"), "click", train_frame())
    unrated = session_events().with_columns(rating=pl.when(pl.col("step") == 2).then(None).otherwise(pl.col("rating")))
    with pytest.raises(ValueError, match="'rating' missing or outside 1..5, e.g. user 1 step 2"):
        simulated_interactions(unrated, "view", train_frame())
    with pytest.raises(ValueError, match="unknown signal 'like'"):
        simulated_interactions(session_events(), "like", train_frame())
    with pytest.raises(ValueError, match=r"table 'simulated interactions' lacks column\(s\) \['timestamp'\]"):
        augment(train_frame(), train_frame().drop("timestamp"))


def test_augmented_train_is_exactly_train_plus_the_new_pairs():
    train = train_frame()
    simulated = pl.DataFrame(
        {"user_id": [1, 3, 3, 2], "item_id": [6, 7, 7, 9], "rating": [1, 5, 2, 4], "timestamp": [300, 301, 302, 303]},
        schema=RATINGS,
    )
    out = augment(train, simulated)
    assert out.slice(0, train.height).equals(train)  # train untouched and first
    # (1, 6) is already in train (the real rating stands); (3, 7) appears twice: first kept.
    assert rows(out.slice(train.height)) == [(3, 7, 5, 301), (2, 9, 4, 303)]
    assert out.select("user_id", "item_id").is_unique().all()
    assert augment(train, simulated.clear()).equals(train)


@pytest.fixture(scope="module")
def planted():
    import torch

    torch.set_num_threads(1)
    users, movies, ratings = planted_movielens(seed=11)
    split = chronological_split(ratings)
    # Hold 60 % of the train rows back as what a faithful simulator would report.
    held = np.random.default_rng(0).random(split.train.height) < 0.6
    return users, movies, split, split.train.filter(pl.Series(~held)), split.train.filter(pl.Series(held))


def views_of(pairs: pl.DataFrame, ratings: np.ndarray) -> pl.DataFrame:
    """watch_and_rate events of `pairs` with `ratings`."""
    return events_frame(
        [
            dict(user_id=u, item_id=m, action="watch_and_rate", step=i + 1, rating=int(r))
            for i, (u, m, r) in enumerate(zip(pairs["user_id"], pairs["item_id"], ratings))
        ],
        brain="planted",
    )


def test_refit_trains_original_and_each_signal_like_for_like(planted):
    from ops.arms.recommenders import arm_config, evaluate_arm, train_arm

    users, movies, split, train, pool = planted
    sample = pool.head(400)
    clicks = (
        sample.head(150)
        .select("user_id", "item_id")
        .with_columns(action=pl.lit("click_movie"), step=pl.int_range(1, pl.len() + 1).over("user_id"))
    )
    events = pl.concat(
        [
            views_of(sample, sample["rating"].to_numpy()),
            events_frame(
                [dict(user_id=u, item_id=m, action="click_movie", step=10_000 + s) for u, m, _, s in clicks.rows()]
            ),
            # A view of a pair already in train adds nothing.
            events_frame(
                [
                    dict(
                        user_id=train["user_id"][0],
                        item_id=train["item_id"][0],
                        action="watch_and_rate",
                        step=1,
                        rating=1,
                    )
                ]
            ),
        ]
    )
    out = refit_and_evaluate(
        "fm", train, split.valid, split.test, users, build_catalogue(movies), events, config=QUIET, **FAST
    )
    assert out.schema == pl.Schema(AUGMENTATION_METRICS)
    assert out["training_set"].to_list() == ["original", "+click", "+view"]
    assert out["added_rows"].to_list() == [0, 150, 400]
    assert out["train_rows"].to_list() == [train.height, train.height + 150, train.height + 400]
    assert out["added_positive_share"][1] == 1.0  # clicks are positives
    assert out["added_positive_share"][2] == pytest.approx(float((sample["rating"] >= 4).mean()))
    # What the added rows touch, and the real rows' label balance to set them against.
    assert out["added_users"].to_list() == [0, clicks["user_id"].n_unique(), sample["user_id"].n_unique()]
    assert out["added_items"].to_list() == [0, clicks["item_id"].n_unique(), sample["item_id"].n_unique()]
    assert out["train_positive_share"].to_list() == pytest.approx([float((train["rating"] >= 4).mean())] * 3)
    assert set(out["simulated_arm"]) == {"deepfm"} and out["brain"][0] == "embedded,planted"
    assert out["auc_difference"].to_list() == pytest.approx((out["test_auc"] - out["test_auc"][0]).to_list())
    assert out["auc_difference"][1] != 0 and out["auc_difference"][2] != 0
    # The original row is the same model the arm alone would train (same config and seed).
    alone = train_arm(arm_config("fm", **FAST), train, split.valid, users, build_catalogue(movies))
    metrics = evaluate_arm(alone, train, split.test, movies["item_id"].to_numpy())
    assert out["test_auc"][0] == metrics.test_auc and out["ndcg_at_k"][0] == metrics.ndcg_at_k

    table = table_5(out)
    assert table.columns == ["training_set", "fm"] and table["training_set"].to_list() == [
        "original",
        "+click",
        "+view",
    ]


def test_a_signal_with_nothing_new_repeats_the_original_and_random_is_refused(planted, tmp_path):
    users, movies, split, train, _ = planted
    only_train_pairs = events_frame(
        [
            dict(user_id=u, item_id=m, action="click_movie", step=i)
            for i, (u, m) in enumerate(train.head(5).select("user_id", "item_id").rows())
        ]
    )
    out = refit_and_evaluate(
        "fm",
        train,
        split.valid,
        split.test,
        users,
        build_catalogue(movies),
        only_train_pairs,
        signals=("click",),
        config=QUIET,
        **{**FAST, "max_epochs": 1},
    )
    assert out["added_rows"].to_list() == [0, 0] and out["test_auc"][0] == out["test_auc"][1]
    with pytest.raises(ValueError, match="'random' cannot be refit"):
        refit_and_evaluate(
            "random", train, split.valid, split.test, users, build_catalogue(movies), only_train_pairs, config=QUIET
        )
    with pytest.raises(ValueError, match=r"unknown signal\(s\) \['likes'\]"):
        refit_and_evaluate(
            "fm",
            train,
            split.valid,
            split.test,
            users,
            build_catalogue(movies),
            only_train_pairs,
            signals=("likes",),
            config=QUIET,
        )
    figure = augmentation_figure(pl.concat([out, out.with_columns(arm=pl.lit("deepfm"))]), tmp_path / "auc.png")
    assert figure.stat().st_size > 5000


def test_simulated_views_that_follow_the_tastes_raise_auc_and_shuffled_ones_do_not(planted):
    """The same pairs added twice: with the ratings the planted users gave (what a faithful
    simulator reports) and with those ratings shuffled.  Only the first helps."""
    users, movies, split, train, pool = planted
    ratings = pool["rating"].to_numpy()
    faithful = refit_and_evaluate(
        "fm",
        train,
        split.valid,
        split.test,
        users,
        build_catalogue(movies),
        views_of(pool, ratings),
        signals=("view",),
        config=QUIET,
        **FAST,
    )
    shuffled = refit_and_evaluate(
        "fm",
        train,
        split.valid,
        split.test,
        users,
        build_catalogue(movies),
        views_of(pool, np.random.default_rng(1).permutation(ratings)),
        signals=("view",),
        config=QUIET,
        **FAST,
    )
    assert faithful["added_rows"][1] == shuffled["added_rows"][1] == pool.height
    assert faithful["test_auc"][0] == shuffled["test_auc"][0]  # the same original model
    # Measured: original 0.611, faithful views 0.768, shuffled views 0.601.
    assert faithful["auc_difference"][1] > 0.08, faithful
    assert faithful["test_auc"][1] > shuffled["test_auc"][1] + 0.08
    assert shuffled["auc_difference"][1] < 0.03, shuffled


def test_the_arm_already_trained_is_reused_for_the_original_only_when_its_config_matches(planted, monkeypatch):
    import ops.studies.augmentation as augmentation
    from ops.arms.recommenders import arm_config, evaluate_arm, train_arm

    users, movies, split, train, pool = planted
    events = views_of(pool.head(100), pool.head(100)["rating"].to_numpy())
    fast = {**FAST, "max_epochs": 1}
    trained = train_arm(arm_config("fm", **fast), train, split.valid, users, build_catalogue(movies))
    calls = []
    monkeypatch.setattr(augmentation, "train_arm", lambda cfg, *a, **k: calls.append(cfg) or train_arm(cfg, *a, **k))

    out = refit_and_evaluate(
        "fm",
        train,
        split.valid,
        split.test,
        users,
        build_catalogue(movies),
        events,
        signals=("view",),
        config=QUIET,
        original_model=trained,
        **fast,
    )
    assert len(calls) == 1  # only the augmented model was trained
    assert out["test_auc"][0] == evaluate_arm(trained, train, split.test, movies["item_id"].to_numpy()).test_auc
    # A model trained with other settings is not the like-for-like original: trained again.
    refit_and_evaluate(
        "fm",
        train,
        split.valid,
        split.test,
        users,
        build_catalogue(movies),
        events,
        signals=("view",),
        config=QUIET,
        original_model=trained,
        **{**fast, "seed": 7},
    )
    assert len(calls) == 3


def test_seed_summary_puts_an_interval_over_training_seeds():
    from ops.readout.augmentation_summary import seed_summary

    def rows(training_set, diffs):
        return [
            dict(
                simulated_arm="deepfm",
                brain="embedded",
                arm="fm",
                training_set=training_set,
                seed=1024 + i,
                auc_difference=d,
            )
            for i, d in enumerate(diffs)
        ]

    metrics = pl.DataFrame(
        rows("original", [0.0] * 4)
        + rows("+view", [0.004, 0.005, 0.003, 0.004])
        + rows("+click", [0.004, -0.006, 0.002, -0.001])
    )
    summary = {r["training_set"]: r for r in seed_summary(metrics).iter_rows(named=True)}
    assert set(summary) == {"+view", "+click"}  # the original is the baseline, not a row
    view = summary["+view"]
    assert view["seeds"] == 4 and view["auc_difference"] == pytest.approx(0.004)
    # t(0.975, 3) = 3.182; sd of (4, 5, 3, 4)e-3 = 0.8165e-3
    assert view["ci_high"] - view["auc_difference"] == pytest.approx(3.1824 * 0.8165e-3 / 2, rel=1e-3)
    assert view["verdict"] == "gain" and summary["+click"]["verdict"] == "within seed noise"
    one = seed_summary(pl.DataFrame(rows("+view", [0.004])))
    assert one["verdict"].to_list() == ["one seed"] and one["ci_low"].to_list() == [None]


def test_a_warm_refit_starts_from_the_arm_and_passes_over_the_simulated_rows_only(planted):
    """refit="warm" (the lifecycle's): the augmented model is the trained arm fine-tuned on
    the simulated rows and as many replayed train rows, its weights moved from the arm's,
    the arm itself untouched; the epochs are a budget; the test AUC stays near the arm's."""
    import torch

    from ops.arms.base import FitData
    from ops.arms.recommenders import arm_config, train_arm
    from ops.arms.warm_refit import warm_refit

    users, movies, split, train, pool = planted
    catalogue = build_catalogue(movies)
    config = arm_config("fm", **FAST)
    arm = train_arm(config, train, split.valid, users, catalogue)
    before = {k: v.clone() for k, v in arm.model.state_dict().items()}
    added = pool.head(300)
    refit = warm_refit(arm, added, FitData(train, split.valid, users, catalogue), epochs=3)
    assert all(torch.equal(before[k], v) for k, v in arm.model.state_dict().items())  # the arm is left as it was
    moved = [k for k, v in refit.model.state_dict().items() if not torch.equal(before[k], v)]
    assert moved and len(refit.history) == 3 and refit.best_epoch == 3
    assert refit.train_rows == arm.train_rows + 300 and refit.encoder is arm.encoder
    events = views_of(added, added["rating"].to_numpy())
    warm = refit_and_evaluate(
        "fm",
        train,
        split.valid,
        split.test,
        users,
        catalogue,
        events,
        signals=("view",),
        config=AugmentationConfig(progress=False, refit="warm", warm_epochs=2),
        original_model=arm,
        **FAST,
    )
    assert warm["added_rows"].to_list() == [0, 300] and warm["best_epoch"][1] == 2
    assert abs(warm["auc_difference"][1]) < 0.05

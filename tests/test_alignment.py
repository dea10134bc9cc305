"""The alignment protocols (ops.studies.alignment) on hand-made cases with known answers:
an oracle brain that knows the truth, a coin-flip brain that scores chance, the leakage
guard, social traits with a planted relation, the fidelity warning."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from ops.agents.session import AgentSession
from ops.simulation.catalogue import Catalogue, MovieInfo
from ops.simulation.observation import BACK, CLICK_MOVIE, EXIT, NEXT_PAGE, WATCH_AND_RATE, Decision
from ops.studies.alignment.list_quality import list_quality, simulate_lists
from ops.studies.alignment.mixed_lists import choose_ladder, mixed_lists
from ops.studies.alignment.rating import brain_ratings, rating_alignment, rating_distribution
from ops.studies.alignment.social import (
    real_behaviour,
    real_session_behaviour,
    simulated_behaviour,
    social_traits_alignment,
    tiers_frame,
    verdicts,
)
from ops.studies.alignment.taste import taste_discrimination
from ops.studies.alignment.trust import fidelity_warning, list_quality_seen, list_quality_warning
from ops.studies.alignment.windows import LeakageError, check_held_out

N_MOVIES = 400


class OracleBrain:
    """Knows every user's truth: picks and clicks exactly the relevant movies, rates each
    movie as its user did."""

    name = "oracle"

    def __init__(self, relevant: set[tuple[int, int]], ratings: dict[tuple[int, int], int] | None = None) -> None:
        self.relevant, self.ratings = relevant, ratings or {}

    def prepare(self, sessions, shown) -> None:
        pass

    def decide(self, session, observation, rng):
        user = session.user_id
        if observation.page_type == "detail":
            movie = observation.detail.card.item_id
            if (user, movie) in self.relevant or BACK not in observation.legal_actions:
                return Decision(WATCH_AND_RATE, 5, "mine", item_id=movie, rating=self.ratings.get((user, movie), 5))
            return Decision(BACK, 1, "not mine", item_id=movie)
        clicked = {e.item_id for e in session.short_term if e.action == CLICK_MOVIE}
        mine = tuple(c.item_id for c in observation.items if (user, c.item_id) in self.relevant)
        todo = [m for m in mine if m not in clicked]
        if todo and CLICK_MOVIE in observation.legal_actions:
            return Decision(CLICK_MOVIE, 5, "mine", item_id=todo[0], caught_eye=mine)
        action = NEXT_PAGE if NEXT_PAGE in observation.legal_actions else EXIT
        return Decision(action, 2, "nothing for me", caught_eye=mine)

    def exit_interview(self, session, rng):
        return 7, "fine"


class CoinFlipBrain:
    """Picks each card with probability 1/2 and rates uniformly 1..5: chance."""

    name = "coin"

    def prepare(self, sessions, shown) -> None:
        pass

    def decide(self, session, observation, rng):
        if observation.page_type == "detail":
            movie = observation.detail.card.item_id
            if BACK not in observation.legal_actions or rng.random() < 0.5:
                return Decision(WATCH_AND_RATE, 3, "why not", item_id=movie, rating=int(rng.integers(1, 6)))
            return Decision(BACK, 3, "no", item_id=movie)
        clicked = {e.item_id for e in session.short_term if e.action == CLICK_MOVIE}
        caught = tuple(c.item_id for c in observation.items if rng.random() < 0.5)
        todo = [m for m in caught if m not in clicked]
        if todo and not session.short_term:
            return Decision(CLICK_MOVIE, 3, "a coin said so", item_id=todo[0], caught_eye=caught)
        action = NEXT_PAGE if NEXT_PAGE in observation.legal_actions else EXIT
        return Decision(action, 3, "a coin said so", caught_eye=caught)

    def exit_interview(self, session, rng):
        return 5, "meh"


@pytest.fixture(scope="module")
def world():
    """200 users; each rated 30 held-out movies (ratings 1..5 by a fixed rule, about 12
    of them liked) and 30 earlier ones; a catalogue of 400 movies."""
    rng = np.random.default_rng(0)
    users = list(range(1, 201))
    rows_train, rows_test = [], []
    for u in users:
        movies = rng.choice(np.arange(1, N_MOVIES + 1), 60, replace=False)
        for i, m in enumerate(movies[:30]):
            rows_train.append((u, int(m), int(rng.integers(1, 6)), 1000 + i))
        for i, m in enumerate(movies[30:]):
            rows_test.append((u, int(m), 1 + (u + int(m)) % 5, 5000 + i))
    schema = {"user_id": pl.Int64, "item_id": pl.Int64, "rating": pl.Int64, "timestamp": pl.Int64}
    train, test = (
        pl.DataFrame(rows_train, schema=schema, orient="row"),
        pl.DataFrame(rows_test, schema=schema, orient="row"),
    )
    catalogue = Catalogue([MovieInfo(m, f"Movie {m}", 6.5, ("Drama",)) for m in range(1, N_MOVIES + 1)])
    tiers = ("low", "medium", "high")
    sessions = [AgentSession(u, SimpleNamespace(activity_tier=tiers[u % 3]), None, 0.0, 0.0) for u in users]
    return SimpleNamespace(
        train=train,
        test=test,
        catalogue=catalogue,
        sessions=sessions,
        users=users,
        known=pl.concat([train, test]).select("user_id", "item_id"),
    )


def _lists(world, ratios, liked_only=False, stream="t"):
    held = world.test.filter(pl.col("rating") >= 4) if liked_only else world.test
    return mixed_lists(
        held, world.known, np.arange(1, N_MOVIES + 1), ratios, 20, 0, world.users, stream, full_lists_only=liked_only
    )


# -- lists ---------------------------------------------------------------------------------------


def test_lists_keep_the_ratio_draw_never_rated_negatives_and_shuffle(world):
    lists = _lists(world, (1, 3, 9))
    per = lists.group_by("ratio", "user_id").agg(pl.col("relevant").sum().alias("pos"), pl.len().alias("n"))
    # 30 held-out items: 10 + 10 at 1:1, 5 + 15 at 1:3, 2 + 18 at 1:9.
    assert per.filter(pl.col("ratio") == "1:1").select(pl.col("pos").unique(), pl.col("n").unique()).rows() == [
        (10, 20)
    ]
    assert per.filter(pl.col("ratio") == "1:3").select(pl.col("pos").unique(), pl.col("n").unique()).rows() == [(5, 20)]
    assert per.filter(pl.col("ratio") == "1:9").select(pl.col("pos").unique(), pl.col("n").unique()).rows() == [(2, 20)]
    negatives = lists.filter(~pl.col("relevant")).select("user_id", "item_id")
    assert negatives.join(world.known, on=["user_id", "item_id"], how="semi").is_empty()
    positives = lists.filter(pl.col("relevant")).select("user_id", "item_id")
    assert positives.join(world.test, on=["user_id", "item_id"], how="anti").is_empty()
    # Shuffled: the positives are not all at the top.
    first = lists.filter((pl.col("ratio") == "1:9") & (pl.col("position") <= 2)).get_column("relevant").mean()
    assert first < 0.5
    again = _lists(world, (1, 3, 9))
    assert again.equals(lists)


def test_a_user_with_few_held_out_items_gets_a_shorter_list_at_the_same_ratio(world):
    few = world.test.filter(pl.col("user_id") == 1).head(1)
    lists = mixed_lists(few, world.known, np.arange(1, N_MOVIES + 1), (1, 9), 20, 0, None, "few")
    assert lists.filter(pl.col("ratio") == "1:1").height == 2 and lists.filter(pl.col("ratio") == "1:9").height == 10
    assert lists.get_column("relevant").sum() == 2


# -- taste discrimination ------------------------------------------------------------------------


def test_an_oracle_scores_f1_1_and_a_coin_scores_chance(world):
    lists = _lists(world, (1, 3, 9))
    relevant = {(u, m) for u, m in world.test.select("user_id", "item_id").iter_rows()}
    oracle = taste_discrimination(OracleBrain(relevant), world.sessions, lists, world.catalogue, n_bootstrap=200)
    assert oracle.summary.filter(pl.col("metric") == "f1").get_column("mean").to_list() == [1.0, 1.0, 1.0]
    assert oracle.summary.filter(pl.col("metric") == "accuracy").get_column("pooled").to_list() == [1.0, 1.0, 1.0]

    coin = taste_discrimination(CoinFlipBrain(), world.sessions, lists, world.catalogue, n_bootstrap=200)
    pooled = {(r["ratio"], r["metric"]): r["pooled"] for r in coin.summary.iter_rows(named=True)}
    for ratio, prevalence in (("1:1", 0.5), ("1:3", 0.25), ("1:9", 0.1)):
        assert pooled[(ratio, "recall")] == pytest.approx(0.5, abs=0.03)
        assert pooled[(ratio, "precision")] == pytest.approx(prevalence, abs=0.03)
        assert pooled[(ratio, "accuracy")] == pytest.approx(0.5, abs=0.03)
        chance_f1 = 2 * prevalence * 0.5 / (prevalence + 0.5)
        assert pooled[(ratio, "f1")] == pytest.approx(chance_f1, abs=0.03)
    # The interval over agents holds the chance value.
    f1 = coin.summary.filter((pl.col("ratio") == "1:1") & (pl.col("metric") == "f1")).row(0, named=True)
    assert f1["ci_low"] < 0.5 < f1["ci_high"]


# -- rating prediction and distribution ---------------------------------------------------------


def test_an_oracle_rates_with_rmse_0_and_a_coin_with_the_uniform_error(world):
    from ops.studies.alignment.rating import rating_pairs

    truth = {(u, m): r for u, m, r in world.test.select("user_id", "item_id", "rating").iter_rows()}
    pairs = rating_pairs(world.test, world.users, max_per_agent=6)
    assert (
        pairs.height == 6 * len(world.users)
        and pairs.join(world.test, on=["user_id", "item_id", "rating"], how="anti").is_empty()
    )
    oracle = rating_alignment(
        brain_ratings(OracleBrain(set(), truth), world.sessions, pairs, world.catalogue), world.train, n_bootstrap=200
    )
    brain = oracle.prediction.filter(pl.col("predictor") == "brain").row(0, named=True)
    assert brain["rmse"] == 0.0 and brain["mae"] == 0.0 and brain["pairs"] == pairs.height
    assert oracle.wasserstein == 0.0
    # The user-mean baseline on the same pairs: computed by hand.
    means = dict(world.train.group_by("user_id").agg(pl.col("rating").mean()).iter_rows())
    expected = np.sqrt(np.mean([(means[u] - r) ** 2 for u, _, r in pairs.iter_rows()]))
    assert oracle.prediction.filter(pl.col("predictor") == "user_mean").get_column("rmse")[0] == pytest.approx(expected)

    coin = rating_alignment(
        brain_ratings(CoinFlipBrain(), world.sessions, pairs, world.catalogue, seed=1), world.train, n_bootstrap=200
    )
    real = pairs.get_column("rating").to_numpy()
    uniform_mse = np.mean([np.mean((np.arange(1, 6) - r) ** 2) for r in real])
    row = coin.prediction.filter(pl.col("predictor") == "brain").row(0, named=True)
    assert row["rmse"] == pytest.approx(np.sqrt(uniform_mse), abs=0.08)
    assert row["rmse_ci_low"] < np.sqrt(uniform_mse) < row["rmse_ci_high"]
    assert coin.distribution.get_column("simulated_share").to_list() == pytest.approx([0.2] * 5, abs=0.03)


def test_an_offline_arm_is_mapped_to_ratings_on_validation_and_the_best_is_named(world):
    from ops.studies.alignment.rating import offline_rating_predictors

    truth = {(u, m): r for u, m, r in world.test.select("user_id", "item_id", "rating").iter_rows()}
    knows = SimpleNamespace(score=lambda u, m: np.array([truth.get((a, b), 3) for a, b in zip(u, m)], dtype=float))
    blind = SimpleNamespace(score=lambda u, m: np.zeros(len(u)))
    predictors = offline_rating_predictors({"knows": knows, "blind": blind}, world.test)
    pairs = world.test.select("user_id", "item_id", "rating").with_columns(pl.col("rating").alias("simulated"))
    result = rating_alignment(pairs, world.train, predictors, n_bootstrap=100)
    rows = {r["predictor"]: r for r in result.prediction.iter_rows(named=True)}
    assert rows["knows"]["kind"] == "best offline arm" and rows["knows"]["rmse"] == pytest.approx(0.0, abs=1e-9)
    assert rows["blind"]["kind"] == "offline arm" and rows["blind"]["rmse"] == pytest.approx(
        float(np.std(world.test["rating"].to_numpy())), rel=1e-6
    )


def test_an_arm_that_scores_unplaceable_pairs_at_minus_infinity_predicts_them_its_lowest_rating(world):
    from ops.studies.alignment.rating import offline_rating_predictors

    truth = {(u, m): r for u, m, r in world.test.select("user_id", "item_id", "rating").iter_rows()}
    # Like the plug-in's factor models: pairs it cannot place (here the 1-star ones) score -inf.
    knows = SimpleNamespace(
        score=lambda u, m: np.array([truth.get((a, b), 3) for a, b in zip(u, m)], dtype=float)
        + np.array([-np.inf if truth.get((a, b)) == 1 else 0.0 for a, b in zip(u, m)])
    )
    predict = offline_rating_predictors({"knows": knows}, world.test)["knows"]
    users, movies = world.test.get_column("user_id").to_numpy(), world.test.get_column("item_id").to_numpy()
    predicted = predict(users, movies)
    assert np.isfinite(predicted).all()
    assert np.allclose(predicted, world.test.get_column("rating").to_numpy())


def test_rating_distribution_shares_and_wasserstein_by_hand():
    table, distance = rating_distribution(np.array([4, 4, 4, 4]), np.array([3, 4, 5, 4]))
    assert table.get_column("real_share").to_list() == [0.0, 0.0, 0.25, 0.5, 0.25]
    assert table.get_column("simulated_share").to_list() == [0.0, 0.0, 0.0, 1.0, 0.0]
    assert distance == pytest.approx(0.5)  # a quarter of the mass moves one star each way


# -- list quality --------------------------------------------------------------------------------


def test_list_quality_rises_for_an_oracle_and_stays_flat_for_a_coin(world):
    lists = _lists(world, (9, 4, 1), liked_only=True, stream="q")
    liked = {(u, m) for u, m in world.test.filter(pl.col("rating") >= 4).select("user_id", "item_id").iter_rows()}
    events = simulate_lists(OracleBrain(liked), world.sessions, lists, world.catalogue)
    oracle = list_quality(events, lists, window=world.test, n_bootstrap=200)
    assert oracle.rises["ctr"] and oracle.rises["cvr"]
    elasticity = {(r["metric"], r["side"]): r["elasticity"] for r in oracle.elasticity.iter_rows(named=True)}
    assert elasticity[("rated_share", "real")] == pytest.approx(1.0)
    assert elasticity[("cvr", "simulated")] > 0.7

    coin = list_quality(simulate_lists(CoinFlipBrain(), world.sessions, lists, world.catalogue), lists, n_bootstrap=200)
    flat = coin.elasticity.filter(pl.col("metric") == "ctr").row(0, named=True)
    assert flat["ci_low"] < 0 < flat["ci_high"] and abs(flat["elasticity"]) < 0.1
    assert not coin.rises["ctr"]
    # The spread, a trust figure: CTR on the 1:1 lists minus on the 1:9 lists, paired over agents.
    sees, blind = oracle.spread(), coin.spread()
    assert (sees["best"], sees["worst"], sees["label"]) == ("1:1", "1:9", "CTR")
    assert sees["ci_low"] > 0.1 and sees["agents"] == oracle.readout.per_agent.get_column("user_id").n_unique()
    assert blind["ci_low"] < 0 < blind["ci_high"]
    assert list_quality_warning(oracle, floor=0.02) is None
    # A floor inside the spread's interval: the protocol cannot tell whether the brain reaches it.
    inside = list_quality_seen(oracle, None, floor=sees["difference"] + 0.01)
    assert inside["warning"] is None and inside["spread"]["status"] == "underpowered" and inside["sees"] is None
    assert list_quality_warning(oracle, floor=sees["ci_high"] + 0.01).endswith(
        "floor ($SIMAB_LIST_QUALITY_SPREAD_FLOOR); a difference between arms in this run says little about real users"
    )
    # The coin: a flat response whose interval lies below the floor — blind, warned ...
    warned = list_quality_warning(coin, floor=0.02)
    assert warned.startswith("the brain cannot tell lists apart: its CTR on") and "its interval holding 0" in warned
    # ... where a smaller floor inside its interval could not be told from 0 by so few agents.
    few = list_quality_seen(coin, None, floor=blind["ci_high"] / 2)
    assert few["warning"] is None and few["line"].startswith(
        f"the agents see list quality: not established, the list-quality spread is underpowered ({blind['agents']} agents"
    )
    assert list_quality_warning({"not_measured": "no agent"}, 0.02) is None


def test_the_yardstick_keeps_the_papers_lists_where_users_like_enough_and_shortens_them_where_they_do_not():
    def liked(counts):  # counts[u]: liked held-out items of user u
        return pl.DataFrame(
            [(u, 1000 * u + i) for u, n in enumerate(counts) for i in range(n)],
            schema={"user_id": pl.Int64, "item_id": pl.Int64},
            orient="row",
        )

    # MovieLens-like: many users with 10+ liked items -> the papers' 20 items at 1:9, 1:4, 1:1.
    rich = choose_ladder(liked([12] * 60 + [2] * 100), min_agents=50)
    assert (rich.list_length, rich.ratios, rich.agents, rich.need) == (20, (9, 4, 1), 60, 10)
    # Steam-like: nobody likes 10 and few like 5; 3 liked items fill lists of 6 at 1:5, 1:2, 1:1.
    sparse = choose_ladder(liked([3] * 70 + [1] * 500 + [5] * 10), min_agents=50)
    assert (sparse.list_length, sparse.ratios, sparse.agents, sparse.need) == (6, (5, 2, 1), 80, 3)
    # Fewer than min_agents anywhere: the shape most users can fill; the longest among equals.
    few = choose_ladder(liked([2] * 8 + [1] * 30), min_agents=50)
    assert (few.list_length, few.ratios, few.agents) == (4, (3, 1), 8)
    assert choose_ladder(liked([1] * 30), min_agents=50) is None
    # Only the given users count.
    assert choose_ladder(liked([12] * 60), users=range(5), min_agents=5).agents == 5


def test_list_quality_on_a_short_yardstick_reads_against_its_poorest_lists(world):
    lists = mixed_lists(
        world.test.filter(pl.col("rating") >= 4),
        world.known,
        np.arange(1, N_MOVIES + 1),
        (5, 2, 1),
        6,
        0,
        world.users,
        "short",
        full_lists_only=True,
    )
    assert lists.group_by("ratio", "user_id").len().get_column("len").unique().to_list() == [6]
    liked = {(u, m) for u, m in world.test.filter(pl.col("rating") >= 4).select("user_id", "item_id").iter_rows()}
    oracle = list_quality(simulate_lists(OracleBrain(liked), world.sessions, lists, world.catalogue), lists, world.test)
    assert oracle.ratios == ["1:5", "1:2", "1:1"] and oracle.readout.control == "1:5"
    assert oracle.shares["1:1"] == pytest.approx(0.5) and oracle.rises["ctr"] and oracle.rises["cvr"]
    assert oracle.table().get_column("ratio").to_list() == ["1:5", "1:2", "1:1"]


# -- social traits -------------------------------------------------------------------------------

TRAITS = ("activity", "conformity", "diversity")


def test_social_traits_find_a_planted_rise_and_call_a_flat_simulation_a_tie():
    tiers = pl.DataFrame(
        {
            "user_id": range(1, 91),
            "activity": ["low", "medium", "high"] * 30,
            "conformity": ["low", "medium", "high"] * 30,
            "diversity": ["low", "medium", "high"] * 30,
        }
    )
    level = {"low": 1.0, "medium": 2.0, "high": 3.0}
    real = tiers.select(
        "user_id",
        pl.col("activity").replace_strict(level, return_dtype=pl.Float64).alias("interactions"),
        (4 - pl.col("conformity").replace_strict(level, return_dtype=pl.Float64)).alias("rating_gap"),
        pl.col("diversity").replace_strict(level, return_dtype=pl.Float64).alias("genres"),
        pl.lit(None, dtype=pl.Float64).alias("clicks"),
    )
    rng = np.random.default_rng(0)
    simulated = real.with_columns(pl.Series("genres", rng.normal(size=90)), pl.Series("clicks", rng.normal(size=90)))
    table = social_traits_alignment(tiers, real, simulated, n_bootstrap=200)
    rho = {
        (r["trait"], r["side"]): r["rho"] for r in table.filter(pl.col("behaviour") != "clicks").iter_rows(named=True)
    }
    assert rho[("activity", "real")] == pytest.approx(1.0) and rho[("conformity", "real")] == pytest.approx(-1.0)
    verdict = dict(verdicts(table).select("trait", "verdict").filter(pl.col("trait") != "activity").iter_rows())
    assert verdict == {"conformity": "agree", "diversity": "simulated tie"}
    low_high = table.filter(
        (pl.col("trait") == "activity") & (pl.col("behaviour") == "interactions") & (pl.col("side") == "real")
    ).row(0, named=True)
    assert (low_high["mean_low"], low_high["mean_medium"], low_high["mean_high"]) == (1.0, 2.0, 3.0)


def test_per_session_rows_tell_how_often_from_how_much():
    """Planted: a more active user comes more often with shorter visits (ML-1M's shape);
    the simulation gives more sessions of the same length.  The window rows cannot tell
    the two apart; the per-session rows can."""
    tiers = pl.DataFrame({"user_id": range(1, 91), **{t: ["low", "medium", "high"] * 30 for t in TRAITS}})
    level = tiers.get_column("activity").replace_strict({"low": 1.0, "medium": 2.0, "high": 3.0}).to_numpy()
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.01, 90)
    window = pl.DataFrame(
        {"user_id": range(1, 91), "interactions": 12.0 + noise, "rating_gap": noise, "genres": noise, "clicks": noise}
    )
    real_sessions = pl.DataFrame(
        {"user_id": range(1, 91), "interactions": 12.0 / level + noise, "sessions": level, "genres": 3.0 + noise}
    )
    sim_sessions = real_sessions.with_columns(pl.Series("interactions", 6.0 + noise))
    table = social_traits_alignment(
        tiers, window, window, n_bootstrap=200, real_sessions=real_sessions, simulated_sessions=sim_sessions
    )
    verdict = {(r["trait"], r["behaviour"]): r["verdict"] for r in verdicts(table).iter_rows(named=True)}
    assert verdict[("activity", "sessions")] == "agree"
    assert verdict[("activity", "interactions_per_session")] == "simulated tie"
    assert verdict[("diversity", "genres_per_session")] == "real tie"
    assert table.height == 8 + 6  # the four window rows and three per-session rows, real and simulated


def test_behaviours_are_counted_from_events_and_held_out_ratings():
    movies = pl.DataFrame({"item_id": [1, 2, 3], "genres": [["Drama"], ["Comedy", "Drama"], ["Horror"]]})
    movie_mean = pl.DataFrame({"item_id": [1, 2, 3], "mean": [3.0, 4.0, 2.0]})
    held = pl.DataFrame({"user_id": [7, 7, 8], "item_id": [1, 3, 2], "rating": [5, 2, 4]})
    real = real_behaviour(held, movie_mean, movies)
    assert real.row(0, named=True) | {} == {
        "user_id": 7,
        "interactions": 2.0,
        "clicks": None,
        "rating_gap": 2.0,
        "genres": 2.0,
    }
    events = pl.DataFrame(
        {
            "arm": ["a", "a", "a", "b", "b"],
            "user_id": [7] * 5,
            "action": [CLICK_MOVIE, WATCH_AND_RATE, EXIT, CLICK_MOVIE, EXIT],
            "item_id": [2, 2, None, 1, None],
            "rating": [None, 5, None, None, None],
        }
    )
    sim = simulated_behaviour(events, movie_mean, movies).row(0, named=True)
    # arm a: 2 interactions, 1 click, gap (5 - 4)^2, 2 genres; arm b: 1, 1, no rating, 0 genres.
    assert sim == {"user_id": 7, "interactions": 1.5, "clicks": 1.0, "rating_gap": 1.0, "genres": 1.0}


def test_real_sessions_split_where_an_hour_passes_without_a_rating():
    movies = pl.DataFrame({"item_id": [1, 2, 3], "genres": [["Drama"], ["Comedy", "Drama"], ["Horror"]]})
    # User 7: two ratings a minute apart, then one two hours later; user 8: one rating.
    held = pl.DataFrame(
        {"user_id": [7, 7, 7, 8], "item_id": [3, 1, 2, 2], "rating": [5, 2, 4, 3], "timestamp": [7260, 0, 60, 50]}
    )
    got = real_session_behaviour(held, movies, gap_s=3600).rows(named=True)
    # 7: sessions {1, 2} (2 ratings, genres Drama + Comedy) and {3} (1 rating, Horror).
    assert got == [
        {"user_id": 7, "interactions": 1.5, "sessions": 2.0, "genres": 1.5},
        {"user_id": 8, "interactions": 1.0, "sessions": 1.0, "genres": 2.0},
    ]
    # A gap longer than every pause: one session holding the window, as real_behaviour counts it.
    whole = real_session_behaviour(held, movies, gap_s=10_000).row(0, named=True)
    assert (whole["interactions"], whole["sessions"], whole["genres"]) == (3.0, 1.0, 3.0)
    with pytest.raises(ValueError, match="timestamp"):
        real_session_behaviour(held.drop("timestamp"), movies)


def test_tiers_come_from_the_profiles():
    profiles = {2: SimpleNamespace(activity_tier="high", conformity_tier="low", diversity_tier="medium")}
    assert tiers_frame(profiles).row(0) == (2, "high", "low", "medium")


# -- leakage and the fidelity warning ------------------------------------------------------------


def test_the_leakage_guard_refuses_a_window_the_brain_was_fitted_on(world):
    check_held_out(world.test, {"train": world.train}, "taste", fit_last_timestamp=int(world.train["timestamp"].max()))
    with pytest.raises(LeakageError, match="train window"):
        check_held_out(world.train.head(5), {"train": world.train}, "taste")
    with pytest.raises(LeakageError, match="fitting reached the held-out window"):
        check_held_out(
            world.test,
            {"train": world.train},
            "rating prediction",
            fit_last_timestamp=int(world.test["timestamp"].max()),
        )


def test_the_fidelity_warning_names_a_low_tau_and_every_disagreeing_pair():
    fid = pl.DataFrame({"simulated": ["ctr"], "offline": ["ndcg_at_k"], "kendall_tau": [0.33]})
    pairs = pl.DataFrame({"arm_a": ["fm", "fm"], "arm_b": ["pop", "random"], "verdict": ["disagree", "agree"]})
    warning = fidelity_warning(fid, pairs, tau_floor=0.6)
    assert not warning.passed and warning.tau == 0.33 and warning.disagreements == ["fm vs pop"]
    assert "0.330 is below the floor 0.60" in warning.description and "fm vs pop" in warning.description
    ok = fidelity_warning(
        fid.with_columns(pl.lit(1.0).alias("kendall_tau")),
        pairs.with_columns(pl.lit("agree").alias("verdict")),
        tau_floor=0.6,
    )
    assert ok.passed and "no pair of arms disagrees" in ok.description
    undefined = fidelity_warning(pl.DataFrame(), pl.DataFrame(), tau_floor=0.6)
    assert not undefined.passed and "undefined" in undefined.description


def test_the_fidelity_warning_counts_missed_pairs_as_ties_against_the_same_floor():
    fid = pl.DataFrame({"simulated": ["ctr"], "offline": ["ndcg_at_k"], "kendall_tau": [1.0]})
    verdicts = ["agree", "agree", "missed", "missed", "offline tie"]
    pairs = pl.DataFrame({"arm_a": list("abcde"), "arm_b": ["z"] * 5, "verdict": verdicts})
    # τ over the means is perfect, but of 4 pairs separated offline the simulation saw 2: (2 − 0) / 4.
    warning = fidelity_warning(fid, pairs, tau_floor=0.6)
    assert not warning.passed and warning.pair_tau == 0.5 and warning.misses == ["c vs z", "d vs z"]
    assert "the pairs' τ (a missed pair counted as a tie) = 0.500 is below the floor 0.60" in warning.description
    assert "missed: c vs z, d vs z" in warning.description
    # Three of four seen: 0.75 passes, the miss still named.
    passing = fidelity_warning(fid, pairs.with_columns(pl.Series("verdict", ["agree"] * 3 + verdicts[3:])), 0.6)
    assert passing.passed and passing.pair_tau == 0.75 and "(1 missed)" in passing.description
    # Nothing separated offline: the pairs' τ is undefined and does not warn by itself.
    ties = fidelity_warning(fid, pairs.with_columns(pl.lit("offline tie").alias("verdict")), 0.6)
    assert ties.passed and ties.pair_tau is None

"""The papers' per-item taste protocol on a planted-taste data set: a
scorer that knows the plant scores F1 = 1 with a threshold fitted on the validation window,
a coin flip scores chance; the threshold never reads the test window; the LLM brain's
structured list answer through a fake endpoint."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from ops.agents.session import AgentSession
from ops.simulation.brains.llm.answers import AnswerError
from ops.studies.alignment.mixed_lists import history_holdout, mixed_lists
from ops.studies.alignment.per_item import (
    check_list_answer,
    fit_taste_thresholds,
    list_answer_schema,
    taste_per_item,
    threshold_answerer,
    thresholds_on_lists,
)
from ops.studies.alignment.taste import PER_ITEM
from ops.studies.alignment.windows import LeakageError, check_threshold_window

N_MOVIES, N_USERS = 300, 120
SCHEMA = {"user_id": pl.Int64, "item_id": pl.Int64, "rating": pl.Int64, "timestamp": pl.Int64}


@pytest.fixture(scope="module")
def world():
    """Every user's taste is a planted set of 30 movies, all of which it rates: 15 in the
    train window, 8 in validation, 7 in test (so a never-rated movie is never to its taste)."""
    rng = np.random.default_rng(11)
    windows: dict[str, list] = {"train": [], "valid": [], "test": []}
    planted = {}
    for u in range(1, N_USERS + 1):
        movies = rng.choice(np.arange(1, N_MOVIES + 1), 30, replace=False)
        planted[u] = set(movies.tolist())
        for name, chunk, t0 in (
            ("train", movies[:15], 1000),
            ("valid", movies[15:23], 3000),
            ("test", movies[23:], 5000),
        ):
            windows[name] += [(u, int(m), 4, t0 + i) for i, m in enumerate(chunk)]
    frames = {k: pl.DataFrame(v, schema=SCHEMA, orient="row") for k, v in windows.items()}
    sessions = [AgentSession(u, SimpleNamespace(activity_tier="medium"), None, 0.0, 0.0) for u in range(1, N_USERS + 1)]
    known = pl.concat(list(frames.values())).select("user_id", "item_id")
    lists = mixed_lists(frames["test"], known, np.arange(1, N_MOVIES + 1), (1, 3, 9), 20, 0, None, "per item")
    return SimpleNamespace(**frames, planted=planted, sessions=sessions, lists=lists)


def _knows_the_plant(world, noise: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)

    def score(session, movies):
        return np.array([float(m in world.planted[session.user_id]) for m in movies]) + noise * rng.random(len(movies))

    return score


def _thresholds(world, score, held_out=None):
    return fit_taste_thresholds(
        score,
        world.sessions,
        world.valid,
        {"train": world.train},
        world.test if held_out is None else held_out,
        np.arange(1, N_MOVIES + 1),
        (1, 3, 9),
        seed=0,
    )


def test_a_scorer_that_knows_the_plant_scores_f1_1_with_a_validation_threshold(world):
    score = _knows_the_plant(world, noise=0.5)
    thresholds = _thresholds(world, score)
    assert set(thresholds) == {"1:1", "1:3", "1:9"}
    # Planted movies score 1 to 1.5, the rest 0 to 0.5: the cut falls above the rest.
    assert all(0.5 < t < 1.5 for t in thresholds.values()), thresholds
    result = taste_per_item(threshold_answerer(score, thresholds), world.sessions, world.lists, n_bootstrap=200)
    assert result.protocol == PER_ITEM
    f1 = result.summary.filter(pl.col("metric") == "f1")
    assert f1.get_column("mean").to_list() == [1.0, 1.0, 1.0]
    # Every item of every list was answered, not only what a session reached.
    assert result.per_agent.get_column("items").sum() == world.lists.height


def test_a_coin_flip_scores_chance_at_every_ratio(world):
    rng = np.random.default_rng(3)

    def coin(session, movies, ratio):
        return {m for m in movies if rng.random() < 0.5}

    result = taste_per_item(coin, world.sessions, world.lists, n_bootstrap=200)
    pooled = {(r["ratio"], r["metric"]): r["pooled"] for r in result.summary.iter_rows(named=True)}
    for ratio, prevalence in (("1:1", 0.5), ("1:3", 0.25), ("1:9", 0.1)):
        assert pooled[(ratio, "recall")] == pytest.approx(0.5, abs=0.05)
        assert pooled[(ratio, "f1")] == pytest.approx(2 * prevalence * 0.5 / (prevalence + 0.5), abs=0.05)


def test_a_scorer_blind_to_the_plant_gets_a_threshold_but_no_skill(world):
    rng = np.random.default_rng(5)
    thresholds = _thresholds(world, lambda s, movies: rng.random(len(movies)))
    blind = np.random.default_rng(6)
    result = taste_per_item(
        threshold_answerer(lambda s, movies: blind.random(len(movies)), thresholds),
        world.sessions,
        world.lists,
        n_bootstrap=200,
    )
    f1 = {r["ratio"]: r["mean"] for r in result.summary.filter(pl.col("metric") == "f1").iter_rows(named=True)}
    # At best "pick everything" (F1 = 2p / (1 + p)); far below the oracle's 1.
    assert f1["1:9"] < 0.3 and f1["1:1"] < 0.75


def test_the_threshold_never_reads_the_test_window(world):
    score = _knows_the_plant(world, noise=0.5)
    # The test window's content does not move the thresholds: it is only guarded against.
    other = world.test.with_columns(pl.col("item_id") + 10_000, pl.col("rating") * 0 + 1)
    assert _thresholds(world, _knows_the_plant(world, 0.5, seed=4)) == _thresholds(
        world, _knows_the_plant(world, 0.5, seed=4), held_out=other
    )
    # A threshold fitted on the test window itself, or on a window reaching into it, is refused.
    with pytest.raises(LeakageError, match="threshold"):
        fit_taste_thresholds(
            score, world.sessions, world.test, {"train": world.train}, world.test, np.arange(1, N_MOVIES + 1), (1,)
        )
    late = world.valid.with_columns(pl.col("timestamp") + 4000)
    with pytest.raises(LeakageError, match="older"):
        check_threshold_window(late, world.test, "taste threshold")
    check_threshold_window(world.valid, world.test, "taste threshold")  # the chronological split passes


def test_the_papers_history_holdout_draws_disjoint_sets_and_keeps_the_profile(world):
    positives, tuning = history_holdout(world.train, [1, 2, 3, 99_999], n=3, seed=7)
    train = {(u, m) for u, m, *_ in world.train.iter_rows()}
    drawn_pos = set(positives.iter_rows())
    drawn_tune = set(tuning.iter_rows())
    assert drawn_pos and not drawn_pos & drawn_tune and (drawn_pos | drawn_tune) <= train
    # 15 train ratings each: a quarter is 3, so 3 + 3 drawn and 9 kept for the profile; a user
    # without ratings draws nothing.
    assert positives.group_by("user_id").len().sort("user_id").rows() == [(1, 3), (2, 3), (3, 3)]
    # Its own stream per user: asking for more users changes none of these three's draws.
    again, _ = history_holdout(world.train, [1, 2, 3, 4, 5], n=3, seed=7)
    assert drawn_pos <= set(again.iter_rows())
    other, _ = history_holdout(world.train, [1, 2, 3], n=3, seed=8)
    assert set(other.iter_rows()) != drawn_pos
    with pytest.raises(ValueError, match="n must be"):
        history_holdout(world.train, [1], n=0)


def test_thresholds_fitted_on_the_second_history_draw_score_the_first(world):
    # The bench's papers' protocol on the plant: thresholds from one draw, F1 on the other.
    positives, tuning = history_holdout(world.train, range(1, N_USERS + 1), n=3, seed=0)
    known = pl.concat([world.train, world.valid, world.test]).select("user_id", "item_id")
    movies = np.arange(1, N_MOVIES + 1)
    score = _knows_the_plant(world, noise=0.5)
    thresholds = thresholds_on_lists(
        score, world.sessions, mixed_lists(tuning, known, movies, (1, 9), 20, 0, None, "taste threshold")
    )
    assert set(thresholds) == {"1:1", "1:9"} and all(0.5 < t < 1.5 for t in thresholds.values())
    lists = mixed_lists(positives, known, movies, (1, 9), 20, 0, None, "taste")
    result = taste_per_item(threshold_answerer(score, thresholds), world.sessions, lists, n_bootstrap=100)
    assert result.summary.filter(pl.col("metric") == "f1").get_column("mean").to_list() == [1.0, 1.0]


def test_the_llm_list_answer_is_checked_against_the_list():
    movies = [5, 9, 12]
    assert check_list_answer('{"watch": [9, 12]}', movies) == {9, 12}
    assert check_list_answer('```json\n{"watch": []}\n```', movies) == set()
    for bad, match in (
        ('{"watch": [7]}', "not in the list"),
        ("watch 9", "not JSON"),
        ('{"ids": [9]}', "object"),
        ('{"watch": [true]}', "not in"),
    ):
        with pytest.raises(AnswerError, match=match):
            check_list_answer(bad, movies)
    schema = list_answer_schema(movies)
    assert schema["properties"]["watch"]["items"]["enum"] == movies and schema["required"] == ["watch"]


def test_the_llm_brain_answers_every_item_in_one_structured_request(tmp_path, monkeypatch):
    from fakes.agents import llm_world
    from fakes.openai_server import FakeOpenAI, user_text
    from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
    from ops.studies.alignment.per_item import llm_answerer

    world = llm_world(tmp_path, n_agents=2)
    monkeypatch.setenv("SIMAB_TEST_LLM_KEY", "sk-test")
    uid = sorted(world["profiles"])[0]
    movies = list(world["lists"][uid][:6])
    liked = movies[1::2]
    fake = FakeOpenAI()
    fake.reply(json.dumps({"watch": [liked[0], 99999]}))  # an id outside the list: re-asked
    fake.reply(json.dumps({"watch": liked}))
    with fake.serve() as url:
        brain = LLMBrain(
            LLMBrainConfig(base_url=url, model="m", api_key_env="SIMAB_TEST_LLM_KEY", backoff_s=0.0, backoff_max_s=0.0),
            catalogue=world["catalogue"],
        )
        template = AgentSession(uid, world["profiles"][uid], world["memories"][uid], 0.0, 30.0)
        picked = llm_answerer(brain, world["catalogue"])(template, movies, "1:1")
        brain.close()
    assert picked == set(liked)
    assert len(fake.requests) == 2
    asked = user_text(fake.requests[0])
    # The whole list in one request, each item with its title and id.
    assert all(f"[{m}] {world['catalogue'][m].title}" in asked for m in movies)
    assert "99999" in user_text(fake.requests[1]) or "not in the list" in user_text(fake.requests[1])


def test_both_protocols_stand_side_by_side_named_in_the_result_and_the_report_section(world, tmp_path):
    from dataclasses import replace

    from ops.studies.alignment.taste import TasteDiscrimination
    from ops.studies.alignment.trust import trust_section

    score = _knows_the_plant(world, noise=0.5)
    thresholds = _thresholds(world, score)
    per_item = taste_per_item(threshold_answerer(score, thresholds), world.sessions, world.lists, n_bootstrap=100)
    rng = np.random.default_rng(1)
    sandbox = replace(
        taste_per_item(
            lambda s, movies, r: {m for m in movies if rng.random() < 0.3}, world.sessions, world.lists, n_bootstrap=100
        ),
        protocol="sandbox",
    )
    both = sandbox.with_per_item(per_item, thresholds)
    table = both.table()
    assert table.get_column("protocol").to_list() == ["sandbox"] * 3 + ["per item"] * 3
    assert table.filter(pl.col("protocol") == "per item").get_column("f1").str.starts_with("1.0").all()
    both.save(tmp_path / "taste")
    back = TasteDiscrimination.load(tmp_path / "taste")
    assert back.per_item.equals(per_item.summary) and back.thresholds == pytest.approx(thresholds)
    text = "\n".join(trust_section(taste=back))
    assert "*per item*" in text and "*sandbox*" in text and "validation window" in text


def test_the_papers_holdout_rebuilds_the_agents_without_both_draws_and_reports_a_third_row(world, tmp_path):
    from dataclasses import replace

    from ops.studies.alignment.per_item import papers_holdout_taste
    from ops.studies.alignment.taste import PAPERS_HOLDOUT, TasteDiscrimination
    from ops.studies.alignment.trust import trust_section

    known = pl.concat([world.train, world.valid, world.test]).select("user_id", "item_id")
    movies = np.arange(1, N_MOVIES + 1)
    seen = {}

    def rebuild(kept):
        seen["kept"] = kept
        return SimpleNamespace(
            profiles={s.user_id: None for s in world.sessions},
            sessions=lambda users=None: [s for s in world.sessions if users is None or s.user_id in set(users)],
        )

    def answerer_for(agents, kept, threshold_lists):
        seen["threshold_lists"] = threshold_lists
        score = _knows_the_plant(world, noise=0.5)
        cuts = thresholds_on_lists(score, agents.sessions(), threshold_lists)
        return threshold_answerer(score, cuts), cuts

    judged = list(range(1, 41))
    result, cuts = papers_holdout_taste(
        answerer_for, rebuild, world.train, judged, known, movies, held_out=3, ratios=(1, 9), n_bootstrap=100
    )
    positives, tuning = history_holdout(world.train, judged, 3, 0)
    kept = {(u, m) for u, m, *_ in seen["kept"].iter_rows()}
    # Neither draw reaches the rebuilt agents; everything else of the train window does.
    assert not kept & (set(positives.iter_rows()) | set(tuning.iter_rows()))
    assert len(kept) == world.train.height - positives.height - tuning.height
    # The thresholds are fitted on the second draw, the F1 scored on the first.
    tuned = seen["threshold_lists"].filter(pl.col("relevant")).select("user_id", "item_id")
    assert set(tuned.iter_rows()) <= set(tuning.iter_rows())
    assert result.protocol == PAPERS_HOLDOUT and set(result.per_agent.get_column("user_id").to_list()) == set(judged)
    assert result.summary.filter(pl.col("metric") == "f1").get_column("mean").to_list() == [1.0, 1.0]
    # Beside the other two protocols, saved and shown in the report's section.
    rng = np.random.default_rng(2)
    sandbox = replace(
        taste_per_item(
            lambda s, m, r: {x for x in m if rng.random() < 0.3}, world.sessions, world.lists, n_bootstrap=50
        ),
        protocol="sandbox",
    )
    three = sandbox.with_per_item(sandbox, None).with_holdout(result, cuts)
    three.save(tmp_path / "taste")
    back = TasteDiscrimination.load(tmp_path / "taste")
    assert back.holdout.equals(result.summary) and back.holdout_thresholds == pytest.approx(cuts)
    assert back.table().get_column("protocol").to_list()[-2:] == [PAPERS_HOLDOUT] * 2
    assert "*per item, papers' hold-out*" in "\n".join(trust_section(taste=back))


def test_the_embedded_answer_reads_an_item_against_its_list():
    from ops.studies.alignment.per_item import embedded_scorer

    class Shifted:
        """Log-probabilities that rank alike for every agent, at a level that differs by agent."""

        def click_and_watch_log_probability(self, session, movies):
            return np.array([-0.1 * m for m in movies]) - 3.0 * session.user_id

    movies = [1, 2, 3, 4]
    relative, absolute = embedded_scorer(Shifted()), embedded_scorer(Shifted(), relative=False)
    a, b = (AgentSession(u, SimpleNamespace(activity_tier="medium"), None, 0.0, 0.0) for u in (1, 5))
    np.testing.assert_allclose(relative(a, movies), relative(b, movies))
    assert relative(a, movies).mean() == pytest.approx(0.0) and relative(a, movies).std() == pytest.approx(1.0)
    assert absolute(a, movies)[0] - absolute(b, movies)[0] == pytest.approx(12.0)
    assert relative(a, [7]).tolist() == [0.0]

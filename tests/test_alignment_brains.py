"""The alignment protocols with the real brains: the embedded brain on the synthetic
generator's planted tastes (with its list-response calibration), the LLM brain against the
fake OpenAI-compatible endpoint with scripted answers, and the leakage guards — no
protocol scores a brain whose fitting reached its held-out window, and the calibration
never reads the test window."""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl
import pytest

from fakes.agents import HashTextEmbedder, synthetic_agents
from fakes.openai_server import FakeOpenAI, answer, user_text
from ops.simulation.observation import EXIT, NEXT_PAGE, WATCH_AND_RATE
from ops.studies.alignment.calibration import (
    CalibrationConfig,
    calibrate_if_possible,
    calibrate_list_response,
    list_response_status,
)
from ops.studies.alignment.list_quality import list_quality, simulate_lists
from ops.studies.alignment.mixed_lists import mixed_lists
from ops.studies.alignment.rating import brain_ratings, rating_alignment
from ops.studies.alignment.taste import taste_discrimination

KEY_ENV = "SIMAB_TEST_ALIGNMENT_KEY"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """The synthetic generator (planted tastes), split 7:2:1, agents and the embedded brain
    fitted on train + validation."""
    return _synthetic_world(tmp_path_factory.mktemp("alignment"), n_users=300, n_movies=400)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The same, small: for the guards, which need a fitted brain, not a good one."""
    return _synthetic_world(tmp_path_factory.mktemp("alignment-tiny"), n_users=80, n_movies=150)


def _synthetic_world(root, n_users: int, n_movies: int) -> dict:
    from ops.data.synthetic import SyntheticConfig
    from ops.simulation.brains.embedded import fit_embedded_brain
    from ops.simulation.catalogue import Catalogue

    config = SyntheticConfig(n_users=n_users, n_movies=n_movies, mean_ratings_per_user=70, seed=5)
    world = synthetic_agents(root, config)
    data, split, agents, frame = world["data"], world["split"], world["agents"], world["frame"]
    model = fit_embedded_brain(agents, split.train, split.valid, data.users)
    return dict(data=data, split=split, agents=agents, model=model, catalogue=Catalogue.from_frame(frame), frame=frame)


@pytest.mark.slow
def test_on_planted_tastes_the_calibrated_brain_discriminates_and_responds_to_list_quality(synthetic):
    split, agents, catalogue = synthetic["split"], synthetic["agents"], synthetic["catalogue"]
    calibrated = calibrate_list_response(
        synthetic["model"],
        agents.sessions(),
        split.train,
        split.valid,
        catalogue,
        CalibrationConfig(n_agents=120, scales=(1.0, 2.0, 4.0, 8.0)),
    )
    response = calibrated.params.list_response
    # The yardstick: real users rate 5x the items from a list half relevant as from one a
    # tenth relevant (elasticity 1); calibration brings the brain closer to that.
    assert response.real_elasticity == pytest.approx(1.0)
    assert response.elasticity_after >= response.elasticity_before and calibrated.params.click_scale >= 1.0
    assert abs(response.elasticity_after - 1.0) <= abs(response.elasticity_before - 1.0)

    users = sorted(set(split.test.get_column("user_id").to_list()) & set(agents.profiles))
    known = pl.concat([f.select("user_id", "item_id") for f in (split.train, split.valid, split.test)])
    lists = mixed_lists(split.test, known, synthetic["frame"].get_column("item_id"), (1, 9), 20, 0, users, "taste")
    taste = taste_discrimination(calibrated.brain(), agents.sessions(users), lists, catalogue, n_bootstrap=300)
    row = {(r["ratio"], r["metric"]): r for r in taste.summary.iter_rows(named=True)}
    f1, recall = row[("1:1", "f1")], row[("1:1", "recall")]
    # Chance at the same pick rate: precision 1/2, recall r, F1 = r / (r + 1/2).
    chance = recall["mean"] / (recall["mean"] + 0.5)
    assert f1["ci_low"] > chance + 0.05, (f1, chance)
    assert row[("1:1", "precision")]["ci_low"] > 0.6

    liked = split.test.filter(pl.col("rating") >= 4)
    quality = mixed_lists(
        liked,
        known,
        synthetic["frame"].get_column("item_id"),
        (9, 4, 1),
        20,
        0,
        users,
        "quality",
        full_lists_only=True,
    )
    result = list_quality(
        simulate_lists(calibrated.brain(), agents.sessions(users), quality, catalogue),
        quality,
        window=split.test,
        n_bootstrap=300,
    )
    assert result.rises["ctr"] and result.rises["cvr"], result.readout.arms


@pytest.mark.slow
def test_the_calibration_reads_neither_the_test_window_nor_more_than_it_is_given(tiny):
    """Fitting and calibration see train + validation only: the same data with another test
    window gives the same brain, to the bit."""
    from ops.agents.build import AgentsConfig, build_agents
    from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder
    from ops.data.split import chronological_split
    from ops.simulation.brains.embedded import fit_embedded_brain

    synthetic = tiny
    data, split = synthetic["data"], synthetic["split"]
    # Scramble the test window's ratings (same pairs, same times, so the cut falls at the
    # same rows) and split again.
    test_rows = data.ratings.join(split.test.select("user_id", "item_id"), on=["user_id", "item_id"], how="semi")
    scrambled = test_rows.with_columns(pl.Series("rating", np.random.default_rng(9).integers(1, 6, test_rows.height)))
    other = chronological_split(
        pl.concat(
            [
                data.ratings.join(split.test.select("user_id", "item_id"), on=["user_id", "item_id"], how="anti"),
                scrambled,
            ]
        )
    )
    assert other.train.equals(split.train) and other.valid.equals(split.valid) and not other.test.equals(split.test)
    config = CalibrationConfig(n_agents=40, scales=(1.0, 4.0))

    def brain(s):
        agents = build_agents(
            s.train,
            data.users,
            synthetic["frame"],
            AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
            HashTextEmbedder(),
            PaletteLayoutPosterEmbedder(),
            None,
        )
        model = fit_embedded_brain(agents, s.train, s.valid, data.users)
        return calibrate_list_response(
            model, agents.sessions(), s.train, s.valid, synthetic["catalogue"], config
        ).params

    first, second = brain(split), brain(other)
    assert first.model_dump() == second.model_dump()
    assert first.fit_last_timestamp == max(split.train["timestamp"].max(), split.valid["timestamp"].max())
    # ...and the yardstick's positives are validation-window ratings, never test ones.
    from ops.studies.alignment.calibration import validation_lists

    lists = validation_lists(synthetic["model"], synthetic["agents"].sessions(), split.train, split.valid, config)
    positives = lists.filter(pl.col("relevant")).select("user_id", "item_id")
    assert positives.height and positives.join(split.valid, on=["user_id", "item_id"], how="anti").is_empty()
    negatives = lists.filter(~pl.col("relevant")).select("user_id", "item_id")
    known = pl.concat([split.train, split.valid]).select("user_id", "item_id")
    assert negatives.join(known, on=["user_id", "item_id"], how="semi").is_empty()


def test_on_a_sparse_validation_window_the_calibration_runs_on_shorter_lists_and_tries_uniform_negatives(tiny):
    """No user likes 10 validation items (the papers' 1:1 list of 20 needs them): the
    yardstick shortens to lists of 6 at 1:5, 1:2, 1:1 instead of leaving the click decision
    uncalibrated, and the click model refitted on uniform negatives is tried beside the
    fitted one, the kept one recorded in the record and in the configuration."""
    split, agents = tiny["split"], tiny["agents"]
    liked = split.valid.filter(pl.col("rating") >= 4)
    # At most 3 liked validation items per user (the rest of the window as it was).
    kept = liked.with_columns(pl.int_range(pl.len()).over("user_id").alias("i")).filter(pl.col("i") < 3).drop("i")
    sparse = pl.concat([split.valid.filter(pl.col("rating") < 4), kept]).sort("timestamp", "user_id", "item_id")
    assert sparse.filter(pl.col("rating") >= 4).group_by("user_id").len().get_column("len").max() == 3
    config = CalibrationConfig(n_agents=40, scales=(1.0, 4.0), min_agents=10, n_bootstrap=50, progress=False)
    calibrated = calibrate_list_response(
        tiny["model"], agents.sessions(), split.train, sparse, tiny["catalogue"], config
    )
    response = calibrated.params.list_response
    assert (response.list_length, response.ratios) == (6, [5, 2, 1]) and response.agents >= 10
    assert {g["popular_negative_share"] for g in response.grid} == {0.5, 0.0}
    assert response.popular_negative_share in (0.5, 0.0)
    assert calibrated.config.popular_negative_share == response.popular_negative_share
    # Only the click model may change: the like and rating models are the fitted ones.
    assert (
        calibrated.params.like == tiny["model"].params.like and calibrated.params.rating == tiny["model"].params.rating
    )
    status = list_response_status(calibrated.params)
    assert status["calibrated"] and status["list_length"] == 6


def test_a_lower_click_level_is_solved_on_the_anchor_lists_and_kept_only_when_it_responds_better(tiny):
    """Each level of the grid pivots the click decision so that the anchor lists' mean
    first-look click probability is that share of the fitted model's; the kept cell is the
    first, in grid order (fitted level first), within `tolerance` of the best response."""
    from ops.studies.alignment.calibration import _anchor_logits, _sigmoid, validation_lists, yardstick

    split, agents = tiny["split"], tiny["agents"]
    config = CalibrationConfig(
        n_agents=40, scales=(1.0, 4.0), levels=(1.0, 0.25), negative_shares=(), n_bootstrap=50, progress=False
    )
    model = tiny["model"]
    calibrated = calibrate_list_response(model, agents.sessions(), split.train, split.valid, tiny["catalogue"], config)
    response = calibrated.params.list_response
    assert [(g["level"], g["scale"]) for g in response.grid] == [(1.0, 1.0), (1.0, 4.0), (0.25, 1.0), (0.25, 4.0)]
    ladder = yardstick(model, agents.sessions(), split.valid, config)
    lists = validation_lists(model, agents.sessions(), split.train, split.valid, config, ladder)
    users = set(lists.get_column("user_id").to_list())
    sessions = [s for s in agents.sessions() if s.user_id in users]
    anchor = "1:4" if 4 in ladder.ratios else f"1:{ladder.ratios[len(ladder.ratios) // 2]}"
    z = _anchor_logits(
        model, model.params.model_copy(update={"click_scale": 1.0, "click_shift": 0.0}), sessions, lists, anchor
    )
    fitted = _sigmoid(z).mean()
    for g in response.grid:
        assert _sigmoid(g["scale"] * z + g["shift"]).mean() == pytest.approx(g["level"] * fitted, rel=1e-6)
    gaps = [abs(g["elasticity_cvr"] - g["real"]) for g in response.grid]
    kept = next(i for i, gap in enumerate(gaps) if gap <= min(gaps) + config.tolerance)
    assert (response.level, response.click_scale) == (response.grid[kept]["level"], response.grid[kept]["scale"])
    assert list_response_status(calibrated.params)["level"] == response.level


def test_a_window_too_sparse_for_any_yardstick_leaves_the_brain_as_fitted_and_says_why(tiny):
    split, agents = tiny["split"], tiny["agents"]
    one_each = split.valid.filter(pl.col("rating") >= 4).unique("user_id", keep="first")
    model = calibrate_if_possible(
        tiny["model"], agents.sessions(), split.train, one_each, tiny["catalogue"], CalibrationConfig(progress=False)
    )
    assert model.params.list_response is None and model.params.click == tiny["model"].params.click
    status = list_response_status(model.params)
    assert not status["calibrated"] and "0 agents" in status["reason"] and "uncalibrated" in status["reason"]


@pytest.mark.parametrize(
    "asset_name", ["taste_alignment", "rating_alignment", "list_quality_alignment", "social_traits_alignment"]
)
def test_no_protocol_scores_a_brain_whose_fitting_reached_the_held_out_window(tiny, asset_name):
    """Each alignment asset refuses a brain fitted on train + validation + TEST, and a
    held-out window the brain was fitted on."""

    from assets.alignment import list_quality, rating, social, taste
    from assets.alignment.protocol import AlignmentConfig
    from resources.embeddings import EmbeddingsResource
    from resources.llm import LLMResource
    from resources.mlflow_tracking import MlflowTracking

    synthetic = tiny
    split, model = synthetic["split"], synthetic["model"]
    leaky = type(model)(
        model.params.model_copy(update={"fit_last_timestamp": int(split.test["timestamp"].max())}),
        model.context,
        model.config,
    )
    asset, config_class = {
        "taste_alignment": (taste.taste_alignment, taste.TasteAlignmentConfig),
        "rating_alignment": (rating.rating_alignment, rating.RatingAlignmentConfig),
        "list_quality_alignment": (list_quality.list_quality_alignment, AlignmentConfig),
        "social_traits_alignment": (social.social_traits_alignment, social.SocialTraitsConfig),
    }[asset_name]
    config = config_class(n_agents=5)
    inputs = dict(
        agents=synthetic["agents"],
        embedded_brain=leaky,
        train_ratings=split.train,
        valid_ratings=split.valid,
        test_ratings=split.test,
        catalogue=synthetic["frame"],
        users=synthetic["data"].users,
        recommender_arm={},
        simulation_events={"pop": _events(split)},
    )
    wanted = set(asset.op.ins) | set(asset.required_resource_keys)
    resources = dict(
        llm=LLMResource(),
        mlflow_tracking=MlflowTracking(tracking_uri="sqlite:///:memory:"),
        embeddings=EmbeddingsResource(),
    )
    kwargs = {k: v for k, v in {**inputs, **resources}.items() if k in wanted}
    # A protocol that degrades (taste, rating, list quality) stores a not-measured record with
    # the leak as its reason, so the report says why; the others stop.  None is ever scored.
    _refused(asset, config, kwargs, "reached the held-out window|fitted on")
    # The validation window as "held out": the brain was fitted on it.
    kwargs.update(test_ratings=split.valid, embedded_brain=model)
    _refused(asset, config, kwargs, "validation window")


def _refused(asset, config, kwargs: dict, pattern: str) -> None:
    from dagster import build_asset_context

    from ops.studies.alignment.windows import LeakageError

    degrades = hasattr(asset.op.compute_fn.decorated_fn, "__wrapped__")
    if not degrades:
        with pytest.raises(LeakageError, match=pattern):
            asset(build_asset_context(), config, **kwargs)
        return
    record = asset(build_asset_context(), config, **kwargs).value
    assert record["why"] == "failed" and re.search(rf"LeakageError: .*({pattern})", record["not_measured"])


def _events(split) -> pl.DataFrame:
    """One embedded-brain session of one event: enough for the social asset to know whose sessions they are."""
    from ops.schema import EVENTS

    row = {c: None for c in EVENTS} | {
        "arm": "pop",
        "user_id": int(split.train["user_id"][0]),
        "step": 1,
        "page_type": "home",
        "page_number": 1,
        "action": EXIT,
        "shown": [],
        "caught_eye": [],
        "forced": False,
        "reason": "x",
        "brain": "embedded",
    }
    return pl.DataFrame([row], schema=EVENTS)


# -- the LLM brain against the fake endpoint ----------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from fakes.agents import make_catalogue, make_users_and_ratings
    from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder, embed_catalogue
    from ops.agents.memory import build_long_term_memories
    from ops.agents.movie_facts import build_movie_facts
    from ops.agents.profile import build_profiles
    from ops.agents.session import AgentSession
    from ops.data.catalogue import build_catalogue
    from ops.simulation.catalogue import Catalogue

    root = tmp_path_factory.mktemp("alignment-llm")
    movies, meta = make_catalogue(root / "posters", n_per_genre=10)
    users, ratings, favourite = make_users_and_ratings(movies, n_users=3, per_user=6)
    frame = build_catalogue(movies, meta)
    vectors = embed_catalogue(
        frame, HashTextEmbedder(), PaletteLayoutPosterEmbedder(), None, EmbeddingConfig(show_progress=False)
    )
    facts = build_movie_facts(frame, ratings)
    profiles = build_profiles(ratings, users, frame, facts=facts, poster_looks={})
    memories = build_long_term_memories(ratings, vectors)
    sessions = [AgentSession(u, profiles[u], memories[u], 0.0, 0.0) for u in sorted(profiles)]
    genre = {m: g[0] for m, g in movies.select("item_id", "genres").iter_rows()}
    return dict(catalogue=Catalogue.from_frame(frame), sessions=sessions, genre=genre, ratings=ratings)


def _llm_brain(url: str, small):
    from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig

    # No response cache: each test scripts other answers to the same prompts.
    config = LLMBrainConfig(
        base_url=url, model="test-model", api_key_env=KEY_ENV, backoff_s=0.0, backoff_max_s=0.0, cache="off"
    )
    return LLMBrain(config, catalogue=small["catalogue"])


def _sci_fi_lists(small) -> pl.DataFrame:
    """Hand-made 1:1 and 1:3 lists: Sci-Fi movies are the positives, Romance the negatives."""
    sci = [m for m, g in sorted(small["genre"].items()) if g == "Sci-Fi"]
    rom = [m for m, g in sorted(small["genre"].items()) if g == "Romance"]
    rows = []
    for s in small["sessions"]:
        for ratio, pos, neg in (("1:1", sci[:4], rom[:4]), ("1:3", sci[4:6], rom[4:10])):
            items = [m for pair in zip(pos + [None] * len(neg), neg) for m in pair if m is not None]
            rows += [(ratio, s.user_id, i + 1, m, m in pos) for i, m in enumerate(items)]
    return pl.DataFrame(rows, schema=["ratio", "user_id", "position", "item_id", "relevant"], orient="row")


def test_llm_brain_scripted_to_pick_the_positives_scores_f1_1_and_picking_all_scores_the_prevalence(small, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    title_genre = {small["catalogue"][m].title: g for m, g in small["genre"].items()}

    def picker(everything: bool):
        def policy(body: dict) -> str:
            text = user_text(body)
            assert "You are on home page" in text and "Legal actions:" in text  # the sandbox's own page prompt
            cards = re.findall(r"^\[(\d+)\] (.*?) \| genres", text, re.M)
            caught = [int(m) for m, title in cards if everything or title_genre[title] == "Sci-Fi"]
            legal = re.search(r"Legal actions: (.*)\.", text).group(1).split(", ")
            action = NEXT_PAGE if NEXT_PAGE in legal else EXIT
            return answer(action=action, interest=3, caught_eye=caught)

        return policy

    lists = _sci_fi_lists(small)
    fake = FakeOpenAI(picker(False))
    with fake.serve() as url:
        exact = taste_discrimination(
            _llm_brain(url, small), small["sessions"], lists, small["catalogue"], n_bootstrap=50
        )
    assert exact.summary.filter(pl.col("metric") == "f1").get_column("mean").to_list() == [1.0, 1.0]
    pages = lists.group_by("ratio", "user_id").len().select(((pl.col("len") + 4) // 5).sum()).item()
    assert fake.calls == pages  # one request per home page, nothing else
    body = fake.requests[0]
    assert body["response_format"]["type"] == "json_schema" and "role-playing" in body["messages"][0]["content"]

    with FakeOpenAI(picker(True)).serve() as url:
        everything = taste_discrimination(
            _llm_brain(url, small), small["sessions"], lists, small["catalogue"], n_bootstrap=50
        )
    pooled = {(r["ratio"], r["metric"]): r["pooled"] for r in everything.summary.iter_rows(named=True)}
    assert (
        pooled[("1:1", "recall")] == 1.0
        and pooled[("1:1", "precision")] == 0.5
        and pooled[("1:3", "precision")] == 0.25
    )


def test_llm_brain_asked_to_rate_answers_on_the_detail_page_and_its_rmse_is_worked_by_hand(small, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")

    def rater(body: dict) -> str:
        text = user_text(body)
        assert "You are on the detail page" in text and "Legal actions: watch_and_rate." in text
        return answer(action=WATCH_AND_RATE, rating=4, interest=4, reason="solid")

    fake = FakeOpenAI(rater)
    pairs = small["ratings"].select("user_id", "item_id", "rating").head(12)
    train = small["ratings"].join(pairs, on=["user_id", "item_id"], how="anti")
    with fake.serve() as url:
        rated = brain_ratings(_llm_brain(url, small), small["sessions"], pairs, small["catalogue"])
    result = rating_alignment(rated, train, n_bootstrap=50)
    real = pairs.get_column("rating").to_numpy()
    brain = result.prediction.filter(pl.col("predictor") == "brain").row(0, named=True)
    assert brain["rmse"] == pytest.approx(np.sqrt(np.mean((4 - real) ** 2))) and brain["mae"] == pytest.approx(
        np.mean(np.abs(4 - real))
    )
    assert (
        fake.calls == 12 and result.distribution.filter(pl.col("star") == 4).get_column("simulated_share").item() == 1.0
    )
    # An answer that stays invalid after the re-ask is recorded as unanswered, not guessed ...
    four = pairs.head(4)
    bad = int(four.get_column("item_id")[0])
    invalid = json.dumps({"action": "back", "interest": 3, "caught_eye": [], "reason": "no"})

    def one_bad(body: dict) -> str:
        # The request's own schema names the movie on its page.
        shown = body["response_format"]["json_schema"]["schema"]["properties"]["caught_eye"]["items"]["enum"]
        return invalid if shown == [bad] else rater(body)

    expected = sum(m == bad for m in four.get_column("item_id"))
    assert expected <= 2
    with FakeOpenAI(one_bad).serve() as url:
        refused = rating_alignment(
            brain_ratings(_llm_brain(url, small), small["sessions"], four, small["catalogue"]), train, n_bootstrap=20
        )
    assert refused.unanswered == expected and refused.pairs.height == 4 - expected
    # ... and a protocol the brain mostly could not answer fails rather than reading out.
    from ops.studies.alignment.questioning import ProtocolFailed

    with FakeOpenAI(lambda body: invalid).serve() as url, pytest.raises(ProtocolFailed, match="2 of 2 questions"):
        brain_ratings(_llm_brain(url, small), small["sessions"], pairs.head(2), small["catalogue"])

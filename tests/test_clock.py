"""The simulation clock (ops.agents.clock): agents who stand at the start of the test period,
a catalogue seen from a clock (recency-weighted popularity with a half-life fitted on the
validation window, trend, age), memories recalled with recency and importance, and what an
agent already took not taken again."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fakes.agents import HashTextEmbedder, make_catalogue, make_users_and_ratings, split_by_time
from ops.agents.build import Agents, AgentsConfig, build_agents
from ops.agents.clock import DAY_S, Clock, catalogue_at, fit_half_life
from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder
from ops.agents.memory import RecallWeights
from ops.data.catalogue import build_catalogue
from ops.simulation.brains.embedded import FEATURES, EmbeddedBrainConfig, fit_embedded_brain
from ops.simulation.brains.embedded.brain import SEEN_LOGIT
from ops.simulation.brains.embedded.collab import pathsim_neighbours

QUIET = AgentsConfig(embedding=EmbeddingConfig(show_progress=False))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("clock")
    movies, meta = make_catalogue(root / "posters")
    users, ratings, _ = make_users_and_ratings(movies)
    train, valid = split_by_time(ratings)
    catalogue = build_catalogue(movies, meta)
    agents = build_agents(
        train, users, catalogue, QUIET, HashTextEmbedder(), PaletteLayoutPosterEmbedder(), root / "cache", valid=valid
    )
    return dict(train=train, valid=valid, users=users, catalogue=catalogue, agents=agents, root=root)


def _log(rows):
    return pl.DataFrame(rows, schema=["user_id", "item_id", "rating", "timestamp"], orient="row")


def test_the_half_life_is_the_one_under_which_train_predicts_the_validation_window():
    # Item 1 was popular long ago, item 2 lately; the validation window goes to item 2: a short
    # half-life predicts it best.  When the validation window goes to item 1 instead, no decay does.
    day = int(DAY_S)
    old = [(u, 1, 4, 0) for u in range(40)]
    recent = [(u, 2, 4, 300 * day + u) for u in range(10)]
    train = _log(old + recent)
    ids = np.array([1, 2, 3])
    rising = _log([(u, 2, 4, 301 * day + u) for u in range(30)])
    lasting = _log([(u, 1, 4, 301 * day + u) for u in range(30)])
    short, grid = fit_half_life(train, rising, ids)
    assert short < 30 and len(grid) > 3
    assert fit_half_life(train, lasting, ids)[0] == float("inf")
    seen = catalogue_at(train, ids, Clock.of(train, rising).fit, short)
    assert seen.decayed[1] > seen.decayed[0] and seen.count[0] > seen.count[1]
    assert seen.trend[1] > seen.trend[0] and seen.trend[2] == 0  # never seen: no trend
    assert seen.age_days[0] > seen.age_days[1] > 0 and seen.age_days[2] == 0


def test_agents_stand_at_the_simulation_clock_and_the_fit_clock_is_their_train_part(world, tmp_path):
    agents, train, valid = world["agents"], world["train"], world["valid"]
    assert agents.at_simulation_clock and agents.clock == Clock.of(train, valid)
    uid = int(valid.get_column("user_id")[0])
    memory = agents.memories[uid]
    n_train = train.filter(pl.col("user_id") == uid).height
    n_valid = valid.filter(pl.col("user_id") == uid).height
    assert len(memory) == n_train + n_valid and memory.clock == agents.clock.simulation
    assert set(memory.item_ids[n_train:].tolist()) == set(valid.filter(pl.col("user_id") == uid)["item_id"])
    at_fit = agents.at_fit_clock()
    assert len(at_fit.memories[uid]) == n_train and at_fit.memories[uid].clock == agents.clock.fit
    assert set(at_fit.memories[uid].item_ids.tolist()) == set(train.filter(pl.col("user_id") == uid)["item_id"])
    agents.save(tmp_path / "agents")
    again = Agents.load(tmp_path / "agents")
    assert again.clock == agents.clock and again.fit_lengths == agents.fit_lengths
    assert again.memories[uid].clock == agents.clock.simulation
    assert np.array_equal(again.at_fit_clock().memories[uid].rows, at_fit.memories[uid].rows)


def test_the_brain_is_fitted_at_the_fit_clock_and_decides_at_the_simulation_clock(world):
    agents, train, valid = world["agents"], world["train"], world["valid"]
    model = fit_embedded_brain(agents, train, valid, world["users"])
    # Features read from train at the fit clock, from train + validation at the simulation clock.
    fit_pop = model.fit_context.facts.popularity
    sim_pop = model.context.facts.popularity
    ids = model.context.facts.item_ids

    def counts(frame):
        return frame.group_by("item_id").len().join(pl.DataFrame({"item_id": ids}), on="item_id", how="right")

    assert fit_pop.tolist() == counts(train).sort("item_id").get_column("len").fill_null(0).to_list()
    assert (
        sim_pop.tolist() == counts(pl.concat([train, valid])).sort("item_id").get_column("len").fill_null(0).to_list()
    )
    assert model.fit_context.clock == agents.clock.fit and model.context.clock == agents.clock.simulation
    assert {"trend", "age"} <= set(model.params.click.features)
    # An agent does not click a card of what it already took (its validation movies now).
    uid = int(valid.get_column("user_id")[0])
    taken = valid.filter(pl.col("user_id") == uid).get_column("item_id").to_list()
    session = agents.sessions([uid])[0]
    assert np.all(model.brain().click_logits(session, taken) == SEEN_LOGIT)
    seeing = model.brain(model.config.model_copy(update={"skip_seen": False}))
    assert np.all(seeing.click_logits(session, taken) > SEEN_LOGIT)
    # Saved and loaded, both contexts come back, the fit one sharing the vectors.
    model.save(world["root"] / "brain")
    again = type(model).load(world["root"] / "brain")
    assert again.fit_context.clock == agents.clock.fit and again.fit_context.vectors is again.context.vectors
    assert np.array_equal(again.fit_context.facts.popularity, fit_pop)


def test_recall_weighs_recency_and_importance_the_same_in_batch_and_in_memory(world):
    agents, train, valid = world["agents"], world["train"], world["valid"]
    weights = RecallWeights(recency=1.0, importance=1.0, half_life_days=1.0)
    config = EmbeddedBrainConfig(recall=weights)
    model = fit_embedded_brain(agents, train, valid, world["users"], config)
    assert model.config.recall == weights and model.params.recall_grid == []
    uid = int(valid.get_column("user_id")[0])
    session = agents.sessions([uid])[0]
    memory = session.memory
    movie = next(m for m in model.context.facts.item_ids.tolist() if m not in set(memory.item_ids.tolist()))
    brain = model.brain()
    brain.click_probability(session, [movie])
    row = agents.vectors.rows_of([movie])[0]
    recalled = memory.retrieve_by_text(agents.vectors.text[row], config.retrieval_k, weights)
    plain = memory.retrieve_by_text(agents.vectors.text[row], config.retrieval_k)
    assert [r.item_id for r in recalled] != [r.item_id for r in plain]  # recency changed what is recalled
    familiarity = brain._scores[uid].features[0, FEATURES.index("text_familiarity")]
    assert familiarity == pytest.approx(np.mean([r.similarity for r in recalled]), abs=1e-5)


def test_the_fit_chooses_the_recall_weights_on_the_held_out_users(world):
    grid = ((0.0, 0.0), (1.0, 0.0))
    model = fit_embedded_brain(
        world["agents"], world["train"], world["valid"], world["users"], EmbeddedBrainConfig(recall_grid=grid)
    )
    tried = model.params.recall_grid
    assert [(g["recency"], g["importance"]) for g in tried] == list(grid)
    best = max(tried, key=lambda g: (g["click_auc_holdout"] or 0.0))
    assert (model.config.recall.recency, model.config.recall.importance) in {
        (g["recency"], g["importance"]) for g in tried
    }
    assert model.params.recall == model.config.recall
    assert (
        best["click_auc_holdout"]
        - next(g["click_auc_holdout"] for g in tried if g["recency"] == model.config.recall.recency)
        <= 1e-4
    )


def test_pathsim_is_twice_the_shared_users_over_both_items_users_and_keeps_the_strongest():
    log = _log(
        [(1, 10, 5, 0), (1, 20, 5, 0), (2, 10, 5, 0), (2, 20, 5, 0), (3, 10, 5, 0), (3, 30, 5, 0), (4, 30, 5, 0)]
    )
    s = pathsim_neighbours(log, np.array([10, 20, 30]), k=1).toarray()
    # item 10: 3 users; 20: 2 (both shared with 10); 30: 2 (one shared with 10)
    assert s[0, 1] == pytest.approx(2 * 2 / (3 + 2)) and s[0, 2] == 0  # only the strongest neighbour kept
    assert s[2, 0] == pytest.approx(2 * 1 / (2 + 3)) and np.all(np.diag(s) == 0)

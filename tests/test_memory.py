"""Memory: shared catalogue vectors, long-term memory retrieval by text and by image,
movie facts, and the short-term memory's rendering."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fakes.agents import HashTextEmbedder, make_catalogue
from ops.agents.embeddings import EmbeddingConfig, MovieVectors, PaletteLayoutPosterEmbedder, embed_catalogue
from ops.agents.memory import ShortTermEntry, build_long_term_memories, describe_short_term
from ops.agents.movie_facts import build_movie_facts
from ops.data.catalogue import build_catalogue


def _vectors(text: np.ndarray, poster: np.ndarray | None = None, ids=None) -> MovieVectors:
    n = len(text)
    poster = np.zeros((n, 2), np.float32) if poster is None else poster
    return MovieVectors(
        item_ids=np.asarray(ids if ids is not None else np.arange(1, n + 1), dtype=np.int64),
        text=np.asarray(text, np.float32),
        poster=np.asarray(poster, np.float32),
        has_poster=np.linalg.norm(poster, axis=1) > 0,
        poster_look=np.array([""] * n, dtype=object),
        text_model="t",
        poster_model="p",
        digest="d",
    )


def _unit(angles_deg):
    a = np.radians(angles_deg)
    return np.stack([np.cos(a), np.sin(a)], axis=1)


def test_movie_vectors_check_their_shape_and_name_unknown_ids():
    with pytest.raises(ValueError, match="ascending"):
        _vectors(_unit([0, 10]), ids=[5, 3])
    v = _vectors(_unit([0, 10, 20]), ids=[3, 7, 9])
    assert v.rows_of([9, 3]).tolist() == [2, 0]
    with pytest.raises(ValueError, match=r"\[8\]"):
        v.rows_of([7, 8])


def test_memories_point_into_the_shared_matrices_in_time_order():
    v = _vectors(_unit([0, 10, 20, 30]))
    train = pl.DataFrame(
        {"user_id": [1, 1, 2, 1], "item_id": [3, 1, 4, 2], "rating": [5, 2, 4, 3], "timestamp": [30, 10, 5, 20]}
    )
    mem = build_long_term_memories(train, v)
    assert sorted(mem) == [1, 2]
    assert mem[1].item_ids.tolist() == [1, 2, 3] and mem[1].ratings.tolist() == [2, 3, 5]
    assert mem[1].vectors is v and mem[2].vectors is v  # shared, not copied
    assert len(mem[2]) == 1


def test_retrieve_by_text_returns_the_most_similar_memories_with_cosine():
    # Movies at 0, 20, 40, 90 degrees; the query at 35 degrees is nearest 40, then 20.
    v = _vectors(_unit([0, 20, 40, 90]))
    train = pl.DataFrame(
        {"user_id": [1] * 4, "item_id": [1, 2, 3, 4], "rating": [1, 2, 3, 4], "timestamp": [1, 2, 3, 4]}
    )
    mem = build_long_term_memories(train, v)[1]
    got = mem.retrieve_by_text(3.0 * _unit([35])[0], k=2)  # scale does not matter
    assert [r.item_id for r in got] == [3, 2]
    assert got[0].similarity == pytest.approx(np.cos(np.radians(5)), abs=1e-6)
    assert got[0].rating == 3 and got[0].timestamp == 3
    assert [r.item_id for r in mem.retrieve_by_text(_unit([35])[0], k=10)] == [3, 2, 1, 4]
    assert mem.retrieve_by_text(np.zeros(2), k=3) == []
    with pytest.raises(ValueError, match="dim 3"):
        mem.retrieve_by_text(np.ones(3), k=1)


def test_retrieval_ties_prefer_recent_memories():
    v = _vectors(_unit([10, 10, 50]))
    train = pl.DataFrame(
        {"user_id": [1, 1, 1], "item_id": [1, 2, 3], "rating": [4, 5, 3], "timestamp": [100, 200, 300]}
    )
    mem = build_long_term_memories(train, v)[1]
    assert [r.item_id for r in mem.retrieve_by_text(_unit([10])[0], k=2)] == [2, 1]


def test_retrieve_by_image_never_returns_memories_without_poster():
    poster = np.vstack([_unit([0]), np.zeros((1, 2)), _unit([80])]).astype(np.float32)
    v = _vectors(_unit([0, 0, 0]), poster=poster)
    train = pl.DataFrame({"user_id": [1, 1, 1], "item_id": [1, 2, 3], "rating": [4, 5, 3], "timestamp": [1, 2, 3]})
    mem = build_long_term_memories(train, v)[1]
    got = mem.retrieve_by_image(_unit([85])[0], k=5)
    assert [r.item_id for r in got] == [3, 1]


def test_memory_over_a_real_catalogue_recalls_the_same_genre(tmp_path):
    movies, meta = make_catalogue(tmp_path / "p", n_per_genre=5)
    vectors = embed_catalogue(
        build_catalogue(movies, meta),
        HashTextEmbedder(),
        PaletteLayoutPosterEmbedder(),
        None,
        EmbeddingConfig(show_progress=False),
    )
    # User 1 remembers two Sci-Fi (ids 1-5) and two Romance movies (ids 6-10).
    train = pl.DataFrame(
        {"user_id": [1] * 4, "item_id": [1, 2, 6, 7], "rating": [5, 4, 2, 1], "timestamp": [1, 2, 3, 4]}
    )
    mem = build_long_term_memories(train, vectors)[1]
    query = vectors.rows_of([3])[0]  # another Sci-Fi movie
    assert {r.item_id for r in mem.retrieve_by_text(vectors.text[query], k=2)} == {1, 2}
    assert {r.item_id for r in mem.retrieve_by_image(vectors.poster[query], k=2)} == {1, 2}


def test_movie_facts_take_popularity_and_means_from_train_only(tmp_path):
    movies, meta = make_catalogue(tmp_path / "p", n_per_genre=2)
    train = pl.DataFrame({"user_id": [1, 2, 3], "item_id": [1, 1, 2], "rating": [5, 3, 4], "timestamp": [1, 2, 3]})
    facts = build_movie_facts(build_catalogue(movies, meta), train)
    r1, r2, r3 = facts.row(1), facts.row(2), facts.row(3)
    assert facts.popularity[[r1, r2, r3]].tolist() == [2, 1, 0]
    assert facts.mean_rating[r1] == 4.0 and np.isnan(facts.mean_rating[r3])
    assert facts.genres[r1].sum() == 1 and facts.directors[r1] and facts.actors[r1]
    with pytest.raises(ValueError, match="999"):
        facts.row(999)


def test_short_term_memory_reads_as_a_session_log():
    entries = [
        ShortTermEntry(1, "home", 1, (10, 11), 4, "click_movie", item_id=10),
        ShortTermEntry(2, "detail", 1, (), 5, "watch_and_rate", item_id=10, rating=5),
        ShortTermEntry(3, "home", 1, (10, 11), 3, "next_page"),
    ]
    text = describe_short_term(entries, {10: "Alien (1979)", 11: "Heat (1995)"})
    lines = text.splitlines()
    assert lines[0] == "1. home page 1: interest 4/5, noticed Alien (1979), Heat (1995); click_movie Alien (1979)"
    assert lines[1] == "2. detail page (from home page 1): interest 5/5; watch_and_rate Alien (1979) rated 5"
    assert lines[2].endswith("next_page")

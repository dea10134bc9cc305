"""Agent profiles: social traits exactly as docs/definitions.md defines them, tiers by percentile,
SimUSER pickiness, and preferences that recover the planted tastes."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fakes.agents import HashTextEmbedder, make_catalogue, make_users_and_ratings
from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder, embed_catalogue
from ops.agents.movie_facts import build_movie_facts
from ops.agents.profile import ProfileConfig, build_profiles, profiles_frame, social_traits
from ops.data.catalogue import build_catalogue
from ops.schema import MOVIES, RATINGS, USERS, conform


def _tiny():
    movies = conform(
        pl.DataFrame(
            {
                "item_id": [1, 2, 3],
                "title": ["A (1990)", "B (1991)", "C (1992)"],
                "year": [1990, 1991, 1992],
                "genres": [["Comedy"], ["Drama", "Romance"], ["Comedy", "Horror"]],
            }
        ),
        MOVIES,
        "movies",
    )
    # Movie means: 1 -> (5+3)/2 = 4, 2 -> (2+4)/2 = 3, 3 -> 1.
    train = conform(
        pl.DataFrame(
            {
                "user_id": [1, 1, 2, 2, 3],
                "item_id": [1, 2, 1, 2, 3],
                "rating": [5, 2, 3, 4, 1],
                "timestamp": [1, 2, 3, 4, 5],
            }
        ),
        RATINGS,
        "train",
    )
    users = conform(
        pl.DataFrame(
            {
                "user_id": [1, 2, 3],
                "gender": ["F", "M", "F"],
                "age": [25, 35, 18],
                "occupation": [12, 4, 0],
                "zip": ["1", "2", "3"],
                "has_ratings": [True] * 3,
            }
        ),
        USERS,
        "users",
    )
    return movies, train, users


def test_social_traits_follow_the_definitions():
    movies, train, _ = _tiny()
    facts = build_movie_facts(build_catalogue(movies), train)
    t = {r["user_id"]: r for r in social_traits(train, facts).iter_rows(named=True)}
    assert [t[u]["activity"] for u in (1, 2, 3)] == [2, 2, 1]
    # conformity = mean squared gap to the movie's mean train rating
    assert t[1]["conformity"] == pytest.approx(((5 - 4) ** 2 + (2 - 3) ** 2) / 2)
    assert t[2]["conformity"] == pytest.approx(((3 - 4) ** 2 + (4 - 3) ** 2) / 2)
    assert t[3]["conformity"] == pytest.approx(0.0)
    # diversity = distinct genres rated
    assert [t[u]["diversity"] for u in (1, 2, 3)] == [3, 3, 2]
    assert t[1]["mean_rating"] == pytest.approx(3.5)


def test_tiers_cut_at_percentiles_and_high_conformity_means_closest_to_the_crowd():
    n = 9
    train = pl.DataFrame(
        {
            "user_id": np.repeat(np.arange(1, n + 1), np.arange(1, n + 1)),
            "item_id": np.concatenate([np.arange(1, k + 1) for k in range(1, n + 1)]),
            "rating": np.concatenate([np.full(k, 1 + (k % 5)) for k in range(1, n + 1)]),
            "timestamp": np.arange(n * (n + 1) // 2),
        }
    )
    movies = pl.DataFrame(
        {
            "item_id": np.arange(1, n + 1),
            "title": [f"M{i}" for i in range(n)],
            "year": [2000] * n,
            "genres": [["Drama"]] * n,
        }
    )
    facts = build_movie_facts(build_catalogue(conform(movies, MOVIES, "movies")), conform(train, RATINGS, "train"))
    t = social_traits(conform(train, RATINGS, "train"), facts, ProfileConfig(tier_percentiles=(1 / 3, 2 / 3))).sort(
        "user_id"
    )
    assert t.get_column("activity_tier").to_list() == ["low"] * 3 + ["medium"] * 3 + ["high"] * 3
    # The smallest gap gets the high conformity tier and the highest conformity score.
    by_gap = t.sort("conformity")
    assert by_gap.get_column("conformity_tier").to_list()[0] == "high"
    assert by_gap.get_column("conformity_tier").to_list()[-1] == "low"
    assert by_gap.get_column("conformity_score").to_list()[0] == pytest.approx(1.0)
    assert by_gap.get_column("conformity_score").is_sorted(descending=True)


def test_pickiness_follows_the_configured_thresholds():
    movies, train, users = _tiny()
    # Means: user 1 (5+2)/2 = 3.5, user 2 (3+4)/2 = 3.5, user 3 1.0.
    p = build_profiles(train, users, build_catalogue(movies), ProfileConfig(pickiness_thresholds=(2.0, 3.4)))
    assert [p[u].pickiness for u in (1, 2, 3)] == ["not picky", "not picky", "extremely picky"]
    p = build_profiles(train, users, build_catalogue(movies), ProfileConfig(pickiness_thresholds=(0.5, 3.6)))
    assert [p[u].pickiness for u in (1, 2, 3)] == ["moderately picky", "moderately picky", "moderately picky"]


def test_profiles_recover_planted_tastes(tmp_path):
    movies, meta = make_catalogue(tmp_path / "posters")
    users, ratings, favourite = make_users_and_ratings(movies)
    vectors = embed_catalogue(
        build_catalogue(movies, meta),
        HashTextEmbedder(),
        PaletteLayoutPosterEmbedder(),
        None,
        EmbeddingConfig(show_progress=False),
    )
    looks = {int(m): str(look) for m, look in zip(vectors.item_ids, vectors.poster_look) if look}
    profiles = build_profiles(ratings, users, build_catalogue(movies, meta), ProfileConfig(), poster_looks=looks)
    assert sorted(profiles) == sorted(users.get_column("user_id").to_list())
    expected_look = {"Sci-Fi": "cool", "Romance": "warm", "Horror": "dark"}
    expected_director = {"Sci-Fi": "Ada Vector", "Romance": "Rosa Amour", "Horror": "Vlad Grim"}
    for uid, p in profiles.items():
        fav = favourite[uid]
        assert p.liked_genres[0] == fav
        assert fav not in p.disliked_genres and p.disliked_genres  # the other genres are rated low
        assert p.poster_looks[:1] == (expected_look[fav],)
        assert expected_director[fav] in p.directors
        assert p.eras and p.eras[0] == {"Sci-Fi": 1980, "Romance": 1950, "Horror": 1970}[fav]
        assert set(p.plot_themes) <= set(
            {
                "Sci-Fi": "space robot alien planet galaxy starship",
                "Romance": "love wedding kiss heart letter summer",
                "Horror": "night blood ghost scream cellar curse",
            }[fav].split()
        )
        assert fav in p.home_page_preferences and expected_director[fav] in p.detail_page_preferences
        assert p.summary.startswith("A 25-34 ") and p.home_page_preferences in p.summary
        # The persona follows the traits and tastes (ops.agents.persona).
        hobby = {"Sci-Fi": "astronomy", "Romance": "poetry", "Horror": "ghost stories"}[fav]
        assert p.hobbies[0] == hobby and hobby in p.persona and p.occupation_label in p.background
        assert p.agreeableness == {"not picky": 3, "moderately picky": 2, "extremely picky": 1}[p.pickiness]
        assert p.conscientiousness == {"low": 1, "medium": 2, "high": 3}[p.activity_tier]
    frame = profiles_frame(profiles)
    assert frame.height == len(profiles) and frame.get_column("user_id").is_sorted()
    assert {"activity_tier", "conformity_tier", "diversity_tier", "pickiness", "summary"} <= set(frame.columns)


def test_unknown_user_in_train_is_named():
    movies, train, users = _tiny()
    with pytest.raises(ValueError, match=r"\[3\]"):
        build_profiles(train, users.filter(pl.col("user_id") != 3), build_catalogue(movies))


def test_the_persona_is_a_deterministic_function_of_the_traits():
    from ops.agents.persona import trait_persona

    base = dict(
        age_label="25-34",
        gender="F",
        occupation_label="scientist",
        zip_code="94110",
        activity_tier="high",
        conformity_tier="low",
        diversity_tier="medium",
        pickiness="extremely picky",
        vote_preference="indifferent",
        rating_spread=0.5,
        liked_genres=("Sci-Fi", "Mystery", "Drama"),
    )
    p = trait_persona(**base)
    assert (p.openness, p.conscientiousness, p.extraversion, p.agreeableness, p.neuroticism) == (2, 3, 1, 1, 1)
    assert p.hobbies == ("astronomy", "puzzles") and p == trait_persona(**base)
    assert p.text().startswith("A 25-34 woman working as scientist, living in the Pacific coast of the US.")
    assert "moderate openness, high conscientiousness, low extraversion, low agreeableness, low neuroticism" in p.text()
    volatile = trait_persona(**{**base, "rating_spread": 1.3, "vote_preference": "offbeat", "diversity_tier": "high"})
    assert volatile.neuroticism == 3 and volatile.openness == 3


def test_profiles_with_their_persona_round_trip_through_the_stored_table(tmp_path):
    from ops.agents.profile import profiles_from_table, profiles_table
    from ops.simulation.brains.llm.prompts import profile_text

    movies, meta = make_catalogue(tmp_path / "posters", n_per_genre=6)
    users, ratings, _ = make_users_and_ratings(movies, n_users=6, per_user=9)
    profiles = build_profiles(ratings, users, build_catalogue(movies, meta))
    assert profiles_from_table(profiles_table(profiles)) == profiles
    assert all(f"Persona: {p.persona}" in profile_text(p) for p in profiles.values())


def test_agents_built_for_some_users_are_those_of_a_build_for_every_user(tmp_path):
    """The agents of the users a run reads (`build_agents(user_ids=...)`) have the profiles
    and memories a build for every user gives them, tiers still cut over every user; the
    population's traits are kept either way, and asking for an agent not built says so."""
    from ops.agents.build import AgentsConfig, build_agents

    movies, meta = make_catalogue(tmp_path / "posters")
    users, ratings, _ = make_users_and_ratings(movies)
    catalogue = build_catalogue(movies, meta)
    config = AgentsConfig(embedding=EmbeddingConfig(show_progress=False))
    every = build_agents(ratings, users, catalogue, config, HashTextEmbedder(), PaletteLayoutPosterEmbedder())
    some = build_agents(
        ratings, users, catalogue, config, HashTextEmbedder(), PaletteLayoutPosterEmbedder(), user_ids=[3, 7, 8, 29]
    )
    assert sorted(some.profiles) == sorted(some.memories) == [3, 7, 8, 29]
    assert all(some.profiles[u] == every.profiles[u] for u in some.profiles)
    assert all(np.array_equal(some.memories[u].rows, every.memories[u].rows) for u in some.memories)
    assert some.traits.equals(every.traits) and some.population.tolist() == sorted(every.profiles)
    assert [s.user_id for s in some.sessions([8, 3])] == [3, 8]
    with pytest.raises(KeyError, match=r"1 agent\(s\) asked for were not built, e.g. user 4"):
        some.sessions([3, 4])
    stored = tmp_path / "stored"
    some.save(stored)
    again = type(some).load(stored)
    assert again.traits.equals(some.traits) and sorted(again.profiles) == [3, 7, 8, 29]

"""Sandbox state machine: pages, transitions, validation, impressions, rendering."""

import datetime

import polars as pl
import pytest

from ops.data.catalogue import build_catalogue
from ops.simulation.catalogue import Catalogue, MovieInfo
from ops.simulation.observation import Decision
from ops.simulation.sandbox import IllegalActionError, Sandbox, SandboxConfig, describe


@pytest.fixture
def catalogue():
    return Catalogue(
        MovieInfo(
            m,
            f"Movie {m} (1990)",
            7.0 + m / 100,
            ("Drama",),
            f"/s/{m}.jpg",
            overview=f"plot {m}",
            vote_count=10 * m,
            release_date="1990-01-01",
            directors=("D",),
            actors=("A", "B"),
            poster_large=f"/l/{m}.jpg",
        )
        for m in range(100, 130)
    )


@pytest.fixture
def sandbox(catalogue):
    return Sandbox(list(range(100, 120)), catalogue)


def test_home_page_p_shows_items_5p_minus_4_to_5p(sandbox):
    obs = sandbox.observe()
    assert (obs.page_type, obs.page_number) == ("home", 1)
    assert [c.item_id for c in obs.items] == [100, 101, 102, 103, 104]
    assert [c.position for c in obs.items] == [1, 2, 3, 4, 5]
    assert obs.legal_actions == ("click_movie", "next_page", "exit")
    for p in (2, 3, 4):
        sandbox.next_page()
        obs = sandbox.observe()
        assert [c.position for c in obs.items] == list(range(5 * (p - 1) + 1, 5 * p + 1))
    assert obs.legal_actions == ("click_movie", "previous_page", "exit")
    assert obs.items[0].poster_small == "/s/115.jpg" and obs.items[0].title == "Movie 115 (1990)"


def test_click_watch_and_back_return_to_the_same_page(sandbox):
    sandbox.next_page()
    res = sandbox.click_movie(107)
    assert (res.item_id, res.position) == (107, 8)
    obs = sandbox.observe()
    assert obs.page_type == "detail" and obs.page_number == 2
    assert (
        obs.detail.overview == "plot 107" and obs.detail.poster_large == "/l/107.jpg" and obs.detail.vote_count == 1070
    )
    assert obs.legal_actions == ("watch_and_rate", "back")
    res = sandbox.watch_and_rate(4)
    assert (res.item_id, res.rating, sandbox.page_type, sandbox.page_number) == (107, 4, "home", 2)
    sandbox.click_movie(108)
    sandbox.back()
    assert (sandbox.page_type, sandbox.page_number) == ("home", 2)
    sandbox.exit()
    assert sandbox.done and sandbox.observe().legal_actions == ()


@pytest.mark.parametrize(
    "moves, decision, problem",
    [
        ([], Decision("previous_page", 3, ""), "home page 1 is the first"),
        (["next_page"] * 3, Decision("next_page", 3, ""), "is the last of 4"),
        ([], Decision("click_movie", 3, "", item_id=107), "movie 107 is not on home page 1"),
        ([], Decision("click_movie", 3, ""), "no movie id"),
        ([("click", 101)], Decision("click_movie", 3, "", item_id=102), "action of the home page"),
        ([("click", 101)], Decision("next_page", 3, ""), "action of the home page"),
        ([("click", 101)], Decision("watch_and_rate", 3, "", rating=6), "rating must be an integer in 1..5"),
        ([("click", 101)], Decision("watch_and_rate", 3, "", rating=0), "rating must be an integer"),
        ([("click", 101)], Decision("watch_and_rate", 3, ""), "got None"),
        ([("click", 101)], Decision("watch_and_rate", 3, "", item_id=102, rating=4), "shows movie 101"),
        ([], Decision("watch_and_rate", 3, "", rating=4), "action of the detail page"),
        ([], Decision("back", 3, ""), "action of the detail page"),
        ([], Decision("dance", 3, ""), "not an action of the sandbox"),
        (["exit"], Decision("next_page", 3, ""), "the session has ended"),
    ],
)
def test_illegal_actions_raise_naming_action_page_and_legal_actions(sandbox, moves, decision, problem):
    for move in moves:
        if isinstance(move, tuple):
            sandbox.click_movie(move[1])
        else:
            getattr(sandbox, move)()
    state = (
        sandbox.page_type,
        sandbox.page_number,
        sandbox.detail_movie,
        dict(sandbox.watched),
        sandbox.home_impressions,
    )
    with pytest.raises(IllegalActionError, match=problem) as info:
        sandbox.apply(decision)
    assert info.value.action == decision.action
    assert repr(decision.action) in str(info.value) and "legal actions here" in str(info.value)
    assert info.value.legal_actions == sandbox.legal_actions()
    # never a silent half-move: the state is unchanged
    assert state == (
        sandbox.page_type,
        sandbox.page_number,
        sandbox.detail_movie,
        dict(sandbox.watched),
        sandbox.home_impressions,
    )


def test_a_movie_is_watched_once_unless_configured(catalogue):
    sb = Sandbox(list(range(100, 120)), catalogue)
    sb.click_movie(100)
    sb.watch_and_rate(5)
    sb.click_movie(100)
    assert sb.observe().legal_actions == ("back",)
    with pytest.raises(IllegalActionError, match="already watched"):
        sb.watch_and_rate(3)
    sb2 = Sandbox(list(range(100, 120)), catalogue, SandboxConfig(allow_rewatch=True))
    sb2.click_movie(100)
    sb2.watch_and_rate(5)
    sb2.click_movie(100)
    assert sb2.watch_and_rate(3).rating == 3


def test_impressions_count_once_when_a_page_is_revisited(sandbox):
    assert sandbox.home_impressions == (100, 101, 102, 103, 104)
    sandbox.next_page()
    sandbox.previous_page()
    sandbox.click_movie(100)
    sandbox.back()
    sandbox.next_page()
    assert len(sandbox.home_impressions) == 10
    sandbox.next_page()
    sandbox.previous_page()
    sandbox.previous_page()
    assert sandbox.home_impressions == tuple(range(100, 115))


def test_short_list_has_fewer_pages(catalogue):
    sb = Sandbox([100, 101, 102, 103, 104, 105, 106], catalogue)
    assert sb.n_pages == 2
    sb.next_page()
    assert [c.item_id for c in sb.observe().items] == [105, 106]
    assert "next_page" not in sb.observe().legal_actions


def test_bad_lists_are_rejected(catalogue):
    with pytest.raises(ValueError, match="empty"):
        Sandbox([], catalogue)
    with pytest.raises(ValueError, match="repeats"):
        Sandbox([100, 100], catalogue)
    with pytest.raises(ValueError, match="not in the catalogue"):
        Sandbox([100, 999], catalogue)
    with pytest.raises(ValueError, match="more than list_length"):
        Sandbox(list(range(100, 121)), catalogue)


def test_catalogue_from_movielens_and_metadata_frames():
    movies = pl.DataFrame(
        {"item_id": [1, 2], "title": ["A (1990)", "B (1991)"], "year": [1990, 1991], "genres": [["Comedy"], []]}
    )
    meta = pl.DataFrame(
        {
            "item_id": [2],
            "tmdb_id": [9],
            "overview": ["plot"],
            "vote_average": [8.1],
            "vote_count": [5],
            "release_date": [datetime.date(1991, 3, 4)],
            "meta_genres": [["Horror"]],
            "directors": [["X"]],
            "actors": [["Y", "Z"]],
            "poster_small": ["/s.jpg"],
            "poster_large": ["/l.jpg"],
            "metadata_source": ["tmdb"],
        }
    ).with_columns(pl.col("release_date").cast(pl.Date))
    cat = Catalogue.from_frame(build_catalogue(movies, meta))
    assert cat[1].genres == ("Comedy",) and cat[1].vote_average is None and cat[1].overview is None
    assert cat[2].genres == ("Horror",) and cat[2].release_date == "1991-03-04" and cat[2].actors == ("Y", "Z")
    sb = Sandbox([1, 2], cat)
    sb.click_movie(2)
    text = describe(sb.observe())
    assert "plot" in text and "8.1/10" in text and "watch_and_rate, back" in text
    with pytest.raises(ValueError, match="lacks column"):
        Catalogue.from_frame(movies.drop("title"))

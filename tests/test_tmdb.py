"""The TMDB crawl against a fake TMDB on a local HTTP server (pytest-httpserver)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from PIL import Image
from pytest_httpserver import HTTPServer

from fakes.tmdb_server import TEST_API_KEY, TEST_READ_TOKEN, FakeMovie, FakeTmdb, Fault
from ops.data.tmdb import (
    FAILURES,
    MissingCredentialsError,
    RateLimiter,
    TmdbAuthError,
    TmdbConfig,
    TmdbCredentials,
    _parse_retry_after,
    crawl_tmdb,
    redact,
)
from ops.data.tmdb_match import MatchConfig, choose_candidate, parse_movielens_title, search_plan, title_similarity
from ops.schema import METADATA
from ops.storage.checkpoint import CheckpointError, JsonlCheckpoint
from tests.conftest import shared_path

REPO = Path(__file__).resolve().parents[1]

CATALOGUE = [
    FakeMovie(
        862,
        "Toy Story",
        "1995-10-30",
        vote_average=7.97,
        vote_count=18000,
        genres=("Animation", "Comedy"),
        directors=("John Lasseter",),
        cast=(("Tom Hanks", 0), ("Tim Allen", 1), ("Don Rickles", 2)),
    ),
    # A decoy with a similar title but low popularity, so that choosing is tested.
    FakeMovie(999862, "Toy Story Toons", "1995-01-01", popularity=0.5),
    FakeMovie(
        9087,
        "The American President",
        "1995-11-17",
        genres=("Comedy", "Drama", "Romance"),
        directors=("Rob Reiner",),
        cast=(("Michael Douglas", 0), ("Annette Bening", 1)),
    ),
    # TMDB dates it a year after MovieLens (festival vs. release): found by year + 1.
    FakeMovie(11902, "Shanghai Triad", "1996-04-19", original_title="摇啊摇，摇到外婆桥"),
    # Only the alternate title in MovieLens' parentheses matches.
    FakeMovie(2677, "Der bewegte Mann", "1994-10-06", directors=("Sönke Wortmann",)),
    FakeMovie(
        603,
        "The Matrix",
        "1999-03-30",
        vote_average=8.2,
        vote_count=25000,
        directors=("Lana Wachowski", "Lilly Wachowski"),
        cast=(("Keanu Reeves", 0), ("Laurence Fishburne", 1)),
    ),
    FakeMovie(680, "Pulp Fiction", "1994-09-10", directors=("Quentin Tarantino",)),
]

MOVIELENS = [
    (1, "Toy Story (1995)", 1995),
    (11, "American President, The (1995)", 1995),
    (30, "Shanghai Triad (Yao a yao yao dao waipo qiao) (1995)", 1995),
    (860, "Maybe, Maybe Not (Bewegte Mann, Der) (1994)", 1994),
    (2571, "Matrix, The (1999)", 1999),
    (296, "Pulp Fiction (1994)", 1994),
    (4242, "Film That Does Not Exist, The (1997)", 1997),
]
EXPECTED_TMDB = {1: 862, 11: 9087, 30: 11902, 860: 2677, 2571: 603, 296: 680}


def movies_frame(rows=MOVIELENS) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "item_id": [r[0] for r in rows],
            "title": [r[1] for r in rows],
            "year": [r[2] for r in rows],
            "genres": [["Drama"] for _ in rows],
        }
    )


def fast_config(server: HTTPServer, **overrides) -> TmdbConfig:
    base = dict(
        api_base_url=server.url_for("/3"),
        image_base_url=server.url_for("/t/p"),
        rate_limit_rps=500.0,
        concurrency=4,
        max_attempts=3,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
        read_timeout_s=2.0,
        connect_timeout_s=2.0,
        progress=False,
    )
    base.update(overrides)
    return TmdbConfig(**base)


@pytest.fixture
def fake():
    # werkzeug's access log is the *server's* log (TMDB's side, where the key legitimately
    # arrives); silence it so that caplog holds only what the crawler's process would log.
    werkzeug_log = logging.getLogger("werkzeug")
    was_disabled, werkzeug_log.disabled = werkzeug_log.disabled, True
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    tmdb = FakeTmdb(list(CATALOGUE))
    server.expect_request(re.compile(r".*")).respond_with_handler(tmdb.werkzeug_handler)
    tmdb.server = server
    yield tmdb
    server.clear()
    server.stop()
    werkzeug_log.disabled = was_disabled


@pytest.fixture
def api_key_env(monkeypatch):
    monkeypatch.setenv("TMDB_API_KEY", TEST_API_KEY)
    monkeypatch.delenv("TMDB_READ_TOKEN", raising=False)


# ---------------------------------------------------------------------------------------
# Matching


def test_parse_movielens_title_moves_article_and_keeps_alternates():
    p = parse_movielens_title("City of Lost Children, The (Cité des enfants perdus, La) (1995)")
    assert p.title == "The City of Lost Children"
    assert p.alternates == ("La Cité des enfants perdus",)
    assert p.year == 1995
    assert parse_movielens_title("Appartement, L' (1996)").title == "L'Appartement"
    # A comma inside a title is not an article.
    assert parse_movielens_title("Maybe, Maybe Not (Bewegte Mann, Der) (1994)").queries == (
        "Maybe, Maybe Not",
        "Der Bewegte Mann",
    )
    assert parse_movielens_title("Untitled").year is None


def test_search_plan_tries_year_then_neighbours_then_no_year():
    plan = search_plan(parse_movielens_title("Seven (Se7en) (1995)"), MatchConfig())
    assert [(s.query, s.year) for s in plan] == [
        ("Seven", 1995),
        ("Se7en", 1995),
        ("Seven", 1994),
        ("Se7en", 1994),
        ("Seven", 1996),
        ("Se7en", 1996),
        ("Seven", None),
        ("Se7en", None),
    ]


def test_choose_candidate_prefers_the_closer_title_then_popularity():
    parsed = parse_movielens_title("Alien (1979)")
    config = MatchConfig()
    results = [
        {"id": 8077, "title": "Alien³", "release_date": "1992-05-22", "popularity": 40.0},
        {"id": 348, "title": "Alien", "release_date": "1979-05-25", "popularity": 30.0},
        {"id": 99999, "title": "Alien", "release_date": "1979-01-01", "popularity": 0.1},
        {"id": "bad"},  # ignored, not an error
    ]
    assert choose_candidate(parsed, results, config).tmdb_id == 348
    far = choose_candidate(parsed, [{"id": 1, "title": "Aliens in the Attic", "release_date": "2009-07-31"}], config)
    assert far.tmdb_id is None and "similarity" in far.notes[0]
    assert choose_candidate(parsed, [], config).notes == ["no search results"]
    # A subtitle alone does not sink a match, but the exact title wins a tie.
    assert title_similarity("Gendernauts", "Gendernauts: A Journey Through Shifting Identities") == pytest.approx(0.9)


def test_movielens_titles_parse_to_the_titles_omdb_knows():
    """On real ML-1M titles: the cleaned title (or an alternate) matches OMDb's English title."""
    titles = {}
    for line in shared_path("ml-1m", "movies.dat").read_text(encoding="latin-1").splitlines():
        item_id, title, _ = line.split("::")
        titles[int(item_id)] = title
    agree = total = 0
    config = MatchConfig()
    for line in shared_path("ml-1m-metadata", "movies_extrainfos.dat").read_text(encoding="utf-8").splitlines():
        fields = line.split("::")
        parsed = parse_movielens_title(titles[int(fields[0])], config)
        total += 1
        agree += max(title_similarity(q, fields[1]) for q in parsed.queries) >= config.min_title_similarity
    # Measured 3,801 of 3,881 (97.9 %); the rest are different English titles ("187" / "One Eight Seven").
    assert total == 3881 and agree / total >= 0.97


# ---------------------------------------------------------------------------------------
# The crawl


def test_crawl_matches_titles_and_lists_the_unmatched(fake, api_key_env, tmp_path):
    result = crawl_tmdb(movies_frame(), tmp_path, fast_config(fake.server))
    meta = result.metadata
    assert meta.schema == pl.Schema(METADATA)
    assert dict(zip(meta["item_id"], meta["tmdb_id"])) == EXPECTED_TMDB
    assert set(meta["metadata_source"]) == {"tmdb"}

    toy = meta.filter(pl.col("item_id") == 1).row(0, named=True)
    assert toy["actors"] == ["Tom Hanks", "Tim Allen", "Don Rickles"]  # billing order, not response order
    assert toy["directors"] == ["John Lasseter"]
    assert toy["meta_genres"] == ["Animation", "Comedy"]
    assert toy["vote_average"] == pytest.approx(7.97) and toy["vote_count"] == 18000
    assert str(toy["release_date"]) == "1995-10-30"
    matrix = meta.filter(pl.col("item_id") == 2571).row(0, named=True)
    assert matrix["directors"] == ["Lana Wachowski", "Lilly Wachowski"]

    # The article had to move: the search that found it was for "The American President".
    searched = [s.query.get("query") for s in fake.log if s.path == "/3/search/movie"]
    assert "The American President" in searched and "American President, The" not in searched
    # Shanghai Triad needed year + 1; the exact year found nothing.
    shanghai = [
        (s.query.get("query"), s.query.get("year"))
        for s in fake.log
        if s.path == "/3/search/movie" and s.query.get("query") == "Shanghai Triad"
    ]
    assert shanghai[:3] == [("Shanghai Triad", "1995"), ("Shanghai Triad", "1994"), ("Shanghai Triad", "1996")]

    # Every unmatched movie is listed with the reason.
    assert result.failures.schema == pl.Schema(FAILURES)
    assert result.failures["item_id"].to_list() == [4242]
    fail = result.failures.row(0, named=True)
    assert fail["stage"] == "match" and "no TMDB match" in fail["reason"]
    assert "'The Film That Does Not Exist'/1997" in fail["reason"] and "any year" in fail["reason"]

    # Posters: two sizes, content-hash named, decodable RGB, widths as requested.
    for row in meta.iter_rows(named=True):
        for column, width in (("poster_small", 185), ("poster_large", 500)):
            path = Path(row[column])
            assert path.is_file() and path.is_relative_to(tmp_path)
            assert path.stem == hashlib.sha256(path.read_bytes()).hexdigest()
            with Image.open(path) as im:
                assert im.mode == "RGB" and im.width == width
    # The outputs are on disk as well.
    assert pl.read_parquet(tmp_path / "metadata.parquet").equals(meta)


def test_links_table_is_used_and_only_missing_ids_are_searched(fake, api_key_env, tmp_path):
    links = pl.DataFrame({"movieId": [1, 11, 296], "imdbId": ["0114709", "0112346", None], "tmdbId": [862, 9087, None]})
    movies = movies_frame([r for r in MOVIELENS if r[0] in (1, 11, 296)])
    result = crawl_tmdb(movies, tmp_path, fast_config(fake.server, download_posters=False), links=links)
    assert dict(zip(result.metadata["item_id"], result.metadata["tmdb_id"])) == {1: 862, 11: 9087, 296: 680}
    searched = [s.query["query"] for s in fake.log if s.path == "/3/search/movie"]
    assert searched == ["Pulp Fiction"]
    assert sorted(fake.paths("/3/movie/")) == ["/3/movie/680", "/3/movie/862", "/3/movie/9087"]
    assert all(s.query.get("append_to_response") == "credits" for s in fake.log if s.path.startswith("/3/movie/"))


def test_stale_link_falls_back_to_title_search(fake, api_key_env, tmp_path):
    links = pl.DataFrame({"movieId": [2571], "tmdbId": [123456789]})  # TMDB answers 404
    result = crawl_tmdb(
        movies_frame([(2571, "Matrix, The (1999)", 1999)]),
        tmp_path,
        fast_config(fake.server, download_posters=False),
        links=links,
    )
    assert result.metadata["tmdb_id"].to_list() == [603]
    assert result.failures.height == 0


def test_transient_errors_are_retried_until_the_crawl_succeeds(fake, api_key_env, tmp_path):
    fake.add_fault("/3/movie/862", Fault("429", retry_after="1"))
    fake.add_fault("/3/search/movie", Fault("500"), Fault("500"))
    fake.add_fault("/3/movie/603", Fault("slow", delay_s=2.0))  # read timeout is 0.5 s
    fake.add_fault("/3/movie/680", Fault("malformed"))
    fake.add_fault("/t/p/w185/poster9087.jpg", Fault("500"))
    config = fast_config(fake.server, read_timeout_s=0.5, concurrency=2)
    result = crawl_tmdb(movies_frame(), tmp_path, config)

    assert dict(zip(result.metadata["item_id"], result.metadata["tmdb_id"])) == EXPECTED_TMDB
    assert result.failures["item_id"].to_list() == [4242]  # only the movie TMDB lacks
    assert result.metadata.filter(pl.col("poster_small").is_null()).height == 0
    assert result.stats["retries"] == 6
    # Retry-After: 1 was honoured: the retry came at least a second after the 429.
    toy = [s for s in fake.log if s.path == "/3/movie/862"]
    assert [s.status for s in toy] == [429, 200]
    assert toy[1].at - toy[0].at >= 0.95


def test_persistent_failures_are_listed_with_reasons(fake, api_key_env, tmp_path):
    fake.always["/3/movie/603"] = Fault("500")
    fake.always["/3/movie/680"] = Fault("malformed")
    fake.always["/t/p/w185/poster862.jpg"] = Fault("not_image")
    result = crawl_tmdb(movies_frame(), tmp_path, fast_config(fake.server))
    fails = {(r["item_id"], r["stage"]): r["reason"] for r in result.failures.iter_rows(named=True)}

    assert "gave up after 3 attempts: HTTP 500 on" in fails[(2571, "details")]
    assert "malformed JSON" in fails[(296, "details")]
    assert "not an image" in fails[(1, "poster_small")]
    assert (4242, "match") in fails
    assert len(fake.paths("/3/movie/603")) == 3  # bounded retries
    # Toy Story keeps its metadata and its good large poster; only the broken one is missing.
    toy = result.metadata.filter(pl.col("item_id") == 1).row(0, named=True)
    assert toy["poster_small"] is None and Path(toy["poster_large"]).is_file()
    assert toy["overview"] == "An overview."
    assert set(result.metadata["item_id"]) == {1, 11, 30, 860}


def test_api_key_never_reaches_logs_or_outputs(fake, api_key_env, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    for name in ("urllib3", "urllib3.connectionpool", "requests", "ops.data.tmdb"):
        caplog.set_level(logging.DEBUG, logger=name)
    fake.add_fault("/3/movie/862", Fault("500"))
    fake.add_fault("/3/movie/603", Fault("slow", delay_s=1.0))
    fake.always["/3/movie/680"] = Fault("malformed")
    links = pl.DataFrame({"movieId": [1, 2571, 296], "tmdbId": [862, 603, 680]})
    result = crawl_tmdb(movies_frame(), tmp_path, fast_config(fake.server, read_timeout_s=0.3), links=links)

    # The key was really used (in the query string, as TMDB v3 wants) ...
    api_calls = [s for s in fake.log if s.path.startswith("/3/")]
    assert api_calls and all(s.query.get("api_key") == TEST_API_KEY for s in api_calls)
    # ... and urllib3 did log the request lines, redacted.
    url_lines = [r.getMessage() for r in caplog.records if r.name.startswith("urllib3") and "/3/" in r.getMessage()]
    assert url_lines and all("api_key=***" in line for line in url_lines if "api_key" in line)
    assert any("api_key=***" in line for line in url_lines)
    # Nowhere: log text, formatted records, failure reasons, any file the crawl wrote.
    assert TEST_API_KEY not in caplog.text
    assert all(TEST_API_KEY not in r.getMessage() for r in caplog.records)
    assert not result.failures.filter(pl.col("reason").str.contains(TEST_API_KEY, literal=True)).height
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "checkpoint.jsonl" for p in written)
    for path in written:
        assert TEST_API_KEY.encode() not in path.read_bytes(), path
    assert TEST_API_KEY not in repr(TmdbCredentials.from_env())


def test_read_token_goes_in_a_header_only(fake, monkeypatch, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.delenv("TMDB_API_KEY", raising=False)
    monkeypatch.setenv("TMDB_READ_TOKEN", TEST_READ_TOKEN)
    result = crawl_tmdb(movies_frame(MOVIELENS[:1]), tmp_path, fast_config(fake.server))
    assert result.metadata["tmdb_id"].to_list() == [862]
    api_calls = [s for s in fake.log if s.path.startswith("/3/")]
    assert all("api_key" not in s.query for s in api_calls)
    images = [s for s in fake.log if s.path.startswith("/t/p/")]
    assert len(images) == 2 and all("Authorization" not in s.headers for s in images)  # no credentials to the CDN
    assert TEST_READ_TOKEN not in caplog.text
    assert redact(f"Authorization: Bearer {TEST_READ_TOKEN}") == "Authorization: Bearer ***"


def test_refused_key_stops_the_crawl_with_a_clear_error(fake, monkeypatch, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-key-5550000111"
    monkeypatch.setenv("TMDB_API_KEY", wrong)
    with pytest.raises(TmdbAuthError, match="HTTP 401") as info:
        crawl_tmdb(movies_frame(), tmp_path, fast_config(fake.server))
    assert wrong not in str(info.value) and wrong not in caplog.text
    # Nothing was checkpointed as "unmatched": a later run with a good key crawls everything.
    assert len(JsonlCheckpoint(tmp_path / "checkpoint.jsonl", "item_id")) == 0


def test_missing_credentials_name_the_variables(monkeypatch):
    monkeypatch.delenv("TMDB_API_KEY", raising=False)
    monkeypatch.delenv("TMDB_READ_TOKEN", raising=False)
    with pytest.raises(MissingCredentialsError, match="TMDB_READ_TOKEN.*TMDB_API_KEY"):
        TmdbCredentials.from_env()


# ---------------------------------------------------------------------------------------
# Kill and resume


_CHILD = """
import json, sys, polars as pl
from ops.data.tmdb import TmdbConfig, crawl_tmdb
args = json.loads(sys.argv[1])
crawl_tmdb(pl.read_parquet(args["movies"]), args["out"], TmdbConfig(**args["config"]))
"""


def _many_movies(fake: FakeTmdb, n: int) -> pl.DataFrame:
    rows = []
    for i in range(n):
        fake.movies.append(
            FakeMovie(
                70000 + i,
                f"Resumable Picture {i:02d}",
                f"{1950 + i}-06-01",
                cast=((f"Actor {i}", 0), (f"Actor {i + 100}", 1)),
            )
        )
        rows.append((5000 + i, f"Resumable Picture {i:02d} ({1950 + i})", 1950 + i))
    rows.append((4242, "Film That Does Not Exist, The (1997)", 1997))
    return movies_frame(rows)


def _comparable(meta: pl.DataFrame, root: Path) -> list[dict]:
    rows = meta.to_dicts()
    for row in rows:
        for col in ("poster_small", "poster_large"):
            row[col] = str(Path(row[col]).relative_to(root))
    return rows


def test_killed_crawl_resumes_with_exactly_the_uninterrupted_rows(fake, api_key_env, tmp_path, monkeypatch):
    movies = _many_movies(fake, 24)
    movies.write_parquet(tmp_path / "movies.parquet")
    config = fast_config(fake.server, rate_limit_rps=25.0, concurrency=3)
    killed_dir = tmp_path / "killed"
    args = {
        "movies": str(tmp_path / "movies.parquet"),
        "out": str(killed_dir),
        "config": config.model_dump(mode="json"),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(args)],
        cwd=REPO,
        env={**os.environ},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    checkpoint = killed_dir / "checkpoint.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if checkpoint.exists() and checkpoint.read_bytes().count(b"\n") >= 8:
            break
        assert child.poll() is None, child.stderr.read().decode()
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stderr.close()
    done_before = {json.loads(line)["item_id"] for line in checkpoint.read_text().splitlines() if line.strip()}
    assert 8 <= len(done_before) < movies.height, "the kill must land half-way"
    requests_before = len(fake.log)

    resumed = crawl_tmdb(movies, killed_dir, config.model_copy(update={"rate_limit_rps": 500.0}))
    after = fake.log[requests_before:]
    # Movies finished before the kill were not fetched again.
    refetched = {s.path for s in after if s.path.startswith("/3/movie/")} & {
        f"/3/movie/{70000 + m - 5000}" for m in done_before
    }
    assert not refetched

    clean_dir = tmp_path / "clean"
    clean = crawl_tmdb(movies, clean_dir, config.model_copy(update={"rate_limit_rps": 500.0}))
    assert _comparable(resumed.metadata, killed_dir) == _comparable(clean.metadata, clean_dir)
    assert resumed.failures.equals(clean.failures)
    assert resumed.metadata.height == 24 and resumed.failures["item_id"].to_list() == [4242]
    lines = [json.loads(x) for x in checkpoint.read_text().splitlines()]
    assert len(lines) == len({x["item_id"] for x in lines}) == movies.height  # no duplicate, no loss
    # A finished crawl is rebuilt from its checkpoint alone: no request, no key needed.
    monkeypatch.delenv("TMDB_API_KEY")
    n_requests = len(fake.log)
    again = crawl_tmdb(movies, killed_dir, config)
    assert len(fake.log) == n_requests and again.stats["requests"] == 0
    assert again.metadata.equals(resumed.metadata)


def test_checkpoint_drops_a_torn_last_line_and_rejects_damage(tmp_path):
    path = tmp_path / "cp.jsonl"
    path.write_bytes(b'{"item_id": 1, "v": "a"}\n{"item_id": 2, "v": "b"}\n{"item_id": 3, "v": "tor')
    cp = JsonlCheckpoint(path, "item_id")
    assert sorted(cp.records) == [1, 2]
    cp.append({"item_id": 3, "v": "c"})
    cp.append({"item_id": 1, "v": "a2"})  # a later line for the same key wins
    again = JsonlCheckpoint(path, "item_id")
    assert {k: v["v"] for k, v in again.records.items()} == {1: "a2", 2: "b", 3: "c"}

    path.write_bytes(b'{"item_id": 1}\nnot json\n{"item_id": 2}\n')
    with pytest.raises(CheckpointError, match=r"cp.jsonl line 2"):
        JsonlCheckpoint(path, "item_id")


# ---------------------------------------------------------------------------------------
# Rate limit and Retry-After


def test_rate_limiter_spaces_requests_and_pauses_after_429():
    now = [100.0]
    slept: list[float] = []

    def sleep(s):
        slept.append(s)
        now[0] += s

    limiter = RateLimiter(10.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        limiter.acquire()
    assert now[0] == pytest.approx(100.4)  # five starts, 0.1 s apart
    limiter.pause(2.0)
    limiter.acquire()
    assert now[0] == pytest.approx(102.4)


def test_retry_after_accepts_seconds_and_http_dates():
    import email.utils

    assert _parse_retry_after("3") == 3.0
    assert _parse_retry_after(None) is None and _parse_retry_after("soon") is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= _parse_retry_after(future) <= 31


# ---------------------------------------------------------------------------------------
# The Dagster resource


def test_resource_reads_the_key_at_use_time_and_never_holds_it(fake, monkeypatch, tmp_path):
    from resources.tmdb import TmdbResource

    monkeypatch.delenv("TMDB_API_KEY", raising=False)
    monkeypatch.delenv("TMDB_READ_TOKEN", raising=False)
    resource = TmdbResource(
        api_base_url=fake.server.url_for("/3"),
        image_base_url=fake.server.url_for("/t/p"),
        rate_limit_rps=500.0,
        progress=False,
        min_title_similarity=0.8,
    )
    assert not resource.has_credentials()
    with pytest.raises(MissingCredentialsError):
        resource.crawl(movies_frame(MOVIELENS[:1]), tmp_path)
    monkeypatch.setenv("TMDB_API_KEY", TEST_API_KEY)  # set after the resource was built
    result = resource.crawl(movies_frame(MOVIELENS[:2]), tmp_path)
    assert result.metadata["tmdb_id"].to_list() == [862, 9087]
    assert resource.crawl_config().match.min_title_similarity == 0.8
    params = resource.tracking_params()
    assert params["auth"] == "api_key" and params["rate_limit_rps"] == 500.0
    shown = repr(resource) + json.dumps(params, default=str) + json.dumps(resource.model_dump(), default=str)
    assert TEST_API_KEY not in shown and "TMDB_API_KEY" in shown


def test_the_back_off_doubles_to_its_cap_with_a_seeded_jitter_and_retry_after_wins():
    """tenacity's exponential wait: initial × 2^(attempt-1), capped, times 1 + jitter × a seeded draw."""
    import random
    from types import SimpleNamespace

    from ops.data.tmdb import TmdbClient, TmdbCredentials, TransientHttpError

    config = TmdbConfig(backoff_initial_s=0.5, backoff_max_s=3.0, backoff_jitter=0.25, seed=7, max_retry_after_s=9.0)
    client = TmdbClient(config, TmdbCredentials(api_key="k" * 32))
    draws = random.Random(7)
    failed = SimpleNamespace(exception=lambda: TransientHttpError("HTTP 503"))
    for attempt, base in zip(range(1, 6), (0.5, 1.0, 2.0, 3.0, 3.0)):
        wait = client._wait(SimpleNamespace(attempt_number=attempt, outcome=failed))
        assert wait == pytest.approx(base * (1 + 0.25 * draws.random()))
    told = SimpleNamespace(exception=lambda: TransientHttpError("HTTP 429", retry_after=20.0))
    assert client._wait(SimpleNamespace(attempt_number=1, outcome=told)) == 9.0  # Retry-After, under its own cap

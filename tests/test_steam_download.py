"""The `steam-download` source against a fake UCSD site (pytest-httpserver on 127.0.0.1):
made-up gzips of Python-literal lines served, downloaded, verified, resumed after a cut,
refused on a checksum mismatch, read into the `steam` source's tables; bad lines named."""

from __future__ import annotations

import gzip
import hashlib

import polars as pl
import pytest
from werkzeug.wrappers import Request, Response

from fakes.steam_data import steam_original_files
from ops.data.domain import DataFileError
from ops.data.movielens_download import DownloadConfig
from ops.data.steam import load_steam
from ops.data.steam_download import SteamDownloadError, download_steam, literal_lines, load_steam_download, steam_urls
from ops.settings import load
from pipelines.setting_ops import op_config

REVIEWS, GAMES = "australian_user_reviews.json.gz", "steam_games.json.gz"
# Fast retries and small chunks: the behaviour under test is the same, the waiting is not.
FAST = DownloadConfig(backoff_initial_s=0, backoff_max_s=0, max_attempts=3, timeout_s=5, chunk_bytes=256)


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    flat = tmp_path_factory.mktemp("flat")
    return flat, steam_original_files(flat)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def serve(httpserver, files: dict[str, bytes]) -> str:
    for name, body in files.items():

        def handler(request: Request, body=body) -> Response:
            response = Response(body, mimetype="application/gzip")
            response.make_conditional(request, accept_ranges=True, complete_length=len(body))
            return response

        httpserver.expect_request(f"/steam/{name}").respond_with_handler(handler)
    return httpserver.url_for("/steam/")


def test_download_verifies_caches_and_reads_the_steam_tables(httpserver, tmp_path, originals):
    flat, files = originals
    base = serve(httpserver, files)
    pins = {"reviews": sha(files[REVIEWS]), "games": sha(files[GAMES]).upper()}
    got = download_steam(tmp_path, base_url=base, sha256=pins, progress=False, config=FAST)

    assert got.reviews.read_bytes() == files[REVIEWS] and got.games.read_bytes() == files[GAMES]
    assert got.sha256 == {REVIEWS: sha(files[REVIEWS]), GAMES: sha(files[GAMES])}
    assert got.urls[REVIEWS] == base + REVIEWS and not list(tmp_path.glob("*.part"))
    # Cached and verified: no request the second time, pinned or not.
    download_steam(tmp_path, base_url=base, sha256=pins, progress=False, config=FAST)
    again = download_steam(tmp_path, base_url=base, progress=False, config=FAST)
    assert len(httpserver.log) == 2 and again.sha256 == got.sha256

    # The originals and the flattened copy of the same made-up data give the same tables.
    tables, flat_tables = load_steam_download(got, min_interactions=3), load_steam(flat, min_interactions=3)
    for name in ("users", "movies", "ratings"):
        assert getattr(tables, name).equals(getattr(flat_tables, name)), name
    assert tables.metadata.drop("metadata_source").equals(flat_tables.metadata.drop("metadata_source"))
    assert tables.metadata["metadata_source"][0].startswith("steam-download:")
    counts = tables.counts
    assert counts["user_records_read"] > tables.users.height + 5  # player_000 appears twice
    for key in ("reviews_of_games_without_metadata", "duplicate_pairs_dropped", "yearless_dates_assumed_crawl_year"):
        assert counts[key] == flat_tables.counts[key] > 0, key


def test_a_download_cut_in_the_middle_resumes_with_a_range_request(httpserver, tmp_path, originals):
    _, files = originals
    body = files[REVIEWS]
    ranges = []

    def handler(request: Request) -> Response:
        ranges.append(request.headers.get("Range"))
        if len(ranges) == 1:  # promise the whole body, send half, then the connection dies

            def cut():
                yield body[: len(body) // 2]
                raise ConnectionResetError("simulated cut")

            return Response(cut(), headers={"Content-Length": str(len(body))}, mimetype="application/gzip")
        response = Response(body, mimetype="application/gzip")
        response.make_conditional(request, accept_ranges=True, complete_length=len(body))
        return response

    httpserver.expect_request(f"/steam/{REVIEWS}").respond_with_handler(handler)
    base = serve(httpserver, {GAMES: files[GAMES]})
    got = download_steam(tmp_path, base_url=base, sha256={"reviews": sha(body)}, progress=False, config=FAST)

    assert got.reviews.read_bytes() == body
    assert ranges[0] is None and ranges[1].startswith("bytes=") and ranges[1] != "bytes=0-"
    assert int(ranges[1].removeprefix("bytes=").rstrip("-")) <= len(body) // 2


def test_a_checksum_mismatch_names_the_file_and_both_digests_and_keeps_the_good_copy(httpserver, tmp_path, originals):
    _, files = originals
    base = serve(httpserver, files)
    download_steam(tmp_path, base_url=base, progress=False, config=FAST)  # unpinned: cached as downloaded
    wrong = "0" * 64
    with pytest.raises(SteamDownloadError) as err:
        download_steam(tmp_path, base_url=base, sha256={"games": wrong}, progress=False, config=FAST)
    message = str(err.value)
    assert GAMES in message and "checksum mismatch" in message
    assert f"expected {wrong}" in message and f"actual {sha(files[GAMES])}" in message
    assert (tmp_path / GAMES).read_bytes() == files[GAMES]  # the copy already there is untouched
    assert (tmp_path / f"{GAMES}.rejected").read_bytes() == files[GAMES] and not (tmp_path / f"{GAMES}.part").exists()
    with pytest.raises(ValueError, match="64 hex digits"):
        download_steam(tmp_path, base_url=base, sha256={"games": "abc"}, progress=False, config=FAST)


def test_a_truncated_gzip_is_rejected_without_a_pin(httpserver, tmp_path, originals):
    _, files = originals
    base = serve(httpserver, {REVIEWS: files[REVIEWS][:-40], GAMES: files[GAMES]})
    with pytest.raises(SteamDownloadError, match=rf"{REVIEWS} .* not a whole gzip file"):
        download_steam(tmp_path, base_url=base, progress=False, config=FAST)
    assert not (tmp_path / REVIEWS).exists()


def test_a_malformed_line_is_named_by_file_and_line(tmp_path):
    path = tmp_path / REVIEWS
    lines = [
        "{'user_id': 'a', 'reviews': []}",
        "",
        "{'user_id': __import__('os').getcwd(), 'reviews': []}",  # literal_eval refuses code
    ]
    path.write_bytes(gzip.compress("\n".join(lines).encode()))
    with pytest.raises(DataFileError, match=rf"{REVIEWS}, line 3: not a Python literal"):
        list(literal_lines(path))
    path.write_bytes(gzip.compress(b"{'user_id': 'a', 'reviews': [{'item_id': '7', 'recommend': 'yes'}]}\n"))
    from ops.data.steam_download import _reviews_frame

    with pytest.raises(DataFileError, match=r"line 1, field 'reviews\[0\]\.recommend'"):
        _reviews_frame(path, {})


def test_the_urls_and_checksums_are_settings():
    assert (
        steam_urls()["reviews"].startswith("https://") and steam_urls("http://m/x/")["games"] == f"http://m/x/{GAMES}"
    )
    config = op_config(
        load(
            {
                "SIMAB_SOURCE": "steam-download",
                "SIMAB_STEAM_URL": "http://mirror/",
                "SIMAB_STEAM_SHA256_REVIEWS": "a" * 64,
            }
        )
    )["ingestion"]
    assert config == {"source": "steam-download", "steam_url": "http://mirror/", "steam_sha256_reviews": "a" * 64}


def test_the_ingestion_step_stores_the_digests_it_downloaded(httpserver, tmp_path, originals, monkeypatch):
    from dagster import materialize

    from assets.ingestion import ingestion
    from resources.mlflow_tracking import MlflowTracking
    from resources.storage import SimabIOManager

    _, files = originals
    base = serve(httpserver, files)
    monkeypatch.setenv("SIMAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = {"source": "steam-download", "steam_url": base, "steam_min_interactions": 3}
    result = materialize(
        [ingestion],
        # In memory: the same checks, without the slow set-up of a new SQLite file.
        resources={
            "io_manager": SimabIOManager(),
            "mlflow_tracking": MlflowTracking(tracking_uri="sqlite:///:memory:"),
        },
        run_config={"ops": {"ingestion": {"config": config}}},
    )
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key.path == ["ratings"]]
    metadata = event.materialization.metadata
    assert metadata[f"sha256 {REVIEWS}"].value == sha(files[REVIEWS])
    assert metadata[f"sha256 {GAMES}"].value == sha(files[GAMES])
    assert result.output_for_node("ingestion", "ratings").height > 0
    assert (tmp_path / "home" / "downloads" / "steam" / GAMES).exists()
    assert isinstance(result.output_for_node("ingestion", "users"), pl.DataFrame)

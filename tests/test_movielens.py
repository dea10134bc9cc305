"""MovieLens download and local sources: format detection, errors with file and line, the
resumable checksum-verified download against a fake GroupLens (pytest-httpserver), and the
counts of the real reference copies when they are present."""

from __future__ import annotations

import hashlib
import io
import random
import shutil
import socket
import zipfile
from pathlib import Path

import polars as pl
import pytest
from werkzeug.wrappers import Request, Response

from ops.data.movielens import MovieLensFormatError, load_local
from ops.data.movielens_download import ARCHIVE_MD5, DownloadConfig, MovieLensDownloadError, download
from ops.schema import MOVIES, RATINGS, USERS
from tests.conftest import shared_path

# --------------------------------------------------------------------------------------
# tiny data sets written by the tests
# --------------------------------------------------------------------------------------

ML1M_USERS = "1::F::1::10::48067\n2::M::56::16::70072\n3::M::25::15::55117\n4::F::45::7::02460\n"
ML1M_MOVIES = (
    "1::Toy Story (1995)::Animation|Children's|Comedy\n"
    "2::Misérables, Les (1995)::Drama|Musical\n"
    "3::Seven (Se7en) (1995)::Crime|Thriller\n"
)
ML1M_RATINGS = "1::1::5::978300760\n1::2::3::978302109\n2::3::4::978301968\n3::1::1::978300275\n"

ML100K_USERS = "1|24|M|technician|85711\n2|53|F|other|94043\n3|15|M|student|32067\n4|60|F|entertainment|T8H1N\n"
_FLAGS_ANIMATION_COMEDY = "0|0|0|1|1|1|0|0|0|0|0|0|0|0|0|0|0|0|0"
_FLAGS_UNKNOWN = "1|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0|0"
ML100K_ITEMS = (
    f"1|Toy Story (1995)|01-Jan-1995||http://us.imdb.com/M/title-exact?Toy%20Story%20(1995)|{_FLAGS_ANIMATION_COMEDY}\n"
    f"2|Land Before Time III: The Time of the Great Giving (1995) (V)|01-Jan-1995||http://x|{_FLAGS_ANIMATION_COMEDY}\n"
    f"3|unknown||||{_FLAGS_UNKNOWN}\n"
)
ML100K_DATA = "1\t1\t5\t874965758\n1\t2\t3\t876893171\n2\t3\t4\t878542960\n3\t1\t2\t876893119\n"


def write_ml1m(folder: Path, ratings_name: str = "ratings.dat", ratings: str = ML1M_RATINGS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "users.dat").write_bytes(ML1M_USERS.encode("latin-1"))
    (folder / "movies.dat").write_bytes(ML1M_MOVIES.encode("latin-1"))
    (folder / ratings_name).write_bytes(ratings.encode("latin-1"))
    (folder / "README").write_text("SUMMARY\nUserID::MovieID::Rating::Timestamp\n")
    return folder


def write_ml100k(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "u.user").write_text(ML100K_USERS)
    (folder / "u.item").write_bytes(ML100K_ITEMS.encode("latin-1"))
    (folder / "u.data").write_text(ML100K_DATA)
    (folder / "u.genre").write_text("unknown|0\nAction|1\n\n")
    (folder / "u.occupation").write_text("student\nwriter\n")
    (folder / "u1.base").write_text(ML100K_DATA[: ML100K_DATA.index("2\t3")])  # a split beside u.data
    return folder


def ml1m_zip_bytes(extra_member: str | None = None) -> bytes:
    """An ML-1M-shaped archive (top folder ml-1m/, as GroupLens ships it), byte-for-byte reproducible."""
    rng = random.Random(7)
    padding = "".join(rng.choice("abcdefghij \n") for _ in range(20_000))  # big enough to cut in halves
    members = {
        "ml-1m/users.dat": ML1M_USERS.encode("latin-1"),
        "ml-1m/movies.dat": ML1M_MOVIES.encode("latin-1"),
        "ml-1m/ratings.dat": ML1M_RATINGS.encode("latin-1"),
        "ml-1m/README": padding.encode(),
    }
    if extra_member:
        members[extra_member] = b"gotcha"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2003, 2, 28, 0, 0, 0)), data)
    return buffer.getvalue()


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


# Fast retries: the behaviour under test is the same, the back-off is not.
FAST = DownloadConfig(backoff_initial_s=0, backoff_max_s=0, max_attempts=3, timeout_s=5)


# --------------------------------------------------------------------------------------
# local source: format detection
# --------------------------------------------------------------------------------------


def test_ml1m_folder_is_recognised_by_content_and_conforms(tmp_path):
    folder = write_ml1m(tmp_path / "any-name", ratings_name="ratings_users_1-3.dat")
    tables = load_local(folder)

    assert tables.source_format == "ml-1m"
    assert tables.files["ratings"].name == "ratings_users_1-3.dat"
    assert dict(tables.users.schema) == USERS
    assert dict(tables.movies.schema) == MOVIES
    assert dict(tables.ratings.schema) == RATINGS
    assert tables.ratings.rows() == [
        (1, 1, 5, 978300760),
        (1, 2, 3, 978302109),
        (2, 3, 4, 978301968),
        (3, 1, 1, 978300275),
    ]
    movies = {row["item_id"]: row for row in tables.movies.iter_rows(named=True)}
    assert movies[2]["title"] == "Misérables, Les (1995)"  # latin-1 byte 0xE9 decoded
    assert movies[3]["year"] == 1995  # the last "(YYYY)", not "(Se7en)"
    assert movies[1]["genres"] == ["Animation", "Children's", "Comedy"]
    # user 4 has no rating: kept, flagged
    assert dict(tables.users.select("user_id", "has_ratings").iter_rows()) == {1: True, 2: True, 3: True, 4: False}
    assert tables.users.filter(pl.col("user_id") == 4).row(0)[4] == "02460"  # zip keeps its leading zero


def test_ml100k_folder_maps_demographics_onto_ml1m_codes(tmp_path):
    tables = load_local(write_ml100k(tmp_path / "x"))

    assert tables.source_format == "ml-100k"
    assert tables.files["ratings"].name == "u.data"  # preferred over the u1.base split
    assert tables.ratings.height == 4
    users = {r["user_id"]: r for r in tables.users.iter_rows(named=True)}
    assert (users[1]["age"], users[1]["occupation"]) == (18, 17)  # 24 -> "18-24"; technician -> technician/engineer
    assert (users[2]["age"], users[2]["occupation"]) == (50, 0)  # 53 -> "50-55"; other
    assert (users[3]["age"], users[3]["occupation"]) == (1, 10)  # 15 -> "Under 18"; student under 18 -> K-12 student
    assert (users[4]["age"], users[4]["occupation"]) == (56, 2)  # 60 -> "56+"; entertainment -> artist
    assert users[4]["has_ratings"] is False and users[3]["has_ratings"] is True
    movies = {r["item_id"]: r for r in tables.movies.iter_rows(named=True)}
    assert movies[1]["genres"] == ["Animation", "Children's", "Comedy"]
    assert movies[2]["year"] == 1995  # "(1995) (V)"
    assert movies[3]["genres"] == [] and movies[3]["year"] is None  # the "unknown" flag is not an ML-1M genre


def test_a_movies_file_resaved_as_utf8_is_read_as_utf8(tmp_path):
    folder = write_ml1m(tmp_path)
    (folder / "movies.dat").write_bytes(ML1M_MOVIES.encode("utf-8"))
    titles = load_local(folder).movies["title"].to_list()
    assert "Misérables, Les (1995)" in titles  # not the mojibake "MisÃ©rables"


def test_a_folder_holding_the_unzipped_folder_is_accepted(tmp_path):
    write_ml1m(tmp_path / "ml-1m")
    assert load_local(tmp_path).ratings.height == 4


def test_crlf_line_ends_and_blank_lines_are_tolerated(tmp_path):
    folder = write_ml1m(tmp_path, ratings=ML1M_RATINGS.replace("\n", "\r\n") + "\r\n\r\n")
    assert load_local(folder).ratings.height == 4


# --------------------------------------------------------------------------------------
# local source: bad input names the file and the line
# --------------------------------------------------------------------------------------


def test_malformed_ratings_line_names_file_and_line(tmp_path):
    folder = write_ml1m(tmp_path, ratings="1::1::5::978300760\n1::2::3::978302109\n2::3::4\n3::1::1::978300275\n")
    with pytest.raises(MovieLensFormatError) as err:
        load_local(folder)
    assert err.value.path.name == "ratings.dat" and err.value.line == 3
    assert "ratings.dat, line 3" in str(err.value) and "expected 4" in str(err.value)


def test_rating_outside_one_to_five_names_file_and_line(tmp_path):
    folder = write_ml1m(tmp_path, ratings="1::1::5::978300760\n1::2::7::978302109\n2::3::4::978301968\n")
    with pytest.raises(MovieLensFormatError, match=r"ratings\.dat, line 2: rating 7 is outside 1\.\.5"):
        load_local(folder)


def test_non_integer_and_unknown_ids_in_ratings(tmp_path):
    folder = write_ml1m(tmp_path, ratings="1::1::5::978300760\n1::2::4.5::978302109\n")
    with pytest.raises(MovieLensFormatError, match=r"line 2: rating '4\.5' is not an integer"):
        load_local(folder)
    write_ml1m(tmp_path, ratings="1::1::5::978300760\n2::3::4::978301968\n9::1::4::978301968\n")
    with pytest.raises(MovieLensFormatError, match=r"line 3: user 9 is not in the users table"):
        load_local(tmp_path)


def test_a_pair_rated_twice_names_file_and_both_lines(tmp_path):
    # A blank line before the repeat: the line numbers are the file's, not the rows'.
    folder = write_ml1m(tmp_path, ratings=ML1M_RATINGS.replace("2::3::4", "\n2::3::4") + "1::2::4::978309999\n")
    with pytest.raises(
        MovieLensFormatError, match=r"ratings\.dat, line 6: user 1 rated movie 2 twice \(first on line 2\)"
    ) as err:
        load_local(folder)
    assert err.value.line == 6
    ml100k = write_ml100k(tmp_path / "ml-100k")
    (ml100k / "u.data").write_text(ML100K_DATA + "3\t1\t5\t876893200\n")
    with pytest.raises(MovieLensFormatError, match=r"u\.data, line 5: user 3 rated movie 1 twice \(first on line 4\)"):
        load_local(ml100k)


def test_bad_users_and_movies_lines_name_file_and_line(tmp_path):
    folder = write_ml1m(tmp_path)
    (folder / "users.dat").write_text(ML1M_USERS + "5::F::33::7::02460\n")
    with pytest.raises(MovieLensFormatError, match=r"users\.dat, line 5: age code 33"):
        load_local(folder)
    (folder / "users.dat").write_text(ML1M_USERS)
    (folder / "movies.dat").write_text(ML1M_MOVIES + "4::Heat (1995)::Action|Noir\n")
    with pytest.raises(MovieLensFormatError, match=r"movies\.dat, line 4: unknown genre"):
        load_local(folder)


def test_ml100k_bad_lines(tmp_path):
    folder = write_ml100k(tmp_path)
    (folder / "u.user").write_text(ML100K_USERS + "5|30|M|astronaut|12345\n")
    with pytest.raises(MovieLensFormatError, match=r"u\.user, line 5: occupation 'astronaut'"):
        load_local(folder)
    write_ml100k(folder)
    (folder / "u.data").write_text(ML100K_DATA + "1\t3\t0\t874965758\n")
    with pytest.raises(MovieLensFormatError, match=r"u\.data, line 5: rating 0 is outside"):
        load_local(folder)


def test_utf16_file_is_reported_as_an_encoding_problem(tmp_path):
    folder = write_ml1m(tmp_path)
    (folder / "users.dat").write_bytes(ML1M_USERS.encode("utf-16"))  # with a byte-order mark
    with pytest.raises(MovieLensFormatError, match=r"users\.dat: unknown encoding \(UTF-16"):
        load_local(folder)


def test_nul_byte_inside_a_recognised_file_names_the_line(tmp_path):
    folder = write_ml1m(tmp_path, ratings=ML1M_RATINGS + "3::2::4::97830\x000275\n")
    with pytest.raises(MovieLensFormatError, match=r"ratings\.dat, line 5: unknown encoding: NUL byte"):
        load_local(folder)


def test_folder_with_neither_format_lists_what_it_found_and_expects(tmp_path):
    (tmp_path / "README").write_text("nothing here\n")
    (tmp_path / "ratings.csv").write_text("userId,movieId,rating,timestamp\n1,1,4.0,964982703\n")
    with pytest.raises(MovieLensFormatError) as err:
        load_local(tmp_path)
    message = str(err.value)
    assert "neither MovieLens format" in message
    assert "README (not a MovieLens table)" in message and "ratings.csv" in message
    assert "users.dat" in message and "u.data" in message and "missing: users, movies, ratings" in message


def test_two_ratings_files_without_an_official_name_are_ambiguous(tmp_path):
    folder = write_ml1m(tmp_path, ratings_name="part1.dat")
    (folder / "part2.dat").write_text(ML1M_RATINGS)
    with pytest.raises(
        MovieLensFormatError, match=r"several files look like the ml-1m ratings table \(part1\.dat, part2\.dat\)"
    ):
        load_local(folder)


def test_missing_folder(tmp_path):
    with pytest.raises(MovieLensFormatError, match="does not exist"):
        load_local(tmp_path / "nope")


# --------------------------------------------------------------------------------------
# download source against a fake GroupLens
# --------------------------------------------------------------------------------------


def serve(httpserver, body: bytes, *, ranges: bool, path: str = "/ml-1m.zip"):
    def handler(request: Request) -> Response:
        response = Response(body, mimetype="application/zip")
        if ranges:
            response.make_conditional(request, accept_ranges=True, complete_length=len(body))
        return response

    httpserver.expect_request(path).respond_with_handler(handler)


def base(httpserver) -> str:
    return httpserver.url_for("/")


@pytest.mark.parametrize("ranges", [True, False])
def test_download_verifies_unzips_and_loads(httpserver, tmp_path, ranges):
    body = ml1m_zip_bytes()
    serve(httpserver, body, ranges=ranges)
    folder = download("ml-1m", tmp_path, base_url=base(httpserver), checksum=md5(body), progress=False, config=FAST)

    assert folder == tmp_path / "ml-1m"
    assert (tmp_path / "ml-1m.zip").read_bytes() == body
    assert not (tmp_path / "ml-1m.zip.part").exists()
    tables = load_local(folder)
    assert (tables.users.height, tables.movies.height, tables.ratings.height) == (4, 3, 4)


def test_cached_archive_makes_no_request(httpserver, tmp_path):
    body = ml1m_zip_bytes()
    serve(httpserver, body, ranges=True)
    download("ml-1m", tmp_path, base_url=base(httpserver), checksum=md5(body), progress=False, config=FAST)
    assert len(httpserver.log) == 1
    shutil.rmtree(tmp_path / "ml-1m")  # the unzipped folder is rebuilt from the cached archive
    folder = download("ml-1m", tmp_path, base_url=base(httpserver), checksum=md5(body), progress=False, config=FAST)
    download("ml-1m", tmp_path, base_url=base(httpserver), checksum=md5(body), progress=False, config=FAST)
    assert len(httpserver.log) == 1
    assert (folder / "users.dat").exists()


def test_resume_sends_range_and_completes_the_archive(httpserver, tmp_path):
    body = ml1m_zip_bytes()
    half = len(body) // 2
    (tmp_path / "ml-1m.zip.part").write_bytes(body[:half])  # a download killed halfway
    serve(httpserver, body, ranges=True)
    download("ml-1m", tmp_path, base_url=base(httpserver), checksum=md5(body), progress=False, config=FAST)

    assert (tmp_path / "ml-1m.zip").read_bytes() == body
    [(request, response)] = httpserver.log
    assert request.headers["Range"] == f"bytes={half}-"
    assert response.status_code == 206
    assert int(response.headers["Content-Length"]) == len(body) - half


def test_resume_restarts_from_zero_when_the_server_ignores_range(httpserver, tmp_path):
    body = ml1m_zip_bytes()
    (tmp_path / "ml-1m.zip.part").write_bytes(b"garbage that must not stay at the front")
    serve(httpserver, body, ranges=False)
    download("ml-1m", tmp_path, base_url=base(httpserver), checksum=md5(body), progress=False, config=FAST)

    assert (tmp_path / "ml-1m.zip").read_bytes() == body
    [(request, response)] = httpserver.log
    assert request.headers["Range"].startswith("bytes=") and response.status_code == 200


def test_connection_dropped_mid_body_resumes_on_the_next_attempt(httpserver, tmp_path):
    body = ml1m_zip_bytes()
    calls = []

    def handler(request: Request) -> Response:
        calls.append(request.headers.get("Range"))
        if len(calls) == 1:  # promise the whole body, send half, then the server dies

            def cut():
                yield body[: len(body) // 2]
                raise ConnectionResetError("simulated crash")

            return Response(cut(), headers={"Content-Length": str(len(body))}, mimetype="application/zip")
        response = Response(body, mimetype="application/zip")
        response.make_conditional(request, accept_ranges=True, complete_length=len(body))
        return response

    httpserver.expect_request("/ml-1m.zip").respond_with_handler(handler)
    small_chunks = FAST.model_copy(update={"chunk_bytes": 1024})  # what arrived before the cut is on disk
    download("ml-1m", tmp_path, base_url=base(httpserver), checksum=md5(body), progress=False, config=small_chunks)

    assert (tmp_path / "ml-1m.zip").read_bytes() == body
    assert calls[0] is None and calls[1].startswith("bytes=") and calls[1] != "bytes=0-"


def test_truncated_archive_is_rejected_and_the_next_try_starts_clean(httpserver, tmp_path):
    body = ml1m_zip_bytes()
    serve(httpserver, body[: len(body) // 2], ranges=False)  # the server itself holds a cut file
    with pytest.raises(
        MovieLensDownloadError, match=r"archive ml-1m\.zip .* not a readable zip archive, truncated or corrupt"
    ):
        download("ml-1m", tmp_path, base_url=base(httpserver), checksum=None, progress=False, config=FAST)
    assert not (tmp_path / "ml-1m.zip.part").exists() and not (tmp_path / "ml-1m.zip").exists()
    assert (tmp_path / "ml-1m.zip.rejected").exists()

    httpserver.clear()
    serve(httpserver, body, ranges=True)
    download("ml-1m", tmp_path, base_url=base(httpserver), checksum=None, progress=False, config=FAST)
    [(request, _)] = httpserver.log
    assert "Range" not in request.headers  # started clean, not resumed onto the bad bytes
    assert (tmp_path / "ml-1m.zip").read_bytes() == body


def test_checksum_mismatch_names_expected_and_actual(httpserver, tmp_path):
    body = ml1m_zip_bytes()
    serve(httpserver, body, ranges=True)
    with pytest.raises(MovieLensDownloadError) as err:
        download("ml-1m", tmp_path, base_url=base(httpserver), progress=False, config=FAST)  # the real ML-1M md5
    message = str(err.value)
    assert "ml-1m.zip" in message and "checksum mismatch" in message
    assert f"expected {ARCHIVE_MD5['ml-1m']}" in message and f"actual {md5(body)}" in message
    assert not (tmp_path / "ml-1m.zip.part").exists() and not (tmp_path / "ml-1m.zip").exists()


def test_cached_archive_that_no_longer_verifies_is_moved_aside_and_fetched_again(httpserver, tmp_path):
    body = ml1m_zip_bytes()
    (tmp_path / "ml-1m.zip").write_bytes(body[:-10])
    serve(httpserver, body, ranges=True)
    download("ml-1m", tmp_path, base_url=base(httpserver), checksum=md5(body), progress=False, config=FAST)
    assert (tmp_path / "ml-1m.zip").read_bytes() == body
    assert (tmp_path / "ml-1m.zip.rejected").read_bytes() == body[:-10]


def test_published_md5_file_is_used_and_cached(httpserver, tmp_path):
    body = ml1m_zip_bytes()
    serve(httpserver, body, ranges=True)
    httpserver.expect_request("/ml-1m.zip.md5").respond_with_data(f"MD5 (ml-1m.zip) = {md5(body)}\n")
    download("ml-1m", tmp_path, base_url=base(httpserver), checksum="published", progress=False, config=FAST)
    download("ml-1m", tmp_path, base_url=base(httpserver), checksum="published", progress=False, config=FAST)
    assert [request.path for request, _ in httpserver.log] == ["/ml-1m.zip.md5", "/ml-1m.zip"]


def test_server_errors_are_retried_a_bounded_number_of_times(httpserver, tmp_path):
    body = ml1m_zip_bytes()
    answers = iter([503, 502, 200])

    def flaky(request: Request) -> Response:
        status = next(answers)
        return Response(body if status == 200 else b"busy", status=status)

    httpserver.expect_request("/ml-1m.zip").respond_with_handler(flaky)
    download("ml-1m", tmp_path, base_url=base(httpserver), checksum=md5(body), progress=False, config=FAST)
    assert len(httpserver.log) == 3

    httpserver.clear()
    httpserver.expect_request("/ml-100k.zip").respond_with_data(b"busy", status=503)
    with pytest.raises(MovieLensDownloadError, match=r"after 3 attempt\(s\): server answered 503.*source: local"):
        download("ml-100k", tmp_path, base_url=base(httpserver), progress=False, config=FAST)
    assert len(httpserver.log) == 3


def test_not_found_is_not_retried(httpserver, tmp_path):
    httpserver.expect_request("/ml-1m.zip").respond_with_data(b"no", status=404)
    with pytest.raises(MovieLensDownloadError, match="404"):
        download("ml-1m", tmp_path, base_url=base(httpserver), progress=False, config=FAST)
    assert len(httpserver.log) == 1


def test_connection_refused_points_to_the_local_source(tmp_path):
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(MovieLensDownloadError) as err:
        download("ml-1m", tmp_path, base_url=f"http://127.0.0.1:{port}/", progress=False, config=FAST)
    message = str(err.value)
    assert "could not download" in message and "after 3 attempt(s)" in message
    assert "source: local" in message and "folder:" in message and "users.dat" in message


def test_archive_escaping_the_extraction_folder_is_refused(httpserver, tmp_path):
    body = ml1m_zip_bytes(extra_member="ml-1m/../../evil.txt")
    serve(httpserver, body, ranges=True)
    cache = tmp_path / "cache"
    with pytest.raises(MovieLensDownloadError, match=r"unsafe member path 'ml-1m/\.\./\.\./evil\.txt'"):
        download("ml-1m", cache, base_url=base(httpserver), checksum=md5(body), progress=False, config=FAST)
    assert not (tmp_path / "evil.txt").exists() and not (cache / "ml-1m").exists()


def test_licence_reminder_is_logged_when_downloading(httpserver, tmp_path, caplog):
    body = ml1m_zip_bytes()
    serve(httpserver, body, ranges=True)
    with caplog.at_level("INFO", logger="ops.data.movielens_download"):
        download("ml-1m", tmp_path, base_url=base(httpserver), checksum=md5(body), progress=False, config=FAST)
    assert "research use only" in caplog.text and "Harper" in caplog.text and "no redistribution" in caplog.text


# --------------------------------------------------------------------------------------
# the real reference copies (skipped when absent)
# --------------------------------------------------------------------------------------


def test_real_ml100k_counts():
    tables = load_local(shared_path("ml-100k"))
    assert (tables.users.height, tables.movies.height, tables.ratings.height) == (943, 1682, 100_000)
    assert tables.users["has_ratings"].all()
    assert tables.ratings["rating"].is_between(1, 5).all()
    assert set(tables.users["age"].unique()) <= {1, 18, 25, 35, 45, 50, 56}


def test_real_ml1m_counts_and_users_without_ratings():
    tables = load_local(shared_path("ml-1m"))
    assert (tables.users.height, tables.movies.height, tables.ratings.height) == (6040, 3883, 339_444)
    flags = dict(tables.users.select("user_id", "has_ratings").iter_rows())
    assert all(flags[u] for u in range(1, 2000))
    assert not any(flags[u] for u in range(2000, 6041))
    assert tables.movies.filter(pl.col("year").is_null()).height == 0


def test_real_ml1m_bad_line_in_a_copy_is_located(tmp_path):
    source = shared_path("ml-1m")
    for name in ("users.dat", "movies.dat"):
        shutil.copy(source / name, tmp_path / name)
    lines = (source / "ratings_users_1-1999.dat").read_bytes().split(b"\n")[:80_000]
    lines[65_432] = lines[65_432].replace(b"::", b"::9::", 1)  # one extra field, deep in the file
    (tmp_path / "ratings.dat").write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(MovieLensFormatError, match=r"ratings\.dat, line 65433: expected 4"):
        load_local(tmp_path)


def test_reading_a_folder_does_not_depend_on_the_download_source():
    # One-way layering: the download module imports the reading one, never the reverse.
    import ast

    import ops.data.movielens as reading

    tree = ast.parse(Path(reading.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "ops.data.movielens_download" not in imported and "requests" not in imported

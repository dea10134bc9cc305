"""The offline MM-ML-1M source: a local metadata file plus poster folders."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from pathlib import Path

import polars as pl
import pytest
from PIL import Image

from ops.data.local_metadata import LocalMetadataConfig, load_local_metadata, read_metadata_file
from ops.schema import METADATA
from tests.conftest import shared_path

OMDB_LINES = [
    # movieId::title::year::rated::released::genre::director::writer::actors::plot::poster_url
    "1::Toy Story::1995::G::22 Nov 1995::Animation, Adventure, Comedy::John Lasseter::J. Writer::Tom Hanks, Tim Allen::"
    "A little boy named Andy loves to be in his room.::https://example.invalid/1.jpg",
    "2::Jumanji::1995::PG::N/A::Adventure, Family::Joe Johnston, Ash Brannon(co-director)::N/A::Robin Williams::N/A::N/A",
    "3::Grumpier Old Men::1995::PG-13::22 Dec 1995::N/A::N/A::N/A::N/A::Max and John are still fighting.::N/A",
    "7::Sabrina::1995::PG::15 Dec 1995::Comedy, Romance::Sydney Pollack::X::Harrison Ford::Plot.::N/A",
]


def movies_frame(ids) -> pl.DataFrame:
    titles = {
        1: "Toy Story (1995)",
        2: "Jumanji (1995)",
        3: "Grumpier Old Men (1995)",
        4: "Waiting to Exhale (1995)",
        5: "Father of the Bride Part II (1995)",
        6: "Heat (1995)",
        7: "Sabrina (1995)",
    }
    return pl.DataFrame(
        {
            "item_id": ids,
            "title": [titles[i] for i in ids],
            "year": [1995] * len(ids),
            "genres": [["Comedy"]] * len(ids),
        }
    )


def _save(image: Image.Image, path: Path, fmt: str = "JPEG") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format=fmt)


@pytest.fixture
def local_source(tmp_path):
    meta = tmp_path / "extra.dat"
    meta.write_bytes(("\r\n".join(OMDB_LINES) + "\r\n").encode("utf-8"))  # CRLF, like the shared file
    first, second = tmp_path / "posters_tmdb", tmp_path / "posters_other"
    _save(Image.new("RGB", (200, 300), (200, 10, 10)), first / "1.jpg")  # red: preferred folder
    _save(Image.new("RGB", (200, 300), (10, 10, 200)), second / "1.jpg")  # blue: must lose
    _save(Image.new("CMYK", (800, 1200), (0, 255, 255, 0)), second / "2.jpg")  # large CMYK: resized, RGB
    _save(Image.new("RGBA", (300, 450), (0, 200, 0, 128)), second / "4.png", "PNG")  # no metadata, poster only
    (second / "3.jpg").write_bytes(b"<html>not a poster</html>")
    config = LocalMetadataConfig(metadata_path=meta, poster_dirs=[first, second], progress=False, workers=1)
    return config, tmp_path / "out"


def test_local_file_and_posters_give_metadata_rows(local_source):
    config, out = local_source
    result = load_local_metadata(movies_frame([1, 2, 3, 4, 5, 7]), out, config)
    meta = result.metadata
    assert meta.schema == pl.Schema(METADATA)
    assert meta["item_id"].to_list() == [1, 2, 3, 4, 7]  # 5 has neither metadata nor poster
    assert set(meta["metadata_source"]) == {"local:extra.dat"}

    toy = meta.row(0, named=True)
    assert toy["overview"] == "A little boy named Andy loves to be in his room."
    assert toy["release_date"] == dt.date(1995, 11, 22)
    assert toy["meta_genres"] == ["Animation", "Adventure", "Comedy"]
    assert toy["directors"] == ["John Lasseter"] and toy["actors"] == ["Tom Hanks", "Tim Allen"]
    # OMDb has no TMDB votes: left null, never invented.
    assert meta["vote_average"].null_count() == meta.height and meta["vote_count"].null_count() == meta.height

    jumanji = meta.row(1, named=True)
    assert jumanji["release_date"] is None and jumanji["overview"] is None  # "N/A"
    assert jumanji["directors"] == ["Joe Johnston", "Ash Brannon"]  # role note stripped
    grumpier = meta.row(2, named=True)
    assert grumpier["meta_genres"] is None and grumpier["directors"] is None and grumpier["poster_small"] is None

    failures = {(r["item_id"], r["stage"]): r["reason"] for r in result.failures.iter_rows(named=True)}
    assert set(failures) == {(3, "poster"), (4, "match"), (5, "match")}
    assert "not an image" in failures[(3, "poster")] and "3.jpg" in failures[(3, "poster")]
    assert "not in extra.dat" in failures[(4, "match")]
    assert result.stats["with_metadata"] == 4 and result.stats["with_poster"] == 3


def test_posters_prefer_the_first_folder_and_come_in_two_sizes(local_source):
    config, out = local_source
    meta = load_local_metadata(movies_frame([1, 2, 4]), out, config).metadata
    rows = {r["item_id"]: r for r in meta.iter_rows(named=True)}

    with Image.open(rows[1]["poster_small"]) as small:
        assert small.size == (185, 278) and small.getpixel((90, 140))[0] > 150  # red, from the first folder
    # 200 px is narrower than the large width: kept as it is (byte for byte), not blown up.
    large = Path(rows[1]["poster_large"])
    assert large.read_bytes() == (config.poster_dirs[0] / "1.jpg").read_bytes()

    with Image.open(rows[2]["poster_large"]) as big:
        assert big.size == (500, 750) and big.mode == "RGB"  # CMYK 800 px resized and converted
    with Image.open(rows[4]["poster_small"]) as png:
        assert png.mode == "RGB" and png.format == "JPEG"
    for r in rows.values():
        for col in ("poster_small", "poster_large"):
            p = Path(r[col])
            assert p.is_relative_to(out) and p.stem == hashlib.sha256(p.read_bytes()).hexdigest()


def test_rerun_reuses_finished_posters(local_source):
    config, out = local_source
    first = load_local_metadata(movies_frame([1, 2, 3, 4]), out, config)
    stamps = {p: p.stat().st_mtime_ns for p in (out / "posters").rglob("*.jpg")}
    lines_before = (out / "local_posters.jsonl").read_text().count("\n")
    second = load_local_metadata(movies_frame([1, 2, 3, 4]), out, config)
    assert second.metadata.equals(first.metadata)
    assert (out / "local_posters.jsonl").read_text().count("\n") == lines_before  # nothing redone
    assert {p: p.stat().st_mtime_ns for p in (out / "posters").rglob("*.jpg")} == stamps
    # A deleted poster file is rebuilt.
    Path(first.metadata.row(0, named=True)["poster_small"]).unlink()
    third = load_local_metadata(movies_frame([1, 2, 3, 4]), out, config)
    assert Path(third.metadata.row(0, named=True)["poster_small"]).is_file()


def test_bad_lines_are_named_by_file_and_line(tmp_path):
    path = tmp_path / "meta.dat"
    path.write_text(OMDB_LINES[0] + "\n" + "2::Jumanji::1995::PG\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"meta\.dat:2: 4 fields separated by '::', expected 11"):
        read_metadata_file(path, LocalMetadataConfig())
    path.write_text(OMDB_LINES[0].replace("22 Nov 1995", "Novembre 22"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"meta\.dat:1: release date 'Novembre 22'"):
        read_metadata_file(path, LocalMetadataConfig())
    path.write_text(OMDB_LINES[0] + "\n" + OMDB_LINES[0] + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"meta\.dat:2: movie id 1 appears twice"):
        read_metadata_file(path, LocalMetadataConfig())


def test_a_csv_dump_with_votes_maps_through_configuration(tmp_path):
    path = tmp_path / "tmdb_dump.csv"
    pl.DataFrame(
        {
            "id": [1, 2],
            "tmdb": [862, None],
            "overview": ["Toys.", ""],
            "vote_average": ["7.9", "N/A"],
            "vote_count": ["18,000", "12"],
            "release_date": ["1995-10-30", "1995-12-15"],
            "genres": ["Animation|Comedy", "Adventure"],
        }
    ).write_csv(path)
    config = LocalMetadataConfig(
        metadata_path=path,
        list_separator="|",
        progress=False,
        columns={
            "item_id": "id",
            "tmdb_id": "tmdb",
            "overview": "overview",
            "vote_average": "vote_average",
            "vote_count": "vote_count",
            "release_date": "release_date",
            "meta_genres": "genres",
        },
    )
    meta = load_local_metadata(movies_frame([1, 2]), tmp_path / "out", config).metadata
    assert meta["tmdb_id"].to_list() == [862, None]
    assert meta["vote_average"].to_list() == [7.9, None] and meta["vote_count"].to_list() == [18000, 12]
    assert meta["meta_genres"].to_list() == [["Animation", "Comedy"], ["Adventure"]]
    assert meta["overview"].to_list() == ["Toys.", None]
    assert set(meta["metadata_source"]) == {"local:tmdb_dump.csv"}


def test_links_fill_tmdb_ids(local_source):
    config, out = local_source
    links = pl.DataFrame({"movieId": [1, 2, 3], "imdbId": ["0114709", "0113497", None], "tmdbId": [862, 8844, None]})
    meta = load_local_metadata(
        movies_frame([1, 2, 3]), out, config.model_copy(update={"poster_dirs": []}), links=links
    ).metadata
    assert meta["tmdb_id"].to_list() == [862, 8844, None]


def test_shared_ml1m_metadata_covers_the_movies_it_lists():
    meta_file = shared_path("ml-1m-metadata", "movies_extrainfos.dat")
    movies = _ml1m_movies(shared_path("ml-1m", "movies.dat"))
    config = LocalMetadataConfig(metadata_path=meta_file, progress=False)
    result = load_local_metadata(movies, Path("/nonexistent-unused"), config)
    meta = result.metadata
    # README: 3,881 of 3,883 ids; 860 and 1795 missing; N/A counts released 42, genre 5,
    # director 12, actors 7, plot 36.
    assert meta.height == 3881
    assert sorted(result.failures.filter(pl.col("stage") == "match")["item_id"]) == [860, 1795]
    assert meta["release_date"].null_count() == 42
    assert meta["meta_genres"].null_count() == 5
    assert meta["directors"].null_count() == 12
    assert meta["actors"].null_count() == 7
    assert meta["overview"].null_count() == 36
    assert meta.filter(pl.col("item_id") == 1)["directors"].to_list() == [["John Lasseter"]]
    assert meta["release_date"].min() >= dt.date(1900, 1, 1) and meta["release_date"].max() <= dt.date(2030, 1, 1)


def test_shared_poster_folders_prefer_the_tmdb_copies(tmp_path):
    tmdb_dir = shared_path("ml-1m-posters-tmdb")
    other_dir = shared_path("ml-1m-posters")
    both = sorted({int(p.stem) for p in tmdb_dir.glob("*.jpg")} & {int(p.stem) for p in other_dir.glob("*.jpg")})[:3]
    only_other = sorted({int(p.stem) for p in other_dir.glob("*.jpg")} - {int(p.stem) for p in tmdb_dir.glob("*.jpg")})[
        :2
    ]
    ids = both + only_other
    movies = pl.DataFrame(
        {"item_id": ids, "title": [f"m{i}" for i in ids], "year": [None] * len(ids), "genres": [[]] * len(ids)}
    )
    config = LocalMetadataConfig(poster_dirs=[tmdb_dir, other_dir], progress=False, workers=1)
    meta = load_local_metadata(movies, tmp_path, config).metadata
    assert meta["item_id"].to_list() == ids and set(meta["metadata_source"]) == {"local:posters"}
    for row in meta.iter_rows(named=True):
        source = (tmdb_dir if row["item_id"] in both else other_dir) / f"{row['item_id']}.jpg"
        with Image.open(source) as src, Image.open(row["poster_small"]) as small:
            assert small.width == min(185, src.width)
            assert abs(small.height - round(src.height * small.width / src.width)) <= 1


def _ml1m_movies(path: Path) -> pl.DataFrame:
    rows = []
    for line in path.read_text(encoding="latin-1").splitlines():
        item_id, title, genres = line.split("::")
        year = re.search(r"\((\d{4})\)\s*$", title)
        rows.append(
            {
                "item_id": int(item_id),
                "title": title,
                "year": int(year.group(1)) if year else None,
                "genres": genres.split("|"),
            }
        )
    return pl.DataFrame(rows)

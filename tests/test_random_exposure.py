"""A team's random bucket (docs/data_model.md#the-random-exposure-file): the `files` source's
optional random_exposure file read into the judge's rows, every bad row refused naming file,
line and field — by the reader and before any work by the preflight of `simab run` — and a
planted world written as files that reads back with its bucket."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import polars as pl
import pytest

from ops.data.domain import DataFileError, load_files
from ops.data.random_exposure import check_random_exposure
from ops.data.synthetic import SyntheticConfig
from ops.preflight.checks import check_source
from ops.settings import PROJECT_ROOT, SettingError
from pipelines.run_config import settings_from_env
from tools.planted_files import write_planted_files

BOOKSHOP = PROJECT_ROOT / "examples" / "bookshop"


@pytest.fixture
def shop(tmp_path):
    folder = tmp_path / "shop"
    shutil.copytree(BOOKSHOP, folder, ignore=shutil.ignore_patterns("*.py"))
    return folder


def _lines(shop) -> list[str]:
    return (shop / "random_exposure.csv").read_text().splitlines()


def _write(shop, lines: list[str]) -> None:
    (shop / "random_exposure.csv").write_text("\n".join(lines) + "\n")


def test_the_bookshops_random_bucket_reads_into_the_truth():
    tables = load_files(BOOKSHOP)
    truth = tables.truth
    assert truth.height == tables.counts["random_exposure"] == 120  # 20 readers x 6 books
    assert truth["judge"].unique().to_list() == ["random_exposure"]
    assert truth["user_id"].n_unique() == 20 and truth["user_id"].is_in(tables.users["user_id"].implode()).all()
    assert (truth["liked"] == (truth["rating"] >= 4).cast(pl.Float64)).all()
    assert truth["rating"].is_between(1, 5).all() and truth["clicked"].is_null().all()
    # Drawn from the books a reader had not rated: no pair of the log is in the bucket.
    log_pairs = tables.ratings.select("user_id", "item_id")
    assert truth.join(log_pairs, on=["user_id", "item_id"], how="semi").height == 0
    # The log is not read from it: the bucket's rows are not among the ratings.
    assert tables.ratings.height == 560
    first = pl.read_csv(BOOKSHOP / "random_exposure.csv").row(0, named=True)
    row = truth.row(0, named=True)
    assert (row["user_id"], row["item_id"], row["rating"]) == (first["user_id"], first["item_id"], first["rating"])


# (how a line of the bookshop's file is spoiled, the line, the field, what is said)
BAD_ROWS = [
    (lambda lines: lines.__setitem__(3, "1,5,7"), 4, "rating", "'7' is not a whole rating 1..5"),
    (lambda lines: lines.__setitem__(5, "1,999,4"), 6, "item_id", "item 999 is not in the items file"),
    (lambda lines: lines.insert(4, lines[2]), 5, "item_id", "appear twice (first on line 3)"),
    (lambda lines: lines.__setitem__(2, "ann,5,4"), 3, "user_id", "'ann' is not a positive whole number"),
    (lambda lines: lines.__setitem__(2, "77,5,4"), 3, "user_id", "user 77 is neither a user of the interactions"),
    (lambda lines: lines.__setitem__(0, "user_id,item_id,stars"), 1, "rating", "missing column"),
]


@pytest.mark.parametrize("reader", ["load_files", "preflight"])
@pytest.mark.parametrize(("spoil", "line", "field", "said"), BAD_ROWS)
def test_a_bad_row_is_refused_naming_file_line_and_field(shop, reader, spoil, line, field, said):
    lines = _lines(shop)
    spoil(lines)
    _write(shop, lines)
    read = load_files if reader == "load_files" else check_random_exposure
    with pytest.raises(DataFileError) as refused:
        read(shop)
    assert str(refused.value).startswith(f"{shop / 'random_exposure.csv'}, line {line}, field '{field}': ")
    assert said in str(refused.value)


def test_implicit_feedback_reads_liked_and_clicked_and_parquet_names_its_row(shop):
    (shop / "dataset.json").write_text('{"item_noun": "book", "feedback": "implicit"}')
    log = pl.read_csv(shop / "interactions.csv").with_columns((pl.col("rating") >= 4).cast(pl.Int64).alias("liked"))
    log.drop("rating").write_csv(shop / "interactions.csv")
    (shop / "random_exposure.csv").write_text("user_id,item_id,liked,clicked\n1,5,true,1\n1,6,0,\n2,5,1,0\n")
    truth = load_files(shop).truth
    assert truth["liked"].to_list() == [1.0, 0.0, 1.0] and truth["clicked"].to_list() == [1.0, None, 0.0]
    assert truth["rating"].is_null().all()  # an implicit bucket records no rating
    # The file follows the domain's feedback kind: a rating column is no `liked`.
    (shop / "random_exposure.csv").write_text("user_id,item_id,rating\n1,5,4\n")
    with pytest.raises(DataFileError, match=r"random_exposure\.csv, line 1, field 'liked': missing column"):
        load_files(shop)
    (shop / "random_exposure.csv").unlink()
    pl.DataFrame({"user_id": [1, 2], "item_id": [5, 5], "liked": [1, 0], "clicked": ["1", "maybe"]}).write_parquet(
        shop / "random_exposure.parquet"
    )
    for read in (load_files, check_random_exposure):
        with pytest.raises(DataFileError, match=r"random_exposure\.parquet, row 2, field 'clicked': 'maybe'"):
            read(shop)


def test_a_folder_without_the_file_has_no_truth_and_nothing_to_check(shop):
    (shop / "random_exposure.csv").unlink()
    assert load_files(shop).truth.height == 0 and "random_exposure" not in load_files(shop).counts
    assert check_random_exposure(shop) == 0


def test_the_preflight_refuses_a_bad_row_before_any_work(shop):
    settings = settings_from_env({"SIMAB_SOURCE": "files", "SIMAB_FILES_PATH": str(shop)})
    check_source(settings)  # the good file passes
    lines = _lines(shop)
    lines[7] = lines[7].rsplit(",", 1)[0] + ",7"
    _write(shop, lines)
    with pytest.raises(SettingError) as refused:
        check_source(settings)
    said = str(refused.value)
    assert said.startswith(f"SIMAB_FILES_PATH='{shop}': {shop / 'random_exposure.csv'}, line 8, field 'rating'")
    assert "\n" not in said


def test_simab_run_refuses_a_bad_row_of_the_random_bucket_in_one_line(shop, tmp_path):
    lines = _lines(shop)
    lines[2] = "1,999,4"
    _write(shop, lines)
    home = tmp_path / "home"
    env = {
        **os.environ,
        "PYTHONPATH": str(PROJECT_ROOT),
        "SIMAB_HOME": str(home),
        "SIMAB_SOURCE": "files",
        "SIMAB_FILES_PATH": str(shop),
    }
    env.pop("DAGSTER_HOME", None)
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "pipelines.lifecycle", "--arms", "random,pop"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=PROJECT_ROOT,
    )
    took = time.monotonic() - started
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode != 0 and len(lines) == 1, lines  # one line, no Dagster cascade, no traceback
    assert lines[0].startswith(f"simab: SIMAB_FILES_PATH='{shop}': {shop / 'random_exposure.csv'}, line 3, field")
    assert "item 999 is not in the items file" in lines[0]
    assert not home.exists()  # no step ran, nothing was stored
    print(f"refused in {took:.1f} s")  # reported, not asserted (a loaded machine)


def test_a_planted_world_written_as_files_reads_back_with_its_random_bucket(tmp_path):
    config = SyntheticConfig(
        seed=3, n_users=40, n_movies=60, mean_ratings_per_user=20, min_ratings_per_user=10, exposure_bias=2.5
    )
    written = write_planted_files(config, tmp_path / "planted", images=False)
    tables = load_files(written.folder)
    bucket = written.data.truth.filter(pl.col("judge") == "random_exposure").sort("user_id", "item_id")
    assert bucket.height == tables.truth.height == written.counts["random_exposure"] == 12 * 10
    assert tables.truth.sort("user_id", "item_id").equals(bucket)
    assert tables.ratings.sort("user_id", "item_id").equals(written.data.ratings.sort("user_id", "item_id"))
    assert tables.description.name == "planted-3-exposure-2.5" and tables.movies.height == 60
    assert tables.users.height == 40 and tables.metadata["overview"].is_not_null().all()

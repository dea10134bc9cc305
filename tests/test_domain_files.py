"""The domain-neutral data model (docs/data_model.md): the `files` source's reader, the
errors that name file, line and field, and the `steam` source on a made-up fixture."""

import shutil

import polars as pl
import pytest

from fakes.scale_log import ScaleLogConfig, generate_scale_log
from fakes.steam_data import write_steam_fixture
from ops.data.domain import (
    IMPLICIT_LIKED,
    IMPLICIT_NOT_LIKED,
    DataFileError,
    load_files,
    parse_timestamp,
    parse_timestamps,
)
from ops.data.steam import STEAM_CRAWL_YEAR, load_steam
from ops.settings import PROJECT_ROOT, load
from pipelines.setting_ops import op_config

BOOKSHOP = PROJECT_ROOT / "examples" / "bookshop"


@pytest.fixture
def shop(tmp_path):
    folder = tmp_path / "shop"
    shutil.copytree(BOOKSHOP, folder, ignore=shutil.ignore_patterns("*.py"))
    return folder


def _rewrite(path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, count))


def test_the_bookshop_reads_into_the_internal_tables():
    tables = load_files(BOOKSHOP)
    assert tables.description.item_noun == "book" and tables.description.feedback == "explicit"
    assert (tables.movies.height, tables.ratings.height, tables.users.height) == (60, 560, 40)
    assert tables.users["gender"].is_null().all() and tables.users["has_ratings"].all()
    meta = tables.metadata.sort("item_id")
    assert meta["poster_small"].is_not_null().sum() == 6 and meta["item_noun"].unique().to_list() == ["book"]
    assert '"author"' in meta["attributes"][0] and tables.ratings["rating"].is_between(1, 5).all()


def test_a_missing_column_is_named_with_its_file_and_field(shop):
    _rewrite(shop / "interactions.csv", "user_id,item_id,rating,timestamp", "user_id,item_id,score,timestamp")
    with pytest.raises(DataFileError, match=r"interactions\.csv, line 1, field 'rating': missing column"):
        load_files(shop)


def test_an_unknown_item_in_the_interactions_names_its_line(shop):
    lines = (shop / "interactions.csv").read_text().splitlines()
    user, _, rest = lines[3].split(",", 2)
    lines[3] = f"{user},999,{rest}"
    (shop / "interactions.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(
        DataFileError, match=r"interactions\.csv, line 4, field 'item_id': item 999 is not in the items file"
    ):
        load_files(shop)


def test_a_bad_timestamp_names_its_line(shop):
    lines = (shop / "interactions.csv").read_text().splitlines()
    head, _ = lines[5].rsplit(",", 1)
    lines[5] = f"{head},last tuesday"
    (shop / "interactions.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFileError, match=r"interactions\.csv, line 6, field 'timestamp': 'last tuesday'"):
        load_files(shop)


def test_a_duplicate_item_id_names_both_lines(shop):
    _rewrite(shop / "items.csv", "\n2,", "\n1,")
    with pytest.raises(
        DataFileError, match=r"items\.csv, line 3, field 'item_id': duplicate item id 1 \(first on line 2\)"
    ):
        load_files(shop)


def test_an_image_that_does_not_decode_is_named(shop):
    (shop / "images" / "cover_3.png").write_bytes(b"not a png")
    with pytest.raises(DataFileError, match=r"items\.csv, line 4, field 'image'"):
        load_files(shop)


def test_parquet_files_name_their_row(shop):
    pl.read_csv(shop / "items.csv", infer_schema=False).with_columns(
        pl.when(pl.col("item_id") == "4").then(pl.lit("x")).otherwise(pl.col("item_id")).alias("item_id")
    ).write_parquet(shop / "items.parquet")
    with pytest.raises(
        DataFileError, match=r"items\.parquet, row 4, field 'item_id': 'x' is not a positive whole number"
    ):
        load_files(shop)


def test_implicit_feedback_and_user_attributes(shop):
    (shop / "dataset.json").write_text('{"item_noun": "book", "feedback": "implicit"}')
    csv = pl.read_csv(shop / "interactions.csv").with_columns((pl.col("rating") >= 4).cast(pl.Int64).alias("liked"))
    csv.drop("rating").write_csv(shop / "interactions.csv")
    bucket = pl.read_csv(shop / "random_exposure.csv")  # the random bucket follows the feedback kind too
    bucket.select("user_id", "item_id", liked=pl.col("rating") >= 4).write_csv(shop / "random_exposure.csv")
    (shop / "users.csv").write_text("user_id,gender,age,occupation,zip,favourite_shop\n1,F,25,2,10115,north\n2,,,,,\n")
    tables = load_files(shop)
    assert set(tables.ratings["rating"].unique()) == {IMPLICIT_LIKED, IMPLICIT_NOT_LIKED}
    first = tables.users.filter(pl.col("user_id") == 1).row(0, named=True)
    assert (first["gender"], first["age"], first["occupation"]) == ("F", 25, 2)
    (shop / "users.csv").write_text("user_id,gender\n1,X\n")
    with pytest.raises(DataFileError, match=r"users\.csv, line 2, field 'gender'"):
        load_files(shop)


def test_timestamps_parsed_over_a_column_read_as_one_value_at_a_time():
    values = [
        "978300760", "-5", " 12 ", "2023-01-01", "2023-01-01T10:00", "2023-01-01 10:00:05", "2023-01-01T10:00Z",
        "2023-01-01T10:00:00+05:30", "2023-01-01T10:00-0130", "2023-01-01+02:00", "2023-01-01Z", "2023-02-30",
        "2023-01-01 24:00", "2023-01-01T10:00:60", "2023-01-01T10:00+24:00", "last tuesday", "", None, "2023-1-1",
    ]  # fmt: skip
    assert parse_timestamps(pl.Series(values, dtype=pl.Utf8)).to_list() == [parse_timestamp(v) for v in values]


def test_a_repeated_pair_names_its_line_and_the_first(shop):
    lines = (shop / "interactions.csv").read_text().splitlines()
    lines.insert(7, lines[3])  # line 4 again as line 8
    (shop / "interactions.csv").write_text("\n".join(lines) + "\n")
    user, item = lines[3].split(",")[:2]
    with pytest.raises(
        DataFileError,
        match=rf"interactions\.csv, line 8, field 'item_id': user {user} and item {item} appear twice \(first on line 4\)",
    ):
        load_files(shop)


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_a_generated_log_reads_back_whole(tmp_path, file_format):
    written = generate_scale_log(
        ScaleLogConfig(n_users=300, n_items=400, n_interactions=6_000, seed=5), tmp_path, file_format
    )
    again = generate_scale_log(
        ScaleLogConfig(n_users=300, n_items=400, n_interactions=6_000, seed=5), tmp_path / "again", file_format
    )
    tables = load_files(tmp_path)
    assert (tables.users.height, tables.movies.height, tables.ratings.height) == (300, 400, written.interactions)
    assert tables.ratings.equals(load_files(again.folder).ratings)  # the seed gives the same log
    assert 5_000 < written.interactions <= 6_000 and tables.ratings["rating"].is_between(1, 5).all()
    per_user = tables.ratings.group_by("user_id").len().get_column("len")
    assert per_user.min() >= 3 and per_user.max() > 5 * per_user.median()  # lognormal activity: a long tail
    days = (tables.ratings["timestamp"].max() - tables.ratings["timestamp"].min()) / 86_400
    assert 600 < days <= 730


def test_the_steam_source_handles_every_caveat(tmp_path):
    tables = load_steam(write_steam_fixture(tmp_path), min_interactions=3)
    counts = tables.counts
    assert counts["reviews_of_games_without_metadata"] == 1 and counts["duplicate_pairs_dropped"] == 1
    assert counts["users_below_min_interactions"] == 5 and counts["yearless_dates_assumed_crawl_year"] > 0
    assert tables.users.height == 35 and tables.users["gender"].is_null().all()
    assert set(tables.ratings["rating"].unique()) == {IMPLICIT_LIKED, IMPLICIT_NOT_LIKED}
    assert not tables.ratings.select("user_id", "item_id").is_duplicated().any()
    years = pl.from_epoch(tables.ratings["timestamp"]).dt.year()
    assert years.max() == STEAM_CRAWL_YEAR and tables.metadata["poster_small"].is_null().all()
    assert (
        tables.metadata["item_noun"].unique().to_list() == ["game"]
        and '"developer"' in tables.metadata["attributes"][0]
    )
    lines = (tmp_path / "interactions.csv").read_text().splitlines()
    lines[2] = "player_000,1000,1,1,Posted sometime.,,"
    (tmp_path / "interactions.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFileError, match=r"interactions\.csv, line 3, field 'timestamp'"):
        load_steam(tmp_path, min_interactions=3)


def test_the_sources_are_settings():
    settings = load({"SIMAB_SOURCE": "files", "SIMAB_FILES_PATH": "/data/shop", "SIMAB_STEAM_MIN_INTERACTIONS": "3"})
    config = op_config(settings)["ingestion"]
    assert config == {"source": "files", "files_path": "/data/shop", "steam_min_interactions": 3}


def test_a_bad_file_fails_the_ingestion_step_and_stores_nothing(shop, tmp_path, monkeypatch):
    from dagster import materialize

    from assets.ingestion import ingestion
    from resources.mlflow_tracking import MlflowTracking
    from resources.storage import SimabIOManager

    home = tmp_path / "home"
    monkeypatch.setenv("SIMAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _rewrite(shop / "items.csv", "\n2,", "\n1,")
    result = materialize(
        [ingestion],
        resources={"io_manager": SimabIOManager(), "mlflow_tracking": MlflowTracking()},
        run_config={"ops": {"ingestion": {"config": {"source": "files", "files_path": str(shop)}}}},
        raise_on_error=False,
    )
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data.error
    assert "items.csv, line 3, field 'item_id'" in failure.message + str(failure.cause)
    stored = list((home / "assets").rglob("*.parquet")) if (home / "assets").exists() else []
    assert stored == []


def test_the_contracts_take_users_without_demographics_and_want_text_on_items():
    from data_contracts.checks import metadata_verdict, users_verdict

    tables = load_files(BOOKSHOP)
    assert users_verdict(tables.users).passed
    bare = tables.metadata.with_columns(
        pl.lit(None, dtype=pl.Utf8).alias("overview"), pl.lit([], dtype=pl.List(pl.Utf8)).alias("meta_genres")
    )
    verdict = metadata_verdict(bare, tables.movies)
    assert not verdict.passed and "have a description or categories" in verdict.problems[0]

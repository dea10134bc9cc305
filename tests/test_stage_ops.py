"""The ops functions the assets call, without Dagster: the source read into tables, the
refit plan and Table 5's text, the persona sample, the filter-bubble table."""

from __future__ import annotations

import polars as pl
import pytest

from ops.data.ingestion import ingest
from ops.readout.augmentation_summary import empty_metrics
from ops.schema import HIDDEN_TASTES, METADATA
from ops.simulation.brains.llm.persona import persona_agents, tenths
from ops.studies.augmentation import mean_differences, metrics_by_seed, refit_plan, table_5_markdown
from ops.studies.filter_bubble import FilterBubble
from tests.test_movielens import write_ml1m


def test_a_local_source_gives_its_tables_and_empty_side_tables(tmp_path):
    folder = write_ml1m(tmp_path / "ml-1m")
    heard: list[str] = []
    data = ingest(tmp_path / "home", heard.append, source="local", local_path=str(folder))
    assert data.origin == f"local:{folder}"
    assert (data.users.height, data.movies.height, data.ratings.height) == (4, 3, 4)
    assert data.tastes.height == 0 and data.tastes.schema == pl.Schema(HIDDEN_TASTES)
    assert data.side_info.height == 0 and data.side_info.schema == pl.Schema(METADATA)
    assert data.density == pytest.approx(4 / 12)
    metrics = data.metrics()
    assert metrics["users_with_ratings"] == 3 and metrics["mean_rating"] == pytest.approx(13 / 4)
    assert heard == [] and data.extra == {}


@pytest.mark.parametrize(("source", "field"), [("local", "local_path"), ("files", "files_path")])
def test_a_source_without_its_folder_names_the_setting(tmp_path, source, field):
    with pytest.raises(ValueError, match=field):
        ingest(tmp_path, print, source=source)


def test_arms_with_nothing_to_refit_are_not_applicable():
    assert refit_plan(["random", "pop"]) == ([], ["random", "pop"])
    assert table_5_markdown(empty_metrics(), ["pop"]) == "not applicable: pop has no model to refit"
    assert metrics_by_seed(empty_metrics()) == []


def test_table5_figures_are_keyed_by_arm_set_and_seed():
    rows = pl.DataFrame(
        {"arm": ["fm", "fm"], "training_set": ["original", "+click"], "seed": [3, 3]}
        | {"test_auc": [0.7, 0.72], "auc_difference": [0.0, 0.02], "added_rows": [0, 9]}
    )
    by_seed = metrics_by_seed(rows)
    assert [step for step, _ in by_seed] == [3, 3]
    assert by_seed[1][1] == {"fm_click_test_auc": 0.72, "fm_click_auc_difference": 0.02, "fm_click_added_rows": 9}
    assert mean_differences(rows.select("arm", "training_set", "auc_difference")) == {
        "fm_original_auc_difference_mean": 0.0,
        "fm_click_auc_difference_mean": 0.02,
    }


def test_the_persona_sample_is_seeded_and_sorted():
    everyone = list(range(20, 0, -1))
    assert persona_agents(everyone) == sorted(everyone)
    sample = persona_agents(everyone, 5, seed=1)
    assert len(set(sample)) == 5 and sample == sorted(sample) and set(sample) <= set(everyone)
    assert sample == persona_agents(everyone, 5, seed=1) != persona_agents(everyone, 5, seed=2)
    heard: list[str] = []
    progress = tenths(heard.append, 20)
    for done in range(1, 21):
        progress(done, 20)
    assert heard == [f"personas matched: {d}/20 agents" for d in range(2, 21, 2)]


def test_the_filter_bubble_table_has_a_column_per_round():
    metrics = pl.DataFrame(
        {
            "round": [0, 1],
            "metric": ["recommended_genres", "recommended_genres"],
            "mean": [3.0, 2.5],
            "ci_low": [2.9, 2.4],
            "ci_high": [3.1, 2.6],
        }
    )
    table = FilterBubble(metrics, agents=10, seconds=1.0).table()
    assert "3.0 [2.9, 3.1]" in table and "2.5 [2.4, 2.6]" in table
    assert table.splitlines()[0].replace(" ", "") == "|metric|0|1|"

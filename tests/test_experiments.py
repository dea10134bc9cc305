"""The papers' experiments, piece by piece and fast: the poster versions of the
thumbnail experiment, the embedded brain shown other posters, the lists, the paper's
numbers beside ours, and what each experiment's command runs.  The jobs themselves run on
the synthetic lifecycle in tests/test_end_to_end.py (they reuse its prepared data)."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
from PIL import Image

from ops.studies.experiments.thumbnails import (
    BLUE_FILTER,
    ORIGINAL,
    TRAILER_STAND_IN,
    embedded_with_posters,
    poster_version,
    thumbnail_lists,
)
from tests.tables import unpadded


def _poster(seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(90, 60, 3), dtype=np.uint8)
    pixels[:20] = (230, 40, 30)  # a red title block at the top, as posters have
    return Image.fromarray(pixels)


def test_poster_versions_keep_the_size_the_blue_filter_turns_it_blue_and_the_crop_drops_the_title_block():
    poster = _poster()
    original = np.asarray(poster_version(poster, ORIGINAL), dtype=float)
    blue = np.asarray(poster_version(poster, BLUE_FILTER), dtype=float)
    crop = poster_version(poster, TRAILER_STAND_IN)
    assert poster_version(poster, ORIGINAL).size == crop.size == poster.size
    assert np.array_equal(original, np.asarray(poster, dtype=float))
    # Blue gains on red once filtered.
    assert (blue[..., 2] - blue[..., 0]).mean() > (original[..., 2] - original[..., 0]).mean() + 50
    # The 16:9 band of a 60x90 poster is rows 28..61: the red title block (rows 0..19) is gone.
    crop_pixels = np.asarray(crop, dtype=float)
    assert not (np.abs(crop_pixels - (230, 40, 30)).sum(axis=2) < 1).all(axis=1).any()
    with pytest.raises(ValueError, match="unknown poster version"):
        poster_version(poster, "sepia")


def test_thumbnail_lists_show_only_unrated_sampled_movies_the_same_for_a_seed():
    rated = pl.DataFrame({"user_id": [1, 1, 2], "item_id": [10, 11, 12]})
    movies = list(range(10, 40))
    lists = thumbnail_lists([1, 2, 3], movies, rated, list_length=20, seed=5)
    assert lists.group_by("user_id").len().sort("user_id").rows() == [(1, 20), (2, 20), (3, 20)]
    assert lists.filter(pl.col("user_id") == 1).get_column("item_id").is_in([10, 11]).sum() == 0
    assert lists.filter(pl.col("user_id") == 2).get_column("item_id").is_in([12]).sum() == 0
    assert set(lists.get_column("item_id")) <= set(movies) and set(lists.get_column("arm")) == {"thumbnails"}
    assert lists.equals(thumbnail_lists([1, 2, 3], movies, rated, list_length=20, seed=5))
    assert not lists.equals(thumbnail_lists([1, 2, 3], movies, rated, list_length=20, seed=6))
    # Fewer unrated sampled movies than the list length: a shorter list.
    assert thumbnail_lists([1], [10, 11, 13], rated, list_length=20).get_column("item_id").to_list() == [13]


def test_the_embedded_brain_shown_other_posters_changes_only_those_rows_and_keeps_its_catalogue():
    from ops.agents.embeddings import MovieVectors

    vectors = MovieVectors(
        item_ids=np.array([1, 2, 3]),
        text=np.eye(3, dtype=np.float32),
        poster=np.eye(3, dtype=np.float32),
        has_poster=np.ones(3, bool),
        poster_look=np.array(["warm"] * 3, dtype=object),
        text_model="t",
        poster_model="p",
        digest="d",
    )

    @dataclasses.dataclass(eq=False)
    class Context:
        vectors: MovieVectors

    @dataclasses.dataclass
    class Model:
        context: Context
        params: str = "fitted"

    model = Model(Context(vectors))
    shown = embedded_with_posters(model, {2: np.array([0.0, 0.6, 0.8])})
    assert np.allclose(shown.context.vectors.poster, [[1, 0, 0], [0, 0.6, 0.8], [0, 0, 1]])
    assert np.array_equal(model.context.vectors.poster, np.eye(3))  # the fitted brain is left as it was
    assert (
        shown.context.vectors.digest == "d" and shown.params == "fitted" and shown.context.vectors.text is vectors.text
    )


def _table5_long(seeds=((1024, 0.70), (1025, 0.71))) -> pl.DataFrame:
    from ops.readout.augmentation_summary import AUGMENTATION_METRICS
    from ops.studies.experiments.augmentation_table import ROWS

    rows = []
    for seed, base in seeds:
        for i, name in enumerate(ROWS):
            rows.append(
                {
                    "simulated_arm": "deepfm",
                    "brain": "embedded" if "w/ vision" in name else "embedded:no-vision",
                    "arm": "deepfm",
                    "training_set": name,
                    "seed": seed,
                    "added_rows": 0 if i == 0 else 10 + i,
                    "added_users": 0 if i == 0 else 3,
                    "added_items": 0 if i == 0 else 7 + i,
                    "added_positive_share": None if i == 0 else (1.0 if "click" in name else 0.25),
                    "train_positive_share": 0.575,
                    "test_auc": base + 0.001 * i,
                    "auc_difference": 0.001 * i,
                }
            )
    return pl.DataFrame(rows).with_columns(
        [pl.lit(None, dtype=t).alias(c) for c, t in AUGMENTATION_METRICS.items() if c not in rows[0]]
    )


def test_table5_markdown_sets_ours_beside_the_papers_cells_and_gives_the_gains_over_seeds():
    from ops.studies.experiments.augmentation_table import ROWS, augmentation_markdown
    from ops.studies.experiments.papers import TABLE5, TABLE5_MODELS

    text = unpadded("\n".join(augmentation_markdown(_table5_long(), TABLE5, TABLE5_MODELS)))
    # Mean over the two seeds, then the paper's DeepFM cell of the same row.
    assert "| original | 0.7050 / 0.7520 |" in text
    assert "| +view (w/ vision) | 0.7090 / 0.7542 |" in text
    assert (
        sum(line.startswith("| deepfm ") for line in text.splitlines()) == 4 and "gain" in text
    )  # the four augmented rows, each with its verdict over seeds
    # The added rows, in Table 5's row order, with their label balance beside train's.
    added = [line for line in text.splitlines() if line.startswith("| +")][-4:]
    assert [line.split("|")[1].strip() for line in added] == list(ROWS[1:])
    assert [cell.strip() for cell in added[0].split("|")[3:8]] == ["11", "3", "8", "1", "0.575"]


def test_table5_runs_of_one_seed_each_combine_into_the_table_over_seeds(tmp_path, capsys):
    from ops.studies.experiments.augmentation_table import main

    paths = []
    for seed, base in ((1024, 0.70), (1025, 0.71)):
        paths.append(str(tmp_path / f"seed{seed}.csv"))
        _table5_long([(seed, base)]).write_csv(paths[-1])
    assert main(paths) == 0
    text = unpadded(capsys.readouterr().out)
    assert "mean over 2 training seed(s)" in text and "| original | 0.7050 / 0.7520 |" in text
    # A seed in two runs would be counted twice in the mean.
    with pytest.raises(ValueError, match="seed 1024 'original' is in more than one"):
        main([paths[0], paths[0]])
    with pytest.raises(FileNotFoundError, match="no table at"):
        main([str(tmp_path / "absent.csv")])


def test_each_experiment_command_runs_what_its_table_needs():
    from pipelines.experiments import plan, with_overrides
    from pipelines.jobs import run_config_for
    from pipelines.run_config import settings_from_env

    settings = settings_from_env({"SIMAB_ARMS": "pop,fm", "SIMAB_AGENTS": "30"})
    labels = {
        name: [s.label for s in plan(name, settings)]
        for name in ("table2", "table3", "table4", "table5", "thumbnails", "brains")
    }
    assert labels["table2"] == ["simab_prepare", "experiment_arm[pop]", "experiment_arm[fm]", "experiment_table2"]
    assert labels["table3"][1:] == [
        "experiment_arm[deepfm_data50]",
        "experiment_arm[deepfm_data75]",
        "experiment_arm[deepfm]",
        "experiment_table3",
    ]
    assert labels["table4"][1:] == [
        "experiment_arm[deepfm_user_id_only]",
        "experiment_arm[deepfm_movie_id_only]",
        "experiment_arm[deepfm]",
        "experiment_table4",
    ]
    # Table 5: the vision and no-vision simulations are separate partitions of their own asset.
    assert labels["table5"][1:] == [
        "experiment_arm[deepfm]",
        "experiment_simulation[deepfm|embedded]",
        "experiment_simulation[deepfm|embedded-no-vision]",
        "experiment_table5",
    ]
    assert labels["thumbnails"] == ["simab_prepare", "experiment_thumbnails"]
    assert labels["brains"][-5:] == [
        "experiment_simulation[pop|embedded]",
        "experiment_simulation[pop|llm]",
        "experiment_simulation[fm|embedded]",
        "experiment_simulation[fm|llm]",
        "experiment_brains",
    ]
    tuned = with_overrides(
        settings,
        ["ab_agent_table5.simulated_arm=fm", 'ab_agent_table5.models=["fm", "wdl"]', "ab_agent_table5.seeds=2"],
    )
    assert [s.label for s in plan("table5", tuned)][2] == "experiment_simulation[fm|embedded]"
    # Without the §3.5 ablation only the with-vision simulation runs.
    vision_only = with_overrides(settings, ["ab_agent_table5.vision_ablation=false"])
    assert [s.label for s in plan("table5", vision_only)][1:] == [
        "experiment_arm[deepfm]",
        "experiment_simulation[deepfm|embedded]",
        "experiment_table5",
    ]
    assert run_config_for("experiment_table5", tuned) == {
        "ops": {"ab_agent_table5": {"config": {"simulated_arm": "fm", "models": ["fm", "wdl"], "seeds": 2}}}
    }
    # The environment reaches the experiments' own assets: arms of Table 2, agents of their simulations.
    assert run_config_for("experiment_table2", settings)["ops"]["ab_agent_table2"]["config"]["arms"] == ["pop", "fm"]
    assert run_config_for("experiment_simulation", settings) == {
        "ops": {"experiment_simulation_events": {"config": {"n_agents": 30}}}
    }
    with pytest.raises(SystemExit, match="OP.FIELD=VALUE"):
        with_overrides(settings, ["seeds=2"])
    with pytest.raises(SystemExit, match="no op 'ab_agent_table9'; the ops: .*ab_agent_table5"):
        with_overrides(settings, ["ab_agent_table9.seeds=2"])
    with pytest.raises(SystemExit, match="no op 'movielens'; 'movielens' is called 'ingestion' now"):
        with_overrides(settings, ["movielens.synthetic_users=40"])
    assert with_overrides(settings, ["ingestion.synthetic_users=40"]).overrides["ingestion"] == {"synthetic_users": 40}


def test_a_table_whose_arms_or_simulations_are_missing_says_which_and_what_to_run():
    from ops.studies.experiments.arm_tables import arm_experiment, brain_comparison

    frame = pl.DataFrame({"arm": ["pop"]})
    with pytest.raises(
        ValueError, match=r"simulation_events lacks \['fm'\].*offline_metrics lacks \['fm'\].*experiment_arm"
    ):
        arm_experiment(["pop", "fm"], {"pop": frame}, {"pop": frame}, {"pop": frame, "fm": frame}, frame)
    with pytest.raises(ValueError, match=r"\('fm', 'llm'\).*experiment_simulation"):
        brain_comparison({("fm", "embedded"): frame}, ["fm"], ["embedded", "llm"])


def test_the_causal_and_believability_commands_run_what_they_need_and_the_judges_bill_comes_before_step_1():
    from pipelines.experiments import judge_preflight, plan, with_overrides
    from pipelines.jobs import run_config_for
    from pipelines.run_config import settings_from_env

    settings = settings_from_env({"SIMAB_ARMS": "pop,fm", "SIMAB_AGENTS": "30", "SIMAB_MAX_EPOCHS": "2"})
    assert [s.label for s in plan("causal", settings)] == ["simab_prepare", "experiment_causal"]
    # The causal study plays the filter-bubble study's rounds with the environment's agents and epochs.
    assert run_config_for("experiment_causal", settings)["ops"]["agent4rec_causal_graph"]["config"] == {
        "n_agents": 30,
        "max_epochs": 2,
    }
    judged = with_overrides(settings, ['simuser_believability.brains=["embedded", "llm"]'])
    assert [s.label for s in plan("believability", judged)] == [
        "simab_prepare",
        "experiment_arm[pop]",
        "experiment_arm[fm]",
        "experiment_simulation[pop|embedded]",
        "experiment_simulation[pop|llm]",
        "experiment_simulation[fm|embedded]",
        "experiment_simulation[fm|llm]",
        "experiment_believability",
    ]
    said = []
    judge_preflight(settings, {}, said.append)  # no endpoint: not measured, no bill
    assert "its table will say 'not measured'" in said[0]
    priced = settings_from_env(
        {
            "SIMAB_ARMS": "pop,fm",
            "SIMAB_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "SIMAB_LLM_PRICE_PROMPT_PER_1M": "2.5",
            "SIMAB_LLM_PRICE_COMPLETION_PER_1M": "10",
        }
    )
    said.clear()
    judge_preflight(priced, {}, said.append)
    assert said[1].split()[:2] == ["simuser_believability", "20"]  # 2 arms × 1 brain × 10 sessions
    capped = with_overrides(
        priced.model_copy(update={"max_cost_usd": 0.01}), ["simuser_believability.per_arm_and_brain=50"]
    )
    with pytest.raises(
        SystemExit, match=r"believability judge is expected at \$0\.\d+ for 100 sessions, above the cost limit \$0\.01"
    ):
        judge_preflight(capped, {}, said.append)

"""The papers' experiments (issue 13) as the command runs them, on a small synthetic data
set: every job's table has its rows and columns, the intervals hold their values, Table 5's
vision and no-vision simulations coexist beside the lifecycle's partition, the thumbnail
posters are written, and the brain comparison reaches the (fake) LLM endpoint."""

import polars as pl
import pytest
from dagster import DagsterInstance

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ARMS = ("random", "pop", "fm")


@pytest.fixture(scope="module")
def experiments(tmp_path_factory):
    home = tmp_path_factory.mktemp("simab_home")
    env = pytest.MonkeyPatch()
    env.setenv("SIMAB_HOME", str(home))
    env.delenv("MLFLOW_TRACKING_URI", raising=False)
    env.setenv("GX_ANALYTICS_ENABLED", "False")
    env.setenv("HF_HUB_OFFLINE", "1")
    instance = DagsterInstance.ephemeral()
    from fakes.openai_server import FakeOpenAI, scripted_agent
    from pipelines.experiments import run_experiments, with_overrides
    from pipelines.run_config import settings_from_env

    settings = settings_from_env({"SIMAB_ARMS": ",".join(ARMS), "SIMAB_AGENTS": "40", "SIMAB_MAX_EPOCHS": "1"})
    settings = with_overrides(settings, [
        "movielens.synthetic_users=70", "movielens.synthetic_movies=120", "movielens.seed=3",
        "ab_agent_table5.simulated_arm=fm", 'ab_agent_table5.models=["fm"]', "ab_agent_table5.seeds=2",
        "simuser_thumbnail_quality.n_movies=40", "simuser_thumbnail_quality.n_agents=20",
        'brain_comparison.arms=["pop", "fm"]', "brain_comparison.n_bootstrap=500",
    ])
    # Table 2 first: the lifecycle's simulation of FM, which Table 5's own simulations must leave alone.
    results = run_experiments(["table2"], settings, instance=instance, say=lambda _: None)
    lifecycle_fm = pl.read_parquet(home / "assets" / "simulation_events" / "fm.parquet")
    fake = FakeOpenAI(scripted_agent)
    with fake.serve() as url:
        env.setenv("OPENAI_BASE_URL", url)
        env.setenv("OPENAI_API_KEY", "test-key")
        results |= run_experiments(["table3", "table4", "table5", "thumbnails", "brains"], settings, reuse=True, instance=instance, say=lambda _: None)
    yield home, results, lifecycle_fm, fake
    env.undo()


def _experiment(home, name: str) -> tuple[pl.DataFrame, str]:
    folder = home / "experiments" / name
    return pl.read_csv(folder / "table.csv"), (folder / "table.md").read_text()


def _within_intervals(table: pl.DataFrame, metrics) -> bool:
    return all(((table[f"{m}_ci_low"] <= table[m] + 1e-12) & (table[m] <= table[f"{m}_ci_high"] + 1e-12)).all() for m in metrics)


def test_table2_sets_every_configured_arm_beside_the_paper_with_intervals_and_fidelity_verdicts(experiments):
    home, results, _, _ = experiments
    assert [label for label, _, _ in results["table2"]["steps"]] == ["simab_prepare", *(f"experiment_arm[{a}]" for a in ARMS), "experiment_table2"]
    table, text = _experiment(home, "table2")
    assert table["arm"].to_list() == list(ARMS) and (table["agents"] == 40).all()
    assert _within_intervals(table, ("recall_at_k", "ndcg_at_k", "ctr", "cvr", "average_rating")) and table["test_auc"].is_between(0, 1).all()
    assert (table["brain"] == "embedded").all()
    assert "| fm | embedded | 40 |" in text and "| 0.2642 |" in text and "| 0.0987 |" in text  # the paper's FM CTR and NDCG@20
    assert "Kendall" in text and sum(v in text for v in ("| agree", "| disagree", "| offline tie", "| simulation tie")) >= 1
    assert "## Protocol differences from the paper" in text and (home / "experiments" / "table2" / "plots" / "table2.png").stat().st_size > 1000
    pairs = pl.read_csv(home / "experiments" / "table2" / "fidelity_pairs.csv")
    assert pairs.height == 3 and set(pairs["verdict"]) <= {"agree", "disagree", "offline tie", "simulation tie"}
    from resources.mlflow_tracking import MlflowTracking

    client = MlflowTracking().client()
    runs = client.search_runs([MlflowTracking().experiment_id()], "tags.experiment = 'table2'")
    assert len(runs) == 1
    assert {a.path for a in client.list_artifacts(runs[0].info.run_id, "experiments/table2")} >= {"experiments/table2/table.md", "experiments/table2/table.csv"}


def test_tables_3_and_4_train_and_simulate_the_deepfm_variants_offline_and_simulated(experiments):
    home, results, _, _ = experiments
    for name, arms, paper in (("table3", ["deepfm_data50", "deepfm_data75", "deepfm"], "| 0.2205 |"),
                              ("table4", ["deepfm_user_id_only", "deepfm_movie_id_only", "deepfm"], "| 0.2754 |")):
        table, text = _experiment(home, name)
        assert table["arm"].to_list() == arms and (table["agents"] == 40).all() and (table["brain"] == "embedded").all()
        assert _within_intervals(table, ("recall_at_k", "ndcg_at_k", "ctr", "cvr", "average_rating"))
        assert paper in text and "Ordering of the 3 arms against the paper's" in text
    # The data are prepared once, and DeepFM trained once for both tables.
    assert ("simab_prepare", 0.0, True) in results["table3"]["steps"]
    assert "experiment_arm[deepfm]" in [label for label, _, reused in results["table3"]["steps"] if not reused]
    assert ("experiment_arm[deepfm]", 0.0, True) in results["table4"]["steps"]
    assert (home / "assets" / "recommender_arm" / "deepfm_data50.json").exists()


def test_table5_vision_and_no_vision_simulations_coexist_and_the_table_shows_both_side_by_side(experiments):
    home, _, lifecycle_fm, _ = experiments
    folder = home / "assets" / "experiment_simulation_events"
    seeing, blind = pl.read_parquet(folder / "fm|embedded.parquet"), pl.read_parquet(folder / "fm|embedded-no-vision.parquet")
    assert set(seeing["brain"]) == {"embedded"} and set(blind["brain"]) == {"embedded:no-vision"}
    assert set(seeing["user_id"]) == set(blind["user_id"]) and seeing["user_id"].n_unique() == 40
    # The lifecycle's own partition of the arm is untouched by the experiment's simulations.
    assert pl.read_parquet(home / "assets" / "simulation_events" / "fm.parquet").equals(lifecycle_fm)
    table, text = _experiment(home, "table5")
    from ops.readout.experiments.augmentation_table import ROWS

    assert set(table["training_set"]) == set(ROWS) and table.height == 2 * len(ROWS) and table["seed"].unique().sort().to_list() == [1024, 1025]
    by_set = {r["training_set"]: r for r in table.filter(pl.col("seed") == 1024).iter_rows(named=True)}
    assert by_set["+click (w/ vision)"]["brain"] == "embedded" and by_set["+click (w/o vision)"]["brain"] == "embedded:no-vision"
    assert all(by_set[r]["added_rows"] > 0 for r in ROWS[1:]) and by_set["original"]["auc_difference"] == 0
    for row in ROWS:
        assert f"| {row} |" in text
    assert "over seeds" in text and (home / "experiments" / "table5" / "plots" / "table5.png").stat().st_size > 1000


def test_thumbnail_experiment_gives_a_click_rate_per_poster_version_and_says_what_the_embedded_brain_sees(experiments):
    home, _, _, _ = experiments
    table, text = _experiment(home, "thumbnails")
    assert table["version"].to_list() == ["original", "blue_filter", "background_crop"] and (table["agents"] == 20).all()
    assert ((table["ci_low"] <= table["click_rate"]) & (table["click_rate"] <= table["ci_high"])).all()
    assert table["difference_vs_original"][0] == 0 and table["p_value"][1:].is_not_null().all()
    assert "cannot see objects, faces, text" in text and "background crop (trailer stand-in)" in text
    posters = home / "experiments" / "thumbnails" / "posters"
    assert len(list((posters / "blue_filter").glob("*.png"))) == 40
    first = sorted((posters / "original").glob("*.png"))[0].name
    import numpy as np
    from PIL import Image

    original, blue = (np.asarray(Image.open(posters / v / first), dtype=float) for v in ("original", "blue_filter"))
    assert (blue[..., 2] - blue[..., 0]).mean() > (original[..., 2] - original[..., 0]).mean()
    assert (home / "experiments" / "thumbnails" / "plots" / "thumbnails.png").stat().st_size > 1000


def test_brain_comparison_sets_the_embedded_and_the_llm_brain_side_by_side_on_the_same_agents(experiments):
    home, _, _, fake = experiments
    table, text = _experiment(home, "brains")
    assert table.select("arm", "brain").rows() == [("pop", "embedded"), ("pop", "llm"), ("fm", "embedded"), ("fm", "llm")]
    assert (table["agents"] == 40).all() and fake.calls > 0
    llm = pl.read_parquet(home / "assets" / "experiment_simulation_events" / "fm|llm.parquet")
    assert llm["brain"][0].startswith("llm") and set(llm["user_id"]) == set(pl.read_parquet(home / "assets" / "experiment_simulation_events" / "fm|embedded.parquet")["user_id"])
    differences = pl.read_csv(home / "experiments" / "brains" / "differences.csv")
    assert differences.height == 2 * 3 and set(differences["brain"]) == {"llm"} and set(differences["against"]) == {"embedded"}
    # The scripted fake clicks the first movie of page 1 and watches it: one click per agent.
    fake_ctr = table.filter(pl.col("brain") == "llm")["ctr"]
    assert ((fake_ctr > 0) & (fake_ctr < 0.2)).all()
    assert "| arm | CTR embedded | CTR llm |" in text and "Kendall τ" in text

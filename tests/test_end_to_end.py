"""The whole asset graph on a small synthetic data set, as the lifecycle runner runs it:
`simab_prepare`, `simab_arm` per arm, `simab_readout`; then MLflow holds the runs."""

import re

import polars as pl
import pytest

from tests.conftest import PreparedRun
from tests.tables import unpadded

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ARMS = ("random", "pop", "fm")
MIRROR = "mirror"  # the brain's own ranking, run beside the arms: no candidate


@pytest.fixture(scope="module")
def lifecycle(prepared_copy):
    """The session's prepared synthetic world (150 users, 200 movies), then `simab_arm` per
    arm and `simab_readout` on this module's copy of it."""
    home, instance, prepared = prepared_copy
    from pipelines.definitions import build_definitions

    defs = build_definitions(environ={"SIMAB_HOME": str(home)})
    results = {"prepare": prepared}
    arm_config = {
        "ops": {
            "recommender_arm": {"config": {"max_epochs": 2}},
            "simulation_events": {"config": {"n_agents": 60, "sessions_per_agent": 2}},
            "augmentation_metrics": {"config": {"max_epochs": 2, "seeds": 2}},
        }
    }
    for arm in (*ARMS, MIRROR):
        results[arm] = defs.resolve_job_def("simab_arm").execute_in_process(
            instance=instance, partition_key=arm, run_config=arm_config
        )
    results["readout"] = defs.resolve_job_def("simab_readout").execute_in_process(instance=instance)
    return home, results, instance


def _materialised(result) -> set[str]:
    if isinstance(result, PreparedRun):
        return set(result.materialised)
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def test_every_stage_materialises_and_every_contract_passes(lifecycle):
    home, results, _ = lifecycle
    assert all(r.success for r in results.values())
    assert {
        "users",
        "movies",
        "ratings",
        "movie_metadata",
        "catalogue",
        "train_ratings",
        "valid_ratings",
        "test_ratings",
        "agents",
        "embedded_brain",
    } <= _materialised(results["prepare"])
    assert results["prepare"].checks == {
        "users_contract": True,
        "movies_contract": True,
        "ratings_contract": True,
        "movie_metadata_contract": True,
    }
    for arm in ARMS:
        assert {
            "recommender_arm",
            "top20_lists",
            "offline_metrics",
            "simulation_events",
            "augmentation_metrics",
        } <= _materialised(results[arm])
        events = pl.read_parquet(home / "assets" / "simulation_events" / f"{arm}.parquet")
        assert events.get_column("user_id").n_unique() == 60 and set(events.get_column("arm").unique()) == {arm}
        assert events.group_by("session").agg(pl.col("user_id").n_unique()).sort("session").rows() == [(0, 60), (1, 60)]
    assert {"ab_readout", "simab_report"} <= _materialised(results["readout"])


def test_mlflow_has_one_parent_per_dagster_run_with_the_assets_metrics(lifecycle):
    _, results, _ = lifecycle
    from resources.mlflow_tracking import MlflowTracking

    tracking = MlflowTracking()
    client = tracking.client()
    exp = tracking.experiment_id()
    prepare_id = results["prepare"].run_id
    parents = client.search_runs([exp], f"tags.dagster_run_id = '{prepare_id}' and tags.simab_role = 'dagster_run'")
    assert len(parents) == 1
    parent = parents[0]
    assert parent.data.tags["data_source"] == "synthetic" and parent.data.tags["code_version"]
    children = {
        c.data.tags["dagster_asset"]: c
        for c in client.search_runs([exp], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    }
    # Multi-assets (ingestion, chronological_split) are named after their op.
    assert {"ingestion", "chronological_split", "movie_metadata", "catalogue", "agents", "embedded_brain"} <= set(
        children
    )
    ingest = children["ingestion"]
    assert ingest.data.metrics["users"] == 150 and ingest.data.metrics["ratings"] > 150 * 20 * 0.9
    assert {d.dataset.name for d in ingest.inputs.dataset_inputs} == {"users", "movies", "ratings"}
    split = children["chronological_split"]
    assert (
        split.data.metrics["train_rows"] + split.data.metrics["valid_rows"] + split.data.metrics["test_rows"]
        == ingest.data.metrics["ratings"]
    )


def test_arms_are_registered_and_the_report_is_written(lifecycle):
    home, results, instance = lifecycle
    from resources.mlflow_tracking import MlflowTracking

    client = MlflowTracking().client()
    for arm in ARMS:
        versions = client.search_model_versions(f"name = 'simab-{arm}'")
        assert versions, f"simab-{arm} not registered"
    report = home / "reports" / results["readout"].run_id / "report.md"
    text = unpadded(report.read_text())
    assert "Against the control pop" in text and "Kendall" in text
    # It opens on the verdict: the winner (or none) against the control with its interval, fidelity, trust.
    first = text.split("\n## ", 2)[1]
    assert first.startswith("Verdict") and "the control pop" in first and "[" in first
    assert "fidelity: Kendall" in first and "rating RMSE" in first
    # Misses count: the fidelity line splits the pairs the offline metric separates.
    assert "pairs the offline metric separates:" in first or "the offline metric separates none" in first
    # The sensitivity ladder on the run's 60 agents, and the list-quality spread as a trust figure.
    assert "- sensitivity: at 60 agents the " in first and re.search(r"list-quality spread CTR 1:1 − 1:\d+ [+-]", first)
    assert "trust in the agents: taste F1 (per item protocol)" in first and "under the papers' hold-out 1:1" in first
    # The mirror (the brain's own top-20) is simulated and measured, never a candidate: not
    # the winner, in no pair, in the bias section with its excess and each arm's overlap.
    assert "simulator bias: the mirror (mirror) is " in first and "CTR beyond what its NDCG@20 predicts" in first
    assert "Winner on CTR: mirror" not in first and "the best, mirror" not in first
    bias = text.split("## Simulator bias: the brain's own ranking (mirror arm)", 1)[1].split("\n## ", 1)[0]
    assert "| mirror | mirror" in bias and all(f"| {arm} " in bias and "candidate" in bias for arm in ARMS)
    mirror_lists = pl.read_parquet(home / "assets" / "top20_lists" / "mirror.parquet")
    train = pl.read_parquet(home / "assets" / "train_ratings.parquet")
    assert (
        mirror_lists.get_column("rank").max() == 20
        and not mirror_lists.join(train, on=["user_id", "item_id"], how="semi").height
    )
    # Where on the page the agents click: the embedded brain sees the list's order (displayed = list).
    slots = text.split("## Clicks by slot on the page", 1)[1].split("\n## ", 1)[0]
    assert all(f"| {arm} " in slots for arm in (*ARMS, MIRROR)) and "| False " in slots and "| True " not in slots
    # Arm against arm: every pair of the three arms with a verdict, and its figure.
    pairs_section = text.split("## Fidelity arm against arm", 1)[1].split("\n## ", 1)[0]
    assert sum(v in pairs_section for v in ("| agree", "| disagree", "| offline tie", "| missed")) >= 1
    assert pairs_section.count("\n| ") == 3 + 1  # header + 3 pairs
    assert (home / "reports" / results["readout"].run_id / "plots" / "fidelity_pairs.png").stat().st_size > 1000
    for arm in ARMS:
        assert f"| {arm}" in text
    # Power: 60 agents × 2 sessions, one row per pair with its MDE and a verdict, and its figure.
    power = text.split("## Power of the simulated A/B test", 1)[1].split("\n## ", 1)[0]
    assert "60 agents × 2 session(s)" in power
    assert (
        sum(
            any(v in line for v in ("| powered", "| underpowered", "| opposite direction", "| offline tie"))
            for line in power.splitlines()
        )
        == 3
    )
    assert (home / "reports" / results["readout"].run_id / "plots" / "power.png").stat().st_size > 1000
    # Table 5: FM refit on its own simulated clicks and views; Random and Pop have no model to refit.
    augmentation = text.split("## Data augmentation (A/B Agent Table 5)", 1)[1].split("\n## ", 1)[0]
    assert "Not applicable (no CTR model to refit for this arm's partition): mirror, pop, random." in augmentation
    table = pl.read_parquet(home / "assets" / "augmentation_metrics" / "fm.parquet")
    # Two training seeds: each seed has its own original, so every difference is like for like.
    assert table["training_set"].to_list() == ["original", "+click", "+view"] * 2 and set(table["arm"]) == {"fm"}
    assert table["seed"].to_list() == [1024] * 3 + [1025] * 3
    assert table["added_rows"][0] == 0 and table["added_rows"][1] > 0 and table["added_rows"][2] > 0
    assert (
        table["auc_difference"][0] == 0 and table["auc_difference"][3] == 0 and table["test_auc"].is_between(0, 1).all()
    )
    per_seed, over_seeds = augmentation.split("Over training seeds", 1)
    assert sum(line.startswith("| fm ") for line in per_seed.splitlines()) == 6
    assert sum(line.startswith("| fm ") for line in over_seeds.splitlines()) == 2  # +click, +view
    runs = client.search_runs([MlflowTracking().experiment_id()], "tags.dagster_asset = 'augmentation_metrics[fm]'")
    assert len(runs) == 1 and runs[0].data.metrics["fm_view_test_auc"] == pytest.approx(
        table["test_auc"][5]
    )  # the latest step
    history = client.get_metric_history(runs[0].info.run_id, "fm_view_test_auc")
    history = sorted((m.step, m.value) for m in history)
    assert [h[0] for h in history] == [1024, 1025] and [h[1] for h in history] == pytest.approx(
        [table["test_auc"][2], table["test_auc"][5]]
    )
    assert {a.path for a in client.list_artifacts(runs[0].info.run_id, "plots")} == {"plots/augmentation_auc_fm.png"}
    # A trained arm's run holds its learning curve, one step per epoch, beside the best epoch's figures.
    trained = client.search_runs(
        [MlflowTracking().experiment_id()], "tags.arm = 'fm' and tags.simab_role = 'asset' and metrics.best_val_auc > 0"
    )
    assert trained
    for run in trained:
        curve = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "val_auc"))
        assert [step for step, _ in curve] == list(range(1, len(curve) + 1))
        assert run.data.metrics["best_val_auc"] == pytest.approx(max(value for _, value in curve))


def test_a_resimulation_without_vision_replaces_the_partition_and_names_its_brain(lifecycle):
    # Table 5's "w/o vision" ablation through the nightly job's asset selection: the same
    # arm simulated again with posters hidden from the brain.
    home, results, instance = lifecycle
    from pipelines.definitions import build_definitions

    defs = build_definitions(environ={"SIMAB_HOME": str(home)})
    before = pl.read_parquet(home / "assets" / "simulation_events" / "random.parquet")
    config = {"ops": {"simulation_events": {"config": {"n_agents": 60, "vision": False}}}}
    result = defs.resolve_job_def("simab_resimulate").execute_in_process(
        instance=instance, partition_key="random", run_config=config
    )
    assert result.success
    after = pl.read_parquet(home / "assets" / "simulation_events" / "random.parquet")
    assert set(before.get_column("brain")) == {"embedded"} and set(after.get_column("brain")) == {"embedded:no-vision"}
    assert after.get_column("user_id").n_unique() == 60


def test_the_readout_runs_the_alignment_protocols_warns_on_fidelity_and_reports_how_far_to_trust_the_agents(lifecycle):
    home, results, _ = lifecycle
    readout = results["readout"]
    assert {
        "taste_alignment",
        "rating_alignment",
        "list_quality_alignment",
        "social_traits_alignment",
        "list_sensitivity",
    } <= _materialised(readout)
    checks = {c.check_name: c for c in readout.get_asset_check_evaluations()}
    trust = checks["fidelity_trust"]
    from dagster import AssetCheckSeverity

    assert trust.severity == AssetCheckSeverity.WARN and {"kendall_tau", "tau_floor", "disagreements"} <= set(
        trust.metadata
    )
    text = unpadded((home / "reports" / readout.run_id / "report.md").read_text())
    section = text.split("## How far to trust the agents", 1)[1].split("## Figures", 1)[0]
    for heading in (
        "Taste discrimination",
        "Rating prediction",
        "Social traits",
        "List quality",
        "response to list quality",
        "Sensitivity: the control's lists degraded step by step",
    ):
        assert f"### {heading}" in section or heading in section, heading
    assert "SimUSER" in section and "Protocol difference" in section and "best offline arm" in section
    for name in (
        "alignment_taste",
        "alignment_rating",
        "alignment_list_quality",
        "alignment_social",
        "list_response_calibration",
        "sensitivity_ladder",
    ):
        assert (home / "reports" / readout.run_id / "plots" / f"{name}.png").stat().st_size > 1000, name
    from resources.mlflow_tracking import MlflowTracking

    client = MlflowTracking().client()
    runs = client.search_runs([MlflowTracking().experiment_id()], "tags.dagster_asset = 'taste_alignment'")
    assert len(runs) == 1 and "f1_1_1" in runs[0].data.metrics and "per_item_f1_1_9" in runs[0].data.metrics
    assert "*per item*" in section and "| per item" in section and "| sandbox" in section
    # The papers' hold-out: a third protocol, its F1 logged beside the test window's.
    assert "| per item, papers' hold-out" in section and "papers_holdout_f1_1_9" in runs[0].data.metrics
    assert {a.path for a in client.list_artifacts(runs[0].info.run_id, "plots")} == {"plots/alignment_taste.png"}
    # The ladder: five rungs on the control's lists, each agent with its two sessions, its figure in MLflow.
    assert "| 0 of 20 " in section and "| 20 of 20 " in section and "60 agents × 2 session(s)" in section
    ladder = client.search_runs([MlflowTracking().experiment_id()], "tags.dagster_asset = 'list_sensitivity'")
    assert len(ladder) == 1 and {f"sensitivity_ctr_{s}_of_20" for s in (0, 5, 10, 15, 20)} <= set(
        ladder[0].data.metrics
    )
    assert {a.path for a in client.list_artifacts(ladder[0].info.run_id, "plots")} == {"plots/sensitivity_ladder.png"}
    assert {"misses", "pair_tau"} <= set(trust.metadata)


# ---------------------------------------------------------------------------------------
# The papers' experiments on the same data: every job's table has its rows and
# columns, the intervals hold their values, Table 5's vision and no-vision simulations
# coexist beside the lifecycle's partition, the thumbnail posters are written, and the
# brain comparison reaches the (fake) LLM endpoint.
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def experiments(lifecycle):
    """Every experiment on the lifecycle's data: the preparation and the arms it ran are
    reused (pipelines.experiments --reuse), the rest is trained and simulated here."""
    home, _, instance = lifecycle
    from fakes.openai_server import FakeOpenAI, scripted_agent
    from pipelines.experiments import run_experiments, with_overrides
    from pipelines.run_config import settings_from_env

    settings = settings_from_env(
        {"SIMAB_HOME": str(home), "SIMAB_ARMS": ",".join(ARMS), "SIMAB_AGENTS": "60", "SIMAB_MAX_EPOCHS": "1"}
    )
    settings = with_overrides(
        settings,
        [
            "ab_agent_table5.simulated_arm=fm",
            'ab_agent_table5.models=["fm"]',
            "ab_agent_table5.seeds=2",
            "simuser_thumbnail_quality.n_movies=40",
            "simuser_thumbnail_quality.n_agents=20",
            'brain_comparison.arms=["pop", "fm"]',
            "brain_comparison.n_bootstrap=500",
            # The judge reads the brain comparison's sessions (the fake answers as `scripted_judge`).
            'simuser_believability.arms=["pop", "fm"]',
            'simuser_believability.brains=["embedded", "llm"]',
            "simuser_believability.per_arm_and_brain=3",
            "simuser_believability.n_bootstrap=200",
            # The experiments' own simulations (Table 5, the brains) on a third of the agents: the LLM brain's requests cost time.
            "experiment_simulation_events.n_agents=20",
        ],
    )
    lifecycle_fm = pl.read_parquet(home / "assets" / "simulation_events" / "fm.parquet")
    fake = FakeOpenAI(scripted_agent)
    env = pytest.MonkeyPatch()
    with fake.serve() as url:
        env.setenv("OPENAI_BASE_URL", url)
        env.setenv("OPENAI_API_KEY", "test-key")
        results = run_experiments(
            ["table2", "table3", "table4", "table5", "thumbnails", "brains", "believability"],
            settings,
            reuse=True,
            instance=instance,
            say=lambda _: None,
        )
    env.undo()
    yield home, results, lifecycle_fm, fake


def _experiment(home, name: str) -> tuple[pl.DataFrame, str]:
    folder = home / "experiments" / name
    return pl.read_csv(folder / "table.csv"), unpadded((folder / "table.md").read_text())


def _within_intervals(table: pl.DataFrame, metrics) -> bool:
    return all(
        ((table[f"{m}_ci_low"] <= table[m] + 1e-12) & (table[m] <= table[f"{m}_ci_high"] + 1e-12)).all()
        for m in metrics
    )


def test_table2_reuses_the_lifecycles_arms_and_sets_every_arm_beside_the_paper_with_intervals_and_verdicts(experiments):
    home, results, _, _ = experiments
    assert [label for label, _, reused in results["table2"]["steps"] if not reused] == ["experiment_table2"]
    table, text = _experiment(home, "table2")
    assert table["arm"].to_list() == list(ARMS) and (table["agents"] == 60).all()
    assert (
        _within_intervals(table, ("recall_at_k", "ndcg_at_k", "ctr", "cvr", "average_rating"))
        and table["test_auc"].is_between(0, 1).all()
    )
    # The random arm was re-simulated without vision by a test above: the table names the brain of each row.
    assert table["brain"].to_list() == ["embedded:no-vision", "embedded", "embedded"]
    assert (
        "| fm | embedded | 60 |" in text and "| 0.2642 |" in text and "| 0.0987 |" in text
    )  # the paper's FM CTR and NDCG@20
    assert "Kendall" in text and sum(v in text for v in ("| agree", "| disagree", "| offline tie", "| missed")) >= 1
    assert (
        "## Protocol differences from the paper" in text
        and (home / "experiments" / "table2" / "plots" / "table2.png").stat().st_size > 1000
    )
    pairs = pl.read_csv(home / "experiments" / "table2" / "fidelity_pairs.csv")
    assert pairs.height == 3 and set(pairs["verdict"]) <= {"agree", "disagree", "offline tie", "missed"}
    from resources.mlflow_tracking import MlflowTracking

    client = MlflowTracking().client()
    runs = client.search_runs([MlflowTracking().experiment_id()], "tags.experiment = 'table2'")
    assert len(runs) == 1
    assert {a.path for a in client.list_artifacts(runs[0].info.run_id, "experiments/table2")} >= {
        "experiments/table2/table.md",
        "experiments/table2/table.csv",
    }


def test_tables_3_and_4_train_and_simulate_the_deepfm_variants_offline_and_simulated(experiments):
    home, results, _, _ = experiments
    for name, arms, paper in (
        ("table3", ["deepfm_data50", "deepfm_data75", "deepfm"], "| 0.2205 |"),
        ("table4", ["deepfm_user_id_only", "deepfm_movie_id_only", "deepfm"], "| 0.2754 |"),
    ):
        table, text = _experiment(home, name)
        assert table["arm"].to_list() == arms and (table["agents"] == 60).all() and (table["brain"] == "embedded").all()
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
    seeing, blind = (
        pl.read_parquet(folder / "fm" / "embedded.parquet"),
        pl.read_parquet(folder / "fm" / "embedded-no-vision.parquet"),
    )
    assert set(seeing["brain"]) == {"embedded"} and set(blind["brain"]) == {"embedded:no-vision"}
    assert set(seeing["user_id"]) == set(blind["user_id"]) and seeing["user_id"].n_unique() == 20
    # The lifecycle's own partition of the arm is untouched by the experiment's simulations.
    assert pl.read_parquet(home / "assets" / "simulation_events" / "fm.parquet").equals(lifecycle_fm)
    table, text = _experiment(home, "table5")
    from ops.studies.experiments.augmentation_table import ROWS

    assert (
        set(table["training_set"]) == set(ROWS)
        and table.height == 2 * len(ROWS)
        and table["seed"].unique().sort().to_list() == [1024, 1025]
    )
    by_set = {r["training_set"]: r for r in table.filter(pl.col("seed") == 1024).iter_rows(named=True)}
    assert (
        by_set["+click (w/ vision)"]["brain"] == "embedded"
        and by_set["+click (w/o vision)"]["brain"] == "embedded:no-vision"
    )
    assert all(by_set[r]["added_rows"] > 0 for r in ROWS[1:]) and by_set["original"]["auc_difference"] == 0
    for row in ROWS:
        assert f"| {row} |" in text
    assert "over seeds" in text and (home / "experiments" / "table5" / "plots" / "table5.png").stat().st_size > 1000


def test_thumbnail_experiment_gives_a_click_rate_per_poster_version_and_says_what_the_embedded_brain_sees(experiments):
    home, _, _, _ = experiments
    table, text = _experiment(home, "thumbnails")
    assert (
        table["version"].to_list() == ["original", "blue_filter", "background_crop"] and (table["agents"] == 20).all()
    )
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
    assert table.select("arm", "brain").rows() == [
        ("pop", "embedded"),
        ("pop", "llm"),
        ("fm", "embedded"),
        ("fm", "llm"),
    ]
    assert (table["agents"] == 20).all() and fake.calls > 0
    llm = pl.read_parquet(home / "assets" / "experiment_simulation_events" / "fm" / "llm.parquet")
    assert llm["brain"][0].startswith("llm") and set(llm["user_id"]) == set(
        pl.read_parquet(home / "assets" / "experiment_simulation_events" / "fm" / "embedded.parquet")["user_id"]
    )
    differences = pl.read_csv(home / "experiments" / "brains" / "differences.csv")
    assert (
        differences.height == 2 * 3
        and set(differences["brain"]) == {"llm"}
        and set(differences["against"]) == {"embedded"}
    )
    # The scripted fake clicks the first movie of page 1 and watches it: one click per agent.
    fake_ctr = table.filter(pl.col("brain") == "llm")["ctr"]
    assert ((fake_ctr > 0) & (fake_ctr < 0.2)).all()
    assert "| arm | CTR embedded | CTR llm |" in text and "Kendall τ" in text


def test_the_believability_judge_reads_the_brain_comparisons_sessions_through_the_endpoint(experiments):
    home, results, _, fake = experiments
    # Its simulations are the brain comparison's: nothing simulated again.
    assert [label for label, _, reused in results["believability"]["steps"] if not reused] == [
        "experiment_believability"
    ]
    table, text = _experiment(home, "believability")
    assert table.get_column("brain").to_list() == ["embedded", "llm"]
    assert table.get_column("trajectories").to_list() == [6, 6] and table.get_column("scored").to_list() == [6, 6]
    assert ((table["ci_low"] <= table["score"]) & (table["score"] <= table["ci_high"])).all()
    assert table["score"].is_between(1, 5).all() and "3.01 ± 0.14" in text and "Bill before the first call" in text
    judged = [
        b for b in fake.requests if b.get("response_format", {}).get("json_schema", {}).get("name") == "believability"
    ]
    assert len(judged) == 12

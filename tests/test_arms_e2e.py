"""Brought arms through the whole graph: an arm from a package installed for this
test only (entry point), an MLflow-registered model and a lists file each trained, ranked
once, simulated and read out beside Random, as `simab_prepare`, `simab_arm` per arm and
`simab_readout` run them; and malformed lists files that stop their arm and store nothing."""

from __future__ import annotations

import polars as pl
import pytest
from dagster import DagsterInstance

from fakes.arm_packages import install_tiny_arm_package, uninstall

# Readouts here skip the papers' taste hold-out (an agent rebuild and a brain refit) and draw
# 200 bootstrap replicates instead of 2,000: tests/test_end_to_end.py checks both at their defaults.
READOUT = {
    "ops": {
        "taste_alignment": {"config": {"papers_holdout": 0}},
        "ab_readout": {"config": {"n_bootstrap": 200}},
    }
}

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ARM_CONFIG = {
    "ops": {
        "recommender_arm": {"config": {"max_epochs": 1}},
        "simulation_events": {"config": {"n_agents": 30, "sessions_per_agent": 1}},
        "augmentation_metrics": {"config": {"max_epochs": 1}},
    }
}


def _lists(home, drop_user: bool = False) -> pl.DataFrame:
    """Every train and test user's 25 most-rated train movies it has not rated, with scores."""
    # The stored windows with the item column a team's system sees (item_id), as examples/lists_file.py.
    train = pl.read_parquet(home / "assets" / "train_ratings.parquet")
    test = pl.read_parquet(home / "assets" / "test_ratings.parquet")
    counts = train.group_by("item_id").len("n").sort(["n", "item_id"], descending=[True, False])
    users = pl.concat([train.select("user_id"), test.select("user_id")]).unique().sort("user_id")
    lists = (
        users.join(counts, how="cross")
        .join(train.select("user_id", "item_id"), on=["user_id", "item_id"], how="anti")
        .sort(["user_id", "n", "item_id"], descending=[False, True, False])
        .group_by("user_id", maintain_order=True)
        .head(25)
        .with_columns(pl.int_range(1, pl.len() + 1).over("user_id").alias("rank"))
        .select("user_id", "rank", "item_id", pl.col("n").cast(pl.Float64).alias("score"))
    )
    return lists.filter(pl.col("user_id") != lists.get_column("user_id").max()) if drop_user else lists


@pytest.fixture(scope="module")
def world(prepared_copy, tmp_path_factory):
    """The session's prepared synthetic world (tests/conftest.py), this module's copy."""
    import mlflow

    home, _, prepared = prepared_copy
    assert prepared.success
    # No step here reads the prepare run's records: an in-memory instance (faster than the copy's SQLite one).
    instance = DagsterInstance.ephemeral()
    site = tmp_path_factory.mktemp("site")
    install_tiny_arm_package(site)
    from assets.partitions import declare_arms
    from ops.arms.registry import forget
    from pipelines.definitions import build_definitions

    # The team's own: a lists file and a model in the registry simab writes to.
    _lists(home).write_parquet(home / "ours.parquet")
    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    from fakes.mlflow_models import log_popularity_models

    log_popularity_models(pl.read_parquet(home / "assets" / "train_ratings.parquet"), home, name="team-pop")
    specs = ["random", "itemmean", f"ours=lists:{home / 'ours.parquet'}", "prod=mlflow:models:/team-pop-score/1"]
    names = declare_arms(specs)
    defs = build_definitions(
        environ={"SIMAB_HOME": str(home), "SIMAB_ARMS": ",".join(names), "SIMAB_CONTROL": "random"}
    )
    results = {
        arm: defs.resolve_job_def("simab_arm").execute_in_process(
            instance=instance, partition_key=arm, run_config=ARM_CONFIG
        )
        for arm in names
    }
    results["readout"] = defs.resolve_job_def("simab_readout").execute_in_process(
        instance=instance, raise_on_error=False, run_config=READOUT
    )
    yield dict(home=home, defs=defs, instance=instance, results=results, names=names)
    for name in names:
        forget(name)
    uninstall(site)


def _materialised(result) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def test_each_brought_arm_is_fitted_ranked_once_simulated_and_read_out(world):
    home, results = world["home"], world["results"]
    for arm in world["names"]:
        assert results[arm].success, arm
        assert {
            "recommender_arm",
            "arm_rankings",
            "top20_lists",
            "offline_metrics",
            "simulation_events",
            "augmentation_metrics",
        } <= _materialised(results[arm])
        ranking = pl.read_parquet(home / "assets" / "arm_rankings" / f"{arm}.parquet")
        lists = pl.read_parquet(home / "assets" / "top20_lists" / f"{arm}.parquet")
        # The lists are the train users' rows of the one ranking, not a second pass.
        assert lists.equals(ranking.join(lists.select("user_id").unique(), on="user_id", how="semi"))
        events = pl.read_parquet(home / "assets" / "simulation_events" / f"{arm}.parquet")
        assert events.get_column("user_id").n_unique() == 30 and set(events.get_column("arm").unique()) == {arm}
    offline = {
        arm: pl.read_parquet(home / "assets" / "offline_metrics" / f"{arm}.parquet").row(0, named=True)
        for arm in world["names"]
    }
    assert all(0 <= row["ndcg_at_k"] <= 1 and row["users_ranked"] > 0 for row in offline.values())
    assert offline["ours"]["test_auc"] is not None and offline["prod"]["test_auc"] is not None
    # Only the arm that trains refits; the others say why not.
    refit = {
        arm: pl.read_parquet(home / "assets" / "augmentation_metrics" / f"{arm}.parquet") for arm in world["names"]
    }
    assert refit["itemmean"].height >= 1 and refit["itemmean"].get_column("arm").unique().to_list() == ["itemmean"]
    assert all(refit[arm].height == 0 for arm in ("random", "ours", "prod"))
    readout = results["readout"]
    assert readout.success and {"ab_readout", "simab_report"} <= _materialised(readout)
    # Fidelity and power treat every arm alike: every pair of the four arms has a verdict.
    text = (home / "reports" / readout.run_id / "report.md").read_text()
    for arm in world["names"]:
        assert f"| {arm}" in text, arm
    pairs = text.split("## Fidelity arm against arm", 1)[1].split("\n## ", 1)[0]
    assert pairs.count("\n| ") == 6 + 1  # header + 6 pairs
    power = text.split("## Power of the simulated A/B test", 1)[1].split("\n## ", 1)[0]
    assert (
        sum(
            any(v in line for v in ("| powered", "| underpowered", "| opposite direction", "| offline tie"))
            for line in power.splitlines()
        )
        == 6
    )


def test_the_mlflow_arm_records_uri_and_version_and_outside_arms_are_not_registered(world):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{world['home'] / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], filter_string="tags.arm = 'prod'")
    params = {k: v for r in runs for k, v in r.data.params.items()}
    assert params["uri"] == "models:/team-pop-score/1" and params["mlflow_model_version"] == "1"
    assert params["mlflow_registered_model"] == "team-pop-score"
    lists_runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], filter_string="tags.arm = 'ours'"
    )
    assert any(r.data.params.get("sha256") for r in lists_runs)
    names = {m.name for m in client.search_registered_models()}
    assert "simab-random" in names and not {"simab-ours", "simab-prod", "simab-itemmean"} & names


@pytest.mark.parametrize("kind", ["user missing", "unknown item", "duplicate", "bad type", "too few"])
def test_a_malformed_lists_file_stops_its_arm_and_stores_nothing(world, tmp_path, kind):
    from assets.partitions import declare_arms
    from ops.arms.registry import forget
    from pipelines.definitions import build_definitions

    home = world["home"]
    good = _lists(home)
    broken = {
        "user missing": lambda: _lists(home, drop_user=True),
        "unknown item": lambda: good.with_columns(
            pl.when(pl.int_range(pl.len()) == 4).then(10**7).otherwise(pl.col("item_id")).alias("item_id")
        ),
        "duplicate": lambda: pl.concat([good, good.head(1)]),
        "bad type": lambda: good.with_columns(pl.col("rank").cast(pl.Utf8).str.replace("^3$", "three")),
        "too few": lambda: good.filter((pl.col("user_id") != good.get_column("user_id").min()) | (pl.col("rank") <= 5)),
    }[kind]()
    path = tmp_path / ("broken.csv" if kind == "bad type" else "broken.parquet")
    broken.write_csv(path) if path.suffix == ".csv" else broken.write_parquet(path)
    name = f"broken-{kind.replace(' ', '-')}"
    declare_arms([f"{name}=lists:{path}"])
    try:
        defs = build_definitions(environ={"SIMAB_HOME": str(home), "SIMAB_ARMS": f"random,{name}"})
        result = defs.resolve_job_def("simab_arm").execute_in_process(
            instance=world["instance"], partition_key=name, run_config=ARM_CONFIG, raise_on_error=False
        )
        assert not result.success
        failure = next(e for e in result.all_events if e.is_step_failure)
        error = failure.step_failure_data.error
        while error.cause is not None:  # Dagster wraps the asset's own error
            error = error.cause
        message = error.message.strip()
        assert error.cls_name == "ListsFileError" and "\n" not in message
        assert str(path) in message and "field '" in message and ("row" in message), message
        assert not list((home / "assets").rglob(f"{name}*")), "nothing of the broken arm is stored"
    finally:
        forget(name)


def test_short_lists_run_filled_from_popularity_or_as_they_are(world, tmp_path):
    from assets.partitions import declare_arms
    from ops.arms.registry import forget
    from ops.readout.ab_readout import ab_readout
    from pipelines.definitions import build_definitions

    home = world["home"]
    full = _lists(home)  # 25 items of the train window's popularity order per user
    (full.filter(pl.col("rank") <= 9)).write_parquet(tmp_path / "nine.parquet")  # every list 9 items long
    names = declare_arms(
        [f"nine-pop=lists:{tmp_path / 'nine.parquet'};fill=pop", f"nine=lists:{tmp_path / 'nine.parquet'};fill=none"]
    )
    try:
        defs = build_definitions(environ={"SIMAB_HOME": str(home), "SIMAB_ARMS": ",".join(["random", *names])})
        for name in names:
            result = defs.resolve_job_def("simab_arm").execute_in_process(
                instance=world["instance"], partition_key=name, run_config=ARM_CONFIG, raise_on_error=False
            )
            assert result.success, name
        lists = {a: pl.read_parquet(home / "assets" / "top20_lists" / f"{a}.parquet") for a in ("ours", *names)}
        # fill=pop: the nine, then the popularity order: the 20 the full file's lists begin with.
        assert (
            lists["nine-pop"]
            .select("user_id", "rank", "item_id")
            .equals(lists["ours"].select("user_id", "rank", "item_id"))
        )
        # fill=none: nine items a user, two home pages, never a third.
        assert set(lists["nine"].group_by("user_id").len().get_column("len").to_list()) == {9}
        events = {
            a: pl.read_parquet(home / "assets" / "simulation_events" / f"{a}.parquet") for a in ("random", *names)
        }
        assert events["nine"].get_column("page_number").max() <= 2
        assert events["nine"].get_column("user_id").n_unique() == 30
        readout = ab_readout(pl.concat(list(events.values()), how="diagonal_relaxed"), control="random")
        per_agent = readout.per_agent
        assert per_agent.filter(pl.col("arm") == "nine").get_column("impressions").max() <= 9
        assert per_agent.filter(pl.col("arm") == "nine-pop").get_column("impressions").max() > 9
        ctr = readout.arms.filter((pl.col("arm") == "nine") & (pl.col("metric") == "ctr")).row(0, named=True)
        assert 0 < ctr["mean"] <= 1 and ctr["ci_low"] <= ctr["mean"] <= ctr["ci_high"]
        offline = {
            a: pl.read_parquet(home / "assets" / "offline_metrics" / f"{a}.parquet").row(0, named=True) for a in names
        }
        assert 0 <= offline["nine"]["recall_at_k"] <= offline["nine-pop"]["recall_at_k"] <= 1
        assert offline["nine-pop"]["ndcg_at_k"] == pytest.approx(
            pl.read_parquet(home / "assets" / "offline_metrics" / "ours.parquet").row(0, named=True)["ndcg_at_k"]
        )
    finally:
        for name in names:
            forget(name)

"""Arm × user shard partitions (issue 15 item 1): agents dealt to shards by a stable hash
of the user id, each shard a partition of its own, and the arm's events combined from its
shards equal to one unsharded run with the same seed — events and read-out."""

from __future__ import annotations

import polars as pl
import pytest
from dagster import DagsterInstance, build_schedule_context

from ops.simulation.runner import agents_of_shard, combine_shards, user_shard
from pipelines.run_config import run_config_for, settings_from_env


def test_every_agent_is_in_exactly_one_shard_and_stays_there():
    users = list(range(1, 2001))
    shards = [agents_of_shard(users, k, 4) for k in range(4)]
    assert sorted(u for shard in shards for u in shard) == users
    # Roughly even (CRC-32 of the id), and the same on every call: no seed, no process state.
    assert all(400 <= len(s) <= 600 for s in shards), [len(s) for s in shards]
    assert [user_shard(u, 4) for u in (1, 42, 6040)] == [user_shard(u, 4) for u in (1, 42, 6040)]
    assert all(user_shard(u, 1) == 0 for u in users[:50])
    with pytest.raises(ValueError, match="user shard must be in 0..3"):
        agents_of_shard(users, 4, 4)


def _events(user_ids, session=0):
    from ops.schema import EVENTS

    rows = [{"user_id": u, "step": s, "session": session, "arm": "pop"} for u in user_ids for s in (1, 2)]
    frame = pl.DataFrame(rows)
    return frame.with_columns([pl.lit(None, dtype=t).alias(c) for c, t in EVENTS.items() if c not in frame.columns]).select(list(EVENTS)).cast(EVENTS)


def test_combined_shards_are_in_the_unsharded_order_and_misfits_are_refused():
    users = list(range(1, 30))
    by_shard = {k: pl.concat([_events(agents_of_shard(users, k, 3), s) for s in (0, 1)]) for k in range(3)}
    combined = combine_shards(by_shard, 3)
    assert combined.select("session", "user_id", "step").rows() == [(s, u, t) for s in (0, 1) for u in users for t in (1, 2)]
    wrong = {0: by_shard[1], 1: by_shard[0], 2: by_shard[2]}
    with pytest.raises(ValueError, match=r"simulation shard 0 of 3 holds user \d+, who belongs to shard 1"):
        combine_shards(wrong, 3)


def test_shard_count_comes_from_the_environment_and_bad_values_name_the_variable():
    assert settings_from_env({}).shards == 1
    assert settings_from_env({"SIMAB_SHARDS": "4"}).shards == 4
    for bad in ("0", "two", "-1"):
        with pytest.raises(ValueError, match=r"\$SIMAB_SHARDS"):
            settings_from_env({"SIMAB_SHARDS": bad})


def test_sharded_jobs_give_the_simulation_settings_to_the_shards_and_the_schedule_runs_every_shard():
    from pipelines.jobs import build_jobs, build_schedules_and_sensors
    from pipelines.lifecycle import lifecycle_plan

    settings = settings_from_env({"SIMAB_SHARDS": "2", "SIMAB_ARMS": "random,pop", "SIMAB_AGENTS": "30"})
    assert run_config_for("simab_simulate", settings)["ops"] == {"simulation_shard": {"config": {"n_agents": 30, "arms": ["random", "pop"]}}}
    assert "simulation_events" not in run_config_for("simab_arm", settings).get("ops", {})
    assert [s.label for s in lifecycle_plan(settings)] == [
        "simab_prepare", "simab_arm[random]", "simab_simulate[random|0]", "simab_simulate[random|1]", "simab_combine[random]",
        "simab_arm[pop]", "simab_simulate[pop|0]", "simab_simulate[pop|1]", "simab_combine[pop]", "simab_readout",
    ]
    unsharded = settings_from_env({"SIMAB_ARMS": "random,pop"})
    assert [s.label for s in lifecycle_plan(unsharded)] == ["simab_prepare", "simab_arm[random]", "simab_arm[pop]", "simab_readout"]
    (nightly,), sensors = build_schedules_and_sensors(settings, build_jobs(settings))
    from datetime import datetime, timezone

    requests = list(nightly(build_schedule_context(scheduled_execution_time=datetime(2026, 11, 22, 2, tzinfo=timezone.utc))))
    assert [r.partition_key for r in requests] == ["random|0", "random|1", "pop|0", "pop|1"]
    assert {s.name for s in sensors} == {"readout_after_simulation", "combine_after_shards"}


def test_the_combine_sensor_waits_for_every_shard_of_an_arm():
    import time

    from dagster import AssetMaterialization, RunRequest, SkipReason, build_sensor_context

    from pipelines.jobs import build_jobs, build_schedules_and_sensors

    settings = settings_from_env({"SIMAB_SHARDS": "2", "SIMAB_ARMS": "pop"})
    _, sensors = build_schedules_and_sensors(settings, build_jobs(settings))
    combine = next(s for s in sensors if s.name == "combine_after_shards")
    with DagsterInstance.ephemeral() as instance:
        def shard_done(key):
            time.sleep(0.01)
            instance.report_runless_asset_event(AssetMaterialization(asset_key="simulation_shard", partition=key))

        shard_done("pop|0")
        skip = combine(build_sensor_context(instance=instance))
        assert isinstance(skip, SkipReason) and "pop: shard(s) [1]" in skip.skip_message
        shard_done("pop|1")
        (request,) = combine(build_sensor_context(instance=instance))
        assert isinstance(request, RunRequest) and request.partition_key == "pop" and request.job_name in (None, "simab_combine")
        time.sleep(0.01)
        instance.report_runless_asset_event(AssetMaterialization(asset_key="simulation_events", partition="pop"))
        assert isinstance(combine(build_sensor_context(instance=instance)), SkipReason)


@pytest.mark.slow
@pytest.mark.e2e
def test_sharded_readout_equals_the_unsharded_one(tmp_path, monkeypatch):
    """The same seed, unsharded then in 3 shards per arm, in one $SIMAB_HOME: the combined
    events are the unsharded ones row for row (run id and latency aside), and so is the
    A/B read-out; a missing shard is named instead of combined."""
    from pipelines.definitions import build_definitions
    from tests.shard_runs import ARMS, SIMULATION, environ, prepare_and_simulate, run, stored_events

    home = tmp_path / "home"
    monkeypatch.setenv("SIMAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    instance = DagsterInstance.ephemeral()
    readout_config = {"ops": {"ab_readout": {"config": {"n_bootstrap": 200}}}}
    unsharded = prepare_and_simulate(home, instance)
    defs = build_definitions(environ=environ(home))
    before = run(defs, instance, "simab_readout", readout_config, assets=["ab_readout"]).output_for_node("ab_readout")

    sharded = build_definitions(environ=environ(home, SIMAB_SHARDS="3"))
    shard_config = {"ops": {"simulation_shard": {"config": SIMULATION}}}
    run(sharded, instance, "simab_simulate", shard_config, "pop|0")
    failed = sharded.resolve_job_def("simab_combine").execute_in_process(instance=instance, partition_key="pop", raise_on_error=False)
    assert not failed.success
    assert "shard(s) [1, 2] of 3 not simulated yet; materialise simulation_shard pop|1, pop|2" in str([e.message for e in failed.all_events if e.is_failure])
    for arm in ARMS:
        for shard in range(3):
            run(sharded, instance, "simab_simulate", shard_config, f"{arm}|{shard}")
        run(sharded, instance, "simab_combine", {}, arm)
        shards = [pl.read_parquet(home / "assets" / "simulation_shard" / arm / f"{k}.parquet") for k in range(3)]
        assert all(s.height for s in shards) and sum(s.get_column("user_id").n_unique() for s in shards) == SIMULATION["n_agents"]
        combined = stored_events(home, arm)
        assert combined.equals(unsharded[arm]), arm
        assert (home / "checkpoints" / "simulation_events" / arm / "shard-2-of-3").is_dir()
    after = run(sharded, instance, "simab_readout", readout_config, assets=["ab_readout"]).output_for_node("ab_readout")
    assert after.arms.equals(before.arms) and after.comparisons.equals(before.comparisons)
    assert after.per_agent.equals(before.per_agent) and after.arms.height > 0

"""The nightly re-simulation schedule and the sensor that reads the arms out afterwards,
evaluated against a real (ephemeral) Dagster instance."""

import time
from datetime import UTC, datetime

import pytest
from dagster import (
    AssetMaterialization,
    DagsterInstance,
    RunRequest,
    SkipReason,
    build_schedule_context,
    build_sensor_context,
)

from pipelines.jobs import build_jobs, build_schedules_and_sensors
from pipelines.run_config import settings_from_env

SETTINGS = settings_from_env({"SIMAB_ARMS": "random,pop", "SIMAB_AGENTS": "30"})
(nightly_resimulation,), (readout_after_simulation,) = build_schedules_and_sensors(SETTINGS, build_jobs(SETTINGS))


@pytest.fixture
def two_arms():
    return SETTINGS


def test_the_nightly_schedule_requests_one_resimulation_per_configured_arm(two_arms):
    night = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
    requests = list(nightly_resimulation(build_schedule_context(scheduled_execution_time=night)))
    assert [(r.partition_key, r.run_key) for r in requests] == [
        ("random", "2026-11-22-random"),
        ("pop", "2026-11-22-pop"),
    ]
    assert all(r.tags["simab/night"] == "2026-11-22" for r in requests)
    # The environment's settings travel with the request (read once, not at import).
    assert all(r.run_config["ops"]["simulation_events"]["config"]["n_agents"] == 30 for r in requests)
    # The next night gets new run keys, so Dagster does not drop them as duplicates.
    later = list(
        nightly_resimulation(build_schedule_context(scheduled_execution_time=datetime(2026, 11, 23, 2, 0, tzinfo=UTC)))
    )
    assert {r.run_key for r in later}.isdisjoint({r.run_key for r in requests})


def _simulated(instance, arm: str) -> None:
    time.sleep(0.01)  # materialisation timestamps must be strictly ordered
    instance.report_runless_asset_event(AssetMaterialization(asset_key="simulation_events", partition=arm))


def _evaluate(instance):
    return readout_after_simulation(build_sensor_context(instance=instance))


def test_the_sensor_reads_out_only_once_every_arm_is_simulated_again(two_arms):
    with DagsterInstance.ephemeral() as instance:
        skip = _evaluate(instance)
        assert isinstance(skip, SkipReason) and "'random'" in skip.skip_message

        _simulated(instance, "random")
        skip = _evaluate(instance)
        assert isinstance(skip, SkipReason) and "'pop'" in skip.skip_message

        _simulated(instance, "pop")
        first = _evaluate(instance)
        assert isinstance(first, RunRequest)

        # After the read-out, one re-simulated arm is not enough; both are.
        time.sleep(0.01)
        instance.report_runless_asset_event(AssetMaterialization(asset_key="ab_readout"))
        assert isinstance(_evaluate(instance), SkipReason)
        _simulated(instance, "pop")
        assert isinstance(_evaluate(instance), SkipReason)
        _simulated(instance, "random")
        second = _evaluate(instance)
        assert isinstance(second, RunRequest) and second.run_key != first.run_key


def test_a_continuing_nightly_schedule_runs_each_arms_next_round_from_the_last_rounds_memories():
    settings = settings_from_env(
        {"SIMAB_ARMS": "random,pop", "SIMAB_NIGHTLY": "continue", "SIMAB_ROUNDS": "3", "SIMAB_AGENTS": "30"}
    )
    (nightly,), _ = build_schedules_and_sensors(settings, build_jobs(settings))
    assert nightly.job_name == "simab_rounds"
    night = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
    from dagster import instance_for_test

    with instance_for_test() as instance:  # the schedule context needs an instance it can refer to
        for key in ("pop|0", "pop|1", "random|0", "random|1", "random|2"):
            instance.report_runless_asset_event(AssetMaterialization(asset_key="memory_after_round", partition=key))
        requests = list(nightly(build_schedule_context(instance=instance, scheduled_execution_time=night)))
    # pop goes on with round 2; random has lived all 3 rounds ($SIMAB_ROUNDS) and is left alone.
    assert [str(r.partition_key) for r in requests] == ["pop|2"]
    assert requests[0].run_config["ops"]["agent_round"]["config"]["n_agents"] == 30
    with pytest.raises(ValueError, match="SIMAB_NIGHTLY"):
        settings_from_env({"SIMAB_NIGHTLY": "sometimes"})


def _automation(env: dict):
    settings = settings_from_env({"SIMAB_ARMS": "random,pop", "SIMAB_AGENTS": "30", **env})
    (nightly,), (readout,) = build_schedules_and_sensors(settings, build_jobs(settings))
    return nightly, readout


def test_what_spends_on_the_llm_starts_stopped_and_says_what_a_night_costs():
    from dagster import DefaultScheduleStatus, DefaultSensorStatus

    nightly, readout = _automation({"SIMAB_BRAIN": "llm"})  # gpt-4o-mini's prices, the default limit
    assert nightly.default_status == DefaultScheduleStatus.STOPPED
    assert readout.default_status == DefaultSensorStatus.STOPPED
    for described in (nightly.description, readout.description):
        assert "a night costs about $" in described and "at most $5.00 per night" in described
        assert "Overview → Automation" in described
    lifted, _ = _automation({"SIMAB_BRAIN": "llm", "SIMAB_MAX_COST_USD": "none"})
    assert lifted.default_status == DefaultScheduleStatus.STOPPED and "NO limit per night" in lifted.description
    # Nothing to pay: running from the start, as before.
    for env in (
        {},
        {"SIMAB_BRAIN": "llm", "SIMAB_LLM_PRICE_PROMPT_PER_1M": "0", "SIMAB_LLM_PRICE_COMPLETION_PER_1M": "0"},
    ):
        nightly, readout = _automation(env)
        assert nightly.default_status == DefaultScheduleStatus.RUNNING
        assert readout.default_status == DefaultSensorStatus.RUNNING
        assert "No LLM bill" in nightly.description


def test_the_runs_of_one_night_share_one_bill_and_the_read_out_joins_it():
    from dagster import StaticPartitionsDefinition, asset, materialize, mem_io_manager

    from resources.llm import LIFECYCLE_TAG

    nightly, readout = _automation({"SIMAB_BRAIN": "llm"})
    night = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
    requests = list(nightly(build_schedule_context(scheduled_execution_time=night)))
    assert {r.tags[LIFECYCLE_TAG] for r in requests} == {"night-2026-11-22"}

    @asset(name="simulation_events", partitions_def=StaticPartitionsDefinition(["random", "pop"]))
    def simulated() -> int:
        return 1

    with DagsterInstance.ephemeral() as instance:
        for arm in ("random", "pop"):
            tags = {LIFECYCLE_TAG: "night-2026-11-22"}
            materialize(
                [simulated], instance=instance, partition_key=arm, tags=tags, resources={"io_manager": mem_io_manager}
            )
        request = readout(build_sensor_context(instance=instance))
        assert isinstance(request, RunRequest) and request.tags == {LIFECYCLE_TAG: "night-2026-11-22"}
        # An arm simulated by hand since: the read-out is nobody's night, it has a bill of its own.
        time.sleep(0.01)
        materialize([simulated], instance=instance, partition_key="pop", resources={"io_manager": mem_io_manager})
        request = readout(build_sensor_context(instance=instance))
        assert isinstance(request, RunRequest) and LIFECYCLE_TAG not in request.tags


def test_the_nightly_schedule_runs_in_the_time_zone_the_setting_names():
    assert nightly_resimulation.execution_timezone == "UTC"  # the default
    berlin = settings_from_env({"SIMAB_ARMS": "random,pop", "SIMAB_SCHEDULE_TIMEZONE": "Europe/Berlin"})
    (schedule,), _ = build_schedules_and_sensors(berlin, build_jobs(berlin))
    assert schedule.execution_timezone == "Europe/Berlin" and "Europe/Berlin" in schedule.description
    from ops.settings import SettingError

    with pytest.raises(SettingError, match=r"SIMAB_SCHEDULE_TIMEZONE='Mars/Olympus': an IANA time zone"):
        settings_from_env({"SIMAB_SCHEDULE_TIMEZONE": "Mars/Olympus"})

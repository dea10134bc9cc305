"""Arm × user shard partitions: agents dealt to shards by a stable hash
of the user id, each shard a partition of its own, and the arm's events combined from its
shards equal to one unsharded run with the same seed — events and read-out."""

from __future__ import annotations

from datetime import UTC

import polars as pl
import pytest
from dagster import DagsterInstance, build_schedule_context

from ops.simulation.assignment import agents_of_shard, combine_shards, user_shard
from pipelines.jobs import run_config_for
from pipelines.run_config import settings_from_env


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
    return (
        frame.with_columns([pl.lit(None, dtype=t).alias(c) for c, t in EVENTS.items() if c not in frame.columns])
        .select(list(EVENTS))
        .cast(EVENTS)
    )


def test_combined_shards_are_in_the_unsharded_order_and_misfits_are_refused():
    users = list(range(1, 30))
    by_shard = {k: pl.concat([_events(agents_of_shard(users, k, 3), s) for s in (0, 1)]) for k in range(3)}
    combined = combine_shards(by_shard, 3)
    assert combined.select("session", "user_id", "step").rows() == [
        (s, u, t) for s in (0, 1) for u in users for t in (1, 2)
    ]
    wrong = {0: by_shard[1], 1: by_shard[0], 2: by_shard[2]}
    with pytest.raises(ValueError, match=r"simulation shard 0 of 3 holds user \d+, who belongs to shard 1"):
        combine_shards(wrong, 3)


def test_shard_count_comes_from_the_environment_and_bad_values_name_the_variable():
    assert settings_from_env({}).shards == 1
    assert settings_from_env({"SIMAB_SHARDS": "4"}).shards == 4
    for bad in ("0", "two", "-1"):
        with pytest.raises(ValueError, match=r"^SIMAB_SHARDS=.*whole number ≥ 1"):
            settings_from_env({"SIMAB_SHARDS": bad})


def test_sharded_jobs_give_the_simulation_settings_to_the_shards_and_the_schedule_runs_every_shard():
    from pipelines.jobs import build_jobs, build_schedules_and_sensors
    from pipelines.plan import lifecycle_plan

    settings = settings_from_env({"SIMAB_SHARDS": "2", "SIMAB_ARMS": "random,pop", "SIMAB_AGENTS": "30"})
    assert run_config_for("simab_simulate", settings)["ops"] == {
        "simulation_shard": {"config": {"n_agents": 30, "arms": ["random", "pop"]}}
    }
    assert "simulation_events" not in run_config_for("simab_arm", settings).get("ops", {})
    assert [s.label for s in lifecycle_plan(settings)] == [
        "simab_prepare",
        "simab_arm[random]",
        "simab_simulate[random|0]",
        "simab_simulate[random|1]",
        "simab_combine[random]",
        "simab_arm[pop]",
        "simab_simulate[pop|0]",
        "simab_simulate[pop|1]",
        "simab_combine[pop]",
        "simab_readout",
    ]
    unsharded = settings_from_env({"SIMAB_ARMS": "random,pop"})
    assert [s.label for s in lifecycle_plan(unsharded)] == [
        "simab_prepare",
        "simab_arm[random]",
        "simab_arm[pop]",
        "simab_readout",
    ]
    (nightly,), sensors = build_schedules_and_sensors(settings, build_jobs(settings))
    from datetime import datetime

    requests = list(nightly(build_schedule_context(scheduled_execution_time=datetime(2026, 11, 22, 2, tzinfo=UTC))))
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
        assert (
            isinstance(request, RunRequest)
            and request.partition_key == "pop"
            and request.job_name in (None, "simab_combine")
        )
        time.sleep(0.01)
        instance.report_runless_asset_event(AssetMaterialization(asset_key="simulation_events", partition="pop"))
        assert isinstance(combine(build_sensor_context(instance=instance)), SkipReason)


@pytest.fixture(scope="module")
def unsharded(prepared_copy):
    """Both arms simulated unsharded in this module's copy of the session's prepared world:
    the reference."""
    from tests.shard_runs import simulate

    home, _, _ = prepared_copy
    # No step here reads the prepare run's records: an in-memory instance (faster than the copy's SQLite one).
    instance = DagsterInstance.ephemeral()
    return home, instance, simulate(home, instance)


@pytest.mark.slow
@pytest.mark.e2e
def test_sharded_readout_equals_the_unsharded_one(unsharded, monkeypatch):
    """The same seed, unsharded then in 3 shards per arm, in one $SIMAB_HOME: the combined
    events are the unsharded ones row for row (run id and latency aside), and so is the
    A/B read-out; a missing shard is named instead of combined."""
    from pipelines.definitions import build_definitions
    from tests.shard_runs import ARMS, SIMULATION, environ, run, stored_events

    home, instance, events = unsharded
    monkeypatch.setenv("SIMAB_HOME", str(home))
    readout = {"ops": {"ab_readout": {"config": {"n_bootstrap": 200}}}}
    before = run(
        build_definitions(environ=environ(home)), instance, "simab_readout", readout, assets=["ab_readout"]
    ).output_for_node("ab_readout")
    sharded = build_definitions(environ=environ(home, SIMAB_SHARDS="3"))
    shard_config = {"ops": {"simulation_shard": {"config": SIMULATION}}}
    run(sharded, instance, "simab_simulate", shard_config, "pop|0")
    failed = sharded.resolve_job_def("simab_combine").execute_in_process(
        instance=instance, partition_key="pop", raise_on_error=False
    )
    assert not failed.success
    assert "shard(s) [1, 2] of 3 not simulated yet; materialise simulation_shard pop|1, pop|2" in str(
        [e.event_specific_data for e in failed.all_events if e.is_failure]
    )
    for arm in ARMS:
        for shard in range(3):
            if (arm, shard) != ("pop", 0):
                run(sharded, instance, "simab_simulate", shard_config, f"{arm}|{shard}")
        run(sharded, instance, "simab_combine", {}, arm, assets=["simulation_events"])
        shards = [pl.read_parquet(home / "assets" / "simulation_shard" / arm / f"{k}.parquet") for k in range(3)]
        assert (
            all(s.height for s in shards)
            and sum(s.get_column("user_id").n_unique() for s in shards) == SIMULATION["n_agents"]
        )
        assert stored_events(home, arm).equals(events[arm]), arm
        assert (home / "checkpoints" / "simulation_events" / arm / "shard-2-of-3").is_dir()
    after = run(sharded, instance, "simab_readout", readout, assets=["ab_readout"]).output_for_node("ab_readout")
    assert after.arms.equals(before.arms) and after.comparisons.equals(before.comparisons)
    assert after.per_agent.equals(before.per_agent) and after.arms.height > 0


# -- the Celery executor ------------------------------------------------------------------


def _celery_parts_or_skip() -> str:
    """redis-server's path; a skip (a failure in CI, where .ci/run installs it) without it."""
    import importlib.util
    import os
    import shutil

    server = shutil.which("redis-server")
    missing = [
        what
        for what, ok in (
            ("redis-server (Debian package redis-server)", server),
            ("dagster-celery", importlib.util.find_spec("dagster_celery")),
            ("redis (the Python client)", importlib.util.find_spec("redis")),
        )
        if not ok
    ]
    if missing:
        message = f"the Celery executor test needs {', '.join(missing)}; .ci/run installs them"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return server


@pytest.mark.slow
@pytest.mark.e2e
def test_shards_run_on_two_celery_workers_through_redis_and_give_the_in_process_events(unsharded, tmp_path):
    """redis-server on a free 127.0.0.1 port, two `celery -A dagster_celery.app worker`
    processes with the project on their path, a persistent Dagster instance in tmp: both
    shards of pop materialised at once (`dagster asset materialize`, two processes) through
    the Celery executor, then combined through it.
    The events equal the in-process unsharded run's, and the steps ran in the workers."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from dagster import DagsterEventType

    from fakes.redis_broker import free_port, redis_command
    from tests.shard_runs import SIMULATION, environ, stored_events

    server = _celery_parts_or_skip()
    reference_home, _, events = unsharded
    home = tmp_path / "home"
    shutil.copytree(reference_home, home)
    shutil.rmtree(
        home / "assets" / "simulation_shard", ignore_errors=True
    )  # of the in-process sharded test, if it ran first
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    settings = environ(
        home,
        SIMAB_SHARDS="2",
        SIMAB_EXECUTOR="celery",
        SIMAB_CELERY_BROKER=broker,
        DAGSTER_HOME=str(tmp_path / "dagster_home"),
    )
    project = Path(__file__).resolve().parents[1]
    celery_config = tmp_path / "celery_config"
    celery_config.mkdir()
    # dagster_celery.app reads its broker from this module (what `dagster-celery worker start -y` writes).
    (celery_config / "dagster_celery_config.py").write_text(f"broker_url = {broker!r}\nresult_backend = {broker!r}\n")
    worker_env = {**os.environ, **settings, "PYTHONPATH": os.pathsep.join([str(celery_config), str(project)])}
    worker_env.pop("MLFLOW_TRACKING_URI", None)
    processes = [
        subprocess.Popen(redis_command(server, port, tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    ]
    logs = []
    try:
        _wait_for_redis(port, processes[0])
        for name in ("w1", "w2"):
            log = open(tmp_path / f"{name}.log", "wb")
            logs.append(log)
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "dagster_celery.app",
                        "worker",
                        "--pool=solo",
                        "--concurrency=1",
                        "--prefetch-multiplier=1",
                        "-n",
                        f"{name}@%h",
                        "--loglevel=INFO",
                        "--without-gossip",
                        "--without-mingle",
                        "--without-heartbeat",
                    ],
                    cwd=project,
                    env=worker_env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        _wait_for_workers(broker, 2, processes, tmp_path)
        from pipelines.instance import write_instance_config

        write_instance_config(settings["DAGSTER_HOME"])
        from dagster import AssetKey, DagsterInstance

        # The SQLite storages are created here, once: two processes creating them at the same
        # moment race on their schema stamps (a deployment uses Postgres, migrated once).
        with DagsterInstance.from_config(settings["DAGSTER_HOME"]) as instance:
            instance.get_runs(limit=1)
            instance.get_latest_materialization_event(AssetKey("simulation_shard"))
            instance.all_instigator_state()
        cli_env = {key: value for key, value in worker_env.items() if key != "PYTHONPATH"}

        def materialise(asset: str, partition: str, config: dict) -> subprocess.Popen:
            """What a person types: the code location's executor (celery here) runs the step."""
            import json

            command = [
                sys.executable,
                "-m",
                "dagster",
                "asset",
                "materialize",
                "-m",
                "pipelines.definitions",
                "-a",
                "defs",
                "--select",
                asset,
                "--partition",
                partition,
                "--config-json",
                json.dumps(config),
            ]
            return subprocess.Popen(command, cwd=project, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        shard_config = {"ops": {"simulation_shard": {"config": SIMULATION}}}
        launches = [
            materialise("simulation_shard", f"pop|{k}", shard_config) for k in range(2)
        ]  # at once: one per worker
        outputs = [p.communicate(timeout=240)[0].decode(errors="replace") for p in launches]
        assert all(p.returncode == 0 for p in launches), "\n".join(o[-3000:] for o in outputs)
        combine = materialise("simulation_events", "pop", {})
        output = combine.communicate(timeout=240)[0].decode(errors="replace")
        assert combine.returncode == 0, output[-3000:]

        with DagsterInstance.from_config(settings["DAGSTER_HOME"]) as instance:
            runs = instance.get_runs()
            workers = {}
            for run in runs:
                for record in instance.all_logs(run.run_id, of_type=DagsterEventType.ENGINE_EVENT):
                    metadata = record.dagster_event.engine_event_data.metadata if record.dagster_event else {}
                    if "Celery worker" in metadata:
                        workers[run.tags.get("dagster/partition")] = metadata["Celery worker"].value
        assert len(runs) == 3 and all(r.is_success for r in runs)
        # Every step was executed by one of the two workers, none in the launching process.
        assert sorted(workers) == ["pop", "pop|0", "pop|1"], workers
        assert {w.split("@")[0] for w in workers.values()} <= {"w1", "w2"}, workers
        assert stored_events(home, "pop").equals(events["pop"])
        shards = sorted(p.name for p in (home / "assets" / "simulation_shard" / "pop").iterdir())
        assert shards == ["0.parquet", "0.parquet.sha256", "1.parquet", "1.parquet.sha256"]
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in reversed(processes):
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs:
            log.close()


def _wait_for_redis(port: int, process, deadline_s: float = 15) -> None:
    import time

    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    stop = time.monotonic() + deadline_s
    while time.monotonic() < stop:
        if process.poll() is not None:
            raise AssertionError(f"redis-server exited with {process.returncode}")
        try:
            if client.ping():
                return
        except redis.ConnectionError:
            time.sleep(0.1)
    raise AssertionError(f"redis-server did not answer on 127.0.0.1:{port} within {deadline_s} s")


def _wait_for_workers(broker: str, n: int, processes, tmp_path, deadline_s: float = 90) -> None:
    """Until `n` workers answer a ping on the broker (each imports the whole stack first)."""
    import time

    from celery import Celery

    app = Celery(broker=broker, backend=broker)
    stop = time.monotonic() + deadline_s
    while time.monotonic() < stop:
        dead = [p.args for p in processes if p.poll() is not None]
        if dead:
            raise AssertionError(
                f"a Celery worker exited: {dead}\n"
                + "\n".join(
                    (tmp_path / f"w{i}.log").read_text()[-2000:] for i in (1, 2) if (tmp_path / f"w{i}.log").exists()
                )
            )
        answers = app.control.ping(timeout=1.0) or []
        if len(answers) >= n:
            return
        time.sleep(0.5)
    raise AssertionError(f"{n} Celery workers did not answer within {deadline_s} s")

"""Fault suite for the LLM path: every fault reproduced against the
local fake endpoint on 127.0.0.1 (`fakes.openai_server`, scripted faults) or by `kill -9` of
a subprocess, each bounded in time, asserting the fixed behaviour:

- a 200 whose body is not JSON, or is cut off, is retried like a 5xx and the error names the
  endpoint without credentials;
- Retry-After is honoured in both forms (seconds, HTTP date), with a cap of its own;
- a decision has an overall deadline;
- an agent whose calls keep failing gets a recorded fallback, and the arm fails only past
  the allowed share of failed agents, with an error naming the share and examples;
- the cache stores valid answers only, keys on the endpoint, and can be bypassed;
- a killed arm resumes with 0 rows lost, 0 duplicated and calls only for the unfinished
  agents; a re-run with unchanged inputs makes 0 calls;
- credentials in the endpoint's URL or the key never reach a log, an error, MLflow, Dagster
  metadata or any file under $SIMAB_HOME, and the endpoint's host is recorded.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fakes.agents import llm_world
from fakes.openai_server import FakeOpenAI, answer, scripted_agent, system_text
from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
from ops.simulation.observation import EXIT, EXIT_INTERVIEW, NEXT_PAGE
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import SimulationFailed, simulate

SECRET = "sk-fault-suite-DO-NOT-LEAK-91c2e7"
URL_SECRET = "qtok-DO-NOT-LEAK-55ab10"
KEY_ENV = "SIMAB_FAULT_LLM_KEY"
ROOT = Path(__file__).resolve().parents[1]
CFG = SimulationConfig(progress=False)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return llm_world(tmp_path_factory.mktemp("faults_world"), n_agents=6)


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


@pytest.fixture
def fake():
    fake = FakeOpenAI(scripted_agent)
    with fake.serve() as url:
        fake.url = url
        yield fake


def brain(fake, world, **overrides) -> LLMBrain:
    fields = dict(
        base_url=fake.url,
        model="fault-model",
        api_key_env=KEY_ENV,
        vision=False,
        backoff_s=0.0,
        backoff_max_s=0.0,
        backoff_jitter=0.0,
    )
    return LLMBrain(LLMBrainConfig(**{**fields, **overrides}), catalogue=world["catalogue"])


def first_page(world, user=1):
    from ops.agents.session import AgentSession
    from ops.simulation.sandbox import Sandbox

    session = AgentSession(user, world["profiles"][user], world["memories"][user], 0.0, 30.0)
    return session, Sandbox(world["lists"][user], world["catalogue"]).observe()


def rng():
    import numpy as np

    return np.random.default_rng(0)


def of_user(world, user):
    """A predicate on request bodies: this agent's requests (its profile names its zip code)."""
    zip_code = world["profiles"][user].zip
    return lambda body: f"zip code {zip_code}." in system_text(body)


# -- transport ------------------------------------------------------------------------------


def test_a_200_that_is_not_json_or_is_cut_off_is_retried_and_named_by_endpoint(world, fake, key, caplog):
    session, page = first_page(world)
    fake.garbage()  # a proxy's HTML error page with HTTP 200
    fake.truncated()  # Content-Length promised, connection closed half-way
    fake.garbage(b'{"id": "x", "object": "chat.completion"}')  # JSON, but no choices
    fake.reply(answer(action=NEXT_PAGE))
    b = brain(fake, world)
    d = b.decide(session, page, rng())
    assert d.action == NEXT_PAGE and d.fallback_reason is None
    assert fake.calls == 4 and b.usage.retries == 3 and b.usage.requests == 1
    assert f"{fake.url}/chat/completions with a body that is not JSON" in caplog.text
    assert f"{fake.url}/chat/completions without a chat completion" in caplog.text

    # Always garbage: after the last attempt, a recorded fallback naming the endpoint.
    for _ in range(3):
        fake.garbage()
    d = brain(fake, world, max_attempts=3).decide(session, page, rng())
    assert d.action == EXIT and d.fallback_reason.startswith(f"transport: LLM endpoint {fake.url} (model fault-model)")
    assert "still failing after 3 attempts" in d.fallback_reason and "not JSON" in d.fallback_reason


def test_retry_after_is_honoured_in_both_forms_with_its_own_cap(world, fake, key):
    session, page = first_page(world)
    # The back-off cap is 0 s: before, it capped Retry-After too, and the date form was ignored.
    b = brain(fake, world, retry_after_max_s=10.0)
    fake.fail(429, {"Retry-After": "1"})
    started = time.monotonic()
    assert b.decide(session, page, rng()).fallback_reason is None
    assert b.usage.retry_wait_s == pytest.approx(1.0) and time.monotonic() - started >= 1.0

    b = brain(fake, world, retry_after_max_s=10.0)
    fake.fail(503, {"Retry-After": email.utils.formatdate(time.time() + 2, usegmt=True)})
    started = time.monotonic()
    assert b.decide(session, page, rng()).fallback_reason is None
    assert 0.9 < b.usage.retry_wait_s <= 2.0 and time.monotonic() - started >= b.usage.retry_wait_s

    b = brain(fake, world, retry_after_max_s=0.3)  # its own cap, whatever the server asks
    fake.fail(429, {"Retry-After": "30"})
    started = time.monotonic()
    assert b.decide(session, page, rng()).fallback_reason is None
    assert b.usage.retry_wait_s == pytest.approx(0.3) and time.monotonic() - started < 5


def test_a_decision_past_its_deadline_falls_back(world, fake, key):
    session, page = first_page(world)
    fake.slow(5.0)
    started = time.monotonic()
    d = brain(fake, world, decision_deadline_s=0.5, timeout_s=30).decide(session, page, rng())
    assert time.monotonic() - started < 2.0
    assert d.action == EXIT and d.fallback_reason.startswith(
        f"deadline: no valid answer from {fake.url} within decision_deadline_s=0.5 s"
    )


def test_an_agent_whose_calls_keep_failing_gets_a_fallback_and_the_arm_fails_only_past_the_share(world, fake, key):
    fake.fail_when(of_user(world, 3), 500)
    config = SimulationConfig(progress=False, max_failed_agents_share=0.2)  # 1 of 6 allowed
    events = simulate(
        brain(fake, world, max_attempts=2),
        world["agents"],
        world["top_k"],
        world["catalogue"],
        config,
        arms=["pop"],
        seed=1,
        concurrency=3,
    )
    failed = events.filter(pl.col("user_id") == 3)
    assert failed.get_column("action").to_list() == [EXIT, EXIT_INTERVIEW]
    assert failed.get_column("fallback").all()
    reason = failed.get_column("fallback_reason")[0]
    assert (
        reason.startswith(f"transport: LLM endpoint {fake.url}")
        and "still failing after 2 attempts: HTTP 500" in reason
    )
    assert failed.get_column("satisfaction").to_list() == [None, None]  # not asked, not made up
    others = events.filter(pl.col("user_id") != 3)
    assert (
        not others.get_column("fallback").any() and others.get_column("fallback_reason").null_count() == others.height
    )
    assert others.filter(pl.col("action") == EXIT_INTERVIEW).height == 5

    fake.fail_when(of_user(world, 5), 503)
    with pytest.raises(SimulationFailed) as failure:
        simulate(
            brain(fake, world, max_attempts=2),
            world["agents"],
            world["top_k"],
            world["catalogue"],
            config,
            arms=["pop"],
            seed=1,
            concurrency=3,
        )
    message = str(failure.value)
    assert (
        "2 of 6 agents failed (33.3%) on arm 'pop'" in message and "max_failed_agents_share=20.0% allows 1" in message
    )
    assert "user 3: transport: LLM endpoint" in message and "user 5: transport:" in message


# -- cache ------------------------------------------------------------------------------------


def test_invalid_answers_are_never_cached_and_the_key_includes_the_endpoint(world, key, tmp_path):
    session, page = first_page(world)
    cache = str(tmp_path / "cache.sqlite")
    first, second = FakeOpenAI(), FakeOpenAI()
    with first.serve() as url_a, second.serve() as url_b:
        first.url, second.url = url_a, url_b
        first.reply("I'd rather not say")  # invalid: re-asked
        first.reply(answer(action=NEXT_PAGE))
        b = brain(first, world, cache_path=cache)
        assert b.decide(session, page, rng()).action == NEXT_PAGE
        from ops.simulation.brains.llm.cache import ResponseCache

        stored = ResponseCache(cache)
        # The re-ask's valid answer (the invalid one is not kept), and what the probe found.
        assert len(stored) == 2
        texts = [json.loads(r[0])["content"] for r in stored._db.execute("SELECT response FROM completions")]
        assert sorted(texts) == sorted([answer(action=NEXT_PAGE), json.dumps("json_schema")])
        stored.close()
        # The same request to another endpoint is another request: asked, not replayed.
        second.reply(answer(action=EXIT))
        assert brain(second, world, cache_path=cache).decide(session, page, rng()).action == EXIT
        assert second.calls == 1
        # cache=off bypasses it; cache=read replays without storing.
        first.reply(answer(action=EXIT))
        assert brain(first, world, cache_path=cache, cache="off").decide(session, page, rng()).action == EXIT
        calls = first.calls
        first.reply("I'd rather not say")  # the same invalid first answer: the same re-ask follows
        replay = brain(first, world, cache_path=cache, cache="read")
        assert replay.decide(session, page, rng()).action == NEXT_PAGE
        assert first.calls == calls + 1 and replay.usage.cache_hits == 1  # the re-ask came from the cache
        first.reply(answer(action=EXIT))  # "read" stores nothing: the bypassed answer is not there either
        assert replay.decide(session, page, rng()).action == EXIT and first.calls == calls + 2


# -- kill -9 and resume -------------------------------------------------------------------------

KILLED = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from fakes.agents import llm_world
    from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
    from ops.simulation.request import SimulationConfig
    from ops.simulation.runner import simulate

    world_root, url, home = sys.argv[1:4]
    world = llm_world(Path(world_root), n_agents={n})
    brain = LLMBrain(LLMBrainConfig(base_url=url, model="fault-model", api_key_env={key_env!r}, vision=False,
                                    cache_path=home + "/cache.sqlite"), catalogue=world["catalogue"])
    simulate(brain, world["agents"], world["top_k"], world["catalogue"], SimulationConfig(progress=False), arms=["pop"],
             seed=5, run_id="killed", concurrency=3, checkpoint_dir=home + "/checkpoints/pop")
    print("finished without being killed")
    """
)


@pytest.mark.slow
def test_a_killed_arm_resumes_without_losing_duplicating_or_paying_twice(tmp_path, key):
    n = 12
    root = tmp_path / "world"
    world = llm_world(root, n_agents=n)
    fake = FakeOpenAI(scripted_agent, latency_s=0.08)
    home = tmp_path / "home"
    with fake.serve() as url:
        fake.url = url

        def run(run_id: str, checkpoint: bool = True, cache: bool = True, **extra) -> pl.DataFrame:
            config = dict(base_url=url, model="fault-model", api_key_env=KEY_ENV, vision=False, **extra)
            if cache:
                config["cache_path"] = str(home / "cache.sqlite")
            b = LLMBrain(LLMBrainConfig(**config), catalogue=world["catalogue"])
            try:
                return simulate(
                    b,
                    world["agents"],
                    world["top_k"],
                    world["catalogue"],
                    CFG,
                    arms=["pop"],
                    seed=5,
                    run_id=run_id,
                    concurrency=3,
                    checkpoint_dir=home / "checkpoints" / "pop" if checkpoint else None,
                )
            finally:
                b.close()

        reference = run("reference", checkpoint=False, cache=False)
        reference_calls = fake.calls
        assert reference_calls == 5 * n

        script = tmp_path / "killed.py"
        script.write_text(KILLED.format(root=str(ROOT), n=n, key_env=KEY_ENV))
        proc = subprocess.Popen(
            [sys.executable, str(script), str(root), url, str(home)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        checkpoints = home / "checkpoints" / "pop"
        deadline = time.monotonic() + 120
        # Killed once a few agents are in the checkpoint and the others are mid-session.
        while time.monotonic() < deadline and proc.poll() is None:
            lines = sum(p.read_bytes().count(b"\n") for p in checkpoints.glob("*.jsonl")) if checkpoints.is_dir() else 0
            if lines >= 4:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
        time.sleep(0.3)  # requests in flight at the kill reach the fake
        killed_calls = fake.calls - reference_calls
        from ops.storage.checkpoint import JsonlCheckpoint

        (path,) = checkpoints.glob("*.jsonl")
        finished = set(JsonlCheckpoint(path, key="user_id").records)
        assert 4 <= len(finished) < n

        before = fake.calls
        resumed = run("resumed")
        resume_calls = fake.calls - before
        # Calls only for the unfinished agents ...
        asked = {body_user(world, body) for body in fake.requests[before:]}
        assert asked and not asked & finished
        # ... and none paid twice: what the killed run got back is in the cache; at most the
        # requests in flight at the kill (one per agent in flight) are asked again.
        assert killed_calls + resume_calls <= reference_calls + 3
        # 0 rows lost, 0 duplicated, the same events as the run never killed.
        assert resumed.select("user_id", "step").is_duplicated().sum() == 0
        assert resumed.filter(pl.col("action") == EXIT_INTERVIEW).height == n
        assert set(resumed.get_column("run_id")) == {"resumed"}
        drop = ["run_id", "latency_s"]
        assert resumed.drop(drop).equals(reference.drop(drop))

        # A re-run with unchanged inputs makes 0 calls: from the checkpoint ...
        before = fake.calls
        assert run("again").drop(drop).equals(reference.drop(drop)) and fake.calls == before
        # ... and from the cache alone.
        assert run("cache only", checkpoint=False).drop(drop).equals(reference.drop(drop)) and fake.calls == before


def body_user(world, body) -> int:
    text = system_text(body)
    return next(u for u, p in world["profiles"].items() if f"zip code {p.zip}." in text)


def test_a_checkpoint_of_other_inputs_is_superseded_not_reused(world, fake, key, tmp_path):
    folder = tmp_path / "checkpoints" / "pop"
    simulate(
        brain(fake, world),
        world["agents"],
        world["top_k"],
        world["catalogue"],
        CFG,
        arms=["pop"],
        seed=1,
        concurrency=3,
        checkpoint_dir=folder,
    )
    (old,) = folder.glob("*.jsonl")
    calls = fake.calls
    # Another seed: the old rows are not reused (every agent is simulated), and the old file goes.
    simulate(
        brain(fake, world),
        world["agents"],
        world["top_k"],
        world["catalogue"],
        CFG,
        arms=["pop"],
        seed=2,
        concurrency=3,
        checkpoint_dir=folder,
    )
    (new,) = folder.glob("*.jsonl")
    assert new != old and not old.exists() and fake.calls - calls == 5 * len(world["agents"])
    # Another list for one agent is another key too.
    top_k = world["top_k"].with_columns(
        pl.when(pl.col("user_id") == 2)
        .then(pl.col("rank").reverse().over("user_id"))
        .otherwise(pl.col("rank"))
        .alias("rank")
    )
    calls = fake.calls
    simulate(
        brain(fake, world),
        world["agents"],
        top_k,
        world["catalogue"],
        CFG,
        arms=["pop"],
        seed=2,
        concurrency=3,
        checkpoint_dir=folder,
    )
    assert fake.calls - calls == 5 * len(world["agents"]) and not new.exists()


# -- secrets and the endpoint's name -----------------------------------------------------------


def test_credentials_in_the_endpoint_url_are_refused_or_redacted_everywhere(world, fake, key, caplog, monkeypatch):
    from resources.llm import LLMResource

    caplog.set_level(logging.DEBUG)
    with pytest.raises(ValueError) as refused:
        brain(fake, world, base_url=fake.url.replace("http://", f"http://user:{URL_SECRET}@"))
    assert URL_SECRET not in str(refused.value) and "user info" in str(refused.value) and fake.url in str(refused.value)

    # A gateway token in the query string works (sent with each request) and is shown nowhere.
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}?api-key={URL_SECRET}")
    resource = LLMResource(model="fault-model", api_key_env=KEY_ENV, vision=False, max_attempts=2)
    described = resource.describe()
    assert described["llm_endpoint"] == fake.url and described["llm_endpoint_from"] == "OPENAI_BASE_URL"
    assert described["llm_endpoint_host"] == fake.url.split("/")[2]
    b = LLMBrain(resource.brain_config(backoff_s=0.0), catalogue=world["catalogue"])
    session, page = first_page(world)
    fake.fail(503)
    fake.fail(503)
    d = b.decide(session, page, rng())
    assert d.fallback_reason.startswith(f"transport: LLM endpoint {fake.url} ")
    fake.reply(answer(action=EXIT))
    assert b.decide(session, page, rng()).action == EXIT
    b.close()
    shown = caplog.text + json.dumps(described) + d.reason + repr(d)
    assert "HTTP Request" in caplog.text  # the HTTP library did log its request lines ...
    assert URL_SECRET not in shown and SECRET not in shown  # ... redacted


@pytest.mark.slow
def test_an_llm_simulation_through_dagster_leaves_no_secret_under_simab_home(world, fake, key, tmp_path, monkeypatch):
    from dagster import AssetsDefinition, DagsterInstance, asset, materialize, mem_io_manager

    from assets.partitions import arm_partitions
    from assets.simulation import simulation_events
    from resources.llm import LLMResource
    from resources.mlflow_tracking import MlflowTracking
    from resources.storage import SimabIOManager

    home = tmp_path / "simab_home"
    monkeypatch.setenv("SIMAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}?api-key={URL_SECRET}")

    class Population:  # what simulation_events reads of the `agents` asset
        profiles = world["profiles"]
        population = np.array(sorted(world["profiles"]), dtype=np.int64)

        def sessions(self, ids):
            return [a for a in world["agents"] if a.user_id in set(ids)]

    @asset(name="top20_lists", partitions_def=arm_partitions, io_manager_key="mem")
    def top20_lists():
        return world["top_k"]

    @asset(name="agents", io_manager_key="mem")
    def agents():
        return Population()

    @asset(name="embedded_brain", io_manager_key="mem")
    def embedded_brain():
        return 0

    @asset(name="catalogue", io_manager_key="mem")
    def catalogue():
        return world["catalogue_frame"]

    stubs: list[AssetsDefinition] = [top20_lists, agents, embedded_brain, catalogue]
    result = materialize(
        [*stubs, simulation_events],
        partition_key="pop",
        instance=DagsterInstance.ephemeral(),
        resources={
            "io_manager": SimabIOManager(),
            "mem": mem_io_manager,
            "mlflow_tracking": MlflowTracking(),
            # No limit: the stub brain above cannot stand in for the estimate's dry run.
            "llm": LLMResource(model="fault-model", api_key_env=KEY_ENV, vision=False, max_cost_usd=None),
        },
        run_config={"ops": {"simulation_events": {"config": {"brain": "llm", "arms": ["pop"]}}}},
    )
    assert result.success and fake.calls == 5 * len(world["agents"])
    (materialization,) = [
        m for m in result.get_asset_materialization_events() if m.asset_key.to_user_string() == "simulation_events"
    ]
    metadata = materialization.materialization.metadata
    assert metadata["llm endpoint"].value == fake.url and metadata["fallback_agents"].value == 0
    events = pl.read_parquet(home / "assets" / "simulation_events" / "pop.parquet")
    assert events.get_column("user_id").n_unique() == len(world["agents"]) and not events.get_column("fallback").any()
    # The cache and the checkpoint are on by default, under $SIMAB_HOME.
    assert (home / "cache" / "llm" / "responses.sqlite").stat().st_size > 0
    assert list((home / "checkpoints" / "simulation_events" / "pop").glob("*.jsonl"))
    from resources.mlflow_tracking import MlflowTracking as Tracking

    tracking = Tracking()
    (run,) = tracking.client().search_runs([tracking.experiment_id()], "tags.dagster_asset = 'simulation_events[pop]'")
    assert (
        run.data.params["llm_endpoint"] == fake.url and run.data.params["llm_endpoint_host"] == fake.url.split("/")[2]
    )
    # Every file under $SIMAB_HOME, binary included: neither the key nor the URL's token.
    files = [p for p in home.rglob("*") if p.is_file()]
    assert len(files) >= 5
    leaks = [str(p) for p in files if SECRET.encode() in p.read_bytes() or URL_SECRET.encode() in p.read_bytes()]
    assert leaks == []


def test_the_cache_can_be_listed_and_cleared_by_model_and_endpoint(tmp_path, capsys):
    from ops.simulation.brains.llm.__main__ import main
    from ops.simulation.brains.llm.cache import ResponseCache

    path = tmp_path / "responses.sqlite"
    cache = ResponseCache(path)
    cache.put("k1", "http://127.0.0.1:8000/v1", "model-a", {"content": "{}"})
    cache.put("k2", "http://127.0.0.1:8000/v1", "model-b", {"content": "{}"})
    cache.put("k3", "http://127.0.0.1:9000/v1", "model-a", {"content": "{}"})
    cache.close()
    main(["stats", "--cache", str(path)])
    assert capsys.readouterr().out.splitlines() == [
        "http://127.0.0.1:8000/v1\tmodel-a\t1",
        "http://127.0.0.1:8000/v1\tmodel-b\t1",
        "http://127.0.0.1:9000/v1\tmodel-a\t1",
    ]
    # The endpoint is matched without its credentials, as it was stored.
    main(
        [
            "clear",
            "--cache",
            str(path),
            "--model",
            "model-a",
            "--endpoint",
            f"http://u:{URL_SECRET}@127.0.0.1:8000/v1/?key=x",
        ]
    )
    out = capsys.readouterr().out
    assert out.startswith("deleted 1 entries") and "model-b\t1" in out and "9000/v1\tmodel-a\t1" in out
    main(["clear", "--cache", str(path)])
    assert ResponseCache(path).stats() == []
    with pytest.raises(SystemExit, match="no LLM response cache at"):
        main(["stats", "--cache", str(tmp_path / "absent.sqlite")])


def _filled_cache(path: Path, n: int = 300):
    """A cache of `n` replies over several pages, closed (its WAL checkpointed into the file)."""
    from ops.simulation.brains.llm.cache import ResponseCache

    cache = ResponseCache(path)
    for i in range(n):
        cache.put(
            f"k{i:04d}",
            "http://127.0.0.1:8000/v1",
            "m",
            {"content": f"answer {i} " * 8, "prompt_tokens": 9, "completion_tokens": 3, "usage_known": True},
        )
    cache.close()
    assert not Path(f"{path}-wal").exists()


def test_a_damaged_cache_names_its_file_and_the_way_out(tmp_path, capsys):
    from ops.simulation.brains.llm.__main__ import main
    from ops.simulation.brains.llm.cache import CacheError, ResponseCache

    path = tmp_path / "responses.sqlite"
    _filled_cache(path)
    data = bytearray(path.read_bytes())
    page = 4096
    data[page : 3 * page] = bytes([0xAB]) * (2 * page)  # the table's and its key index's root pages
    path.write_bytes(bytes(data))
    way_out = (
        rf"LLM response cache {path} cannot be read: database disk image is malformed\. .*"
        rf"`python -m ops\.simulation\.brains\.llm clear --cache {path}`.*or move the file aside"
    )
    cache = ResponseCache(path)
    with pytest.raises(CacheError, match=way_out):
        cache.get("k0001")
    cache.close()
    # `clear` cannot delete rows of a damaged file: it moves the file aside, and the next run starts afresh.
    main(["clear", "--cache", str(path)])
    assert "is damaged" in capsys.readouterr().out
    (moved,) = tmp_path.glob("responses.sqlite.damaged-*")
    assert moved.read_bytes() == bytes(data)
    fresh = ResponseCache(path)
    assert len(fresh) == 0 and fresh.get("k0001") is None
    fresh.close()
    # Not a database at all (its header overwritten): named when opened.
    path.write_bytes(b"this is not SQLite" * 400)
    not_sqlite = rf"LLM response cache {path} cannot be opened: file is not a database\. .*clear"
    with pytest.raises(CacheError, match=not_sqlite):
        ResponseCache(path)


def test_a_cached_row_of_the_wrong_shape_is_a_logged_miss_and_is_replaced(tmp_path, caplog):
    import sqlite3

    from ops.simulation.brains.llm.cache import ResponseCache

    path = tmp_path / "responses.sqlite"
    _filled_cache(path, n=3)
    with sqlite3.connect(path) as db:
        wrong = json.dumps({"content": 5, "prompt_tokens": 1})
        db.execute("UPDATE completions SET response = ? WHERE key = 'k0000'", (wrong,))
        db.execute("UPDATE completions SET response = ? WHERE key = 'k0001'", (json.dumps(["answer"]),))
        db.execute("UPDATE completions SET response = ? WHERE key = 'k0002'", ("{cut",))
    db.close()
    cache = ResponseCache(path)
    good = {"content": "{}", "prompt_tokens": 4, "completion_tokens": 2, "usage_known": True}
    with caplog.at_level(logging.WARNING, logger="ops.simulation.brains.llm.cache"):
        for key in ("k0000", "k0001", "k0002"):
            assert cache.get(key) is None
            cache.put(key, "http://127.0.0.1:8000/v1", "m", good)  # the endpoint's next answer replaces it
            assert cache.get(key) == good
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3
    assert all(f"LLM response cache {path}: entry k000" in w and "treated as a miss" in w for w in warnings)
    assert "no text content" in warnings[0] and "a JSON list" in warnings[1] and "not JSON" in warnings[2]
    # A good row stays first-come: a second answer for its key does not replace it.
    cache.put("k0000", "http://127.0.0.1:8000/v1", "m", {**good, "content": "other"})
    assert cache.get("k0000") == good
    cache.close()


@pytest.mark.parametrize(
    "status, message, setting",
    [
        (
            500,
            "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj",
            "SIMAB_LLM_VISION=false",
        ),
        (400, "response_format type json_schema is not supported by this model", "SIMAB_LLM_STRUCTURED_OUTPUT"),
    ],
)
def test_a_refused_feature_is_not_retried_and_names_the_setting_to_change(world, fake, key, status, message, setting):
    # llama.cpp answers a request with an image HTTP 500 "image input is not supported": it was
    # retried 5 times as a transient 5xx, then the arm stopped without saying why.
    from ops.simulation.brains.llm import LLMEndpointError

    fake.fail(status, message=message)
    b = brain(fake, world, max_attempts=5)
    try:
        session, page = first_page(world)
        with pytest.raises(LLMEndpointError, match=rf"refused the request.*{re.escape(setting)}"):
            b.decide(session, page, rng())
    finally:
        b.close()
    assert fake.calls == 1  # asked once, not five times


def test_an_arm_of_invalid_answers_fails_with_the_share_and_examples(world, key):
    # A small model's answers that never pass the checks are agent failures, not agents that
    # clicked nothing: the arm fails instead of reading out CTR 0.
    fake = FakeOpenAI(lambda body: '{"action": "fly_away", "interest": 9}')
    with fake.serve() as url:
        fake.url = url
        b = brain(fake, world)
        try:
            with pytest.raises(
                SimulationFailed, match=r"agents failed .* on arm 'pop'.*E\.g\. user \d+: invalid_answer"
            ):
                simulate(b, world["agents"], world["top_k"], world["catalogue"], CFG, arms=["pop"], seed=0, run_id="r")
        finally:
            b.close()

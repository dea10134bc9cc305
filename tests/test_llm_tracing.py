"""MLflow Tracing of the LLM brain against the fake endpoint: one trace per sampled agent
session, one span per chat completion with its tokens and cost, under a span per decision;
the share samples sessions by a hash, the same ones on every run."""

from __future__ import annotations

import mlflow
import polars as pl
import pytest

from fakes.agents import llm_world
from fakes.openai_server import COMPLETION_TOKENS, PROMPT_TOKENS, FakeOpenAI, scripted_agent
from ops.agents.session import AgentSession
from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
from ops.simulation.brains.llm.tracing import Tracer

KEY_ENV = "SIMAB_TEST_LLM_KEY"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return llm_world(tmp_path_factory.mktemp("llm"), n_agents=3)


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A SQLite tracking store of the test's own, and its experiment id."""
    monkeypatch.setenv(KEY_ENV, "sk-test")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    try:
        yield mlflow.MlflowClient().create_experiment("traces", artifact_location=(tmp_path / "art").as_uri())
    finally:
        mlflow.set_tracking_uri(previous)


def _simulate(world, fake, share: float, experiment: str):
    from ops.simulation.request import SimulationConfig
    from ops.simulation.runner import simulate

    fake.policy = scripted_agent
    users = sorted(world["profiles"])
    top_k = pl.DataFrame(
        [
            {"arm": "pop", "user_id": u, "rank": r + 1, "item_id": m, "score": 1.0 / (r + 1)}
            for u in users
            for r, m in enumerate(world["lists"][u])
        ]
    )
    agents = [AgentSession(u, world["profiles"][u], world["memories"][u], 0.0, 0.0) for u in users]
    config = LLMBrainConfig(
        base_url=fake.url,
        model="test-model",
        api_key_env=KEY_ENV,
        backoff_s=0.0,
        backoff_max_s=0.0,
        cache="off",
        trace_share=share,
        trace_experiment_id=experiment,
    )
    brain = LLMBrain(config, catalogue=world["catalogue"])
    events = simulate(brain, agents, top_k, world["catalogue"], SimulationConfig(progress=False), arms=["pop"], seed=3)
    mlflow.flush_trace_async_logging()
    return brain, events


def test_every_sampled_session_is_one_trace_with_a_span_per_call_carrying_tokens_and_cost(world, store):
    fake = FakeOpenAI()
    with fake.serve() as url:
        fake.url = url
        brain, events = _simulate(world, fake, 1.0, store)
    traces = mlflow.search_traces(locations=[store], return_type="list")
    assert len(traces) == len(brain.trace_ids) == events.get_column("user_id").n_unique() == 3
    calls = 0
    for trace in traces:
        spans = trace.data.spans
        (root,) = [s for s in spans if s.parent_id is None]
        assert root.span_type == "AGENT" and root.attributes["simab.arm"] == "pop"
        user = root.attributes["simab.user_id"]
        decisions = [s for s in spans if s.parent_id == root.span_id]
        mine = events.filter(pl.col("user_id") == user)
        # One decision span per event row: the pages and the exit interview.
        assert len(decisions) == mine.height
        assert [d.attributes.get("action") for d in decisions[:-1]] == mine.get_column("action").to_list()[:-1]
        for call in (s for s in spans if s.span_type == "CHAT_MODEL"):
            calls += 1
            a = call.attributes
            assert (a["prompt_tokens"], a["completion_tokens"]) == (PROMPT_TOKENS, COMPLETION_TOKENS)
            assert a["cost_usd"] == pytest.approx(brain.transport.cost(PROMPT_TOKENS, COMPLETION_TOKENS))
            assert a["cache"] == "miss" and a["retries"] == 0 and a["latency_s"] >= 0
            assert call.inputs["messages"][-1]["role"] == "user" and call.outputs
    # One span per call the endpoint answered (no call went uncounted, none was invented).
    assert calls == len(fake.requests) == brain.usage.requests


def test_the_share_samples_sessions_by_a_hash_and_zero_traces_none(world, store):
    tracer = Tracer(0.3)
    drawn = [tracer.sampled("pop", u, 0) for u in range(2000)]
    assert drawn == [Tracer(0.3).sampled("pop", u, 0) for u in range(2000)]  # the same sessions every run
    assert 0.27 < sum(drawn) / len(drawn) < 0.33
    fake = FakeOpenAI()
    with fake.serve() as url:
        fake.url = url
        brain, _ = _simulate(world, fake, 0.0, store)
    assert brain.trace_ids == [] and mlflow.search_traces(locations=[store], return_type="list") == []


def test_the_simulation_step_links_the_brains_traces_to_its_run(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from ops.simulation.brains.llm.tracing import decision_span
    from resources.mlflow_tracking import MlflowTracking

    monkeypatch.setenv("SIMAB_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tracking = MlflowTracking()
    experiment = tracking.experiment_id()
    tracer = Tracer(1.0, experiment)
    for user in (1, 2):
        with tracer.session("pop", user, 0), decision_span("home page 1"):
            pass
    context = SimpleNamespace(
        run=SimpleNamespace(run_id="run-a", job_name="simab_arm"),
        asset_key=SimpleNamespace(to_user_string=lambda: "simulation_events"),
        has_partition_key=False,
    )
    with tracking.asset_run(context) as run:
        tracking.link_traces(tracer.trace_ids)
    linked = mlflow.search_traces(locations=[experiment], run_id=run.info.run_id, return_type="list")
    assert sorted(t.info.trace_id for t in linked) == sorted(tracer.trace_ids) and len(linked) == 2

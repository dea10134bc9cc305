"""SimUSER persona matching as an asset (`llm_personas`) and in the LLM simulation
(`persona: matched`), against the local fake OpenAI server: the kept persona is the
candidate that predicts the held-out ratings best, the bill is estimated and capped before a
call, and every simulation prompt shows the matched persona."""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl
import pytest

from fakes.agents import llm_world, split_by_time
from fakes.openai_server import FakeOpenAI, scripted_agent, system_text, user_text

KEY_ENV = "SIMAB_TEST_PERSONA_KEY"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return llm_world(tmp_path_factory.mktemp("personas"), n_agents=3, per_user=8)


@pytest.fixture
def fake():
    fake = FakeOpenAI()
    with fake.serve() as url:
        fake.url = url
        yield fake


def persona_agent(genres: tuple[str, ...]):
    """Each user's candidates cycle through `genres` ("loves <genre>"; a user's candidates
    are asked one after the other, with the same prompt); a candidate rates its genre 5 and
    the rest 1; any other request is a page of the sandbox (scripted_agent)."""
    written: dict[str, int] = {}

    def policy(body: dict) -> str:
        text = user_text(body)
        if "Imagine who this person is" in text:
            genre = genres[written.get(text, 0) % len(genres)]
            written[text] = written.get(text, 0) + 1
            return json.dumps(
                {
                    "age": "25-34",
                    "openness": 2,
                    "conscientiousness": 2,
                    "extraversion": 1,
                    "agreeableness": 3,
                    "neuroticism": 1,
                    "occupation": "engineer",
                    "background": "Lives alone.",
                    "hobbies": ["chess"],
                    "taste": f"loves {genre}, avoids the rest",
                }
            )
        if "Rate each of these movies" in text:
            genre = re.search(r"loves (\w[\w-]*)", text).group(1)
            rows = re.findall(r"^\[(\d+)\] (.*)$", text, re.M)
            return json.dumps(
                {"ratings": [{"item_id": int(m), "rating": 5 if f"({genre}" in name else 1} for m, name in rows]}
            )
        return scripted_agent(body)

    return policy


def _materialise(
    world,
    fake,
    home,
    monkeypatch,
    selection: str,
    run_config: dict,
    max_cost_usd: float | None = None,
    raise_on_error: bool = True,
):
    from dagster import DagsterInstance, asset, materialize, mem_io_manager

    from assets.agents import llm_personas
    from assets.partitions import arm_partitions
    from assets.simulation import simulation_events
    from resources.llm import LLMResource
    from resources.mlflow_tracking import MlflowTracking
    from resources.storage import SimabIOManager

    monkeypatch.setenv("SIMAB_HOME", str(home))
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    monkeypatch.setenv(KEY_ENV, "sk-test-persona")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    train, valid = split_by_time(world["ratings"])

    class Population:  # what the simulation and llm_personas read of the `agents` asset
        profiles = world["profiles"]
        population = np.array(sorted(world["profiles"]), dtype=np.int64)

        def sessions(self, ids=None):
            wanted = set(self.profiles if ids is None else ids)
            return [a for a in world["agents"] if a.user_id in wanted]

        def at_fit_clock(self):  # the planted agents remember only their train window
            return self

    def stub(name, value, **kwargs):
        @asset(name=name, io_manager_key="mem", **kwargs)
        def _stub():
            return value

        return _stub

    stubs = [stub("agents", Population()), stub("catalogue", world["catalogue_frame"])]
    if selection == "llm_personas":
        stubs += [stub("train_ratings", train), stub("valid_ratings", valid)]
    else:
        stubs += [stub("embedded_brain", 0), stub("top20_lists", world["top_k"], partitions_def=arm_partitions)]
    target = {"llm_personas": llm_personas, "simulation_events": simulation_events}[selection]
    return materialize(
        [*stubs, target],
        partition_key="pop" if selection == "simulation_events" else None,
        instance=DagsterInstance.ephemeral(),
        resources={
            "io_manager": SimabIOManager(),
            "mem": mem_io_manager,
            "mlflow_tracking": MlflowTracking(),
            "llm": LLMResource(model="persona-model", api_key_env=KEY_ENV, vision=False, max_cost_usd=max_cost_usd),
        },
        run_config={"ops": {selection: {"config": run_config}}},
        raise_on_error=raise_on_error,
    )


def test_llm_personas_keep_the_best_candidate_and_the_simulation_shows_it(world, fake, tmp_path, monkeypatch):
    home = tmp_path / "home"
    favourite = {
        u: next(g for g in world["catalogue"][m].genres)
        for u in world["profiles"]
        for m in [world["ratings"].filter((pl.col("user_id") == u) & (pl.col("rating") >= 4)).get_column("item_id")[0]]
    }
    genres = tuple(sorted(set(favourite.values())))
    assert len(genres) == 3  # each user loves another genre
    fake.policy = persona_agent(genres)
    result = _materialise(world, fake, home, monkeypatch, "llm_personas", {"n_candidates": 3, "validation_movies": 4})
    assert result.success and fake.calls == 3 * 3 * 2  # 3 agents x 3 candidates, each written then rating
    table = pl.read_parquet(home / "assets" / "llm_personas.parquet")
    assert table.get_column("user_id").to_list() == sorted(world["profiles"])
    for row in table.iter_rows(named=True):
        # Three candidates, one per genre: the kept one loves the user's genre and scores best.
        assert len(row["candidates"]) == 3 and f"loves {favourite[row['user_id']]}" in row["persona"]
        assert row["rmse"] == min(row["scores"]) and sorted(row["scores"])[1] > row["rmse"]
        # Each candidate not kept says why: here, each rated the movies worse than the kept one.
        assert sum(d is None for d in row["dropped"]) == 1
        assert all(d.startswith("worse: RMSE") for d in row["dropped"] if d is not None)
    (event,) = [m for m in result.get_asset_materialization_events() if m.asset_key.to_user_string() == "llm_personas"]
    metadata = event.materialization.metadata
    # The bill was estimated before the run from the prompts it would send: every call counted.
    assert (
        metadata["matched"].value == 3
        and metadata["candidates dropped"].value == {"worse": 6}
        and metadata["llm structured_output"].value == "json_schema"
        and metadata["estimated calls"].value == fake.calls
        and metadata["estimated cost (USD)"].value > 0
    )

    # The simulation with persona: matched shows each agent its kept persona in every page prompt.
    fake.requests.clear()
    result = _materialise(
        world, fake, home, monkeypatch, "simulation_events", {"brain": "llm", "arms": ["pop"], "persona": "matched"}
    )
    assert result.success
    prompts = [system_text(r) + "\n" + user_text(r) for r in fake.requests]
    pages = [p for p in prompts if "Persona:" in p]
    assert pages and len(pages) == len(prompts)
    kept = dict(table.select("user_id", "persona").iter_rows())
    shown = {re.search(r"- Persona: (.*)$", p, re.M).group(1) for p in pages}
    assert shown == set(kept.values())  # every agent's kept persona, and only those
    assert not any(world["profiles"][u].persona in p for p in pages for u in kept)  # never the trait persona


def test_llm_personas_refuse_a_bill_above_max_cost_and_matched_needs_them(world, fake, tmp_path, monkeypatch):
    from dagster import Failure

    fake.policy = persona_agent(("Drama",))
    home = tmp_path / "home"
    result = _materialise(
        world, fake, home, monkeypatch, "llm_personas", {"n_candidates": 5}, max_cost_usd=1e-9, raise_on_error=False
    )
    assert not result.success and fake.calls == 0  # refused before any call
    failure = result.get_step_failure_events()[0].event_specific_data.error
    assert "above max_cost_usd" in failure.message and "llm_personas" in failure.message
    with pytest.raises(Failure, match="llm_personas has not been materialised: run the job simab_personas"):
        _materialise(
            world, fake, home, monkeypatch, "simulation_events", {"brain": "llm", "arms": ["pop"], "persona": "matched"}
        )
    assert fake.calls == 0


def test_the_ratings_schema_admits_each_listed_movie_once_and_the_check_reads_both_shapes():
    import jsonschema

    from ops.simulation.brains.llm.answers import AnswerError
    from ops.simulation.brains.llm.persona import _check_ratings, ratings_schema

    _, schema = ratings_schema([10, 20, 30])
    jsonschema.validate({"ratings": {"10": 5, "20": 1, "30": 3}}, schema)
    for bad in (
        {"ratings": {"10": 5, "20": 1}},  # one skipped
        {"ratings": {"10": 5, "20": 1, "30": 3, "40": 2}},  # one not listed
        {"ratings": {"10": 6, "20": 1, "30": 3}},  # off the scale
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    truth = {10: 4, 20: 2, 30: 3}
    assert _check_ratings(json.dumps({"ratings": {"10": 5, "20": 1, "30": 3}}), truth) == {10: 5, 20: 1, 30: 3}
    entries = [{"item_id": 10, "rating": 5}, {"item_id": 20, "rating": 1}, {"item_id": 30, "rating": 3}]
    assert _check_ratings(json.dumps({"ratings": entries}), truth) == {10: 5, 20: 1, 30: 3}
    # The array shape a model filled with one movie twice: the skipped one is named.
    twice = [{"item_id": 10, "rating": 5}, {"item_id": 10, "rating": 4}, {"item_id": 30, "rating": 3}]
    with pytest.raises(AnswerError, match=r"\[20\]"):
        _check_ratings(json.dumps({"ratings": twice}), truth)

"""One LLM bill per run: every call reserves its ceiling in the run's ledger before it is sent,
so max_cost_usd holds for the run as a whole (simulations, personas, the read-out's
protocols), whichever step makes the call."""

from __future__ import annotations

import polars as pl
import pytest

from fakes.agents import llm_world
from fakes.openai_server import FakeOpenAI, scripted_agent
from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
from ops.simulation.budget import CostLimitExceeded, RunBudget
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate


def test_two_steps_share_one_cap_and_a_call_past_it_is_refused_before_it_is_sent(tmp_path):
    path = tmp_path / "bills" / "lifecycle-x.json"
    arm_fm, readout = RunBudget(path, 1.0), RunBudget(path, 1.0)  # two steps (processes) of one run
    arm_fm.reserve(0.6, "simulation_events[fm]")
    arm_fm.settle(0.6, 0.5, "simulation_events[fm]")
    readout.reserve(0.4, "taste_alignment")  # 0.5 spent + 0.4 = 0.9: allowed
    with pytest.raises(CostLimitExceeded, match=r"taste_alignment: the next LLM call .* past max_cost_usd=\$1.00"):
        readout.reserve(0.2, "taste_alignment")  # 0.5 + 0.4 in flight + 0.2 > 1.0
    readout.settle(0.4, 0.3, "taste_alignment")
    readout.record_estimate("simulation_events[fm]", 0.55)
    bill = RunBudget(path, 1.0).bill()
    assert bill["spent"] == pytest.approx(0.8) and bill["spend"] == {
        "simulation_events[fm]": 0.5,
        "taste_alignment": 0.3,
    }
    assert bill["estimates"] == {"simulation_events[fm]": 0.55}


def test_no_cap_records_the_spend_and_refuses_nothing(tmp_path):
    budget = RunBudget(tmp_path / "b.json", 0.0)
    for _ in range(3):
        budget.reserve(10.0, "a")
        budget.settle(10.0, 7.0, "a")
    assert budget.bill()["spent"] == pytest.approx(21.0)


def test_a_damaged_bill_is_named(tmp_path):
    path = tmp_path / "b.json"
    path.write_text("{half")
    with pytest.raises(ValueError, match=r"b.json: the run's LLM bill cannot be read"):
        RunBudget(path, 1.0).reserve(0.1, "a")


def test_an_arm_stops_before_the_call_that_would_pass_the_run_cap(tmp_path):
    # The fake endpoint counts what was sent: with a cap worth a few calls the simulation
    # stops with the bill's error, and no call past the cap reached the endpoint.
    world = llm_world(tmp_path / "world", n_agents=4)
    fake = FakeOpenAI(scripted_agent, count_tokens=True)  # it charges the tokens it counts, as a server does
    path, cap = tmp_path / "bill.json", 5.0
    with fake.serve() as url:
        # $1 per 1,000 tokens: a page prompt's ceiling is about a dollar, so the cap is a few calls.
        config = LLMBrainConfig(
            base_url=url,
            model="m",
            api_key_required=False,
            vision=False,
            cache="off",
            price_prompt_per_1m=1000.0,
            price_completion_per_1m=1000.0,
            max_tokens=100,
            budget_path=str(path),
            budget_cap_usd=cap,
            budget_label="simulation_events[pop]",
        )
        brain = LLMBrain(config, catalogue=world["catalogue"])
        try:
            with pytest.raises(CostLimitExceeded, match=r"simulation_events\[pop\]: the next LLM call"):
                simulate(
                    brain,
                    world["agents"],
                    world["top_k"],
                    world["catalogue"],
                    SimulationConfig(progress=False),
                    arms=["pop"],
                    seed=0,
                    run_id="r",
                )
        finally:
            brain.close()
    bill = RunBudget(path, cap).bill()
    assert fake.calls >= 1 and bill["spent"] <= cap
    # What the endpoint was paid for is what the bill says was spent, charged to the arm.
    paid = (fake.prompt_tokens + fake.completion_tokens + fake.probe_tokens) * 1000.0 / 1e6  # the probes too
    assert bill["spent"] == pytest.approx(paid) and bill["spend"] == {"simulation_events[pop]": pytest.approx(paid)}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from tests.test_alignment_brains import _synthetic_world

    return _synthetic_world(tmp_path_factory.mktemp("bill-world"), n_users=80, n_movies=150)


PROTOCOLS = ["taste_alignment", "rating_alignment", "list_quality_alignment"]


def _protocol(synthetic, tmp_path, monkeypatch, asset_name, fake, cap, lifecycle="refused", **config):
    """Materialise one alignment protocol with the LLM brain against `fake` (its value)."""
    from dagster import build_asset_context

    from assets.alignment import list_quality, rating, taste
    from assets.alignment.protocol import AlignmentConfig
    from resources.embeddings import EmbeddingsResource
    from resources.llm import LIFECYCLE_TAG, LLMResource
    from resources.mlflow_tracking import MlflowTracking

    monkeypatch.setenv("SIMAB_HOME", str(tmp_path))
    split = synthetic["split"]
    asset, config_class = {
        "rating_alignment": (rating.rating_alignment, rating.RatingAlignmentConfig),
        "taste_alignment": (taste.taste_alignment, taste.TasteAlignmentConfig),
        "list_quality_alignment": (list_quality.list_quality_alignment, AlignmentConfig),
    }[asset_name]
    inputs = dict(
        agents=synthetic["agents"],
        embedded_brain=synthetic["model"],
        train_ratings=split.train,
        valid_ratings=split.valid,
        test_ratings=split.test,
        catalogue=synthetic["frame"],
        users=synthetic["data"].users,
        recommender_arm={},
    )
    with fake.serve() as url:
        llm = LLMResource(base_url=url, model="test-model", api_key_required=False, cache="off", max_cost_usd=cap)
        resources = dict(
            llm=llm,
            mlflow_tracking=MlflowTracking(tracking_uri="sqlite:///:memory:"),
            embeddings=EmbeddingsResource(),
        )
        wanted = set(asset.op.ins) | set(asset.required_resource_keys)
        kwargs = {k: v for k, v in {**inputs, **resources}.items() if k in wanted}
        output = asset(
            build_asset_context(run_tags={LIFECYCLE_TAG: lifecycle}),
            config_class(brain="llm", n_agents=4, **config),
            **kwargs,
        )
    return output.value


@pytest.mark.parametrize("asset_name", PROTOCOLS)
def test_an_alignment_protocol_above_the_cap_is_not_measured_before_any_call(
    synthetic, tmp_path, monkeypatch, asset_name
):
    # The read-out's protocols used to fail above the cap, and the report that depends on them
    # with them: the A/B verdict was never shown.  Now the protocol stores why, and the estimate.
    fake = FakeOpenAI(scripted_agent)
    record = _protocol(synthetic, tmp_path, monkeypatch, asset_name, fake, cap=0.0001)
    assert fake.calls == 0  # refused before the first call
    assert "above max_cost_usd" in record["not_measured"] and record["why"].startswith("refused by the cost limit")
    bill = RunBudget(tmp_path / "bills" / "lifecycle-refused.json", 0.0001).bill()
    assert bill["estimates"][asset_name] > 0.0001 and bill["spent"] == 0.0
    assert record["estimate"] == f"estimated ${bill['estimates'][asset_name]:,.2f} ({record['estimate'].split('(')[1]}"
    assert "by its dry run" in record["estimate"]


def test_a_protocol_switched_off_asks_nothing_and_says_what_it_would_cost(synthetic, tmp_path, monkeypatch):
    fake = FakeOpenAI(scripted_agent)
    record = _protocol(synthetic, tmp_path, monkeypatch, "taste_alignment", fake, cap=None, enabled=False)
    assert fake.calls == 0 and not fake.probes
    assert record["why"] == "switched off" and "SIMAB_TRUST_PROTOCOLS=off" in record["not_measured"]
    assert record["estimate"].startswith("about $") and "for 4 agents" in record["estimate"]


def test_a_protocol_the_endpoint_refuses_is_not_measured_and_says_why(synthetic, tmp_path, monkeypatch):
    fake = FakeOpenAI(scripted_agent)
    fake.fail_when(lambda body: True, 401)  # a bad key: the client stops at once
    record = _protocol(synthetic, tmp_path, monkeypatch, "rating_alignment", fake, cap=None)
    assert record["why"] == "failed" and "401" in record["not_measured"]


def test_a_protocol_that_breaks_is_not_measured_and_names_the_error(synthetic, tmp_path, monkeypatch):
    # A plotting fault on degenerate intervals once failed list quality, and the report with it.
    import ops.studies.alignment.protocols as protocols

    def broken(*args, **kwargs):
        raise ValueError("'yerr' must not contain negative values")

    monkeypatch.setattr(protocols, "rating_pairs", broken)
    record = _protocol(synthetic, tmp_path, monkeypatch, "rating_alignment", FakeOpenAI(scripted_agent), cap=None)
    assert record["why"] == "failed"
    assert record["not_measured"] == "rating_alignment: failed: ValueError: 'yerr' must not contain negative values"


def test_the_sensitivity_ladder_is_not_measured_with_a_brain_that_pays_per_decision(synthetic, tmp_path, monkeypatch):
    # Five simulations of the run's agents: with the LLM brain the ladder says why it did not run, and calls nothing.
    from types import SimpleNamespace

    from dagster import build_asset_context

    from assets.alignment.sensitivity import SensitivityConfig, list_sensitivity
    from resources.llm import LLMResource
    from resources.mlflow_tracking import MlflowTracking

    monkeypatch.setenv("SIMAB_HOME", str(tmp_path))
    split = synthetic["split"]
    users = sorted(synthetic["agents"].profiles)[:6]
    readout = SimpleNamespace(
        control="pop",
        per_session=pl.DataFrame({"arm": "pop", "user_id": users, "session": 0}),
        per_agent=pl.DataFrame({"arm": "pop", "user_id": users}),
    )
    fake = FakeOpenAI(scripted_agent)
    with fake.serve() as url:
        llm = LLMResource(base_url=url, model="test-model", api_key_required=False, cache="off")
        result = list_sensitivity(
            build_asset_context(),
            SensitivityConfig(brain="llm"),
            ab_readout=readout,
            top20_lists={"pop": pl.DataFrame({"user_id": users})},
            agents=synthetic["agents"],
            embedded_brain=synthetic["model"],
            train_ratings=split.train,
            catalogue=synthetic["frame"],
            llm=llm,
            mlflow_tracking=MlflowTracking(tracking_uri="sqlite:///:memory:"),
        )
    assert fake.calls == 0
    assert result.value["not_measured"].startswith("the llm:test-model brain pays for every decision")
    assert "the run's 6 agents five times over" in result.value["not_measured"]

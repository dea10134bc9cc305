"""The believability judge (SimUSER §4.4, Table 4) against the fake endpoint: trajectories
rendered as the judge reads them, scores with their intervals per brain, malformed answers
and HTTP errors counted (never dropped), the bill before the first call and its refusal,
and "not measured" when no endpoint is configured."""

from __future__ import annotations

import json

import polars as pl
import pytest

from fakes.openai_server import JUDGE_QUESTION_MARK, FakeOpenAI, scripted_judge, user_text
from ops.schema import EVENTS, conform
from ops.simulation.brains.llm.config import LLMBrainConfig
from ops.simulation.budget import RunBudget
from ops.studies.believability import (
    JUDGE_QUESTION,
    believability_table,
    judge,
    judge_estimate,
    judge_messages,
    judge_schema,
    sample_trajectories,
    verdicts_frame,
)

CATALOGUE = pl.DataFrame(
    {
        "item_id": [1, 2, 3, 4],
        "title": ["Alpha (1990)", "Beta (1991)", "Gamma (1992)", "Zed Movie (1993)"],
        "genres": [["Drama"], ["Comedy"], ["Action", "Drama"], ["Horror"]],
        "vote_average": [7.1, 6.0, 5.5, 4.0],
    }
)


def _session(user: int, brain: str, arm: str, reasons: list[str], shown=(1, 2, 3)) -> list[dict]:
    """Home page 1 → click the first movie → watch and rate 4 → back → exit → interview."""
    first = shown[0]
    rows = [
        {"step": 1, "page_type": "home", "page_number": 1, "action": "click_movie", "item_id": first, "shown": list(shown), "interest": 4, "reason": reasons[0]},
        {"step": 2, "page_type": "detail", "page_number": 1, "action": "watch_and_rate", "item_id": first, "shown": [first], "rating": 4, "reason": reasons[1]},
        {"step": 3, "page_type": "home", "page_number": 1, "action": "exit", "shown": list(shown), "reason": reasons[2]},
        {"step": 4, "page_type": "home", "page_number": 1, "action": "exit_interview", "satisfaction": 7, "reason": "it was fine"},
    ]  # fmt: skip
    base = {"run_id": "r", "arm": arm, "brain": brain, "user_id": user, "session": 0, "fallback": False}
    return [{**dict.fromkeys(EVENTS), **base, **r} for r in rows]


def _events(arm: str, brain: str) -> pl.DataFrame:
    rows = []
    for user in range(1, 7):
        # The embedded brain repeats one reason; the other varies its reasons by user.
        reasons = ["it fits"] * 3 if brain == "embedded" else [f"liked the cast {user}", "worth it", f"enough {user}"]
        # User 5's log shows "Zed Movie" (the fake fails on it), user 6's is answered badly.
        rows += _session(user, brain, arm, reasons, shown=(4, 1, 2) if user == 5 else (1, 2, 3))
    return conform(pl.DataFrame(rows, schema=EVENTS), EVENTS, "events")


EVENTS_BY_RUN = {(a, b): _events(a, b) for a in ("pop", "fm") for b in ("embedded", "llm")}


def _config(url: str, tmp_path, **overrides) -> LLMBrainConfig:
    fields = dict(
        base_url=url,
        model="judge-model",
        api_key_required=False,
        structured_output="json_schema",
        vision=False,
        cache="off",
        max_attempts=2,
        backoff_s=0.0,
        backoff_jitter=0.0,
        price_prompt_per_1m=1.0,
        price_completion_per_1m=2.0,
        budget_path=str(tmp_path / "bill.json"),
        budget_cap_usd=5.0,
        budget_label="simuser_believability",
    )
    return LLMBrainConfig(**{**fields, **overrides})


def _judge_policy(body: dict) -> str:
    """The scripted judge, except a malformed score for user 6's log of the llm brain, asked
    again or not."""
    if "liked the cast 6" in body["messages"][1]["content"]:
        return json.dumps({"score": 9, "reason": "out of range"})
    return scripted_judge(body)


def test_a_trajectory_reads_as_pages_actions_and_reasons_without_the_brain_or_profile():
    (first, *_) = sample_trajectories({("pop", "llm"): EVENTS_BY_RUN[("pop", "llm")]}, CATALOGUE, 2, seed=0)
    text = first.text
    assert "Home page 1, showing:" in text and "Alpha (1990) (Drama; rated 7.1/10)" in text
    assert 'Action: clicked Alpha (1990) (interest 4/5). Reason: "liked the cast' in text
    assert "Detail page of Alpha (1990)" in text and "watched it and rated it 4/5" in text
    assert 'Exit interview: satisfaction 7/10. Said: "it was fine"' in text
    assert "llm" not in text and "embedded" not in text
    assert JUDGE_QUESTION_MARK in JUDGE_QUESTION
    name, schema = judge_schema()
    assert schema["properties"]["score"]["enum"] == [1, 2, 3, 4, 5] and schema["additionalProperties"] is False


def test_the_sample_is_seeded_and_takes_the_same_agents_under_every_brain_of_an_arm():
    sample = sample_trajectories(EVENTS_BY_RUN, CATALOGUE, 3, seed=1)
    assert len(sample) == 2 * 2 * 3
    users = {
        (t.arm, t.brain): sorted(t.user_id for t in sample if (t.arm, t.brain) == (t.arm, t.brain)) for t in sample
    }
    assert users[("pop", "embedded")] == users[("pop", "llm")]
    again = sample_trajectories(EVENTS_BY_RUN, CATALOGUE, 3, seed=1)
    assert [t.text for t in again] == [t.text for t in sample]
    assert len(sample_trajectories(EVENTS_BY_RUN, CATALOGUE, 50)) == 2 * 2 * 6  # fewer sessions than asked: all


def test_the_judge_scores_each_brain_with_an_interval_and_counts_malformed_answers_and_http_errors(tmp_path):
    trajectories = sample_trajectories(EVENTS_BY_RUN, CATALOGUE, 6, seed=0)
    fake = FakeOpenAI(_judge_policy, count_tokens=True)
    # Every request whose log shows "Zed Movie" (user 5) fails with HTTP 500, every attempt.
    fake.fail_when(lambda body: "Zed Movie" in user_text(body), 500)
    with fake.serve() as url:
        config = _config(url, tmp_path)
        estimate = judge_estimate(config, trajectories)
        verdicts, usage = judge(config, trajectories, seed=0)
    frame = verdicts_frame(verdicts)
    assert frame.height == len(trajectories) == 24  # nothing dropped
    failures = frame.filter(pl.col("failure").is_not_null())
    kinds = sorted(f.split(":")[0] for f in failures.get_column("failure"))
    # user 5 under both brains and both arms (HTTP 500); user 6 under llm on both arms (score 9, asked twice).
    assert kinds == ["invalid_answer"] * 2 + ["transport"] * 4
    assert failures.get_column("score").is_null().all()
    table = {
        r["brain"]: r for r in believability_table(frame, ["embedded", "llm"], n_bootstrap=500).iter_rows(named=True)
    }
    assert table["embedded"]["trajectories"] == 12 and table["embedded"]["scored"] == 10
    assert table["embedded"]["failed_transport"] == 2 and table["embedded"]["failed_invalid_answer"] == 0
    assert table["llm"]["scored"] == 8 and table["llm"]["failed_invalid_answer"] == 2
    # The scripted judge: 1 + distinct action reasons — the embedded logs repeat "it fits" (→ 2),
    # the llm logs give three (→ 4).
    assert table["embedded"]["score"] == pytest.approx(2.0) and table["llm"]["score"] == pytest.approx(4.0)
    for row in table.values():
        assert row["ci_low"] <= row["score"] <= row["ci_high"] and row["measured"] == "yes"
    # The re-ask carried the error back to the model.
    reasked = [b for b in fake.requests if "liked the cast 6" in json.dumps(b) and len(b["messages"]) > 2]
    assert reasked and "That answer is invalid: score must be an integer 1-5" in user_text(reasked[0])
    assert all(b["response_format"]["json_schema"]["name"] == "believability" for b in fake.requests)
    # The bill: the estimate was the prompts really sent (the fake counts them alike), the
    # spend is in the run's bill under the judge's name.
    from ops.simulation.brains.llm.tokens import prompt_tokens

    first_asks = {json.dumps(b["messages"]) for b in fake.requests if len(b["messages"]) == 2}
    assert first_asks == {json.dumps(judge_messages(t)) for t in trajectories}  # what the estimate priced
    assert estimate.calls == len(trajectories)
    assert estimate.prompt_tokens == sum(prompt_tokens(judge_messages(t)) for t in trajectories)
    bill = RunBudget(tmp_path / "bill.json", 5.0).bill()
    assert bill["spend"]["simuser_believability"] == pytest.approx(usage["cost_usd"]) and usage["cost_usd"] > 0
    # Answered requests (first asks and 2 re-asks) and the failing ones' 2 attempts each.
    assert usage["requests"] == 24 - 4 + 2 and fake.calls == usage["requests"] + 4 * 2
    assert estimate.ceiling_cost_usd > estimate.cost_usd > 0


def test_a_judge_past_the_cap_is_stopped_by_the_runs_bill_before_the_call(tmp_path):
    trajectories = sample_trajectories(EVENTS_BY_RUN, CATALOGUE, 1)
    fake = FakeOpenAI(scripted_judge)
    with fake.serve() as url:
        from ops.simulation.budget import CostLimitExceeded

        with pytest.raises(CostLimitExceeded):
            judge(_config(url, tmp_path, budget_cap_usd=1e-9), trajectories)
    assert fake.calls == 0


# -- the asset: not measured without an endpoint, refused past the cap, published ----------


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One home for the asset's runs: its MLflow store is made once."""
    return tmp_path_factory.mktemp("believability") / "home"


def _materialize(home, monkeypatch, llm, config=None):
    from dagster import asset, materialize, mem_io_manager

    from assets.experiments.believability import simuser_believability
    from resources.mlflow_tracking import MlflowTracking
    from resources.storage import SimabIOManager

    monkeypatch.setenv("SIMAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    runs = {f"{a}|{b}": frame for (a, b), frame in EVENTS_BY_RUN.items()}

    @asset(name="experiment_simulation_events", io_manager_key="mem")
    def stub_events():
        return runs

    @asset(name="catalogue", io_manager_key="mem")
    def stub_catalogue():
        return CATALOGUE

    run_config = {
        "ops": {
            "simuser_believability": {
                "config": {
                    "arms": ["pop", "fm"],
                    "brains": ["embedded", "llm"],
                    "per_arm_and_brain": 3,
                    **(config or {}),
                }
            }
        }
    }
    return materialize(
        [stub_events, stub_catalogue, simuser_believability],
        resources={
            "io_manager": SimabIOManager(),
            "mem": mem_io_manager,
            "mlflow_tracking": MlflowTracking(),
            "llm": llm,
        },
        run_config=run_config,
        raise_on_error=False,
    )


def test_with_no_llm_configured_the_study_says_not_measured_and_invents_no_score(home, monkeypatch):
    from resources.llm import LLMResource

    result = _materialize(home, monkeypatch, LLMResource())
    assert result.success
    table = pl.read_csv(home / "experiments" / "believability" / "table.csv")
    assert table.get_column("score").is_null().all() and table.get_column("scored").sum() == 0
    assert table.get_column("trajectories").to_list() == [6, 6]
    assert table.get_column("measured").str.starts_with("not measured: no LLM endpoint configured").all()
    text = (home / "experiments" / "believability" / "table.md").read_text()
    assert "judge: none configured" in text and "3.01 ± 0.14" in text and "4.41 ± 0.16" in text


def test_the_judge_asset_records_its_bill_first_refuses_past_the_cap_and_publishes_its_plot(home, monkeypatch):
    from ops.simulation.budget import bill_path
    from resources.llm import LLMResource
    from resources.mlflow_tracking import MlflowTracking

    fake = FakeOpenAI(scripted_judge)
    with fake.serve() as url:
        priced = dict(
            base_url=url, model="judge-model", price_prompt_per_1m=1000.0, price_completion_per_1m=1000.0, cache="off"
        )
        refused = _materialize(home, monkeypatch, LLMResource(**priced, max_cost_usd=0.001))
        assert not refused.success and fake.calls == 0
        failure = next(e for e in refused.all_events if e.is_step_failure)
        assert "simuser_believability is estimated at" in str(failure.event_specific_data.error)
        bill = json.loads(bill_path(home, None, refused.run_id).read_text())
        assert bill["estimates"]["simuser_believability"] > 0.001 and bill["spent"] == 0

        done = _materialize(home, monkeypatch, LLMResource(**priced, max_cost_usd=50.0))
    assert done.success and fake.calls == 12
    folder = home / "experiments" / "believability"
    table = pl.read_csv(folder / "table.csv")
    assert table.get_column("scored").to_list() == [6, 6] and table.get_column("measured").to_list() == ["yes", "yes"]
    record = json.loads(bill_path(home, None, done.run_id).read_text())
    assert record["estimates"]["simuser_believability"] > 0 and record["spend"]["simuser_believability"] > 0
    assert pl.read_csv(folder / "verdicts.csv").height == 12
    tracking = MlflowTracking()
    run = tracking.client().search_runs([tracking.experiment_id()], "tags.experiment = 'believability'")[0]  # newest
    plots = {a.path for a in tracking.client().list_artifacts(run.info.run_id, "experiments/believability/plots")}
    assert "experiments/believability/plots/believability.png" in plots

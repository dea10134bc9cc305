"""What the LLM brain asks of its endpoint, against the fake OpenAI server: a
strict JSON schema per request built from the answer and the page; the structured output mode
and vision probed once (`auto`), falling back on a refusal and recorded; a feature refused
during the run not retried; the protocols and persona matching asking as many questions at
once as the endpoint serves; why each persona candidate was dropped."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from fakes.agents import llm_world
from fakes.openai_server import FakeOpenAI, answer, images, scripted_agent, user_text
from ops.agents.session import AgentSession
from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig, LLMEndpointError
from ops.simulation.observation import CLICK_MOVIE, EXIT, NEXT_PAGE, WATCH_AND_RATE

KEY_ENV = "SIMAB_TEST_CAPABILITIES_KEY"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return llm_world(tmp_path_factory.mktemp("capabilities"), n_agents=4, per_user=8)


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    fake = FakeOpenAI(scripted_agent)
    with fake.serve() as url:
        fake.url = url
        yield fake


def make_brain(fake, world, **overrides) -> LLMBrain:
    fields = dict(
        base_url=fake.url, model="cap-model", api_key_env=KEY_ENV, backoff_s=0.0, backoff_max_s=0.0, cache="off"
    )
    return LLMBrain(LLMBrainConfig(**{**fields, **overrides}), catalogue=world["catalogue"])


def session(world, uid: int = 1) -> AgentSession:
    return AgentSession(uid, world["profiles"][uid], world["memories"][uid], 0.0, 30.0)


def pages(world, uid: int = 1):
    """(home page, detail page, a detail page where rating is the only legal action)."""
    from ops.simulation.sandbox import Sandbox

    sandbox = Sandbox(world["lists"][uid], world["catalogue"])
    home = sandbox.observe()
    sandbox.click_movie(world["lists"][uid][0])
    detail = sandbox.observe()
    return home, detail, replace(detail, legal_actions=(WATCH_AND_RATE,))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# -- the schema --------------------------------------------------------------------------------


def test_the_schema_of_a_page_enumerates_exactly_its_ids_and_legal_actions(world):
    import jsonschema

    from ops.simulation.brains.llm.answers import page_schema

    config = LLMBrainConfig(reason_max_chars=40)
    home, detail, rate_only = pages(world)
    ids = [c.item_id for c in home.items]
    shown = detail.detail.card.item_id

    name, schema = page_schema(home, config)
    props = schema["properties"]
    assert name == "home_page_answer" and schema["additionalProperties"] is False
    assert (
        sorted(schema["required"]) == sorted(props) == sorted(["action", "item_id", "interest", "caught_eye", "reason"])
    )
    assert props["action"]["enum"] == list(home.legal_actions) and CLICK_MOVIE in home.legal_actions
    assert props["item_id"] == {"anyOf": [{"type": "integer", "enum": ids}, {"type": "null"}]}
    assert props["caught_eye"]["items"]["enum"] == ids and props["caught_eye"]["maxItems"] == len(ids)
    assert props["interest"]["enum"] == [1, 2, 3, 4, 5] and props["reason"]["maxLength"] == 40

    valid = {"action": CLICK_MOVIE, "item_id": ids[2], "interest": 4, "caught_eye": [ids[0]], "reason": "fits"}
    jsonschema.validate(valid, schema)
    off_page = 10**6
    for wrong in (
        {**valid, "action": "fly_away"},  # not a legal action
        {**valid, "item_id": off_page},  # not on the page
        {**valid, "caught_eye": [off_page]},
        {**valid, "interest": 6},
        {**valid, "reason": "x" * 41},  # would run on to max_tokens
        {**valid, "mood": "fine"},  # no other key
        {k: v for k, v in valid.items() if k != "reason"},  # every key required
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)

    name, schema = page_schema(detail, config)
    props = schema["properties"]
    assert name == "detail_page_answer" and "item_id" not in props
    assert props["action"]["enum"] == list(detail.legal_actions) and props["caught_eye"]["items"]["enum"] == [shown]
    assert props["rating"] == {"anyOf": [{"type": "integer", "enum": [1, 2, 3, 4, 5]}, {"type": "null"}]}
    # Asked only to rate (the rating protocol): a rating is required, not null.
    _, schema = page_schema(rate_only, config)
    assert schema["properties"]["action"]["enum"] == [WATCH_AND_RATE]
    assert schema["properties"]["rating"] == {"type": "integer", "enum": [1, 2, 3, 4, 5]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"action": WATCH_AND_RATE, "rating": None, "interest": 3, "caught_eye": [], "reason": "ok"}, schema
        )


def test_the_endpoint_receives_each_requests_own_schema(world, fake):
    brain = make_brain(fake, world, vision=False, structured_output="json_schema")
    home, detail, _ = pages(world)
    try:
        brain.decide(session(world), home, rng())
        brain.decide(session(world), detail, rng())
        brain.exit_interview(session(world), rng())
    finally:
        brain.close()
    assert not fake.probes  # both settings given: nothing probed
    formats = [body["response_format"] for body in fake.requests]
    assert [f["type"] for f in formats] == ["json_schema"] * 3 and all(f["json_schema"]["strict"] for f in formats)
    home_schema, detail_schema, interview = (f["json_schema"]["schema"] for f in formats)
    assert home_schema["properties"]["item_id"]["anyOf"][0]["enum"] == [c.item_id for c in home.items]
    assert home_schema["properties"]["action"]["enum"] == list(home.legal_actions)
    assert detail_schema["properties"]["caught_eye"]["items"]["enum"] == [detail.detail.card.item_id]
    assert interview["properties"]["satisfaction"]["enum"] == list(range(1, 11))
    assert brain.usage.facts() == {"structured_output": "json_schema", "vision": "false"}


# -- the probes ----------------------------------------------------------------------------------


def test_auto_takes_json_schema_where_the_endpoint_does_and_probes_once(world, fake):
    fake.reply(answer(action=EXIT))
    brain = make_brain(fake, world, vision=False)
    assert brain.usage.facts() == {"vision": "false"}  # nothing known before the first call
    brain.decide(session(world), pages(world)[0], rng())
    assert brain.usage.facts()["structured_output"] == "json_schema" and brain.usage.probes == 1
    assert [p["response_format"]["type"] for p in fake.probes] == ["json_schema"]
    assert fake.requests[-1]["response_format"]["type"] == "json_schema"
    # A second brain on the same endpoint and model in this process: no second probe.
    other = make_brain(fake, world, vision=False)
    assert other.transport.structured_output == "json_schema"
    fake.reply(answer(action=EXIT))
    other.decide(session(world), pages(world)[0], rng())
    assert len(fake.probes) == 1 and other.usage.probes == 0
    brain.close()
    other.close()


def test_auto_falls_back_to_json_object_on_a_400_and_to_text_when_both_are_refused(world, fake):
    fake.refuse_schema(400, "'response_format.type' must be 'json_object' or 'text'")
    fake.reply(answer(action=EXIT))
    brain = make_brain(fake, world, vision=False)
    assert brain.decide(session(world), pages(world)[0], rng()).action == EXIT
    assert [p["response_format"]["type"] for p in fake.probes] == ["json_schema", "json_schema", "json_object"]
    assert fake.requests[-1]["response_format"] == {"type": "json_object"}
    assert brain.usage.facts()["structured_output"] == "json_object"
    brain.close()

    from ops.simulation.brains.llm.probes import forget_probes

    forget_probes()
    fake.probes.clear()
    fake.refuse_json_object(422, "response_format json_object is not supported")
    fake.reply(answer(action=EXIT))
    brain = make_brain(fake, world, vision=False)
    assert brain.decide(session(world), pages(world)[0], rng()).action == EXIT
    assert [p["response_format"]["type"] for p in fake.probes] == ["json_schema", "json_schema", "json_object"]
    assert "response_format" not in fake.requests[-1] and brain.usage.facts()["structured_output"] == "text"
    brain.close()


def test_a_probe_refused_for_a_bad_key_is_no_answer_about_the_feature(world, fake):
    from fakes.openai_server import Outcome

    fake.refusals["json_schema"] = Outcome(status=401, message="invalid api key")
    brain = make_brain(fake, world, vision=False)
    with pytest.raises(LLMEndpointError, match="HTTP 401"):
        brain.decide(session(world), pages(world)[0], rng())
    assert brain.transport.structured_output is None  # not settled: asked again next time
    brain.close()


def test_vision_auto_is_off_where_the_endpoint_refuses_an_image(world, fake):
    # llama.cpp serving a text-only model: HTTP 500 "image input is not supported".
    fake.refuse_images()
    brain = make_brain(fake, world, structured_output="json_schema")
    home = pages(world)[0]
    d = brain.decide(session(world), home, rng())
    assert d.fallback_reason is None and brain.vision is False
    assert len(fake.probes) == 1 and images(fake.probes[0])  # the 1x1 image, once
    page = fake.requests[-1]
    assert not images(page, every=True) and "Poster" in user_text(page)  # palette captions instead
    assert brain.usage.facts() == {"structured_output": "json_schema", "vision": "false"}
    assert brain.name == "llm:cap-model"  # the name comes from the configuration (checkpoint keys)
    brain.close()

    # An endpoint that takes images: posters go as images.
    from ops.simulation.brains.llm.probes import forget_probes

    forget_probes()
    fake.refusals.clear()
    brain = make_brain(fake, world, structured_output="json_schema")
    brain.decide(session(world), home, rng())
    assert brain.vision is True and images(fake.requests[-1]) and brain.usage.facts()["vision"] == "true"
    brain.close()


def test_vision_true_is_not_probed_and_a_refusal_during_the_run_fails_fast_naming_the_setting(world, fake):
    fake.refuse_images()
    brain = make_brain(fake, world, vision=True, structured_output="json_schema", max_attempts=5)
    calls = fake.calls
    with pytest.raises(LLMEndpointError, match=r"image input is not supported.*SIMAB_LLM_VISION=false"):
        brain.decide(session(world), pages(world)[0], rng())
    assert not fake.probes and fake.calls == calls + 1  # not probed, asked once, not retried
    brain.close()


def test_the_settings_reach_the_resource_and_the_brain():
    from ops.settings import load
    from resources.llm import LLMResource

    env = {
        "SIMAB_LLM_STRUCTURED_OUTPUT": "json_object",
        "SIMAB_LLM_VISION": "auto",
        "SIMAB_LLM_BASE_URL": "http://127.0.0.1:8080/v1",
    }
    resource = LLMResource(**load(env).resource_fields("llm"))
    config = resource.brain_config()
    assert (config.structured_output, config.vision, config.api_key_required) == ("json_object", "auto", None)
    assert resource.has_credentials() and resource.describe()["llm_api_key_required"] is False
    assert LLMResource(**load({"SIMAB_LLM_VISION": "false"}).resource_fields("llm")).brain_config().vision is False
    assert LLMResource(**load({"SIMAB_LLM_VISION": "yes"}).resource_fields("llm")).brain_config().vision is True
    from ops.settings import SettingError

    with pytest.raises(SettingError, match="SIMAB_LLM_STRUCTURED_OUTPUT='grammar'.*json_schema"):
        load({"SIMAB_LLM_STRUCTURED_OUTPUT": "grammar"})


# -- the protocols ask as many questions at once as the endpoint serves --------------------------------


def list_or_page_agent(body: dict) -> str:
    text = user_text(body)
    if "Here is a list of movies" in text:
        ids = [int(m) for m in re.findall(r"^\[(\d+)\]", text, re.M)]
        return json.dumps({"watch": ids[:1]})
    if "You are on home page" in text:
        ids = [int(m) for m in re.findall(r"^\[(\d+)\]", text, re.M)]
        legal = re.search(r"Legal actions: (.*)\.", text).group(1).split(", ")
        return answer(action=NEXT_PAGE if NEXT_PAGE in legal else EXIT, caught_eye=ids[:1])
    return scripted_agent(body)


def taste_lists(world) -> pl.DataFrame:
    rows = []
    for u in sorted(world["profiles"]):
        for ratio in ("1:1", "1:3"):
            for pos, m in enumerate(world["lists"][u][:6]):
                rows.append((ratio, u, pos, m, pos % 2 == 0))
    return pl.DataFrame(
        rows,
        schema={
            "ratio": pl.Utf8,
            "user_id": pl.Int64,
            "position": pl.Int64,
            "item_id": pl.Int64,
            "relevant": pl.Boolean,
        },
        orient="row",
    )


@pytest.mark.parametrize("concurrency", [1, 4])
def test_the_protocols_overlap_requests_up_to_the_endpoints_concurrency(world, concurrency, monkeypatch):
    from ops.studies.alignment.per_item import llm_answerer, taste_per_item
    from ops.studies.alignment.rating import brain_ratings
    from ops.studies.alignment.taste import taste_discrimination

    monkeypatch.setenv(KEY_ENV, "sk-test")
    fake = FakeOpenAI(list_or_page_agent, latency_s=0.05)
    lists = taste_lists(world)
    sessions = world["agents"]
    with fake.serve() as url:
        fake.url = url
        brain = make_brain(fake, world, vision=False, structured_output="json_schema", concurrency=concurrency)
        try:
            sandbox = taste_discrimination(brain, sessions, lists, world["catalogue"], n_bootstrap=10)
            sandbox_peak, fake.max_in_flight = fake.max_in_flight, 0
            per_item = taste_per_item(llm_answerer(brain, world["catalogue"]), sessions, lists, n_bootstrap=10)
            per_item_peak, fake.max_in_flight = fake.max_in_flight, 0
            pairs = pl.DataFrame(
                {
                    "user_id": [u for u in sorted(world["profiles"]) for _ in range(2)],
                    "item_id": [m for u in sorted(world["profiles"]) for m in world["lists"][u][:2]],
                },
            ).with_columns(pl.lit(4).alias("rating"))
            rated = brain_ratings(brain, sessions, pairs, world["catalogue"])
            rating_peak = fake.max_in_flight
        finally:
            brain.close()
    # The answers do not depend on how many were in flight.
    assert sandbox.per_agent.height == per_item.per_agent.height == 8
    assert per_item.per_agent.get_column("tp").to_list() == [1] * 8
    assert rated.get_column("simulated").to_list() == [4] * pairs.height
    if concurrency == 1:
        assert (sandbox_peak, per_item_peak, rating_peak) == (1, 1, 1)
    else:
        # 8 lists, 8 lists, 8 pairs: every protocol had more than one request in flight, never above the pool.
        assert 1 < sandbox_peak <= concurrency and 1 < per_item_peak <= concurrency and 1 < rating_peak <= concurrency


# -- persona matching ---------------------------------------------------------------------------------


def persona_policy():
    """Per user prompt, the k-th candidate written: 'Good' (rates all 4), 'Meh' (rates all 1),
    'Mute' (cannot rate: leaves a movie out) and then one that cannot be written."""
    written: dict[str, int] = {}
    kinds = ("Good", "Meh", "Mute", "broken")

    def policy(body: dict) -> str:
        text = user_text(body)
        if "Imagine who this person is" in text:
            kind = kinds[min(written.get(text, 0), len(kinds) - 1)]
            written[text] = written.get(text, 0) + 1
            if kind == "broken":
                return '{"age": 7}'
            traits = dict.fromkeys(("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism"), 2)
            persona = {"age": "25-34", **traits, "occupation": "clerk", "background": "b.", "hobbies": []}
            return json.dumps({**persona, "taste": f"kind {kind}"})
        if "Rate each of these movies" in text:
            kind = re.search(r"kind (\w+)", text).group(1)
            ids = [int(m) for m in re.findall(r"^\[(\d+)\]", text, re.M)]
            if kind == "Mute":
                ids = ids[1:]
            return json.dumps({"ratings": [{"item_id": m, "rating": 4 if kind == "Good" else 1} for m in ids]})
        return '{"age": 7}'  # a re-ask: still unusable

    return policy


def test_persona_matching_records_why_each_candidate_was_dropped_and_overlaps_requests(world, monkeypatch, caplog):
    import logging

    from ops.simulation.brains.llm.persona import drop_summary, match_personas, personas_frame

    monkeypatch.setenv(KEY_ENV, "sk-test")
    fake = FakeOpenAI(persona_policy(), latency_s=0.05)
    users = sorted(world["profiles"])[:2]
    ratings = world["ratings"]
    inputs = {
        u: (
            [(m, r) for m, r in ratings.filter(pl.col("user_id") == u).select("item_id", "rating").iter_rows()][:4],
            [(m, 4) for m in world["lists"][u][:3]],  # held-out ratings of 4: "Good" predicts them exactly
        )
        for u in users
    }
    with fake.serve() as url, caplog.at_level(logging.INFO, logger="ops.simulation.brains.llm.persona"):
        fake.url = url
        brain = make_brain(fake, world, vision=False, structured_output="json_schema", concurrency=4)
        try:
            matches = match_personas(brain, inputs, n_candidates=4, seed=0)
        finally:
            brain.close()
    assert fake.max_in_flight > 1  # candidates and users asked at once
    for u in users:
        m = matches[u]
        assert "kind Good" in m.persona and m.rmse == 0.0
        reasons = dict(zip(m.candidates, m.dropped))
        assert reasons[m.persona] is None and len(m.dropped) == 4
        whys = sorted(w for w in m.dropped if w is not None)
        assert whys[0].startswith("not rated: invalid_answer: invalid 2 times")  # asked, re-asked, dropped
        assert whys[1].startswith("not written: invalid_answer")
        assert whys[2] == "worse: RMSE 3.000 against the kept candidate's 0.000"
    assert drop_summary(matches) == {"not rated": 2, "not written": 2, "worse": 2}
    frame = personas_frame(matches)
    assert frame.get_column("dropped").list.drop_nulls().list.len().to_list() == [3, 3]
    logged = [r.getMessage() for r in caplog.records]
    assert sum("dropped: not written" in line for line in logged) == 2
    # Every persona and rating request carried its strict schema; the ratings' ids are the user's.
    bodies = [b for b in fake.requests if b["response_format"]["json_schema"]["name"] == "ratings"]
    # Keyed by the ids, each required once, none other: no movie rated twice, none skipped.
    keyed = bodies[0]["response_format"]["json_schema"]["schema"]["properties"]["ratings"]
    assert keyed["additionalProperties"] is False and sorted(keyed["required"]) == sorted(keyed["properties"])
    assert sorted(int(m) for m in keyed["properties"]) in [sorted(m for m, _ in inputs[u][1]) for u in users]


def test_a_protocol_answered_mostly_by_fallbacks_fails_with_the_share_and_examples(world, monkeypatch):
    # A small model whose answers never pass the checks: the protocols would read out F1 0 and
    # no ratings as if the agents had judged; they fail instead, saying how many and why.
    from ops.studies.alignment.per_item import llm_answerer, taste_per_item
    from ops.studies.alignment.questioning import ProtocolFailed, check_fallbacks
    from ops.studies.alignment.rating import brain_ratings
    from ops.studies.alignment.taste import taste_discrimination

    monkeypatch.setenv(KEY_ENV, "sk-test")
    fake = FakeOpenAI(lambda body: '{"action": "fly_away", "watch": ["x"], "interest": 9}')
    lists = taste_lists(world)
    with fake.serve() as url:
        fake.url = url
        brain = make_brain(fake, world, vision=False, structured_output="json_schema", concurrency=4)
        try:
            with pytest.raises(ProtocolFailed, match=r"taste discrimination \(sandbox\): 16 of 16 questions \(100%\)"):
                taste_discrimination(brain, world["agents"], lists, world["catalogue"], n_bootstrap=10)
            with pytest.raises(ProtocolFailed, match=r"\(per item\): 8 of 8 .*E\.g\. invalid_answer: invalid 2 times"):
                taste_per_item(llm_answerer(brain, world["catalogue"]), world["agents"], lists, n_bootstrap=10)
            pairs = pl.DataFrame({"user_id": [1, 2], "item_id": [world["lists"][1][0], world["lists"][2][0]]})
            with pytest.raises(
                ProtocolFailed,
                match=r"rating prediction: 2 of 2 .*E\.g\. invalid_answer: the model's answer was invalid 2 times",
            ):
                brain_ratings(brain, world["agents"], pairs.with_columns(pl.lit(4).alias("rating")), world["catalogue"])
        finally:
            brain.close()
    check_fallbacks("a protocol", [None, "invalid_answer: x"])  # half is not "mostly": no error


def test_a_strict_mode_that_refuses_string_lengths_keeps_the_schema_without_them(world, fake):
    # OpenAI's strict mode has at times refused minLength / maxLength: the rest of the schema
    # (enums of actions and ids, ranges) is still worth more than a bare JSON object.
    fake.refuse_schema(400, "Invalid schema for response_format: 'maxLength' is not permitted", keyword="maxLength")
    fake.reply(answer(action=EXIT))
    brain = make_brain(fake, world, vision=False)
    assert brain.decide(session(world), pages(world)[0], rng()).action == EXIT
    assert len(fake.probes) == 2 and brain.usage.facts()["structured_output"] == "json_schema without string lengths"
    sent = fake.requests[-1]["response_format"]
    assert sent["type"] == "json_schema" and "maxLength" not in json.dumps(sent)
    assert sent["json_schema"]["schema"]["properties"]["action"]["enum"] == list(pages(world)[0].legal_actions)
    brain.close()


def test_a_probe_that_cannot_reach_the_endpoint_is_a_transport_fallback_and_is_asked_again(world, fake):
    # The endpoint keeps failing (5xx) while the brain probes: the page falls back as any
    # request that kept failing would; nothing is remembered, the next page probes again.
    from fakes.openai_server import Outcome

    fake.refusals["json_schema"] = Outcome(status=503, message="loading model")
    brain = make_brain(fake, world, vision=False, max_attempts=2)
    d = brain.decide(session(world), pages(world)[0], rng())
    assert (
        d.action == EXIT
        and d.fallback_reason.startswith("transport: ")
        and "still failing after 2" in d.fallback_reason
    )
    assert brain.transport.structured_output is None and len(fake.probes) == 2 and not fake.requests
    fake.refusals.clear()
    fake.reply(answer(action=EXIT))
    assert brain.decide(session(world), pages(world)[0], rng()).fallback_reason is None
    assert len(fake.probes) == 3 and brain.usage.facts()["structured_output"] == "json_schema"
    brain.close()


def test_what_a_probe_found_is_kept_in_the_response_cache_for_a_rerun_without_the_endpoint(world, fake, tmp_path):
    from ops.simulation.brains.llm.probes import forget_probes

    fake.refuse_images()
    fake.reply(answer(action=EXIT))
    cache = str(tmp_path / "responses.sqlite")
    brain = make_brain(fake, world, cache="readwrite", cache_path=cache)
    first = brain.decide(session(world), pages(world)[0], rng())
    brain.close()
    assert first.fallback_reason is None and len(fake.probes) == 2 and fake.calls == 1
    # Another process (nothing remembered in memory), the same cache: no probe, no call, the
    # same request keys, the same decision.
    forget_probes()
    again = make_brain(fake, world, cache="readwrite", cache_path=cache)
    second = again.decide(session(world), pages(world)[0], rng())
    again.close()
    assert len(fake.probes) == 2 and fake.calls == 1 and again.usage.probes == 0
    assert second.extra["request_keys"] == first.extra["request_keys"] and second.action == EXIT
    assert again.usage.facts() == {"structured_output": "json_schema", "vision": "false"}

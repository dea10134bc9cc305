"""The LLM brain against a fake OpenAI-compatible endpoint (`fakes.openai_server` on
a local aiohttp server): decisions, re-asks, recorded fallbacks, retries, the response
cache, posters as images or captions, token and cost accounting, the key kept secret, and
whole sessions through the simulation loop."""

from __future__ import annotations

import base64
import io
import json
import logging
import re

import numpy as np
import polars as pl
import pytest

from fakes.agents import llm_world
from fakes.openai_server import COMPLETION_TOKENS, PROMPT_TOKENS, FakeOpenAI, answer, images, scripted_agent, user_text
from ops.agents.session import AgentSession
from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
from ops.simulation.observation import BACK, CLICK_MOVIE, EXIT, NEXT_PAGE, WATCH_AND_RATE

SECRET = "sk-test-DO-NOT-LEAK-5f3c9a1e"
KEY_ENV = "SIMAB_TEST_LLM_KEY"


# -- a tiny world ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return llm_world(tmp_path_factory.mktemp("llm"), n_agents=3)


def session(world, uid: int = 1, spent: float = 12.0, budget: float = 30.0) -> AgentSession:
    return AgentSession(uid, world["profiles"][uid], world["memories"][uid], spent, budget)


def home(world, uid: int = 1):
    from ops.simulation.sandbox import Sandbox

    return Sandbox(world["lists"][uid], world["catalogue"]).observe()


def detail(world, uid: int = 1):
    from ops.simulation.sandbox import Sandbox

    sandbox = Sandbox(world["lists"][uid], world["catalogue"])
    sandbox.click_movie(world["lists"][uid][0])
    return sandbox.observe()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


@pytest.fixture
def fake():
    fake = FakeOpenAI()
    with fake.serve() as url:
        fake.url = url
        yield fake


def make_brain(fake, world, **overrides) -> LLMBrain:
    fields = dict(base_url=fake.url, model="test-model", api_key_env=KEY_ENV, backoff_s=0.0, backoff_max_s=0.0)
    return LLMBrain(LLMBrainConfig(**{**fields, **overrides}), catalogue=world["catalogue"])


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# -- answers -------------------------------------------------------------------------------------


def test_a_valid_answer_becomes_the_decision_with_tokens_and_cost(world, fake, key):
    obs = home(world)
    ids = [c.item_id for c in obs.items]
    fake.reply(
        answer(
            action=CLICK_MOVIE,
            item_id=ids[1],
            interest=4,
            caught_eye=[ids[1], ids[3]],
            reason="A space story, my thing.",
        )
    )
    brain = make_brain(fake, world, price_prompt_per_1m=2.0, price_completion_per_1m=8.0)
    d = brain.decide(session(world), obs, rng())

    assert (d.action, d.item_id, d.interest, d.caught_eye, d.rating) == (
        CLICK_MOVIE,
        ids[1],
        4,
        (ids[1], ids[3]),
        None,
    )
    assert d.reason == "A space story, my thing."
    assert (d.prompt_tokens, d.completion_tokens) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert d.cost_usd == pytest.approx((PROMPT_TOKENS * 2.0 + COMPLETION_TOKENS * 8.0) / 1e6)
    assert d.latency_s > 0 and "fallback" not in d.extra and d.extra["requests"] == 1
    assert brain.usage.requests == 1 and brain.usage.cost_usd == pytest.approx(d.cost_usd)

    body = fake.requests[0]
    assert body["model"] == "test-model" and body["response_format"]["type"] == "json_schema"
    # The probe found that the endpoint takes a strict schema; the schema is this page's.
    assert brain.usage.structured_output == "json_schema" and len(fake.probes) == 2  # json_schema, vision
    schema = body["response_format"]["json_schema"]
    assert schema["strict"] is True and schema["name"] == "home_page_answer"
    props = schema["schema"]["properties"]
    assert props["action"]["enum"] == list(obs.legal_actions)
    assert props["item_id"]["anyOf"][0]["enum"] == ids and props["caught_eye"]["items"]["enum"] == ids
    assert isinstance(body["seed"], int) and body["temperature"] == 0.7 and body["max_tokens"] == 300
    system = body["messages"][0]["content"]
    profile = world["profiles"][1]
    assert (
        profile.pickiness in system and profile.home_page_preferences in system and profile.occupation_label in system
    )
    assert "click_movie 2" in system and "watch_and_rate 10" in system  # Table 8 costs the agent is told
    text = user_text(body)
    assert "12.0 spent of a budget of 30.0" in text
    assert all(f"[{c.item_id}] {c.title}" in text for c in obs.items)
    # Memories retrieved from the agent's own history, naming what they resemble.
    remembered = set(world["ratings"].filter(pl.col("user_id") == 1).get_column("item_id").to_list())
    recalled = [
        int(m)
        for m in re.findall(
            r"^- .*? \(.*?\): you rated it \d/5 \(its (?:story|poster|story and poster) resembles? \[(\d+)\]",
            text,
            re.M,
        )
    ]
    assert recalled and set(recalled) <= set(ids)
    titles = {world["catalogue"][m].title for m in remembered}
    assert any(t in text for t in titles)


def test_detail_page_prompt_shows_the_details_and_the_answer_rates(world, fake, key):
    obs = detail(world)
    movie = world["catalogue"][obs.detail.card.item_id]
    fake.reply(answer(action=WATCH_AND_RATE, rating=5, interest=5, caught_eye=[movie.item_id]))
    d = make_brain(fake, world).decide(session(world), obs, rng())
    assert (d.action, d.rating, d.item_id) == (WATCH_AND_RATE, 5, movie.item_id)
    text = user_text(fake.requests[0])
    assert movie.overview in text and movie.directors[0] in text and movie.actors[0] in text
    assert movie.release_date in text and str(movie.vote_count) in text


def test_a_malformed_answer_is_reasked_once_then_accepted(world, fake, key):
    obs = home(world)
    fake.reply("Sure! I would click the second movie.")
    fake.reply(answer(action=NEXT_PAGE, interest=2))
    d = make_brain(fake, world).decide(session(world), obs, rng())
    assert d.action == NEXT_PAGE and "fallback" not in d.extra
    assert len(fake.requests) == 2 and d.extra["requests"] == 2
    assert (d.prompt_tokens, d.completion_tokens) == (2 * PROMPT_TOKENS, 2 * COMPLETION_TOKENS)
    second = fake.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": "Sure! I would click the second movie."}
    assert "not valid JSON" in second[-1]["content"] and "next_page" in second[-1]["content"]
    assert len(d.extra["invalid_answers"]) == 1


def test_twice_malformed_falls_back_to_a_recorded_safe_action(world, fake, key):
    from ops.simulation.sandbox import Sandbox

    brain = make_brain(fake, world)
    fake.reply("{not json")
    fake.reply('{"action": "click_movie"}')  # JSON, but no interest and no reason
    d = brain.decide(session(world), home(world), rng())
    assert d.action == EXIT and d.extra["fallback"] == EXIT and d.reason.startswith("fallback to exit")
    assert "interest" in d.reason and len(d.extra["invalid_answers"]) == 2 and len(fake.requests) == 2

    fake.reply("nope")
    fake.reply("still nope")
    d = brain.decide(session(world), detail(world), rng())
    assert d.action == BACK and d.extra["fallback"] == BACK and d.item_id == world["lists"][1][0]
    # The fallback is a legal move the sandbox carries out.
    sandbox = Sandbox(world["lists"][1], world["catalogue"])
    sandbox.click_movie(world["lists"][1][0])
    assert sandbox.apply(d).action == BACK
    assert brain.usage.fallbacks == 2 and brain.usage.reasks == 2

    fake.reply('{"satisfaction": 11, "reason": "superb"}')  # off the 1-10 scale
    fake.reply('{"satisfaction": "high"}')
    satisfaction, reason = brain.exit_interview(session(world), rng())
    assert satisfaction == 5 and reason.startswith("fallback") and "invalid 2 times" in reason
    assert brain.interview_accounting[1]["fallback"] and brain.usage.fallbacks == 3


def test_illegal_answers_are_reasked_with_what_was_wrong(world, fake, key):
    obs = home(world)
    on_page = [c.item_id for c in obs.items]
    stranger = world["lists"][1][-1]
    assert stranger not in on_page
    fake.reply(answer(action=CLICK_MOVIE, item_id=stranger))
    fake.reply(answer(action=CLICK_MOVIE, item_id=on_page[0]))
    brain = make_brain(fake, world)
    d = brain.decide(session(world), obs, rng())
    assert (d.action, d.item_id) == (CLICK_MOVIE, on_page[0])
    reask = fake.requests[1]["messages"][-1]["content"]
    assert str(stranger) in reask and str(on_page) in reask

    fake.reply(answer(action=WATCH_AND_RATE, rating=7))
    fake.reply(answer(action=WATCH_AND_RATE, rating=4))
    d = brain.decide(session(world), detail(world), rng())
    assert (d.action, d.rating) == (WATCH_AND_RATE, 4)
    assert "rating from 1 to 5, got 7" in fake.requests[3]["messages"][-1]["content"]

    fake.reply(answer(action=BACK, interest=9))  # out of scale
    fake.reply(answer(action="previous_page"))  # not legal on a detail page
    d = brain.decide(session(world), detail(world), rng())
    assert d.extra["fallback"] == BACK
    assert "interest" in d.extra["invalid_answers"][0] and "not legal" in d.extra["invalid_answers"][1]


def test_memories_are_retrieved_by_story_and_by_poster(world, fake):
    brain = make_brain(fake, world)
    genre = {m: world["catalogue"][m].genres[0] for m in world["catalogue"].item_ids()}
    remembered = {m: r for u, m, r in world["ratings"].select("user_id", "item_id", "rating").iter_rows() if u == 1}
    page = world["lists"][1][:5]
    lines = brain.recall(session(world), page, "home")
    assert 0 < len(lines) <= 5 * 3 and any("poster" in line for line in lines)
    for line in lines:
        title, rating, target = re.match(r"- (.*) \([^()]*\): you rated it (\d)/5 \(its .*? \[(\d+)\]", line).groups()
        (memory,) = [m for m in remembered if world["catalogue"][m].title == title]
        assert int(rating) == remembered[memory] and int(target) in page
    # Detail page: the movie's nearest memories by story share its genre first.
    first = brain.recall(session(world), [page[0]], "detail")[0]
    assert genre[page[0]] in first
    assert brain.recall(AgentSession(1, world["profiles"][1], None, 0.0, 30.0), page, "home") == []


@pytest.mark.parametrize(
    ("page", "reply", "problem"),
    [
        ("home", "I'd click the first one", "not valid JSON"),
        ("home", "[1, 2]", "expected a JSON object"),
        ("home", '{"action": "exit", "interest": 2}', "reason: Field required"),
        ("home", '{"action": "watch_and_rate", "interest": 2, "reason": "x"}', "not legal on this page"),
        (
            "home",
            '{"action": "click_movie", "item_id": null, "interest": 2, "reason": "x"}',
            "needs the item_id of a movie on this page",
        ),
        (
            "home",
            '{"action": "exit", "interest": 2, "caught_eye": [999999], "reason": "x"}',
            "caught_eye may only name movies on this page",
        ),
        ("home", '{"action": "exit", "interest": true, "reason": "x"}', "must be an integer"),
        ("detail", '{"action": "watch_and_rate", "rating": 4.5, "interest": 4, "reason": "x"}', "must be an integer"),
        (
            "detail",
            '{"action": "watch_and_rate", "interest": 4, "reason": "x"}',
            "needs a rating from 1 to 5, got None",
        ),
        ("detail", '{"action": "back", "item_id": 999999, "interest": 1, "reason": "x"}', "not movie 999999"),
    ],
)
def test_answers_are_checked_against_the_schema_and_the_page(world, page, reply, problem):
    from ops.simulation.brains.llm import AnswerError, check_answer

    obs = home(world) if page == "home" else detail(world)
    with pytest.raises(AnswerError, match=re.escape(problem)):
        check_answer(reply, obs, LLMBrainConfig())


def test_benign_variants_of_a_valid_answer_are_accepted(world):
    from ops.simulation.brains.llm import check_answer

    obs = home(world)
    first = obs.items[0].item_id
    fenced = f'```json\n{{"action": "click_movie", "item_id": "{first}", "interest": 4.0, "caught_eye": null, "reason": "x", "mood": "curious"}}\n```'
    a = check_answer(fenced, obs, LLMBrainConfig())
    assert (a.action, a.item_id, a.interest, a.caught_eye) == (CLICK_MOVIE, first, 4, [])


# -- transport -------------------------------------------------------------------------------


def test_rate_limits_and_server_errors_are_retried_with_a_bound(world, fake, key):
    fake.fail(429, {"Retry-After": "0"})
    fake.fail(503)
    fake.reply(answer(action=EXIT, interest=1))
    brain = make_brain(fake, world)
    d = brain.decide(session(world), home(world), rng())
    assert d.action == EXIT and len(fake.requests) == 3 and brain.usage.retries == 2
    # Transient failures are not answers: they are not re-asks and cost nothing.
    assert d.extra["requests"] == 1 and d.prompt_tokens == PROMPT_TOKENS

    fake.requests.clear()
    for _ in range(3):
        fake.fail(500)
    # Still failing after the last attempt: a recorded fallback naming the endpoint, not a crash.
    d = make_brain(fake, world, max_attempts=2).decide(session(world), home(world), rng())
    assert d.action == EXIT and d.fallback_reason.startswith("transport: LLM endpoint " + fake.url)
    assert "still failing after 2 attempts: HTTP 500" in d.fallback_reason
    assert len(fake.requests) == 2


def test_an_identical_request_is_answered_from_the_cache(world, fake, key, tmp_path):
    cache = tmp_path / "llm-cache.sqlite"
    fake.policy = lambda body: answer(action=NEXT_PAGE, interest=2)
    first = make_brain(fake, world, cache_path=str(cache)).decide(session(world), home(world), rng(7))
    again = make_brain(fake, world, cache_path=str(cache))  # a re-run: a new process, same file
    second = again.decide(session(world), home(world), rng(7))
    assert len(fake.requests) == 1
    assert second.extra["cached"] and not first.extra["cached"]
    assert (second.action, second.interest, second.reason) == (first.action, first.interest, first.reason)
    assert (second.prompt_tokens, second.cost_usd) == (first.prompt_tokens, first.cost_usd)  # same events
    assert again.usage.requests == 0 and again.usage.cost_usd == 0 and again.usage.cache_hits == 1
    # Another seed from the agent's generator is another request.
    again.decide(session(world), home(world), rng(8))
    assert len(fake.requests) == 2


# -- posters ---------------------------------------------------------------------------------


def test_vision_models_get_posters_as_data_urls(world, fake, key):
    from PIL import Image

    fake.policy = lambda body: answer(action=NEXT_PAGE)
    brain = make_brain(fake, world, vision=True, image_max_side_small=32)
    brain.decide(session(world), home(world), rng())
    urls = images(fake.requests[0])
    assert len(urls) == 5
    for url in urls:
        assert url.startswith("data:image/jpeg;base64,")
        img = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        assert max(img.size) <= 32
    parts = [m for m in fake.requests[0]["messages"] if m["role"] == "user"][0]["content"]
    assert all(p["image_url"]["detail"] == "low" for p in parts if p["type"] == "image_url")
    assert "palette" not in user_text(fake.requests[0])

    fake.policy = lambda body: answer(action=BACK)
    brain.decide(session(world), detail(world), rng())
    (large,) = images(fake.requests[1])
    assert max(Image.open(io.BytesIO(base64.b64decode(large.split(",", 1)[1]))).size) <= 512


def test_text_models_get_palette_captions_instead(world, fake, key):
    from ops.agents.embeddings import load_poster, poster_look

    fake.policy = lambda body: answer(action=NEXT_PAGE)
    brain = make_brain(fake, world, vision=False)
    assert brain.name == "llm:test-model:no-vision"
    obs = home(world)
    brain.decide(session(world), obs, rng())
    body = fake.requests[0]
    content = [m for m in body["messages"] if m["role"] == "user"][0]["content"]
    assert isinstance(content, str) and "data:image" not in json.dumps(body)
    captions = re.findall(
        r"Poster \(palette measured from the image's colours; the picture itself is not described\): (.*)\.", content
    )
    assert len(captions) == 5
    expected = {"warm": "warm", "cool": "cool", "dark": "dark", "bright": "bright"}
    for card, caption in zip(brain.displayed(session(world), obs).items, captions):  # in the order shown
        assert expected[poster_look(load_poster(card.poster_small))] in caption


def test_another_domains_images_are_not_called_posters(world, fake, key):
    fake.policy = lambda body: answer(action=NEXT_PAGE)
    brain = make_brain(fake, world, vision=False)
    brain.noun = "book"  # what a catalogue with item_noun "book" sets
    brain.decide(session(world), home(world), rng())
    content = [m for m in fake.requests[0]["messages"] if m["role"] == "user"][0]["content"]
    assert len(re.findall(r"Image \(palette measured from the image's colours", content)) == 5
    assert "Poster" not in content


# -- secrets ----------------------------------------------------------------------------------


def test_the_api_key_is_sent_but_never_logged_cached_or_recorded(world, fake, key, tmp_path, caplog):
    from resources.llm import LLMResource

    caplog.set_level(logging.DEBUG)
    for name in (
        "openai",
        "httpx",
        "httpcore",
        "ops.simulation.brains.llm.transport",
        "ops.simulation.brains.llm.brain",
    ):
        caplog.set_level(logging.DEBUG, logger=name)
    cache = tmp_path / "cache" / "llm.sqlite"
    resource = LLMResource(base_url=fake.url, model="test-model", api_key_env=KEY_ENV, cache_path=str(cache))
    brain = LLMBrain(resource.brain_config(backoff_s=0.0), catalogue=world["catalogue"])
    fake.fail(429)
    fake.reply("not json")
    fake.reply(answer(action=NEXT_PAGE))
    fake.reply(json.dumps({"satisfaction": 6, "reason": "some good picks"}))
    d = brain.decide(session(world), home(world), rng())
    satisfaction = brain.exit_interview(session(world), rng())

    assert fake.auth and all(a == f"Bearer {SECRET}" for a in fake.auth)  # the key is used...
    assert caplog.records and "HTTP Request" in caplog.text  # (the transport did log at DEBUG)
    assert SECRET not in caplog.text  # ...but never logged
    stored = b"".join(p.read_bytes() for p in cache.parent.iterdir())
    assert stored and SECRET.encode() not in stored
    assert satisfaction == (6, "some good picks")
    bill = dict(brain.interview_accounting[1])
    assert bill.pop("latency_s") >= 0.0
    assert bill == {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "cost_usd": pytest.approx(d.cost_usd / 2),
        "cached": False,
        "fallback": False,
        "fallback_reason": None,
    }
    assert (
        SECRET not in repr(d) and SECRET not in json.dumps(d.extra) and SECRET not in repr(brain.interview_accounting)
    )
    assert SECRET not in json.dumps(resource.describe()) and resource.describe()["llm_api_key_set"] is True
    assert SECRET not in brain.config.model_dump_json() and SECRET not in repr(brain.usage.as_dict())


def test_a_missing_key_names_the_variable(world, fake, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(RuntimeError, match=KEY_ENV):  # a key asked for explicitly, even on the loopback
        make_brain(fake, world, api_key_required=True).decide(session(world), home(world), rng())
    assert not fake.requests and not fake.probes
    fake.reply(answer(action=EXIT))  # a local server without a key
    d = make_brain(fake, world, api_key_required=False).decide(session(world), home(world), rng())
    assert d.action == EXIT


def test_an_endpoint_on_the_loopback_needs_no_key_a_remote_one_does(world, fake, monkeypatch):
    from ops.simulation.brains.llm.endpoint import is_loopback, key_required
    from resources.llm import LLMResource

    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    # The default (api_key_required unset) on the fake at 127.0.0.1: no key, a placeholder sent.
    fake.reply(answer(action=EXIT))
    d = make_brain(fake, world).decide(session(world), home(world), rng())
    assert d.action == EXIT and fake.auth[-1] == "Bearer no-key-needed"
    for url in ("http://localhost:11434/v1", "http://127.0.0.1:8080/v1", "http://[::1]:8000/v1", "http://0.0.0.0:8080"):
        assert is_loopback(url) and not key_required(None, url), url
        assert LLMResource(base_url=url, api_key_env=KEY_ENV).has_credentials()
    for url in ("https://api.openai.com/v1", "http://10.0.0.5:8000/v1", "http://gpu-box:8000/v1", None):
        assert key_required(None, url), url
        assert not LLMResource(base_url=url or "", api_key_env=KEY_ENV).has_credentials()
    assert key_required(True, "http://127.0.0.1:8080/v1") and not key_required(False, "https://api.openai.com/v1")
    # A remote endpoint without its key stops before any request, naming the variable.
    remote = LLMBrain(LLMBrainConfig(base_url="http://192.0.2.1:9/v1", api_key_env=KEY_ENV, model="m"))
    with pytest.raises(RuntimeError, match=KEY_ENV):
        remote.decide(session(world), home(world), rng())
    remote.close()


# -- whole sessions ---------------------------------------------------------------------------


def test_sessions_through_the_simulation_loop_give_valid_events(world, fake, key, tmp_path):
    from ops.schema import EVENTS, conform
    from ops.simulation.observation import EXIT_INTERVIEW
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
    config = SimulationConfig(progress=False)
    cache = str(tmp_path / "cache.sqlite")
    events = simulate(
        make_brain(fake, world, cache_path=cache),
        agents,
        top_k,
        world["catalogue"],
        config,
        arms=["pop"],
        seed=3,
        run_id="r1",
    )

    conform(events, EVENTS, "events")
    shown_first = {}
    for u in users:
        mine = events.filter(pl.col("user_id") == u).sort("step")
        assert mine.get_column("action").to_list() == [CLICK_MOVIE, WATCH_AND_RATE, NEXT_PAGE, EXIT, EXIT_INTERVIEW]
        # The page is shown shuffled per agent: the scripted user opens the first card it
        # READS, recorded in displayed slot 1, wherever the arm ranked it on the page.
        displayed = make_brain(fake, world).displayed(session(world, u), home(world, u))
        shown_first[u] = displayed.items[0].item_id
        assert sorted(c.item_id for c in displayed.items) == sorted(world["lists"][u][:5])
        assert mine.get_column("item_id").to_list()[:2] == [shown_first[u]] * 2
        click = mine.row(0, named=True)
        assert click["slot"] == 1 and click["position"] == world["lists"][u].index(shown_first[u]) + 1
        assert mine.get_column("slot").to_list()[1:] == [None] * 4
        assert mine.get_column("rating").to_list()[1] == 4 and mine.get_column("satisfaction").to_list()[-1] == 7
        assert mine.get_column("page_number").to_list()[:4] == [1, 1, 1, 2]
        assert not mine.get_column("forced").any()
    steps = events.filter(pl.col("action") != EXIT_INTERVIEW)
    assert (steps.get_column("prompt_tokens") == PROMPT_TOKENS).all() and (steps.get_column("cost_usd") > 0).all()
    # The interview is a paid call too: its row carries that call's tokens and cost.
    interviews = events.filter(pl.col("action") == EXIT_INTERVIEW)
    assert (interviews.get_column("prompt_tokens") == PROMPT_TOKENS).all() and (
        interviews.get_column("completion_tokens") == COMPLETION_TOKENS
    ).all()
    assert (interviews.get_column("cost_usd") > 0).all()
    assert set(events.get_column("brain")) == {"llm:test-model"}
    # Fatigue charged at the stated interest: click at 4 (x0.75), watch at 5 (x0.5).
    first = events.filter(pl.col("user_id") == users[0]).sort("step")
    assert first.get_column("fatigue_after").to_list()[:2] == pytest.approx([1.5, 6.5])
    assert len(fake.requests) == 5 * len(users)
    # One order per page visit: coming back from the detail page shows page 1 as before; and
    # the shuffle is not the list's order for every agent.
    first_user = [user_text(b) for b in fake.requests[:5]]
    cards = [re.findall(r"^\[(\d+)\]", text, re.M) for text in first_user]
    assert "detail page" in first_user[1] and cards[0] == cards[2] and len(cards[0]) == 5
    orders = [
        [c.item_id for c in make_brain(fake, world).displayed(session(world, u), home(world, u)).items] for u in users
    ]
    assert any(order != world["lists"][u][:5] for order, u in zip(orders, users))

    # Agents in flight at once give the same events; the cache makes the re-run free.
    brain = make_brain(fake, world, cache_path=cache)
    again = simulate(brain, agents, top_k, world["catalogue"], config, arms=["pop"], seed=3, run_id="r1", concurrency=3)
    assert len(fake.requests) == 5 * len(users) and brain.usage.cache_hits == 5 * len(users)
    assert again.drop("latency_s").equals(events.drop("latency_s"))

    # The serial loop of the synchronous protocol (decide / exit_interview, no coroutines)
    # against the endpoint, no cache: the same events as the coroutines.
    class SyncOnly:
        def __init__(self, brain):
            self.brain, self.name, self.interview_accounting = brain, brain.name, brain.interview_accounting

        def prepare(self, sessions, shown):
            return None

        def decide(self, session, observation, rng):
            return self.brain.decide(session, observation, rng)

        def exit_interview(self, session, rng):
            return self.brain.exit_interview(session, rng)

    serial = simulate(
        SyncOnly(make_brain(fake, world)), agents, top_k, world["catalogue"], config, arms=["pop"], seed=3, run_id="r1"
    )
    assert len(fake.requests) == 10 * len(users)  # really asked
    assert serial.drop("latency_s").equals(events.drop("latency_s"))

    # Unshuffled (the papers' prompt): the first card read is the arm's first, with its rank shown.
    plain = simulate(
        make_brain(fake, world, shuffle_page=False), agents, top_k, world["catalogue"], config, arms=["pop"], seed=3
    )
    clicks = plain.filter(pl.col("action") == CLICK_MOVIE)
    assert clicks.get_column("item_id").to_list() == [world["lists"][u][0] for u in users]
    assert clicks.get_column("slot").to_list() == [1] * len(users) and "(recommendation #1)" in user_text(
        fake.requests[-5]
    )
    assert "(recommendation #" not in user_text(fake.requests[0])


# -- reflection (Agent4Rec §2.1.2) ----------------------------------------------------------------


def reflecting_agent(body: dict) -> str:
    """Scripted: the reflection prompt is answered "I now crave romance"; a home page whose
    prompt carries that reflection gets a click on its first movie, any other an exit."""
    text = user_text(body)
    if "Pause and reflect" in text:
        return json.dumps(
            {"preferences": "I now crave romance and want no more horror", "satisfaction": 6, "fatigue": 2}
        )
    ids = [int(m) for m in re.findall(r"^\[(\d+)\]", text, re.M)]
    if "Your reflection on this session so far: I now crave romance" in text:
        return answer(action=CLICK_MOVIE, item_id=ids[0], interest=4, caught_eye=[ids[0]])
    return answer(action=EXIT, interest=2)


def test_a_reflection_every_n_actions_becomes_the_preference_state_that_changes_the_next_decision(
    world, fake, key, tmp_path
):
    from ops.agents.memory import ShortTermEntry

    fake.policy = reflecting_agent
    watched = world["lists"][1][:3]
    steps = [ShortTermEntry(i + 1, "detail", 1, (m,), 4, WATCH_AND_RATE, m, 5) for i, m in enumerate(watched)]

    def with_steps(entries):
        s = session(world)
        s.short_term = list(entries)
        return s

    plain = make_brain(fake, world, cache="off")
    assert plain.decide(with_steps(steps), home(world), rng(3)).action == EXIT and fake.calls == 1
    cache = tmp_path / "responses.sqlite"
    reflective = make_brain(fake, world, reflect_every=3, cache_path=str(cache))
    decision = reflective.decide(with_steps(steps), home(world), rng(3))
    assert decision.action == CLICK_MOVIE and fake.calls == 3  # the reflection, then the page
    reflection_prompt, page_prompt = (user_text(b) for b in fake.requests[-2:])
    assert "Pause and reflect" in reflection_prompt and all(
        world["catalogue"][m].title in reflection_prompt for m in watched
    )
    assert (
        "Your reflection on this session so far: I now crave romance" in page_prompt
        and "satisfaction 6, tiredness 2" in page_prompt
    )
    assert (
        decision.prompt_tokens == 2 * PROMPT_TOKENS and decision.extra["reflection"]["requests"] == 1
    )  # both requests billed
    # Not due at 4 actions: no new reflection, the last one is still the state.
    assert (
        reflective.decide(with_steps([*steps, steps[0]]), home(world), rng(4)).action == CLICK_MOVIE and fake.calls == 4
    )
    # A new session forgets it.
    assert reflective.decide(with_steps([]), home(world), rng(3)).action == EXIT and reflective.reflection(1) is None
    reflective.close()
    # A re-run with the cache: the same decision, no request.
    calls = fake.calls
    again = make_brain(fake, world, reflect_every=3, cache_path=str(cache))
    assert again.decide(with_steps(steps), home(world), rng(3)).action == CLICK_MOVIE and fake.calls == calls
    again.close()
    plain.close()


def test_an_invalid_reflection_is_reasked_then_recorded_and_the_session_goes_on(world, fake, key):
    from ops.agents.memory import ShortTermEntry

    fake.policy = scripted_agent
    fake.reply("not json")
    fake.reply(json.dumps({"preferences": "x", "satisfaction": 99, "fatigue": 2}))
    brain = make_brain(fake, world, reflect_every=1, cache="off")
    s = session(world)
    s.short_term = [ShortTermEntry(1, "home", 1, (), 3, NEXT_PAGE)]
    decision = brain.decide(s, home(world), rng(0))
    assert decision.fallback_reason is None and "invalid_answer" in decision.extra["reflection"]["fallback_reason"]
    assert brain.reflection(1) is None and brain.usage.fallbacks == 1 and fake.calls == 3
    brain.close()


# -- persona matching (SimUSER §3.1) ----------------------------------------------------------------


def test_persona_matching_keeps_the_candidate_that_best_predicts_the_held_out_ratings_and_the_cache_replays_it(
    world, fake, key, tmp_path
):
    from ops.simulation.brains.llm.persona import match_personas, with_persona
    from ops.simulation.brains.llm.prompts import profile_text

    written = []

    def persona_agent(body: dict) -> str:
        text = user_text(body)
        if "Imagine who this person is" in text:  # candidates alternate between two tastes
            genre = ("Romance", "Sci-Fi")[len(written) % 2]
            written.append(genre)
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
        genre = re.search(r"loves (\w[\w-]*)", text).group(1)
        rows = re.findall(r"^\[(\d+)\] (.*)$", text, re.M)
        return json.dumps(
            {"ratings": [{"item_id": int(m), "rating": 5 if f"({genre}" in name else 1} for m, name in rows]}
        )

    fake.policy = persona_agent
    ratings = world["ratings"].filter(pl.col("user_id") == 1)  # user 1 rates Sci-Fi 4-5, the rest 1-3
    history = list(ratings.head(4).select("item_id", "rating").iter_rows())
    held_out = list(ratings.tail(4).select("item_id", "rating").iter_rows())
    cache = tmp_path / "responses.sqlite"
    brain = make_brain(fake, world, cache_path=str(cache))
    match = match_personas(brain, {1: (history, held_out)}, n_candidates=4)[1]
    brain.close()
    assert written == ["Romance", "Sci-Fi"] * 2 and fake.calls == 8  # 4 candidates, each written then rating
    assert "loves Sci-Fi" in match.persona and match.rmse == min(s for s in match.scores if s is not None)
    romance, scifi = match.scores[0], match.scores[1]
    assert scifi < romance
    prompt = user_text(fake.requests[0])
    assert all(world["catalogue"][m].title in prompt for m, r in history if r >= 4)  # the liked history is shown
    profile = with_persona(world["profiles"][1], match.persona)
    assert f"Persona: {match.persona}" in profile_text(profile)
    again = make_brain(fake, world, cache_path=str(cache))
    replay = match_personas(again, {1: (history, held_out)}, n_candidates=4)[1]
    again.close()
    assert replay == match and fake.calls == 8  # the cache answered everything

"""The bill before the run: the dry-run estimate against what the fake endpoint counts when
the same agents really browse through it, both sides counting tokens the same way
(`ops.simulation.brains.llm.tokens`) on the requests themselves."""

from __future__ import annotations

import base64
import io

import pytest

from ops.simulation.brains.llm.tokens import image_tokens, prompt_tokens, text_tokens


def test_tokens_count_text_chat_structure_and_images():
    assert text_tokens("") == 0 and text_tokens("abcd") == 1 and text_tokens("abcde") == 2
    one = [{"role": "user", "content": "x" * 40}]
    assert prompt_tokens(one) == 3 + 3 + text_tokens("user") + 10
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (512, 768), (200, 10, 10)).save(buf, format="JPEG")
    url = "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()
    assert image_tokens(url, "low") == 85
    assert image_tokens(url, "high") == 85 + 170 * 2  # one tile wide, two tall
    assert image_tokens(url, "auto", size=(4096, 4096)) == 85 + 170 * 4  # 2048 -> 768: 2 × 2 tiles
    parts = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "x" * 8},
                {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
            ],
        }
    ]
    assert prompt_tokens(parts) == 3 + 3 + text_tokens("user") + 2 + 85


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from fakes.agents import llm_world

    return llm_world(tmp_path_factory.mktemp("cost"), n_agents=120)


@pytest.mark.parametrize("reflect_every", [0, 3])
def test_the_estimate_is_within_a_quarter_of_what_the_endpoint_counts(world, reflect_every):
    from fakes.openai_server import FakeOpenAI, uniform_agent, user_text
    from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
    from ops.simulation.brains.random_policy import UniformRandomBrain
    from ops.simulation.cost import CostEstimateConfig, estimate_llm_cost
    from ops.simulation.request import SimulationConfig
    from ops.simulation.runner import simulate

    sim_config = SimulationConfig(progress=False)
    fake = FakeOpenAI(uniform_agent, count_tokens=True, record=bool(reflect_every))
    with fake.serve() as url:
        config = LLMBrainConfig(
            base_url=url,
            api_key_required=False,
            model="test-model",
            fatigue=sim_config.fatigue,
            max_attempts=2,
            backoff_s=0.0,
            reflect_every=reflect_every,
        )
        # The dry run: 50 of the 120 agents, a uniform random user deciding, nothing sent.
        estimate = estimate_llm_cost(
            "pop",
            world["top_k"],
            world["agents"],
            world["catalogue"],
            LLMBrain(config, catalogue=world["catalogue"]),
            UniformRandomBrain(),
            sim_config,
            config=CostEstimateConfig(sample_agents=50, seed=0),
        )
        assert fake.calls == 0
        # The run: all 120 agents through the endpoint, which answers as a uniform random user
        # (the same behaviour, other draws: sessions differ, only their distribution is shared).
        brain = LLMBrain(config, catalogue=world["catalogue"])
        try:
            events = simulate(
                brain,
                world["agents"],
                world["top_k"],
                world["catalogue"],
                sim_config,
                arms=["pop"],
                seed=1,
                concurrency=8,
            )
        finally:
            brain.close()
    assert events.get_column("fallback").sum() == 0
    counted = fake.stats()
    print(
        f"estimate {estimate.calls} calls, {estimate.prompt_tokens} + {estimate.completion_tokens} tokens; counted {counted}"
    )
    assert estimate.agents == 120 and estimate.sampled_agents == 50
    assert estimate.calls == pytest.approx(counted["calls"], rel=0.25)
    assert estimate.prompt_tokens == pytest.approx(counted["prompt_tokens"], rel=0.25)
    assert estimate.completion_tokens == pytest.approx(counted["completion_tokens"], rel=0.25)
    # The events' accounting (what the endpoint reported) is what the fake counted.
    assert events.get_column("prompt_tokens").sum() == counted["prompt_tokens"]
    # The ceiling bounds the real run; the expected cost is priced from the table.
    assert estimate.ceiling_calls >= counted["calls"] and estimate.ceiling_prompt_tokens >= counted["prompt_tokens"]
    assert estimate.cost_usd == pytest.approx((estimate.prompt_tokens * 0.15 + estimate.completion_tokens * 0.60) / 1e6)
    spent = (counted["prompt_tokens"] * 0.15 + counted["completion_tokens"] * 0.60) / 1e6
    assert estimate.cost_low_usd <= spent <= estimate.cost_high_usd
    assert "expected" in estimate.to_markdown() and "arm pop" in estimate.describe()
    if reflect_every:
        # The run asked for reflections, and the estimate counted about as many: its calls
        # above the same dry run without reflection are the reflections it expects.
        asked = sum(1 for r in fake.requests if "Pause and reflect" in user_text(r))
        without = estimate_llm_cost(
            "pop",
            world["top_k"],
            world["agents"],
            world["catalogue"],
            LLMBrain(config.model_copy(update={"reflect_every": 0}), catalogue=world["catalogue"]),
            UniformRandomBrain(),
            sim_config,
            config=CostEstimateConfig(sample_agents=50, seed=0),
        )
        assert asked > 0 and estimate.calls - without.calls == pytest.approx(asked, rel=0.3)
        assert estimate.ceiling_calls > without.ceiling_calls


def test_a_run_above_the_limit_is_refused_naming_the_estimate_and_the_limit():
    from ops.simulation.cost import CostEstimate, CostLimitExceeded, check_cost_limit

    estimate = CostEstimate(
        "pop",
        "gpt-4o-mini",
        "embedded",
        100,
        20,
        900,
        2_000_000,
        50_000,
        0.33,
        0.3,
        0.36,
        4600,
        9_000_000,
        1_380_000,
        2.18,
        0.15,
        0.6,
    )
    check_cost_limit(estimate, None)
    check_cost_limit(estimate, 0.5)
    with pytest.raises(CostLimitExceeded) as refused:
        check_cost_limit([estimate, estimate], 0.5)
    message = str(refused.value)
    assert "$0.66" in message and "max_cost_usd=$0.50" in message and "pop $0.33" in message


def test_sessions_per_agent_multiply_the_bill_and_widen_its_interval_by_their_root():
    from ops.simulation.cost import CostEstimate, CostLimitExceeded, check_cost_limit

    one = CostEstimate(
        "pop",
        "gpt-4o-mini",
        "embedded",
        100,
        20,
        900,
        2_000_000,
        50_000,
        0.33,
        0.30,
        0.36,
        4600,
        9_000_000,
        1_380_000,
        2.18,
        0.15,
        0.6,
    )
    assert one.over_sessions(1) is one
    four = one.over_sessions(4)
    assert (four.calls, four.prompt_tokens, four.ceiling_calls) == (3600, 8_000_000, 18_400)
    assert four.cost_usd == pytest.approx(1.32) and four.ceiling_cost_usd == pytest.approx(8.72)
    # Four independent sessions: half-widths 0.03 each side grow by √4 = 2, not by 4.
    assert (four.cost_low_usd, four.cost_high_usd) == (pytest.approx(1.26), pytest.approx(1.38))
    check_cost_limit(one, 0.5)
    with pytest.raises(CostLimitExceeded):
        check_cost_limit(four, 0.5)  # the limit sees every session's calls
    with pytest.raises(ValueError, match="sessions must be >= 1"):
        one.over_sessions(0)
    # Visits by activity tier: a mean of 1.5 sessions per agent; counts stay whole numbers.
    half = one.over_sessions(1.5)
    assert (half.calls, half.ceiling_calls, half.completion_tokens) == (1350, 6900, 75_000)
    assert half.cost_usd == pytest.approx(0.495) and half.cost_high_usd == pytest.approx(0.495 + 0.03 * 1.5**0.5)

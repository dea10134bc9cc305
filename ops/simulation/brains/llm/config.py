"""The LLM brain's configuration: endpoint, sampling, transport, cache, prices, perception
(defaults and their sources in the comments; the package docstring says how they are used)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ops.agents.memory import RecallWeights
from ops.simulation.fatigue import FatigueConfig


class LLMBrainConfig(BaseModel):
    # -- endpoint ------------------------------------------------------------------------
    # None: the client's default (api.openai.com, or $OPENAI_BASE_URL).  vLLM:
    # "http://host:8000/v1"; Ollama: "http://localhost:11434/v1".
    base_url: str | None = None
    # A/B Agent §3.1 runs GPT-4o-mini (and GPT-4o); Table 8 gives fatigue costs for both.
    model: str = "gpt-4o-mini"
    # Posters as images (A/B Agent's multimodal perception, §2.4.2); False for text-only
    # models, which get a palette caption instead (also the "w/o vision" ablation, Table 5).
    # "auto": one probe of the endpoint (a 1x1 image) decides, cached per endpoint and model
    # for the process — a text-only server (llama.cpp: HTTP 500 "image input is not
    # supported") would otherwise fail every page.
    vision: bool | Literal["auto"] = "auto"
    # The NAME of the environment variable holding the key, never the key itself.
    api_key_env: str = "OPENAI_API_KEY"
    # None: a key is needed unless the endpoint is on the loopback (127.0.0.0/8, localhost,
    # ::1, 0.0.0.0: a local llama.cpp, vLLM or Ollama); True / False say so explicitly.
    # Without a needed key the client sends a placeholder.
    api_key_required: bool | None = None

    # -- sampling ------------------------------------------------------------------------
    # Not given by the papers; people differ, so answers are sampled, with the seed drawn
    # from the agent's generator (reproducible, and cached per request).
    # None: not sent (reasoning models accept only their default).
    temperature: float | None = Field(0.7, ge=0, le=2)
    send_seed: bool = True
    max_tokens: int = Field(300, ge=16)  # a JSON answer with a one-sentence reason
    # Newer OpenAI reasoning models accept only "max_completion_tokens".
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # How answers are constrained (`response_format`): "json_schema" sends a strict schema
    # built per request from the answer and the page (legal actions, the ids shown, bounded
    # strings; `answers.page_schema`) — llama.cpp, vLLM, Ollama and OpenAI enforce it while
    # decoding, and a small model's answers go from 0 % to ~100 % valid (docs/findings/small_llms.md);
    # "json_object" asks for any JSON object; "text" sends none (the prompt states the
    # format either way, and every answer is checked after).  "auto": one probe request
    # finds the first the endpoint accepts, cached per endpoint and model for the process.
    structured_output: Literal["auto", "json_schema", "json_object", "text"] = "auto"
    # Longest `reason` the schema allows: a model writing on would otherwise run to
    # max_tokens and cut its JSON off.
    reason_max_chars: int = Field(200, ge=16)

    # -- answers (docs/definitions.md: "re-asked once when malformed") -----------------------------
    reasks: int = Field(1, ge=0)
    fallback_interest: int = Field(3, ge=1, le=5)  # neutral: the fallback neither saves nor wastes fatigue

    # -- transport (style.md: bounded retries, never forever) ----------------------------
    timeout_s: float = Field(60.0, gt=0)  # one HTTP request
    max_attempts: int = Field(5, ge=1)  # tries of one request (429, 5xx, timeouts, unreadable 200s)
    backoff_s: float = Field(1.0, ge=0)  # exponential: backoff_s * 2**(attempt-1) ...
    backoff_max_s: float = Field(30.0, ge=0)  # ... capped here
    backoff_jitter: float = Field(0.25, ge=0)  # up to this fraction added, so agents do not retry in step
    # The server's Retry-After (seconds or HTTP date) is honoured up to this cap, its own:
    # a rate limit that asks for 45 s gets 45 s even though the back-off stops at 30.
    retry_after_max_s: float = Field(120.0, ge=0)
    # One decision — every attempt and the re-ask included — ends within this; past it the
    # agent falls back ("deadline") and its session ends.
    decision_deadline_s: float = Field(300.0, gt=0)
    # Requests in flight at once (an asyncio semaphore per event loop); the runner's
    # `simulate(..., concurrency=)` sets the agents in flight.
    concurrency: int = Field(8, ge=1)
    # The run's bill (ops.simulation.cost.RunBudget): every call not answered by the cache
    # reserves its ceiling there first and is refused past `budget_cap_usd`; `budget_label`
    # names the asset it is charged to.  None: no run-wide bill (a brain used on its own).
    budget_path: str | None = None
    budget_cap_usd: float = Field(0.0, ge=0)
    budget_label: str = ""
    # MLflow Tracing (`tracing`): the share of agent sessions traced, one trace each, into the
    # experiment `trace_experiment_id` (None: MLflow's active one).  0: none.
    trace_share: float = Field(0.0, ge=0, le=1)
    trace_experiment_id: str | None = None
    # The HTTP stack under `openai.AsyncOpenAI`: "aiohttp" (the SDK's DefaultAioHttpClient)
    # costs less CPU per request than "httpx" at hundreds in flight (bench/llm_brain.py).
    http_client: Literal["aiohttp", "httpx"] = "aiohttp"

    # -- cache and cost ------------------------------------------------------------------
    # The response cache: a SQLite file keyed by the whole request and the endpoint
    # (`cache.request_key`).  "readwrite": answers are read from it and valid ones stored;
    # "read": read only (replay what is there, store nothing); "off": bypassed.  None as the
    # path: no cache (the `llm` resource defaults to $SIMAB_HOME/cache/llm/responses.sqlite).
    cache_path: str | None = None
    cache: Literal["off", "read", "readwrite"] = "readwrite"
    # USD per 1M tokens; defaults: OpenAI's list price of gpt-4o-mini (input 0.15, output
    # 0.60).  Set both to 0 for a self-hosted model.
    price_prompt_per_1m: float = Field(0.15, ge=0)
    price_completion_per_1m: float = Field(0.60, ge=0)

    # -- perception ----------------------------------------------------------------------
    # Long-term memory retrieval (A/B Agent §2.4.2): memories recalled per movie on a home
    # page and for the movie of a detail page, by text and by poster similarity.
    home_text_memories_per_item: int = Field(2, ge=0)
    home_poster_memories_per_item: int = Field(1, ge=0)
    detail_text_memories: int = Field(5, ge=0)
    detail_poster_memories: int = Field(3, ge=0)
    # Which memories are recalled (`ops.agents.memory.RecallWeights`): Generative Agents'
    # retrieval (Park et al. 2023, §4.1), relevance plus recency at half weight, recency halving
    # every 30 days at the memory's clock.  Importance is left out: with relevance scaled
    # between an agent's least and most similar memory, a strongly rated film outweighed the
    # page's film itself (a romance rated 1 recalled first on a horror film's detail page).
    recall: RecallWeights = Field(default_factory=lambda: RecallWeights(recency=0.5))
    short_term_max_steps: int = Field(30, ge=0)  # most recent session steps in the prompt
    # Reflection (Agent4Rec §2.1.2): every `reflect_every` actions of a session the agent is
    # asked to sum up its recent experiences — its taste now, its satisfaction with the
    # recommendations, its fatigue — and the page prompts that follow carry that summary
    # as its preference state.  0: never (no extra request).
    reflect_every: int = Field(0, ge=0)
    # A home page's cards are shown in an order shuffled per agent and page visit (seeded by
    # `shuffle_seed`), without the arm's rank beside them, and each click records the slot
    # it was shown in (events' `slot`): a model that clicks the first card it reads, whatever
    # it is, shows as clicks bunched on slot 1 and spread over the list's positions.  False:
    # the sandbox's order with "recommendation #N", as the papers' prompts show it.
    shuffle_page: bool = True
    shuffle_seed: int = 0
    # Posters sent to vision models: longest side in pixels and JPEG quality.  OpenAI
    # "low" detail reads a 512 px image for a flat 85 tokens.
    image_max_side_small: int = Field(256, ge=16)
    image_max_side_large: int = Field(512, ge=16)
    image_jpeg_quality: int = Field(85, ge=10, le=100)
    image_detail: Literal["low", "high", "auto"] = "low"

    # -- scales and fatigue shown to the agent -------------------------------------------
    rating_range: tuple[int, int] = (1, 5)  # A/B Agent §2.3.1 / MovieLens
    interest_range: tuple[int, int] = (1, 5)  # A/B Agent §2.4.2
    satisfaction_range: tuple[int, int] = (1, 10)  # Agent4Rec §3.3
    # The costs the agent is told; pass the simulation's own FatigueConfig.
    fatigue: FatigueConfig = Field(default_factory=FatigueConfig)

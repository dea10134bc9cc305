"""The LLM brain's configuration: endpoint, sampling, transport, cache, prices, perception
(defaults and their sources in the comments; the package docstring says how they are used)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

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
    vision: bool = True
    # The NAME of the environment variable holding the key, never the key itself.
    api_key_env: str = "OPENAI_API_KEY"
    # Local servers (vLLM, Ollama) need no key: False sends a placeholder when the
    # variable is unset.
    api_key_required: bool = True

    # -- sampling ------------------------------------------------------------------------
    # Not given by the papers; people differ, so answers are sampled, with the seed drawn
    # from the agent's generator (reproducible, and cached per request).
    # None: not sent (reasoning models accept only their default).
    temperature: float | None = Field(0.7, ge=0, le=2)
    send_seed: bool = True
    max_tokens: int = Field(300, ge=16)  # a JSON answer with a one-sentence reason
    # Newer OpenAI reasoning models accept only "max_completion_tokens".
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # response_format={"type": "json_object"}: supported by OpenAI, vLLM and Ollama.
    json_mode: bool = True

    # -- answers (design.md: "re-asked once when malformed") -----------------------------
    reasks: int = Field(1, ge=0)
    fallback_interest: int = Field(3, ge=1, le=5)  # neutral: the fallback neither saves nor wastes fatigue

    # -- transport (style.md: bounded retries, never forever) ----------------------------
    timeout_s: float = Field(60.0, gt=0)
    max_attempts: int = Field(5, ge=1)
    backoff_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    # Agents simulated at once by the runner (`simulate_arm(..., concurrency=)`): requests in flight.
    concurrency: int = Field(8, ge=1)

    # -- cache and cost ------------------------------------------------------------------
    cache_path: str | None = None  # SQLite file; None: no cache
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
    short_term_max_steps: int = Field(30, ge=0)  # most recent session steps in the prompt
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

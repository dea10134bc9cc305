"""The LLM endpoint as a Dagster resource: any OpenAI-compatible chat endpoint (OpenAI,
vLLM, Ollama) chosen by configuration; the brain itself lives in `ops.simulation.brains.llm`.

The key is never a config field: Dagster shows resource config in the UI and stores it
with every run.  The resource holds only the NAME of the environment variable
(`api_key_env`); the brain reads the variable when its first request is made.  `describe()`
names the endpoint without credentials (user info and query stripped, `ops.web`), whether
it came from `base_url` or from `$OPENAI_BASE_URL`.

The response cache is on by default: `$SIMAB_HOME/cache/llm/responses.sqlite`
(`cache_path` moves it, `cache` = off | read | readwrite switches it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from dagster import ConfigurableResource, Failure, MetadataValue
from pydantic import Field, field_validator

from ops.settings import DEFAULT_MAX_COST_USD
from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
from ops.simulation.brains.llm.client import key_required, resolve_base_url
from ops.simulation.budget import bill_path
from ops.simulation.cost import CostEstimate, CostLimitExceeded, RunBudget
from ops.web import endpoint_host, safe_endpoint
from resources.storage import data_root

_DEFAULTS = LLMBrainConfig()
# The tag the lifecycle runner puts on every run of one lifecycle: its steps share one bill.
LIFECYCLE_TAG = "simab/lifecycle"


class LLMResource(ConfigurableResource):
    """Settings of the LLM brain (defaults and their sources: `ops.simulation.brains.llm.LLMBrainConfig`)."""

    base_url: str = Field("", description="empty: the client's default (api.openai.com or $OPENAI_BASE_URL)")
    model: str = _DEFAULTS.model
    # A string, not bool | "auto": Dagster's config types have no such union.
    vision: str = Field(
        str(_DEFAULTS.vision).lower(),
        description="posters as images (true), palette captions for text-only models (false), or auto: probe the "
        "endpoint once with a 1x1 image",
    )
    api_key_env: str = Field(_DEFAULTS.api_key_env, description="NAME of the environment variable holding the key")
    api_key_required: bool | None = Field(
        _DEFAULTS.api_key_required,
        description="None: a key unless the endpoint is on the loopback (127.0.0.1, localhost, ::1, 0.0.0.0)",
    )
    temperature: float | None = _DEFAULTS.temperature
    max_tokens: int = _DEFAULTS.max_tokens
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = _DEFAULTS.max_tokens_param
    structured_output: Literal["auto", "json_schema", "json_object", "text"] = Field(
        _DEFAULTS.structured_output,
        description="response_format: json_schema (a strict schema per request), json_object, text, or auto: "
        "probe the endpoint once for the first it takes",
    )
    price_prompt_per_1m: float = Field(_DEFAULTS.price_prompt_per_1m, description="USD per 1M prompt tokens")
    price_completion_per_1m: float = Field(
        _DEFAULTS.price_completion_per_1m, description="USD per 1M completion tokens"
    )
    cache: Literal["off", "read", "readwrite"] = Field(
        _DEFAULTS.cache,
        description="response cache: readwrite (default) | read (replay only, store nothing) | off (bypass)",
    )
    cache_path: str = Field("", description="SQLite response cache; empty: $SIMAB_HOME/cache/llm/responses.sqlite")
    concurrency: int = Field(
        _DEFAULTS.concurrency, description="agents and requests in flight at once (the runner's concurrency)"
    )
    timeout_s: float = Field(_DEFAULTS.timeout_s, description="one HTTP request")
    max_attempts: int = Field(
        _DEFAULTS.max_attempts, description="tries of one request (429, 5xx, timeouts, unreadable 200s)"
    )
    retry_after_max_s: float = Field(_DEFAULTS.retry_after_max_s, description="cap on the server's Retry-After")
    decision_deadline_s: float = Field(
        _DEFAULTS.decision_deadline_s, description="one decision, every attempt and re-ask included"
    )
    http_client: Literal["aiohttp", "httpx"] = _DEFAULTS.http_client
    max_cost_usd: float | None = Field(
        DEFAULT_MAX_COST_USD,
        gt=0,
        description="the run's LLM spending limit in USD: every call is refused past it, and a step estimated above "
        "what the run has left is refused before its first call; null: no limit ($SIMAB_MAX_COST_USD, `none`)",
    )

    @field_validator("vision", mode="before")
    @classmethod
    def _vision_words(cls, value):
        if isinstance(value, bool):
            return "true" if value else "false"
        word = str(value).strip().lower()
        if word not in ("true", "false", "auto"):
            raise ValueError(f"vision must be true, false or auto, got {value!r}")
        return word

    def vision_setting(self) -> bool | Literal["auto"]:
        return "auto" if self.vision == "auto" else self.vision == "true"

    def brain_config(self, **overrides) -> LLMBrainConfig:
        """The brain's configuration; `overrides` set fields the resource does not expose
        (e.g. `fatigue=` the simulation's FatigueConfig, so the agent is told the real costs)."""
        fields = {
            "base_url": self.base_url or None,
            "model": self.model,
            "vision": self.vision_setting(),
            "api_key_env": self.api_key_env,
            "api_key_required": self.api_key_required,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "max_tokens_param": self.max_tokens_param,
            "structured_output": self.structured_output,
            "price_prompt_per_1m": self.price_prompt_per_1m,
            "price_completion_per_1m": self.price_completion_per_1m,
            "cache": self.cache,
            "cache_path": self.cache_file(),
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "max_attempts": self.max_attempts,
            "retry_after_max_s": self.retry_after_max_s,
            "decision_deadline_s": self.decision_deadline_s,
            "http_client": self.http_client,
        }
        return LLMBrainConfig(**{**fields, **overrides})

    def brain(self, catalogue=None, **overrides) -> LLMBrain:
        """A fresh LLM brain; `catalogue` (ops.simulation.sandbox.Catalogue) names remembered movies."""
        return LLMBrain(self.brain_config(**overrides), catalogue=catalogue)

    @property
    def cap_usd(self) -> float:
        """The limit as the run's bill takes it: 0.0 when there is none."""
        return self.max_cost_usd or 0.0

    def bill_of(self, context) -> RunBudget:
        """The bill of the run `context` belongs to: one per lifecycle (all its steps, every
        arm and the read-out) or per night of the schedule, else one per Dagster run; under
        $SIMAB_HOME/bills/."""
        tags = context.run_tags  # (context.run is not set when an asset is invoked directly)
        return RunBudget(bill_path(data_root(), tags.get(LIFECYCLE_TAG), context.run_id), self.cap_usd)

    @contextmanager
    def open_brain(
        self,
        context,
        kind: str,
        embedded: Callable,
        catalogue=None,
        estimate: Callable[[], CostEstimate] | None = None,
        **overrides,
    ) -> Iterator:
        """The brain a step asks for, built here for every asset that runs agents, and closed
        after.  `kind` "embedded": `embedded()`.  "llm": this resource's brain, every call
        charged to the run's bill (`bill_of`) and refused before it is sent past
        max_cost_usd; with a limit, `estimate()` (the step's CostEstimate) is checked against
        what the run has left before any call and recorded in the bill beside the spend."""
        if kind != "llm":
            brain = embedded()
        else:
            if estimate is not None and self.cap_usd:
                self.check_estimate(context, estimate())
            brain = self.charged_brain(context, catalogue, **overrides)
        try:
            yield brain
        except CostLimitExceeded as exc:  # the run's bill refused a call: the cap holds, the step stops
            raise Failure(description=str(exc), allow_retries=False) from None
        finally:
            close = getattr(brain, "close", None)
            if close is not None:
                close()

    def label_of(self, context) -> str:
        """The asset (and partition) a step's LLM calls are charged to in the run's bill."""
        return context.asset_key.to_user_string() + (f"[{context.partition_key}]" if context.has_partition_key else "")

    def check_estimate(self, context, guess: CostEstimate) -> None:
        """Record a step's estimate in the run's bill and refuse the step (before any call)
        when it is above what the run has left of max_cost_usd."""
        refused = self.refusal(context, guess)
        if refused is not None:
            raise Failure(
                description=refused,
                metadata={"estimate": MetadataValue.md(guess.to_markdown())},
                allow_retries=False,
            )

    def refusal(self, context, guess: CostEstimate) -> str | None:
        """Record a step's estimate in the run's bill; why the step must not start (its
        estimate is above what the run has left of max_cost_usd), or None."""
        bill, label = self.bill_of(context), self.label_of(context)
        bill.record_estimate(label, guess.cost_usd)
        if not self.cap_usd:
            context.log.info(f"LLM bill before {label}: {guess.describe()}; no cost limit")
            return None
        left = max(0.0, self.cap_usd - bill.bill()["spent"])
        context.log.info(
            f"LLM bill before {label}: {guess.describe()}; the run has ${left:,.2f} of ${self.cap_usd:,.2f} left"
        )
        if guess.cost_usd <= left:
            return None
        return (
            f"{label} is estimated at ${guess.cost_usd:,.4f} ({guess.calls:,} calls), above "
            f"max_cost_usd=${self.cap_usd:,.4f} less what this run has spent (${left:,.4f} left): raise the "
            "limit ($SIMAB_MAX_COST_USD), ask for fewer agents ($SIMAB_AGENTS, $SIMAB_ALIGNMENT_AGENTS) or choose a "
            "cheaper model"
        )

    def charged_brain(self, context, catalogue=None, **overrides) -> LLMBrain:
        """A fresh LLM brain whose every call is charged to the run's bill (`bill_of`) under
        the asset's name, and refused before it is sent past max_cost_usd."""
        label = self.label_of(context)
        budget = self.bill_of(context)
        return self.brain(
            catalogue, budget_path=str(budget.path), budget_cap_usd=self.cap_usd, budget_label=label, **overrides
        )

    def cache_file(self) -> str:
        """Where the response cache lives (the default is under $SIMAB_HOME)."""
        return self.cache_path or str(data_root() / "cache" / "llm" / "responses.sqlite")

    def has_credentials(self) -> bool:
        return bool(os.environ.get(self.api_key_env)) or not key_required(self.api_key_required, self.base_url or None)

    def endpoint(self) -> str:
        """The endpoint the brain calls — `base_url`, else $OPENAI_BASE_URL, else OpenAI's —
        without user info or query (where gateways put tokens)."""
        return safe_endpoint(resolve_base_url(self.base_url or None))

    def describe(self) -> dict[str, str | float | int | bool]:
        """Parameters safe to log (MLflow, Dagster metadata): no key, only whether one is
        set; the endpoint without credentials, and where it came from."""
        return {
            "brain": "llm",
            "llm_endpoint": self.endpoint(),
            "llm_endpoint_host": endpoint_host(self.endpoint()),
            "llm_endpoint_from": "base_url"
            if self.base_url
            else "OPENAI_BASE_URL"
            if os.environ.get("OPENAI_BASE_URL")
            else "default",
            "llm_model": self.model,
            "llm_vision": self.vision,
            "llm_temperature": self.temperature,
            "llm_max_tokens": self.max_tokens,
            "llm_structured_output": self.structured_output,
            "llm_price_prompt_per_1m": self.price_prompt_per_1m,
            "llm_price_completion_per_1m": self.price_completion_per_1m,
            "llm_cache": self.cache,
            "llm_concurrency": self.concurrency,
            "llm_max_cost_usd": self.max_cost_usd if self.max_cost_usd is not None else "none",
            "llm_decision_deadline_s": self.decision_deadline_s,
            "llm_api_key_env": self.api_key_env,
            "llm_api_key_set": bool(os.environ.get(self.api_key_env)),
            "llm_api_key_required": key_required(self.api_key_required, self.base_url or None),
        }

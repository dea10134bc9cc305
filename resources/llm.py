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
from ops.simulation.brains.llm import LLMBrainConfig
from ops.simulation.brains.llm.endpoint import key_required, resolve_endpoint
from ops.simulation.budget import bill_path, estimate_refusal
from ops.simulation.cost import CostEstimate, CostLimitExceeded, RunBudget
from ops.simulation.kinds import Bill, BrainKind, BrainSources
from ops.simulation.kinds.llm import describe_endpoint
from ops.web import safe_endpoint
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

    trace_share: float = Field(
        0.05,
        ge=0,
        le=1,
        description="share of the simulated agent sessions traced in MLflow (one trace each, a span per LLM call; "
        "sampled by a hash of arm, user and session); 0: none ($SIMAB_LLM_TRACE_SHARE)",
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
            "trace_share": self.trace_share,
        }
        return LLMBrainConfig(**{**fields, **overrides})

    def sources(
        self, context=None, catalogue=None, embedded=None, fatigue=None, trace_experiment_id: str | None = None
    ) -> BrainSources:
        """What a brain kind builds its brain from in a step (`ops.simulation.kinds.BrainSources`):
        `catalogue`, the fitted embedded brain `embedded`, this resource's endpoint, and with a
        step's `context` the run's bill (`bill_of`) the calls are charged to under the
        asset's name; `fatigue`: the costs the agent is told (the simulation's);
        `trace_experiment_id`: the MLflow experiment the LLM brain's traces go to."""
        bill = None
        if context is not None:
            bill = Bill(str(self.bill_of(context).path), self.cap_usd, self.label_of(context))
        llm = self.brain_config(trace_experiment_id=trace_experiment_id)
        return BrainSources(catalogue=catalogue, embedded=embedded, llm=llm, bill=bill, fatigue=fatigue)

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
        kind: BrainKind,
        sources: BrainSources,
        estimate: Callable[[], CostEstimate | None] | None = None,
    ) -> Iterator:
        """The brain of `kind` a step asks for (`kind.brain(sources)`), closed after.  A kind
        that pays per decision is charged to `sources.bill`, every call refused before it is
        sent past max_cost_usd; with a limit, `estimate()` (the step's CostEstimate) is checked
        against what the run has left before any call and recorded in the bill beside the
        spend.  The run's bill refusing a call fails the step without retries."""
        if estimate is not None and not kind.decides_offline and self.cap_usd:
            guess = estimate()
            if guess is not None:
                self.check_estimate(context, guess)
        brain = kind.brain(sources)
        try:
            yield brain
        except CostLimitExceeded as exc:  # the run's bill refused a call: the cap holds, the step stops
            raise Failure(description=str(exc), allow_retries=False) from None
        finally:
            close = getattr(brain, "close", None)
            if close is not None:
                close()

    def label_of(self, context) -> str:
        """The asset (and partition) a step's LLM calls are charged to in the run's bill; a
        step that makes several assets (a multi-asset) is named by its op."""
        keys = context.selected_asset_keys if context.has_assets_def else set()
        name = next(iter(keys)).to_user_string() if len(keys) == 1 else context.op_def.name
        return name + (f"[{context.partition_key}]" if context.has_partition_key else "")

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
        return estimate_refusal(self.bill_of(context), self.label_of(context), guess, context.log.info)

    def cache_file(self) -> str:
        """Where the response cache lives (the default is under $SIMAB_HOME)."""
        return self.cache_path or str(data_root() / "cache" / "llm" / "responses.sqlite")

    def has_credentials(self) -> bool:
        return bool(os.environ.get(self.api_key_env)) or not key_required(self.api_key_required, self.base_url or None)

    def endpoint(self) -> str:
        """The endpoint the brain calls (`resolve_endpoint`) without user info or query (where
        gateways put tokens)."""
        return safe_endpoint(resolve_endpoint(self.base_url or None).url)

    def describe(self) -> dict[str, str | float | int | bool]:
        """Parameters safe to log (MLflow, Dagster metadata): no key, only whether one is
        set; the endpoint without credentials, and where it came from."""
        return describe_endpoint(self.brain_config(), self.max_cost_usd)

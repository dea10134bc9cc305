"""The LLM endpoint as the brain asks it: a chat completion from the response cache when it
holds the request (`cache`), else from the endpoint (`transport`: bounded concurrency and
retries), each request priced before it is sent and charged to the run's bill, and what was
really spent counted in `usage`.  What the configuration leaves to `auto` — the structured
output mode and vision — is settled by a probe first (`probes`); which endpoint is called is
`endpoint.resolve_endpoint`'s.
"""

from __future__ import annotations

import asyncio
import math
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from ops.simulation.brains.llm import probes, tracing
from ops.simulation.brains.llm.cache import ResponseCache, request_key
from ops.simulation.brains.llm.config import LLMBrainConfig
from ops.simulation.brains.llm.tokens import prompt_tokens
from ops.simulation.brains.llm.transport import Transport
from ops.simulation.budget import RunBudget

# How far a server's prompt tokens may exceed the count (characters / 4) before a call's
# reserved ceiling in the run's bill is too low.
PROMPT_TOKEN_MARGIN = 1.5


@dataclass
class Reply:
    """One chat completion, from the endpoint or the cache."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    key: str
    usage_known: bool = True


@dataclass
class Usage:
    """What this brain spent in this process (cached replies cost nothing)."""

    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    retry_wait_s: float = 0.0
    reasks: int = 0
    fallbacks: int = 0
    transport_failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    probes: int = 0  # capability probes sent (structured output, vision): apart from the requests above
    probe_cost_usd: float = 0.0
    # What the endpoint was found to take ("" until known): run facts, not metrics.
    structured_output: str = ""
    vision: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def as_dict(self) -> dict:
        """The counts (MLflow metrics)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("lock", *_FACTS)}

    def facts(self) -> dict[str, str]:
        """What the endpoint was found to take, as the run records it (MLflow tags)."""
        return {k: getattr(self, k) for k in _FACTS if getattr(self, k)}


_FACTS = ("structured_output", "vision")


class LLMClient:
    """Chat completions (module docstring): the response cache first, then the endpoint;
    counts what was really spent in `usage`.  `client` replaces the per-loop
    `openai.AsyncOpenAI` client (tests, custom transports)."""

    def __init__(self, config: LLMBrainConfig, client=None) -> None:
        self.config = config
        self.usage = Usage()
        self.http = Transport(config, self.usage, client)
        self.endpoint = self.http.endpoint
        self.cache = ResponseCache(config.cache_path) if config.cache_path and config.cache != "off" else None
        self.budget = RunBudget(config.budget_path, config.budget_cap_usd) if config.budget_path else None
        # What the endpoint takes: the configuration's, else found by a probe (`aresolve`),
        # remembered per endpoint and model for the process.
        self.structured_output: str | None = (
            probes.known(self.endpoint, config.model, "structured_output")
            if config.structured_output == "auto"
            else config.structured_output
        )
        self.vision: bool | None = (
            probes.known(self.endpoint, config.model, "vision") if config.vision == "auto" else bool(config.vision)
        )
        self._probe_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> asyncio.Lock
        self._probe_locks_lock = threading.Lock()
        self._record_facts()

    # -- requests ------------------------------------------------------------------------

    def request(self, messages: list[dict], seed: int | None = None, schema: tuple[str, dict] | None = None) -> dict:
        """The chat-completion request for `messages` (what is sent and what is keyed);
        `schema` (name, JSON schema) is the answer's, sent as the structured output mode
        asks (`probes.response_format`)."""
        c = self.config
        request: dict = {"model": c.model, "messages": messages, c.max_tokens_param: c.max_tokens}
        if c.temperature is not None:
            request["temperature"] = c.temperature
        if c.send_seed and seed is not None:
            request["seed"] = seed
        # Not yet probed (a request only written, e.g. priced): as the best mode would send it.
        response_format = probes.response_format(self.structured_output or "json_schema", schema)
        if response_format is not None:
            request["response_format"] = response_format
        return request

    async def acomplete(
        self,
        messages: list[dict],
        seed: int | None = None,
        use_cache: bool = True,
        schema: tuple[str, dict] | None = None,
    ) -> Reply:
        """One chat completion: from the cache when it holds this request, else from the
        endpoint (retried).  Nothing is stored here: see `remember`.  The endpoint's
        capabilities are probed first where the configuration leaves them to `auto`."""
        await self.aresolve()
        with tracing.call_span(messages, {"model": self.config.model}) as span:
            reply = await self._acomplete(messages, seed, use_cache, schema)
            tracing.finish(
                span,
                reply.content,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                # What this call spent: a cache hit costs nothing (its tokens are the stored reply's).
                cost_usd=0.0 if reply.cached else self.cost(reply.prompt_tokens, reply.completion_tokens),
                cache="hit" if reply.cached else "miss",
                usage_known=reply.usage_known,
            )
        return reply

    async def _acomplete(
        self, messages: list[dict], seed: int | None, use_cache: bool, schema: tuple[str, dict] | None
    ) -> Reply:
        request = self.request(messages, seed, schema)
        # The key is a canonical JSON dump and a hash of a ~4 kB request: only with a cache.
        key = request_key(request, self.endpoint) if self.cache is not None else ""
        if self.cache is not None and use_cache:
            hit = self.cache.get(key)
            if hit is not None:
                with self.usage.lock:
                    self.usage.cache_hits += 1
                return Reply(
                    hit["content"],
                    hit["prompt_tokens"],
                    hit["completion_tokens"],
                    True,
                    key,
                    hit.get("usage_known", True),
                )
        # Priced before it is sent: the prompt as counted (characters / 4, with a margin for
        # tokenizers that cut finer), the whole answer allowance.
        ceiling = (
            self.cost(math.ceil(prompt_tokens(messages) * PROMPT_TOKEN_MARGIN), self.config.max_tokens)
            if self.budget is not None
            else 0.0
        )
        content, pt, ct, usage_known = await self.send(request, ceiling)
        with self.usage.lock:
            self.usage.requests += 1
            self.usage.prompt_tokens += pt
            self.usage.completion_tokens += ct
            self.usage.cost_usd += self.cost(pt, ct)
        return Reply(content, pt, ct, False, key, usage_known)

    async def send(self, request: dict, ceiling: float) -> tuple[str, int, int, bool]:
        """`request` sent to the endpoint (`Transport.create`), `ceiling` reserved in the run's
        bill first and settled at what the reply cost (nothing when it failed)."""
        budget, label = self.budget, self.config.budget_label
        if budget is not None:
            budget.reserve(ceiling, label)
        spent = 0.0
        try:
            content, pt, ct, usage_known = await self.http.create(request)
            spent = self.cost(pt, ct)
        finally:
            if budget is not None:
                budget.settle(ceiling, spent, label)
        return content, pt, ct, usage_known

    def remember(self, reply: Reply) -> None:
        """Store a reply whose answer passed the checks (mode "readwrite" only)."""
        if self.cache is not None and self.config.cache == "readwrite" and not reply.cached:
            self.cache.put(
                reply.key,
                self.endpoint,
                self.config.model,
                {
                    "content": reply.content,
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "usage_known": reply.usage_known,
                },
            )

    def forget(self, reply: Reply) -> None:
        """Drop a cached reply that no longer passes the checks (mode "readwrite" only)."""
        if self.cache is not None and self.config.cache == "readwrite":
            self.cache.delete(reply.key)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        c = self.config
        return (prompt_tokens * c.price_prompt_per_1m + completion_tokens * c.price_completion_per_1m) / 1e6

    # -- capabilities ------------------------------------------------------------------------

    async def aresolve(self) -> None:
        """Settle what `auto` leaves open — the structured output mode and vision — by one
        probe each, once per endpoint and model in this process (a probe's transport failure
        is not remembered: the next call probes again)."""
        if self.structured_output is not None and self.vision is not None:
            return
        loop = asyncio.get_running_loop()
        with self._probe_locks_lock:
            lock = self._probe_locks.setdefault(loop, asyncio.Lock())
        async with lock:  # the agents that start together wait for one probe
            if self.structured_output is None:
                self.structured_output = await probes.settle(self, "structured_output")
            if self.vision is None:
                self.vision = await probes.settle(self, "vision")
            self._record_facts()

    def resolve(self) -> None:
        """`aresolve` from synchronous code."""
        if self.structured_output is None or self.vision is None:
            self.run_sync(self.aresolve)

    def _record_facts(self) -> None:
        with self.usage.lock:
            if self.structured_output is not None:
                self.usage.structured_output = self.structured_output
            if self.vision is not None:
                self.usage.vision = "true" if self.vision else "false"

    # -- event loops -----------------------------------------------------------------------

    def run_sync(self, fn: Callable, *args):
        """Run the coroutine function `fn(*args)` to completion from synchronous code, on the
        transport's private event loop (thread-safe: calls from many threads share it)."""
        return self.http.run_sync(fn, *args)

    async def aclose_connections(self) -> None:
        """Close the HTTP connections held on the running event loop (the client stays
        usable: the next request on a loop opens new ones)."""
        await self.http.aclose_connections()

    def close(self) -> None:
        """Close the cache file, the private loop and its connections."""
        self.http.close()
        if self.cache is not None:
            self.cache.close()

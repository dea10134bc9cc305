"""The LLM endpoint: `openai.AsyncOpenAI`, bounded concurrency, bounded retries, the
response cache.

Transport: one `openai.AsyncOpenAI` client per event loop (its own retries off) with an
asyncio semaphore bounding the requests in flight (`config.concurrency`).  tenacity retries
with exponential back-off and jitter on rate limits (429), 408/409, 5xx, timeouts,
connection errors and 200 replies whose body is not a chat completion (not JSON, truncated,
no choices) — at most `max_attempts` tries; the server's Retry-After (delay-seconds or an
HTTP date, or OpenAI's retry-after-ms) is honoured up to `retry_after_max_s`, a cap of its
own.  A request still failing after every attempt raises `LLMTransportError` (the brain
records a fallback); a refusal (401, 403, 400, 404, 422: a bad key or a bad request) raises
`LLMEndpointError` and stops the run, since every other request would fail alike.  Every
message names the endpoint as `ops.web.safe_endpoint` writes it — scheme, host, port and
path, never user info or query — and passes through `ops.web.redact`.

The endpoint is `config.base_url`, else `$OPENAI_BASE_URL`, else OpenAI's; whichever it is,
`LLMClient.endpoint` names it without credentials (recorded in MLflow by the resource).  An
endpoint on the loopback needs no key unless `api_key_required` says so (`key_required`).

Capabilities (`aresolve`): what the configuration leaves to `auto` — the structured output
mode (`response_format`: a strict json_schema per request, json_object, or none) and vision
— is settled by one tiny probe request each before the first call, remembered per endpoint
and model for the process, charged to the run's bill and recorded in `usage.facts()`.  A
probe refused with 400/415/422 or "not supported" means the feature is not there; a bad key
or a wrong model (401/403/404) is raised as it is.

Cache (`ResponseCache`): one SQLite row per request, keyed by `request_key` — the endpoint
without credentials plus the whole request (model, messages, sampling, seed, format).
`acomplete` never stores: the brain stores an answer (`remember`) only once it has passed
the schema and page checks, so an invalid answer is never cached, and drops a cached one
that no longer passes (`forget`).  Mode `config.cache`: "readwrite", "read", "off".

Synchronous callers (`LLMBrain.decide`) run the coroutines on a private event loop in a
daemon thread (`run_sync`); the runner awaits them on its own loop.

The API key is read from the environment variable NAMED in the configuration when the
first client is made; it is registered with `ops.web` so that no log line shows it, and it
is never stored, cached or put in a decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import os
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ops.settings import current
from ops.simulation.brains.llm.config import LLMBrainConfig
from ops.simulation.brains.llm.tokens import prompt_tokens
from ops.simulation.budget import RunBudget
from ops.web import parse_retry_after, redact, register_secrets, safe_endpoint, secret_parameter

log = logging.getLogger(__name__)

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Loggers that may print request lines or keys: their records are redacted.
_HTTP_LOGGERS = (
    "openai",
    "openai._base_client",
    "httpx",
    "httpx2",
    "httpcore",
    "aiohttp.client",
    "ops.simulation.brains.llm",
)


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


class LLMTransportError(RuntimeError):
    """The endpoint kept failing for one request (every attempt spent)."""


class LLMEndpointError(RuntimeError):
    """The endpoint refused the request (bad key, bad request): retrying cannot help.
    `status`: the HTTP status of the refusal."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class MalformedReply(Exception):
    """An HTTP 200 whose body is not a chat completion: retried like a 5xx."""


class LLMClient:
    """Chat completions through `openai.AsyncOpenAI`: the response cache first, then the
    endpoint with bounded concurrency and retries; counts what was really spent in `usage`.
    `client` replaces the per-loop `openai.AsyncOpenAI` client (tests, custom transports)."""

    def __init__(self, config: LLMBrainConfig, client=None) -> None:
        self.config = config
        self.usage = Usage()
        self._base_url = resolve_base_url(config.base_url)  # may carry a query token: never shown
        self.endpoint = safe_endpoint(self._base_url)
        if urlsplit(self._base_url).username is not None:
            # aiohttp refuses a bearer key beside URL credentials, httpx silently swaps the
            # key for Basic auth: neither is what anyone means.  Say so, without the secret.
            raise ValueError(
                f"LLM endpoint {self.endpoint}: the base URL carries user info (user:password@); put the key in "
                f"the environment variable named by api_key_env ({config.api_key_env!r}) instead"
            )
        self._client = client
        self._loops: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> (client, semaphore)
        self._loops_lock = threading.Lock()
        self._random = random.Random(0)  # back-off jitter: timing only, never events
        self._sync_loop: _LoopThread | None = None
        self._cache = ResponseCache(config.cache_path) if config.cache_path and config.cache != "off" else None
        self._budget = RunBudget(config.budget_path, config.budget_cap_usd) if config.budget_path else None
        # What the endpoint takes: the configuration's, else found by a probe (`aresolve`),
        # remembered per endpoint and model for the process.
        self.structured_output: str | None = (
            _known(self.endpoint, config.model, "structured_output")
            if config.structured_output == "auto"
            else config.structured_output
        )
        self.vision: bool | None = (
            _known(self.endpoint, config.model, "vision") if config.vision == "auto" else bool(config.vision)
        )
        self._probe_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> asyncio.Lock
        self._record_facts()
        # A client dropped without close() still closes its private loop's connections.
        self._sync_holder: dict = {}
        weakref.finalize(self, _release_sync_loop, self._sync_holder, self._loops, client is None)

    # -- requests ------------------------------------------------------------------------

    def request(self, messages: list[dict], seed: int | None = None, schema: tuple[str, dict] | None = None) -> dict:
        """The chat-completion request for `messages` (what is sent and what is keyed);
        `schema` (name, JSON schema) is the answer's, sent as the structured output mode
        asks (`response_format`)."""
        c = self.config
        request: dict = {"model": c.model, "messages": messages, c.max_tokens_param: c.max_tokens}
        if c.temperature is not None:
            request["temperature"] = c.temperature
        if c.send_seed and seed is not None:
            request["seed"] = seed
        # Not yet probed (a request only written, e.g. priced): as the best mode would send it.
        response_format = self.response_format(self.structured_output or "json_schema", schema)
        if response_format is not None:
            request["response_format"] = response_format
        return request

    @staticmethod
    def response_format(mode: str, schema: tuple[str, dict] | None) -> dict | None:
        """What `response_format` carries in `mode` (json_schema | json_object | text, or
        UNBOUNDED_SCHEMA: a schema without string lengths); a request without a schema asks
        for a JSON object in either schema mode."""
        if mode in ("json_schema", UNBOUNDED_SCHEMA) and schema is not None:
            name, body = schema
            if mode == UNBOUNDED_SCHEMA:
                body = without_keywords(body, STRING_LENGTHS)
            return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": body}}
        if mode in ("json_schema", UNBOUNDED_SCHEMA, "json_object"):
            return {"type": "json_object"}
        return None

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
        request = self.request(messages, seed, schema)
        # The key is a canonical JSON dump and a hash of a ~4 kB request: only with a cache.
        key = request_key(request, self.endpoint) if self._cache is not None else ""
        if self._cache is not None and use_cache:
            hit = self._cache.get(key)
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
        budget, ceiling = self._budget, 0.0
        if budget is not None:
            # Priced before it is sent: the prompt as counted (characters / 4, with a margin for
            # tokenizers that cut finer), the whole answer allowance.
            ceiling = self.cost(math.ceil(prompt_tokens(messages) * PROMPT_TOKEN_MARGIN), self.config.max_tokens)
            budget.reserve(ceiling, self.config.budget_label)
        try:
            content, pt, ct, usage_known = await self._create(request)
        except BaseException:
            if budget is not None:
                budget.settle(ceiling, 0.0, self.config.budget_label)
            raise
        if budget is not None:
            budget.settle(ceiling, self.cost(pt, ct), self.config.budget_label)
        with self.usage.lock:
            self.usage.requests += 1
            self.usage.prompt_tokens += pt
            self.usage.completion_tokens += ct
            self.usage.cost_usd += self.cost(pt, ct)
        return Reply(content, pt, ct, False, key, usage_known)

    def remember(self, reply: Reply) -> None:
        """Store a reply whose answer passed the checks (mode "readwrite" only)."""
        if self._cache is not None and self.config.cache == "readwrite" and not reply.cached:
            self._cache.put(
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
        if self._cache is not None and self.config.cache == "readwrite":
            self._cache.delete(reply.key)

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
        with self._loops_lock:
            lock = self._probe_locks.setdefault(loop, asyncio.Lock())
        async with lock:  # the agents that start together wait for one probe
            if self.structured_output is None:
                self.structured_output = await self._settle("structured_output", self._probe_structured_output)
            if self.vision is None:
                self.vision = await self._settle("vision", self._probe_vision)
            self._record_facts()

    def resolve(self) -> None:
        """`aresolve` from synchronous code."""
        if self.structured_output is None or self.vision is None:
            self.run_sync(self.aresolve)

    async def _settle(self, feature: str, probe: Callable):
        key = (self.endpoint, self.config.model, feature)
        with _PROBED_LOCK:
            if key in _PROBED:
                return _PROBED[key]
        # The response cache keeps what was found beside the answers it shaped, so a re-run
        # from the cache needs no endpoint (and gets the same requests, so the same keys).
        cache_key = request_key({"capability": feature, "model": self.config.model}, self.endpoint)
        held = self._cache.get(cache_key) if self._cache is not None else None
        if held is not None:
            value, how = json.loads(held["content"]), "from the response cache"
        else:
            value, how = await probe(), "probed once"
            if self._cache is not None and self.config.cache == "readwrite":
                content = json.dumps(value)
                self._cache.put(cache_key, self.endpoint, self.config.model, _capability_row(content))
        with _PROBED_LOCK:
            _PROBED.setdefault(key, value)
        log.info("LLM endpoint %s (model %s): %s %s (%s)", self.endpoint, self.config.model, feature, value, how)
        return value

    async def _probe(self, messages: list[dict], response_format: dict | None = None) -> bool:
        """One tiny request: True when the endpoint answers it, False when it refuses it as a
        request it cannot serve (400, 415, 422, or a "not supported" 500/501).  A bad key or a
        wrong path or model (401, 403, 404) is no answer about a feature: raised as it is."""
        c = self.config
        request: dict = {"model": c.model, "messages": messages, c.max_tokens_param: PROBE_MAX_TOKENS}
        if c.temperature is not None:
            request["temperature"] = c.temperature
        if response_format is not None:
            request["response_format"] = response_format
        with self.usage.lock:
            self.usage.probes += 1
        # Charged to the run's bill like any call: a tiny prompt (an image's tokens included).
        budget, ceiling = self._budget, self.cost(PROBE_PROMPT_TOKENS, PROBE_MAX_TOKENS)
        if budget is not None:
            budget.reserve(ceiling, self.config.budget_label)
        spent = 0.0
        try:
            _, pt, ct, _ = await self._create(request)
            spent = self.cost(pt, ct)
            with self.usage.lock:
                self.usage.probe_cost_usd += spent
        except LLMEndpointError as exc:
            if exc.status in (401, 403, 404):
                raise
            log.info("LLM endpoint %s refused a probe: %s", self.endpoint, exc)
            return False
        finally:
            if budget is not None:
                budget.settle(ceiling, spent, self.config.budget_label)
        return True

    async def _probe_structured_output(self) -> str:
        """The first the endpoint takes of: json_schema; a schema without string lengths
        (strict modes that refuse minLength / maxLength — a reason may then run long, the
        rest is still enforced); json_object; else text."""
        messages = [{"role": "user", "content": PROBE_JSON_PROMPT}]
        for mode in ("json_schema", UNBOUNDED_SCHEMA, "json_object"):
            if await self._probe(messages, self.response_format(mode, PROBE_SCHEMA)):
                return mode
        return "text"

    async def _probe_vision(self) -> bool:
        content = [{"type": "text", "text": "What colour is this image? One word."}, PROBE_IMAGE_PART]
        return await self._probe([{"role": "user", "content": content}])

    def _record_facts(self) -> None:
        with self.usage.lock:
            if self.structured_output is not None:
                self.usage.structured_output = self.structured_output
            if self.vision is not None:
                self.usage.vision = "true" if self.vision else "false"

    # -- event loops -----------------------------------------------------------------------

    def run_sync(self, fn: Callable, *args):
        """Run the coroutine function `fn(*args)` to completion from synchronous code, on this
        client's private event loop (thread-safe: calls from many threads share it)."""
        with self._loops_lock:
            if self._sync_loop is None:
                self._sync_loop = self._sync_holder["runner"] = _LoopThread()
            runner = self._sync_loop
        return runner.call(fn(*args))

    async def aclose_connections(self) -> None:
        """Close the HTTP connections held on the running event loop (the client stays
        usable: the next request on a loop opens new ones)."""
        with self._loops_lock:
            held = self._loops.pop(asyncio.get_running_loop(), None)
        if held is not None and self._client is None:
            await held[0].close()

    def close(self) -> None:
        """Close the cache file, the private loop and its connections."""
        with self._loops_lock:
            runner, self._sync_loop = self._sync_loop, None
            self._sync_holder.pop("runner", None)
        if runner is not None:
            runner.call(self.aclose_connections(), timeout=30)
            runner.close()
        if self._cache is not None:
            self._cache.close()

    # -- plumbing ----------------------------------------------------------------------------

    async def _create(self, request: dict) -> tuple[str, int, int, bool]:
        import openai
        from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

        c = self.config
        client, semaphore = self._for_this_loop()

        def wait(state: RetryCallState) -> float:
            backoff = min(c.backoff_max_s, c.backoff_s * 2 ** (state.attempt_number - 1))
            backoff *= 1.0 + c.backoff_jitter * self._random.random()
            told = _retry_after(state.outcome.exception())
            return backoff if told is None else max(backoff, min(told, c.retry_after_max_s))

        def before_sleep(state: RetryCallState) -> None:
            pause = state.next_action.sleep if state.next_action else 0.0
            with self.usage.lock:
                self.usage.retries += 1
                self.usage.retry_wait_s += pause
            log.warning(
                "LLM endpoint %s: %s on attempt %d of %d; retrying in %.2fs",
                self.endpoint,
                _describe(state.outcome.exception()),
                state.attempt_number,
                c.max_attempts,
                pause,
            )

        async def attempt() -> tuple[str, int, int, bool]:
            async with semaphore:
                # The SDK's documented route for a raw request (`client.post(path, cast_to=…)`):
                # its auth, timeouts and status errors, without re-validating the request
                # against its types (a third of its CPU per call) or building a response model;
                # the body is parsed and checked here, so a 200 that is not a chat completion is
                # retried instead of raising a bare JSONDecodeError.
                body = await client.post("/chat/completions", body=request, cast_to=bytes)
            return self._parse(body)

        retrying = AsyncRetrying(
            retry=retry_if_exception(_transient),
            stop=stop_after_attempt(c.max_attempts),
            wait=wait,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return await retrying(attempt)
        except openai.APIStatusError as exc:
            if _transient(exc):
                raise self._exhausted(exc) from None
            hint = f"; {refusal_hint(str(exc))}" if _refused_feature(exc) else ""
            raise LLMEndpointError(
                f"LLM endpoint {self.endpoint} (model {c.model}) refused the request: {_describe(exc)}{hint}",
                status=exc.status_code,
            ) from None
        except (openai.APIConnectionError, MalformedReply) as exc:
            raise self._exhausted(exc) from None

    def _exhausted(self, exc: BaseException) -> LLMTransportError:
        c = self.config
        with self.usage.lock:
            self.usage.transport_failures += 1
        return LLMTransportError(
            f"LLM endpoint {self.endpoint} (model {c.model}) still failing after {c.max_attempts} attempts: {_describe(exc)}"
        )

    def _parse(self, body: bytes) -> tuple[str, int, int, bool]:
        """(content, prompt tokens, completion tokens, usage known) of a 200's body, or MalformedReply."""
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise MalformedReply(
                f"HTTP 200 from {self.endpoint}/chat/completions with a body that is not JSON "
                f"({len(body)} bytes, {type(exc).__name__}: {str(exc)[:80]}; starts {redact(body[:60])!r})"
            ) from None
        try:
            message = data["choices"][0]["message"]
            content = message.get("content") or ""
            if not isinstance(content, str):
                raise TypeError(f"content is {type(content).__name__}")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedReply(
                f"HTTP 200 from {self.endpoint}/chat/completions without a chat completion "
                f"({type(exc).__name__}: {redact(exc)}; body starts {redact(body[:60])!r})"
            ) from None
        usage = data.get("usage")
        if not isinstance(usage, dict):
            return content, 0, 0, False
        return content, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), True

    def _for_this_loop(self):
        loop = asyncio.get_running_loop()
        with self._loops_lock:
            held = self._loops.get(loop)
            if held is None:
                held = (self._client or self._new_client(), asyncio.Semaphore(self.config.concurrency))
                self._loops[loop] = held
        return held

    def _new_client(self):
        import openai

        c = self.config
        key = os.environ.get(c.api_key_env) if c.api_key_env else None
        if not key:
            if key_required(c.api_key_required, self._base_url):
                raise RuntimeError(
                    f"LLM brain needs an API key in the environment variable {c.api_key_env!r} for {self.endpoint} "
                    "(an endpoint on this machine needs none; api_key_required false, SIMAB_LLM_API_KEY_REQUIRED=false, "
                    "for a remote one that takes no key)"
                )
            key = "no-key-needed"  # the client insists on a non-empty key
        register_secrets([key], _HTTP_LOGGERS)
        # Keep-alive for every request in flight: a connection closed after each reply is a
        # new TCP handshake (and CPU) for the next.
        # (The SDK's own Limits class: its HTTP library is the SDK's business, not a pin of ours.)
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
            max_connections=c.concurrency, max_keepalive_connections=c.concurrency
        )
        http = (openai.DefaultAioHttpClient if c.http_client == "aiohttp" else openai.DefaultAsyncHttpxClient)(
            timeout=c.timeout_s, limits=limits
        )
        # A gateway's query token (…/v1?api-key=…) goes with every request as a default query
        # parameter; left in the base URL the SDK would glue the path after it.
        parts = urlsplit(self._base_url)
        base_url = urlunsplit(parts._replace(query="", fragment=""))
        query = dict(parse_qsl(parts.query, keep_blank_values=True)) or None
        register_secrets([v for k, v in (query or {}).items() if v and secret_parameter(k)], _HTTP_LOGGERS)
        # Retries are tenacity's (bounded, counted), not the SDK's.
        return openai.AsyncOpenAI(
            api_key=key, base_url=base_url, default_query=query, timeout=c.timeout_s, max_retries=0, http_client=http
        )


def key_required(setting: bool | None, base_url: str | None) -> bool:
    """Whether an API key is needed: as `setting` says, else (None) unless the endpoint is on
    the loopback — a local llama.cpp, vLLM or Ollama takes none, a remote endpoint does."""
    if setting is not None:
        return bool(setting)
    return not is_loopback(resolve_base_url(base_url))


def is_loopback(url: str) -> bool:
    """Whether `url`'s host is this machine: localhost, 127.0.0.0/8, ::1 or 0.0.0.0."""
    import ipaddress

    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def resolve_base_url(base_url: str | None) -> str:
    """The endpoint the client will call: `base_url`, else $OPENAI_BASE_URL, else OpenAI's."""
    return base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL


def request_key(request: Mapping, endpoint: str = "") -> str:
    """SHA-256 of the endpoint (without credentials: `ops.web.safe_endpoint`) and the whole
    request as canonical JSON: the same request to the same endpoint has the same key."""
    canonical = json.dumps(
        {"endpoint": endpoint, "request": request}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class CacheError(ValueError):
    """The response cache file cannot be used (not a database, a damaged page, locked): names
    the file and what to do."""


class ResponseCache:
    """Chat completions by request key in one SQLite file.

    Each write is one transaction in WAL mode with synchronous=NORMAL: a killed process
    (kill -9) keeps every committed row and never a half row (only a power cut may lose the
    last ones).  The first answer stored for a key is kept, so parallel processes sharing
    the file agree.  Only the reply text, token counts, endpoint (without credentials) and
    model are stored — no request, header or key.

    A file SQLite cannot read raises `CacheError` naming it and the way out (`clear`, which
    moves a damaged file aside, or moving it aside by hand): the cache only saves repeated
    calls, so starting a new one loses nothing else.  A row that is not a reply (not JSON, or
    JSON of another shape) is a miss, logged, and the next answer for its key replaces it.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._unusable: set[str] = set()  # keys whose row is not a reply: replaced, not kept
        self._db = None
        try:
            with self._named("cannot be opened"):
                self._db = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, "
                    "model TEXT NOT NULL, response TEXT NOT NULL, created_at REAL NOT NULL)"
                )
        except CacheError:
            self.close()  # a half-open connection would hold the file
            raise

    def get(self, key: str) -> dict | None:
        with self._lock, self._named("cannot be read"):
            row = self._db.execute("SELECT response FROM completions WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            reply = json.loads(row[0])
            problem = _reply_shape_problem(reply)
        except (TypeError, ValueError) as exc:
            problem = f"not JSON ({type(exc).__name__}: {str(exc)[:80]})"
        if problem is None:
            return reply
        log.warning(
            "LLM response cache %s: entry %s is not a cached reply (%s); treated as a miss",
            self.path,
            key[:16],
            problem,
        )
        self._unusable.add(key)
        return None

    def put(self, key: str, endpoint: str, model: str, response: Mapping) -> None:
        verb = "INSERT OR REPLACE" if key in self._unusable else "INSERT OR IGNORE"
        with self._lock, self._named("cannot be written"):
            self._db.execute(
                f"{verb} INTO completions (key, endpoint, model, response, created_at) VALUES (?, ?, ?, ?, ?)",
                (key, endpoint, model, json.dumps(response, sort_keys=True), time.time()),
            )
        self._unusable.discard(key)

    def delete(self, key: str) -> None:
        with self._lock, self._named("cannot be written"):
            self._db.execute("DELETE FROM completions WHERE key = ?", (key,))

    def clear(self, model: str | None = None, endpoint: str | None = None) -> int:
        """Delete the entries of one model and/or endpoint (all without either); returns how many."""
        where, args = [], []
        if model is not None:
            where.append("model = ?")
            args.append(model)
        if endpoint is not None:
            where.append("endpoint = ?")
            args.append(safe_endpoint(endpoint))
        sql = "DELETE FROM completions" + (" WHERE " + " AND ".join(where) if where else "")
        with self._lock, self._named("cannot be cleared"):
            deleted = self._db.execute(sql, args).rowcount
            self._db.execute("VACUUM")
        return int(deleted)

    def stats(self) -> list[tuple[str, str, int]]:
        """(endpoint, model, entries) for every endpoint and model in the cache."""
        with self._lock, self._named("cannot be read"):
            return self._db.execute(
                "SELECT endpoint, model, COUNT(*) FROM completions GROUP BY endpoint, model ORDER BY 1, 2"
            ).fetchall()

    def __len__(self) -> int:
        with self._lock, self._named("cannot be read"):
            return int(self._db.execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()

    @contextlib.contextmanager
    def _named(self, what: str):
        try:
            yield
        except sqlite3.DatabaseError as exc:  # OperationalError (locked, I/O) included
            raise CacheError(
                f"LLM response cache {self.path} {what}: {exc}. The cache only saves repeated calls: run "
                f"`python -m ops.simulation.brains.llm.client clear --cache {self.path}` (a damaged file is moved "
                "aside), or move the file aside yourself, and run again"
            ) from exc


def move_aside(path: str | os.PathLike) -> Path:
    """Rename a cache file (and its WAL and shared-memory files) to `<name>.damaged-<time>`; returns the new name."""
    path = Path(path)
    target = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{path}{suffix}")
        if source.exists():
            source.rename(Path(f"{target}{suffix}"))
    return target


def _reply_shape_problem(reply) -> str | None:
    """What makes a decoded cache row not a reply (None when it is one)."""
    if not isinstance(reply, dict):
        return f"a JSON {type(reply).__name__}, not an object"
    if not isinstance(reply.get("content"), str):
        return "no text content"
    for name in ("prompt_tokens", "completion_tokens"):
        value = reply.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"{name} is {value!r}"
    if not isinstance(reply.get("usage_known", True), bool):
        return f"usage_known is {reply.get('usage_known')!r}"
    return None


def main(argv: list[str] | None = None) -> None:
    """`python -m ops.simulation.brains.llm.client stats|clear [--cache PATH] [--model M]
    [--endpoint URL]`: what the response cache holds, or delete (some of) it."""
    import argparse

    default = current().home / "cache" / "llm" / "responses.sqlite"
    parser = argparse.ArgumentParser(
        prog="python -m ops.simulation.brains.llm.client", description=main.__doc__.split(":", 1)[1].strip()
    )
    parser.add_argument("command", choices=("stats", "clear"))
    parser.add_argument("--cache", default=str(default), help=f"the cache file (default: {default})")
    parser.add_argument("--model")
    parser.add_argument("--endpoint")
    args = parser.parse_args(argv)
    if not Path(args.cache).exists():
        raise SystemExit(f"no LLM response cache at {args.cache}")
    try:
        cache = ResponseCache(args.cache)
        try:
            if args.command == "clear":
                print(f"deleted {cache.clear(args.model, args.endpoint)} entries from {args.cache}")
            for endpoint, model, n in cache.stats():
                print(f"{endpoint}\t{model}\t{n}")
        finally:
            cache.close()
    except CacheError as exc:
        if args.command != "clear" or args.model or args.endpoint:
            # Only a whole clear may drop the file: a damaged file cannot be cleared in part.
            raise SystemExit(f"{exc}\n(`clear` without --model/--endpoint moves it aside)") from None
        moved = move_aside(args.cache)
        print(f"{args.cache} is damaged ({exc.__cause__}); moved it aside to {moved}: the next run starts a new cache")


# -- capability probes ----------------------------------------------------------------------------

# (endpoint, model, feature) -> what the probe found, for this process.
_PROBED: dict[tuple[str, str, str], object] = {}
_PROBED_LOCK = threading.Lock()
PROBE_MAX_TOKENS = 32
PROBE_PROMPT_TOKENS = 400  # the bill's ceiling for a probe's prompt: ~50 tokens of text, an image at most ~255
PROBE_JSON_PROMPT = 'Reply with the JSON object {"ok": true, "word": "yes", "n": 1}.'
# The keywords the answers' schemas use (enum, anyOf with null, maxLength, maxItems): an endpoint
# that refuses one of them refuses this probe too.
PROBE_SCHEMA = (
    "probe",
    {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "word": {"type": "string", "minLength": 1, "maxLength": 8},
            "n": {"anyOf": [{"type": "integer", "enum": [1, 2, 3]}, {"type": "null"}]},
            "ids": {"type": "array", "items": {"type": "integer", "enum": [1, 2]}, "maxItems": 2},
        },
        "required": ["ok", "word", "n", "ids"],
        "additionalProperties": False,
    },
)
# A 1x1 white PNG.
PROBE_IMAGE_PART = {
    "type": "image_url",
    "image_url": {
        "url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4//8/AAX+Av4N70a4AAAAAElFTkSuQmCC",
        "detail": "low",
    },
}


# The schema mode of an endpoint whose strict mode refuses string lengths.
UNBOUNDED_SCHEMA = "json_schema without string lengths"
STRING_LENGTHS = ("minLength", "maxLength")


def without_keywords(schema, keywords: tuple[str, ...]):
    """`schema` with `keywords` removed at every level."""
    if isinstance(schema, dict):
        return {k: without_keywords(v, keywords) for k, v in schema.items() if k not in keywords}
    if isinstance(schema, list):
        return [without_keywords(v, keywords) for v in schema]
    return schema


def _capability_row(content: str) -> dict:
    """A probe's finding as a row of the response cache (a reply's shape, no tokens)."""
    return {"content": content, "prompt_tokens": 0, "completion_tokens": 0, "usage_known": True}


def _known(endpoint: str, model: str, feature: str):
    with _PROBED_LOCK:
        return _PROBED.get((endpoint, model, feature))


def forget_probes() -> None:
    """Forget what the probes found (tests; an endpoint restarted with other features)."""
    with _PROBED_LOCK:
        _PROBED.clear()


# -- helpers ------------------------------------------------------------------------------------


class _LoopThread:
    """An event loop running forever in a daemon thread, for synchronous callers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="simab-llm-sync", daemon=True)
        self.thread.start()

    def call(self, coroutine, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


def _release_sync_loop(holder: dict, loops: weakref.WeakKeyDictionary, own_clients: bool) -> None:
    runner = holder.pop("runner", None)
    if runner is None:
        return
    held = loops.pop(runner.loop, None)
    try:
        if held is not None and own_clients:
            runner.call(held[0].close(), timeout=10)
    except Exception:  # at interpreter exit the loop may be gone: nothing left to close
        pass
    finally:
        runner.close()


def _transient(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, (MalformedReply, openai.APIConnectionError)):  # timeouts included
        return True
    if isinstance(exc, openai.APIStatusError):
        if _refused_feature(exc):  # asking again cannot help, whatever the status code
            return False
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


# What servers answer (llama.cpp: HTTP 500 "image input is not supported"; vLLM, Ollama: 400)
# when a request uses something the model or server cannot do.
_REFUSAL_WORDS = ("not supported", "unsupported", "does not support", "not implemented", "is not enabled")


def _refused_feature(exc: BaseException) -> bool:
    import openai

    return (
        isinstance(exc, openai.APIStatusError)
        and exc.status_code in (400, 415, 422, 500, 501)
        and any(word in str(exc).lower() for word in _REFUSAL_WORDS)
    )


def refusal_hint(text: str) -> str:
    """Which setting to change for a server's refusal of a feature."""
    text = text.lower()
    if "image" in text or "vision" in text or "multimodal" in text:
        return "the endpoint takes no images: set vision false (SIMAB_LLM_VISION=false, the llm resource's vision)"
    if "response_format" in text or "json" in text or "grammar" in text or "schema" in text:
        return (
            "the endpoint refuses the response format asked for: set structured_output json_object or text "
            "(SIMAB_LLM_STRUCTURED_OUTPUT, the llm resource's structured_output)"
        )
    if "seed" in text:
        return "the endpoint refuses the seed parameter: set send_seed false"
    return "the endpoint does not support a feature this request uses: check the llm resource's settings"


def _retry_after(exc: BaseException | None) -> float | None:
    """Seconds the server asked to wait: OpenAI's retry-after-ms, else Retry-After in either form."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


def _describe(exc: BaseException | None) -> str:
    """What went wrong, in one redacted line."""
    status = getattr(exc, "status_code", None)
    text = f"HTTP {status}" if status else type(exc).__name__
    detail = str(exc) if exc is not None else ""
    cause = getattr(exc, "__cause__", None)
    if cause is not None and detail in ("Connection error.", "Request timed out."):
        detail = f"{detail} {type(cause).__name__}: {cause}"
    return redact(f"{text}: {detail}"[:300])


if __name__ == "__main__":
    main()

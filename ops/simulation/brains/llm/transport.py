"""The LLM endpoint's transport: `openai.AsyncOpenAI`, bounded concurrency, bounded retries.

One `openai.AsyncOpenAI` client per event loop (its own retries off) with an asyncio
semaphore bounding the requests in flight (`config.concurrency`).  tenacity retries with
exponential back-off and jitter on rate limits (429), 408/409, 5xx, timeouts, connection
errors and 200 replies whose body is not a chat completion (not JSON, truncated, no choices)
— at most `max_attempts` tries; the server's Retry-After (delay-seconds or an HTTP date, or
OpenAI's retry-after-ms) is honoured up to `retry_after_max_s`, a cap of its own.  A request
still failing after every attempt raises `LLMTransportError` (the brain records a fallback);
a refusal (401, 403, 400, 404, 422: a bad key or a bad request) raises `LLMEndpointError` and
stops the run, since every other request would fail alike.  Every message names the endpoint
as `ops.web.safe_endpoint` writes it — scheme, host, port and path, never user info or query
— and passes through `ops.web.redact`.

Synchronous callers (`LLMBrain.decide`) run the coroutines on a private event loop in a
daemon thread (`run_sync`); the runner awaits them on its own loop.

The API key is read from the environment variable NAMED in the configuration when the
first client is made; it is registered with `ops.web` so that no log line shows it, and it
is never stored, cached or put in a decision.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
import weakref
from collections.abc import Callable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential

from ops.simulation.brains.llm import tracing
from ops.simulation.brains.llm.config import LLMBrainConfig
from ops.simulation.brains.llm.endpoint import key_required, resolve_endpoint
from ops.web import parse_retry_after, redact, register_secrets, safe_endpoint, secret_parameter

log = logging.getLogger(__name__)

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


class Transport:
    """Chat-completion requests to one endpoint (module docstring), the spent retries and
    failures counted in `usage` (`client.Usage`).  `client` replaces the per-loop
    `openai.AsyncOpenAI` client (tests, custom transports)."""

    def __init__(self, config: LLMBrainConfig, usage, client=None) -> None:
        self.config = config
        self.usage = usage
        self._base_url = resolve_endpoint(config.base_url).url  # may carry a query token: never shown
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
        # A transport dropped without close() still closes its private loop's connections.
        self._sync_holder: dict = {}
        weakref.finalize(self, _release_sync_loop, self._sync_holder, self._loops, client is None)

    def run_sync(self, fn: Callable, *args):
        """Run the coroutine function `fn(*args)` to completion from synchronous code, on this
        transport's private event loop (thread-safe: calls from many threads share it)."""
        with self._loops_lock:
            if self._sync_loop is None:
                self._sync_loop = self._sync_holder["runner"] = _LoopThread()
            runner = self._sync_loop
        return runner.call(fn(*args))

    async def aclose_connections(self) -> None:
        """Close the HTTP connections held on the running event loop (the transport stays
        usable: the next request on a loop opens new ones)."""
        with self._loops_lock:
            held = self._loops.pop(asyncio.get_running_loop(), None)
        if held is not None and self._client is None:
            await held[0].close()

    def close(self) -> None:
        """Close the private loop and its connections."""
        with self._loops_lock:
            runner, self._sync_loop = self._sync_loop, None
            self._sync_holder.pop("runner", None)
        if runner is not None:
            runner.call(self.aclose_connections(), timeout=30)
            runner.close()

    async def create(self, request: dict) -> tuple[str, int, int, bool]:
        """(content, prompt tokens, completion tokens, usage known) of one chat completion,
        retried (module docstring); LLMTransportError when every attempt failed,
        LLMEndpointError when the endpoint refused it."""
        import openai  # lazy: openai (seconds to import), needed only once a request is sent

        c = self.config
        client, semaphore = self._for_this_loop()

        # tenacity's exponential back-off (backoff_s, doubling, capped at backoff_max_s), its jitter
        # a seeded share of it: tenacity's own jitter draws from the unseeded global random.
        exponential = wait_exponential(multiplier=c.backoff_s, max=c.backoff_max_s)

        def wait(state: RetryCallState) -> float:
            backoff = exponential(state) * (1.0 + c.backoff_jitter * self._random.random())
            told = _retry_after(state.outcome.exception())
            return backoff if told is None else max(backoff, min(told, c.retry_after_max_s))

        def before_sleep(state: RetryCallState) -> None:
            pause = state.next_action.sleep if state.next_action else 0.0
            with self.usage.lock:
                self.usage.retries += 1
                self.usage.retry_wait_s += pause
            tracing.note_retry()
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
        import openai  # lazy: openai (seconds to import), needed only once a request is sent

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
    import openai  # lazy: openai, loaded already when a request failed

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
    import openai  # lazy: openai, loaded already when a request failed

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

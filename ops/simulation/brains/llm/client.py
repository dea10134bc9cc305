"""The LLM endpoint: the `openai` client, bounded retries and the response cache.

Transport: the official `openai` client (its own retries off), tenacity retries with
exponential back-off (honouring Retry-After) on rate limits, 5xx, timeouts and connection
errors, at most `max_attempts` tries; other errors (a bad key, a bad request) stop the run.
A response cache (SQLite, one row per request hash) keyed by the full request makes a
re-run free and identical.  The API key is read from the environment variable NAMED in the
configuration when the client is first needed; it is never stored, logged or cached.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ops.simulation.brains.llm.config import LLMBrainConfig

log = logging.getLogger(__name__)


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
    reasks: int = 0
    fallbacks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "lock"}


class LLMClient:
    """Chat completions through the `openai` client: the response cache first, then the
    endpoint with bounded retries; counts what was really spent in `usage`.  `client`
    replaces the `openai.OpenAI` client (tests, custom transports).  Thread-safe."""

    def __init__(self, config: LLMBrainConfig, client=None) -> None:
        self.config = config
        self.usage = Usage()
        self._client = client
        self._client_lock = threading.Lock()
        self._cache = ResponseCache(config.cache_path) if config.cache_path else None

    def complete(self, messages: list[dict], seed: int | None = None) -> Reply:
        """One chat completion through the cache; retried on transient errors."""
        c = self.config
        request: dict = {"model": c.model, "messages": messages, c.max_tokens_param: c.max_tokens}
        if c.temperature is not None:
            request["temperature"] = c.temperature
        if c.send_seed and seed is not None:
            request["seed"] = seed
        if c.json_mode:
            request["response_format"] = {"type": "json_object"}
        key = request_key(request)
        if self._cache is not None:
            hit = self._cache.get(key)
            if hit is not None:
                with self.usage.lock:
                    self.usage.cache_hits += 1
                log.debug("LLM brain: cache hit %s", key[:16])
                return Reply(hit["content"], hit["prompt_tokens"], hit["completion_tokens"], True, key, hit.get("usage_known", True))
        response = self._create(request)
        choices = getattr(response, "choices", None) or []
        content = (choices[0].message.content or "") if choices else ""
        usage = getattr(response, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        reply = Reply(content, pt, ct, False, key, usage is not None)
        with self.usage.lock:
            self.usage.requests += 1
            self.usage.prompt_tokens += pt
            self.usage.completion_tokens += ct
            self.usage.cost_usd += self.cost(pt, ct)
        if self._cache is not None:
            self._cache.put(key, c.model, {"content": content, "prompt_tokens": pt, "completion_tokens": ct, "usage_known": usage is not None})
        return reply

    def _create(self, request: dict):
        import openai
        from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

        c = self.config
        transient = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)

        def wait(state: RetryCallState) -> float:
            exponential = c.backoff_s * 2 ** (state.attempt_number - 1)
            return min(c.backoff_max_s, max(exponential, _retry_after(state.outcome.exception())))

        def before_sleep(state: RetryCallState) -> None:
            with self.usage.lock:
                self.usage.retries += 1
            exc = state.outcome.exception()
            status = getattr(exc, "status_code", None)
            log.warning(
                "LLM endpoint: %s%s on attempt %d of %d; retrying in %.1fs",
                type(exc).__name__, f" (HTTP {status})" if status else "", state.attempt_number, c.max_attempts,
                state.next_action.sleep if state.next_action else 0.0,
            )

        retrying = Retrying(
            retry=retry_if_exception_type(transient),
            stop=stop_after_attempt(c.max_attempts),
            wait=wait,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return retrying(lambda: self.client.chat.completions.create(**request))
        except transient as exc:
            raise RuntimeError(
                f"LLM endpoint {c.base_url or 'default'} (model {c.model}) still failing after {c.max_attempts} attempts: "
                f"{type(exc).__name__}"
            ) from exc

    @property
    def client(self):
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    import openai

                    c = self.config
                    key = os.environ.get(c.api_key_env) if c.api_key_env else None
                    if not key:
                        if c.api_key_required:
                            raise RuntimeError(
                                f"LLM brain needs an API key in the environment variable {c.api_key_env!r} "
                                "(or api_key_required=False for a local server)"
                            )
                        key = "no-key-needed"  # the client insists on a non-empty key
                    # Retries are tenacity's (bounded, counted), not the client's.
                    self._client = openai.OpenAI(api_key=key, base_url=c.base_url, timeout=c.timeout_s, max_retries=0)
        return self._client

    # -- decisions ----------------------------------------------------------------------------


    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        c = self.config
        return (prompt_tokens * c.price_prompt_per_1m + completion_tokens * c.price_completion_per_1m) / 1e6

    def close(self) -> None:
        """Close the cache file and the HTTP connections (a closed client reopens neither)."""
        if self._cache is not None:
            self._cache.close()
        if self._client is not None and hasattr(self._client, "close"):
            self._client.close()


def request_key(request: Mapping) -> str:
    """SHA-256 of the request as canonical JSON: the same request always has the same key."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """Chat completions by request hash in one SQLite file.

    Each write is one transaction (atomic: a killed run leaves whole rows only); the first
    answer stored for a key is kept, so parallel processes sharing the file agree.  Only
    the reply text and token counts are stored — no request, header or key.  The
    endpoint's address is not part of the key: the same model name behind another URL
    (a moved vLLM server) answers from the same cache.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, response TEXT NOT NULL, created_at REAL NOT NULL)"
            )
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"LLM response cache {self.path} is not a usable SQLite file: {exc}") from exc

    def get(self, key: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except json.JSONDecodeError as exc:
            raise ValueError(f"LLM response cache {self.path}: entry {key[:16]} is corrupt ({exc})") from exc

    def put(self, key: str, model: str, response: Mapping) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO responses (key, model, response, created_at) VALUES (?, ?, ?, ?)",
                (key, model, json.dumps(response, sort_keys=True), time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()



def _retry_after(exc: BaseException | None) -> float:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return 0.0
    value = headers.get("retry-after")
    try:
        return max(float(value), 0.0) if value is not None else 0.0
    except ValueError:
        return 0.0

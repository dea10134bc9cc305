"""The LLM brain: an agent decides through any OpenAI-compatible chat endpoint (design.md
"Brains"; A/B Agent §2.4; Agent4Rec §2.1.3, §3.5).

Per page the brain builds one prompt (`ops.simulation.brains.prompts`) from the agent's profile,
the memories retrieved from its long-term memory by text similarity to the movies on the
page (and by poster similarity when the catalogue has poster vectors), the session so
far, its fatigue, and the page itself.  Posters go to vision models as images (base64 data
URLs of the poster files, downscaled); text-only models get a caption that says what it
is: a palette description measured from the image's pixels (`ops.agents.embeddings.poster_look`),
not a description of what the poster shows.

Every answer is JSON validated against a schema (`PageAnswer`) and against the page (the
action must be legal, a clicked movie must be on the page, a rating in range).  An answer
that fails is re-asked ONCE with the error; if it fails again the brain records a safe
action — `exit` on a home page, `back` on a detail page — with `Decision.extra["fallback"]`
set and a reason that says so.  Nothing is dropped silently.

Transport: the official `openai` client (its own retries off), tenacity retries with
exponential back-off (honouring Retry-After) on rate limits, 5xx, timeouts and connection
errors, at most `max_attempts` tries; other errors (a bad key, a bad request) stop the run.
A response cache (SQLite, one row per request hash) keyed by the full request — model,
messages, sampling parameters, response format — makes a re-run free and identical.  The
sampling seed of each request is drawn from the agent's generator, so a session is a pure
function of (seed, agent, arm) as the simulation loop requires, and repeated pages get
fresh samples.  Token counts come from the response's `usage`; cost from configurable
prices per million tokens.

The API key is read from the environment variable NAMED in the configuration when the
client is first needed; it is never stored on the configuration, logged, cached or put in
a decision.

Scale: `decide` is synchronous (the simulation loop calls it once per step).  Agents are
independent, so `simulate_arm_concurrently` runs one arm's agents on a bounded pool of
threads sharing this brain (the client and the cache are thread-safe) and gives the same
events as `ops.simulation.runner.simulate_arm`; beyond one process, scale comes from simulation
partitions (arm × user shard) on the Dagster executor, all sharing the cache file.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ops.simulation.brains import prompts
from ops.simulation.fatigue import FatigueConfig
from ops.agents.memory import LongTermMemory, describe_short_term
from ops.simulation.observation import BACK, CLICK_MOVIE, EXIT, WATCH_AND_RATE, AgentSession, Decision, Observation

log = logging.getLogger(__name__)


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
    # Agents simulated at once by `simulate_arm_concurrently` (requests in flight).
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


class PageAnswer(BaseModel):
    """The JSON a page prompt asks for."""

    model_config = ConfigDict(extra="ignore")

    action: str
    movie_id: int | None = None
    rating: int | None = None
    interest: int
    caught_eye: list[int] = Field(default_factory=list)
    reason: str = Field(min_length=1)

    @field_validator("caught_eye", mode="before")
    @classmethod
    def _null_is_empty(cls, value):
        return [] if value is None else value

    @field_validator("movie_id", "rating", "interest", mode="before")
    @classmethod
    def _no_floats_or_bools(cls, value):
        # 4.5 is not a rating and true is not an id: refuse rather than round.
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(f"must be an integer, got {value!r}")
        return value


class InterviewAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    satisfaction: int
    reason: str = Field(min_length=1)


class AnswerError(ValueError):
    """An answer that is not valid JSON, breaks the schema or is illegal on the page."""


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


class LLMBrain:
    """An agent's decisions through an OpenAI-compatible chat endpoint.

    `catalogue` (an `ops.simulation.sandbox.Catalogue`, or anything mapping a movie id to an object
    with `title` and `genres`) names the remembered movies in prompts; without it they are
    named by id.  `client` replaces the `openai.OpenAI` client (tests, custom transports).
    """

    def __init__(self, config: LLMBrainConfig | None = None, catalogue=None, client=None) -> None:
        self.config = config or LLMBrainConfig()
        self.catalogue = catalogue
        self.name = f"llm:{self.config.model}" + ("" if self.config.vision else ":no-vision")
        self.usage = Usage()
        # user id -> tokens, cost, cached, fallback of that agent's exit interview (the
        # interview returns only (satisfaction, reason), so its cost is kept here).
        self.interview_accounting: dict[int, dict] = {}
        self._client = client
        self._client_lock = threading.Lock()
        self._cache = ResponseCache(self.config.cache_path) if self.config.cache_path else None
        self._posters: OrderedDict[tuple[str, str], list[dict]] = OrderedDict()
        self._posters_lock = threading.Lock()

    # -- the Brain protocol ---------------------------------------------------------------

    def prepare(self, sessions: Sequence[AgentSession], shown: Mapping[int, Sequence[int]]) -> None:
        """Nothing to score ahead: every decision is one request made when the page is seen."""
        return None

    def decide(self, session: AgentSession, observation: Observation, rng: np.random.Generator) -> Decision:
        if not observation.legal_actions:
            raise ValueError("LLM brain: the page offers no legal action (the session has ended)")
        started = time.perf_counter()
        seed = int(rng.integers(0, 2**31 - 1))
        messages = self.page_messages(session, observation)
        answer, replies, errors = self._ask(messages, lambda text: check_answer(text, observation, self.config), seed, observation)
        latency = time.perf_counter() - started
        accounting = self._accounting(replies, errors)
        if answer is None:
            return self._fallback(observation, errors, latency, accounting)
        movie_id = answer.movie_id
        if observation.page_type == "detail":
            movie_id = observation.detail.card.movie_id
        elif answer.action != CLICK_MOVIE:
            movie_id = None
        return Decision(
            action=answer.action,
            interest=answer.interest,
            reason=answer.reason.strip(),
            movie_id=movie_id,
            rating=answer.rating if answer.action == WATCH_AND_RATE else None,
            caught_eye=tuple(dict.fromkeys(answer.caught_eye)),
            latency_s=latency,
            **accounting,
        )

    def exit_interview(self, session: AgentSession, rng: np.random.Generator) -> tuple[int, str]:
        """Agent4Rec's post-exit interview: satisfaction 1..10 and why."""
        seed = int(rng.integers(0, 2**31 - 1))
        messages = self.interview_messages(session)
        started = time.perf_counter()
        answer, replies, errors = self._ask(messages, lambda text: check_interview(text, self.config), seed, None)
        accounting = self._accounting(replies, errors)
        record = {k: accounting[k] for k in ("prompt_tokens", "completion_tokens", "cost_usd")} | {
            "cached": accounting["extra"]["cached"],
            "fallback": answer is None,
            "latency_s": time.perf_counter() - started,
        }
        with self.usage.lock:
            self.interview_accounting[session.user_id] = record
        if answer is None:
            lo, hi = self.config.satisfaction_range
            with self.usage.lock:
                self.usage.fallbacks += 1
            log.warning("LLM brain: exit interview of user %s fell back after %d invalid answers", session.user_id, len(errors))
            return (lo + hi) // 2, f"fallback: the model's interview answer was invalid {len(errors)} times ({errors[-1]}); midpoint recorded"
        return answer.satisfaction, answer.reason.strip()

    def close(self) -> None:
        """Close the cache file and the HTTP connections (a closed brain reopens neither)."""
        if self._cache is not None:
            self._cache.close()
        if self._client is not None and hasattr(self._client, "close"):
            self._client.close()

    # -- prompts ----------------------------------------------------------------------------

    def page_messages(self, session: AgentSession, observation: Observation) -> list[dict]:
        """The chat messages for one page (system: who the agent is; user: the rest)."""
        c = self.config
        system = prompts.system_prompt(session.profile, c.fatigue.base_costs, c.fatigue.phi_min, c.fatigue.phi_max)
        movie_ids = [card.movie_id for card in observation.items] if observation.page_type == "home" else [observation.detail.card.movie_id]
        context = "\n\n".join(
            [
                prompts.fatigue_text(session),
                prompts.memories_text(self.recall(session, movie_ids, observation.page_type)),
                prompts.short_term_text(self._short_term(session)),
            ]
        ) + "\n"
        parts = [{"type": "text", "text": context}]
        parts += prompts.page_parts(observation, self._poster_parts)
        parts.append({"type": "text", "text": "\n" + prompts.answer_instructions(observation, c.rating_range)})
        return [{"role": "system", "content": system}, {"role": "user", "content": _merge_text_parts(parts)}]

    def interview_messages(self, session: AgentSession) -> list[dict]:
        c = self.config
        system = prompts.system_prompt(session.profile, c.fatigue.base_costs, c.fatigue.phi_min, c.fatigue.phi_max)
        watched = [
            f"- {self._movie_name(e.movie_id)}: rated {e.rating}/{c.rating_range[1]}"
            for e in session.short_term
            if e.action == WATCH_AND_RATE and e.rating is not None
        ]
        text = prompts.interview_text(self._short_term(session), watched, c.satisfaction_range)
        return [{"role": "system", "content": system}, {"role": "user", "content": text}]

    def recall(self, session: AgentSession, movie_ids: Sequence[int], page_type: str) -> list[str]:
        """Memories retrieved by text (and poster) similarity to the movies on the page,
        one line each, strongest first per page movie; a memory recalled twice is shown once."""
        memory = session.memory
        if not isinstance(memory, LongTermMemory) or len(memory) == 0:
            return []
        c = self.config
        k_text = c.home_text_memories_per_item if page_type == "home" else c.detail_text_memories
        k_poster = c.home_poster_memories_per_item if page_type == "home" else c.detail_poster_memories
        vectors = memory.vectors
        known = set(vectors.movie_ids[np.isin(vectors.movie_ids, np.asarray(movie_ids, dtype=np.int64))].tolist())
        recalled: dict[int, tuple] = {}  # memory movie id -> (recollection, page movie id, how)
        for movie_id in movie_ids:
            if movie_id not in known:
                continue
            row = int(vectors.rows_of([movie_id])[0])
            found = [("story", r) for r in memory.retrieve_by_text(vectors.text[row], k_text)] if k_text else []
            if k_poster and vectors.poster.shape[1] > 0 and vectors.has_poster[row]:
                found += [("poster", r) for r in memory.retrieve_by_image(vectors.poster[row], k_poster)]
            for how, r in found:
                if r.movie_id not in recalled:
                    recalled[r.movie_id] = (r, movie_id, [how])
                elif recalled[r.movie_id][1] == movie_id and how not in recalled[r.movie_id][2]:
                    recalled[r.movie_id][2].append(how)  # recalled by story AND by poster
        lines = []
        for r, movie_id, hows in recalled.values():
            what = f"its {hows[0]} resembles" if len(hows) == 1 else f"its {' and '.join(hows)} resemble"
            lines.append(
                f"- {self._movie_name(r.movie_id)}: you rated it {r.rating}/{c.rating_range[1]} "
                f"({what} [{movie_id}], similarity {r.similarity:.2f})"
            )
        return lines

    # -- asking -----------------------------------------------------------------------------

    def _ask(self, messages: list[dict], check: Callable[[str], object], seed: int, observation: Observation | None):
        """Ask, validate, re-ask with the error up to `reasks` times.  Returns (answer or
        None, replies, errors)."""
        replies: list[Reply] = []
        errors: list[str] = []
        conversation = list(messages)
        for attempt in range(1 + self.config.reasks):
            reply = self.complete(conversation, seed)
            replies.append(reply)
            try:
                return check(reply.content), replies, errors
            except AnswerError as exc:
                errors.append(str(exc))
                log.info("LLM brain: invalid answer (attempt %d of %d): %s", attempt + 1, 1 + self.config.reasks, exc)
                conversation = conversation + [
                    {"role": "assistant", "content": reply.content},
                    {"role": "user", "content": prompts.reask_text(str(exc), observation)},
                ]
        return None, replies, errors

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
            self.usage.cost_usd += self._cost(pt, ct)
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

    def _accounting(self, replies: Sequence[Reply], errors: Sequence[str]) -> dict:
        pt = sum(r.prompt_tokens for r in replies)
        ct = sum(r.completion_tokens for r in replies)
        with self.usage.lock:
            self.usage.reasks += max(len(replies) - 1, 0)
        extra = {
            "model": self.config.model,
            "requests": len(replies),
            "cached": bool(replies) and all(r.cached for r in replies),
            "request_keys": [r.key for r in replies],
        }
        if errors:
            extra["invalid_answers"] = list(errors)
        if any(not r.usage_known for r in replies):
            extra["usage_missing"] = True
        # A cached reply reports the tokens and cost of the request that produced it, so
        # a re-run writes the same events; `LLMBrain.usage` counts what was really spent.
        return {"prompt_tokens": pt, "completion_tokens": ct, "cost_usd": self._cost(pt, ct), "extra": extra}

    def _fallback(self, observation: Observation, errors: Sequence[str], latency: float, accounting: dict) -> Decision:
        action = EXIT if EXIT in observation.legal_actions else BACK if BACK in observation.legal_actions else observation.legal_actions[-1]
        with self.usage.lock:
            self.usage.fallbacks += 1
        log.warning("LLM brain: %d invalid answers on a %s page; falling back to %s", len(errors), observation.page_type, action)
        accounting["extra"]["fallback"] = action
        return Decision(
            action=action,
            interest=self.config.fallback_interest,
            reason=f"fallback to {action}: the model's answer was invalid {len(errors)} times (last: {errors[-1]})",
            movie_id=observation.detail.card.movie_id if observation.page_type == "detail" else None,
            latency_s=latency,
            **accounting,
        )

    def _cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        c = self.config
        return (prompt_tokens * c.price_prompt_per_1m + completion_tokens * c.price_completion_per_1m) / 1e6

    # -- perception helpers -------------------------------------------------------------------

    def _short_term(self, session: AgentSession) -> str:
        entries = session.short_term[-self.config.short_term_max_steps :] if self.config.short_term_max_steps else []
        ids = {m for e in entries for m in (e.movie_id, *e.caught_eye) if m is not None}
        return describe_short_term(entries, {m: self._movie_name(m) for m in ids})

    def _movie_name(self, movie_id: int) -> str:
        cat = self.catalogue
        if cat is not None and movie_id in cat:
            info = cat[movie_id]
            genres = ", ".join(getattr(info, "genres", ()) or ())
            return f"{info.title}" + (f" ({genres})" if genres else "")
        return f"movie {movie_id}"

    def _poster_parts(self, path: str | None, size: str) -> list[dict]:
        """Image part (vision) or palette caption (text-only) for one poster; memoised."""
        key = (str(path), size)
        with self._posters_lock:
            if key in self._posters:
                self._posters.move_to_end(key)
                return self._posters[key]
        parts = self._render_poster(path, size)
        with self._posters_lock:
            self._posters[key] = parts
            while len(self._posters) > 4096:
                self._posters.popitem(last=False)
        return parts

    def _render_poster(self, path: str | None, size: str) -> list[dict]:
        c = self.config
        if not path:
            return [{"type": "text", "text": "Poster: none."}]
        if c.vision:
            side = c.image_max_side_small if size == "small" else c.image_max_side_large
            try:
                url = poster_data_url(path, side, c.image_jpeg_quality)
            except ValueError as exc:
                log.warning("LLM brain: %s", exc)
                return [{"type": "text", "text": "Poster: unavailable."}]
            return [{"type": "image_url", "image_url": {"url": url, "detail": c.image_detail}}]
        try:
            return [{"type": "text", "text": poster_caption(path)}]
        except ValueError as exc:
            log.warning("LLM brain: %s", exc)
            return [{"type": "text", "text": "Poster: unavailable."}]


def simulate_arm_concurrently(arm, top_k, agents, catalogue, brain, config=None, seed: int = 0, run_id: str = "",
                              users: Iterable[int] | None = None, activity_tiers: Mapping[int, str] | None = None,
                              concurrency: int | None = None):
    """`ops.simulation.runner.simulate_arm` with up to `concurrency` agents in flight at once.

    Each agent runs through `simulate_arm` on its own (its generator depends only on
    (seed, user, arm)), on a pool of threads sharing `brain`; the events are concatenated
    in user-id order, so they equal a serial run's except for measured latencies.  Worth
    it for a brain that waits on the network; `brain` must be thread-safe (LLMBrain is).
    """
    import polars as pl
    from concurrent.futures import ThreadPoolExecutor

    from tqdm.auto import tqdm

    from ops.simulation.runner import SimulationConfig, simulate_arm, top_k_lists

    config = config or SimulationConfig()
    concurrency = concurrency or getattr(getattr(brain, "config", None), "concurrency", 1)
    chosen = sorted({a.user_id for a in agents} if users is None else {int(u) for u in users})
    by_agent = {a.user_id: a for a in agents}
    unknown = [u for u in chosen if u not in by_agent]
    if unknown:
        raise ValueError(f"simulation of arm {arm!r}: no agent for user(s) {unknown[:10]}")
    top_k_lists(top_k, arm)  # checks the whole table once, with its errors
    rows = {key[0]: frame for key, frame in top_k.filter(pl.col("arm") == arm).partition_by("user_id", as_dict=True).items()}
    missing = [u for u in chosen if u not in rows]
    if missing:
        raise ValueError(f"simulation of arm {arm!r}: the top-k table has no list for user(s) {missing[:10]}")
    quiet = config.model_copy(update={"progress": False})

    def one(user_id: int) -> pl.DataFrame:
        return simulate_arm(arm, rows[user_id], [by_agent[user_id]], catalogue, brain, quiet, seed, run_id, [user_id], activity_tiers)

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="simab-llm") as pool:
        frames = list(tqdm(pool.map(one, chosen), total=len(chosen), desc=f"simulate {arm}", disable=not config.progress, mininterval=2.0))
    if not frames:
        from ops.simulation.runner import EVENTS

        return pl.DataFrame(schema=EVENTS)
    return pl.concat(frames, how="vertical")


# -- answers ------------------------------------------------------------------------------


def check_answer(text: str, observation: Observation, config: LLMBrainConfig) -> PageAnswer:
    """Parse and check one page answer; AnswerError says what is wrong, in words the model
    can act on."""
    answer = _parse(text, PageAnswer)
    legal = observation.legal_actions
    if answer.action not in legal:
        raise AnswerError(f'action "{answer.action}" is not legal on this page; legal actions: {", ".join(legal)}')
    lo, hi = config.interest_range
    if not lo <= answer.interest <= hi:
        raise AnswerError(f"interest must be an integer from {lo} to {hi}, got {answer.interest}")
    if observation.page_type == "home":
        on_page = [card.movie_id for card in observation.items]
        if answer.action == CLICK_MOVIE and answer.movie_id not in on_page:
            raise AnswerError(f"click_movie needs the movie_id of a movie on this page, one of {on_page}; got {answer.movie_id}")
    else:
        on_page = [observation.detail.card.movie_id]
        if answer.movie_id is not None and answer.movie_id != on_page[0]:
            raise AnswerError(f"this detail page shows movie {on_page[0]}, not movie {answer.movie_id}")
        if answer.action == WATCH_AND_RATE:
            rlo, rhi = config.rating_range
            if answer.rating is None or not rlo <= answer.rating <= rhi:
                raise AnswerError(f"watch_and_rate needs a rating from {rlo} to {rhi}, got {answer.rating}")
    stray = [m for m in answer.caught_eye if m not in on_page]
    if stray:
        raise AnswerError(f"caught_eye may only name movies on this page {on_page}; got {stray}")
    return answer


def check_interview(text: str, config: LLMBrainConfig) -> InterviewAnswer:
    answer = _parse(text, InterviewAnswer)
    lo, hi = config.satisfaction_range
    if not lo <= answer.satisfaction <= hi:
        raise AnswerError(f"satisfaction must be an integer from {lo} to {hi}, got {answer.satisfaction}")
    return answer


def _parse(text: str, model: type[BaseModel]):
    body = text.strip()
    # Some local models wrap JSON in a Markdown fence despite JSON mode.
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, flags=re.DOTALL)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise AnswerError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(data, dict):
        raise AnswerError(f"expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors())
        raise AnswerError(f"does not follow the format: {problems}") from None


# -- the response cache -------------------------------------------------------------------


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


# -- posters --------------------------------------------------------------------------------


def poster_data_url(path: str, max_side: int, quality: int = 85) -> str:
    """The poster file as a base64 JPEG data URL, longest side at most `max_side` pixels."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
            img.thumbnail((max_side, max_side))
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=quality)
    except Exception as exc:  # pillow raises many types for unreadable files
        raise ValueError(f"poster {path} cannot be read: {exc}") from exc
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


_LOOK_WORDS = {"warm": "warm colours (reds, oranges, yellows)", "cool": "cool colours (greens, blues, purples)", "dark": "mostly dark", "bright": "bright and pale"}


def poster_caption(path: str) -> str:
    """What a text-only model is told about a poster: its palette, measured from pixels."""
    from ops.agents.embeddings import load_poster, poster_look

    look = poster_look(load_poster(path))
    return f"Poster (palette measured from the image's colours; the picture itself is not described): {_LOOK_WORDS.get(look, look)}."


# -- small helpers ----------------------------------------------------------------------------


def _merge_text_parts(parts: list[dict]) -> str | list[dict]:
    """Adjacent text parts joined; a plain string when there is no image (text-only
    endpoints may not accept content lists)."""
    merged: list[dict] = []
    for part in parts:
        if part["type"] == "text" and merged and merged[-1]["type"] == "text":
            merged[-1] = {"type": "text", "text": merged[-1]["text"] + "\n" + part["text"]}
        else:
            merged.append(dict(part))
    if all(p["type"] == "text" for p in merged):
        return "\n".join(p["text"] for p in merged)
    return merged


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

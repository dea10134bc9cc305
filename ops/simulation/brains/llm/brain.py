"""The LLM brain itself: per page, the prompt (`prompts`), the answer checked (`answers`),
re-asked once, or a recorded fallback; the exit interview; memories recalled for the page.
The endpoint, retries and cache are `client.LLMClient`'s.  See the package docstring.

One concept, the LLM brain's decisions, from the page to the checked answer."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ops.agents.memory import LongTermMemory, describe_short_term
from ops.agents.session import AgentSession
from ops.simulation.brains.llm import answers, prompts, tracing
from ops.simulation.brains.llm.answers import (
    AnswerError,
    check_answer,
    check_interview,
    check_reflection,
    interview_schema,
    page_schema,
    reflection_schema,
)
from ops.simulation.brains.llm.client import LLMClient, Reply
from ops.simulation.brains.llm.config import LLMBrainConfig
from ops.simulation.brains.llm.transport import LLMTransportError
from ops.simulation.observation import (
    BACK,
    CLICK_MOVIE,
    EXIT,
    FALLBACK_DEADLINE,
    FALLBACK_INVALID_ANSWER,
    FALLBACK_TRANSPORT,
    NEXT_PAGE,
    PREVIOUS_PAGE,
    WATCH_AND_RATE,
    Decision,
    Observation,
)

log = logging.getLogger(__name__)


class LLMBrain:
    """An agent's decisions through an OpenAI-compatible chat endpoint.

    `catalogue` (an `ops.simulation.sandbox.Catalogue`, or anything mapping a movie id to an object
    with `title` and `genres`) names the remembered movies in prompts; without it they are
    named by id.  `client` replaces the per-loop `openai.AsyncOpenAI` client (tests, custom
    transports).

    `adecide` / `aexit_interview` are the brain (the runner awaits them, many agents in
    flight); `decide` / `exit_interview` run them from synchronous code (the Brain protocol).
    """

    decides_offline = False  # every decision is a request to the endpoint, charged to the run's bill

    def __init__(self, config: LLMBrainConfig | None = None, catalogue=None, client=None) -> None:
        self.config = config or LLMBrainConfig()
        self.catalogue = catalogue
        # The domain's noun ("movie", "book", "game"): the prompts say it (docs/data_model.md).
        self.noun = getattr(catalogue, "item_noun", None) or "movie"
        # From the configuration, not the probe: the name keys checkpoints before any call.
        self.name = f"llm:{self.config.model}" + ("" if self.config.vision else ":no-vision")
        self.transport = LLMClient(self.config, client)
        self.usage = self.transport.usage
        self.tracer = tracing.Tracer(self.config.trace_share, self.config.trace_experiment_id)
        # user id -> tokens, cost, cached, fallback of that agent's exit interview (the
        # interview returns only (satisfaction, reason), so its cost is kept here).
        self.interview_accounting: dict[int, dict] = {}
        self._posters: OrderedDict[tuple[str, str, bool], list[dict]] = OrderedDict()
        self._recalled: OrderedDict[tuple, tuple] = OrderedDict()  # (user, page type, movies) -> (memory, lines)
        # user id -> (short-term length when it reflected, the reflection as prompts show it)
        self._reflections: dict[int, tuple[int, str | None]] = {}
        self._posters_lock = threading.Lock()  # guards both memos and the reflections

    @property
    def vision(self) -> bool:
        """Whether posters go as images: the configuration's, or what the endpoint's probe
        found; before the probe of `vision: auto`, True (a prompt only priced is priced at
        its dearest)."""
        found = self.transport.vision
        return bool(self.config.vision) if found is None else found

    @property
    def concurrency(self) -> int:
        """Requests the endpoint takes at once (the protocols' thread pools size to it)."""
        return self.config.concurrency

    async def aready(self) -> None:
        """Probe what the configuration leaves to `auto` (before prompts with posters are written)."""
        await self.transport.aresolve()

    # -- the Brain protocol ---------------------------------------------------------------

    def prepare(self, sessions: Sequence[AgentSession], shown: Mapping[int, Sequence[int]]) -> None:
        """Nothing to score ahead: every decision is one request made when the page is seen."""
        return None

    def decide(self, session: AgentSession, observation: Observation, rng: np.random.Generator) -> Decision:
        return self.transport.run_sync(self.adecide, session, observation, rng)

    def session_trace(self, arm: str, user_id: int, session: int):
        """The MLflow trace of one agent session (`tracing`): the simulation driver holds it
        open around the session; a session the share does not sample is not traced."""
        return self.tracer.session(arm, user_id, session)

    @property
    def trace_ids(self) -> list[str]:
        """The MLflow traces this brain started (the simulation step links them to its run)."""
        return list(self.tracer.trace_ids)

    def exit_interview(self, session: AgentSession, rng: np.random.Generator) -> tuple[int, str]:
        return self.transport.run_sync(self.aexit_interview, session, rng)

    async def adecide(self, session: AgentSession, observation: Observation, rng: np.random.Generator) -> Decision:
        """The next action for the page: the model's answer once it passes the checks, else
        a recorded fallback (`Decision.fallback_reason`)."""
        page = {"page_type": observation.page_type, "page_number": observation.page_number}
        with tracing.decision_span(f"{observation.page_type} page {observation.page_number}", page) as span:
            decision = await self._adecide(session, observation, rng)
            tracing.finish(
                span,
                {"action": decision.action, "item_id": decision.item_id, "reason": decision.reason},
                action=decision.action,
                item_id=decision.item_id,
                prompt_tokens=decision.prompt_tokens,
                completion_tokens=decision.completion_tokens,
                cost_usd=decision.cost_usd,
                latency_s=decision.latency_s,
                fallback=decision.fallback_reason is not None,
                fallback_reason=decision.fallback_reason,
            )
        return decision

    async def _adecide(self, session: AgentSession, observation: Observation, rng: np.random.Generator) -> Decision:
        if not observation.legal_actions:
            raise ValueError("LLM brain: the page offers no legal action (the session has ended)")
        started = time.perf_counter()
        seed = int(rng.integers(0, 2**31 - 1))
        reflection = await self._reflect(session, rng)
        try:
            await self.aready()
        except LLMTransportError as exc:  # the probe could not reach the endpoint: as any request
            accounting = self._accounting([], [])
            latency = time.perf_counter() - started
            return self._fallback(observation, [], f"{FALLBACK_TRANSPORT}: {exc}", latency, accounting)
        messages = self.page_messages(session, observation)
        answer, replies, errors, failure = await self._ask(
            messages,
            lambda text: check_answer(text, observation, self.config),
            seed,
            observation,
            page_schema(observation, self.config),
        )
        latency = time.perf_counter() - started
        accounting = self._accounting(replies, errors)
        if reflection is not None:  # the reflection's bill goes on the step it preceded
            for k in ("prompt_tokens", "completion_tokens", "cost_usd"):
                accounting[k] += reflection[k]
            accounting["extra"]["reflection"] = reflection["extra"]
        if answer is None:
            return self._fallback(observation, errors, failure, latency, accounting)
        item_id = answer.item_id
        slot = None
        if observation.page_type == "detail":
            item_id = observation.detail.card.item_id
        elif answer.action != CLICK_MOVIE:
            item_id = None
        elif self.config.shuffle_page:
            slot = [card.item_id for card in self.displayed(session, observation).items].index(item_id) + 1
        return Decision(
            action=answer.action,
            interest=answer.interest,
            reason=answer.reason.strip(),
            item_id=item_id,
            rating=answer.rating if answer.action == WATCH_AND_RATE else None,
            caught_eye=tuple(dict.fromkeys(answer.caught_eye)),
            slot=slot,
            latency_s=latency,
            **accounting,
        )

    async def aexit_interview(self, session: AgentSession, rng: np.random.Generator) -> tuple[int, str]:
        """Agent4Rec's post-exit interview: satisfaction 1..10 and why."""
        with tracing.decision_span("exit interview") as span:
            satisfaction, reason = await self._aexit_interview(session, rng)
            record = self.interview_accounting.get(session.user_id) or {}
            tracing.finish(
                span,
                {"satisfaction": satisfaction, "reason": reason},
                **{k: record.get(k) for k in ("prompt_tokens", "completion_tokens", "cost_usd", "latency_s")},
                fallback=bool(record.get("fallback")),
                fallback_reason=record.get("fallback_reason"),
            )
        return satisfaction, reason

    async def _aexit_interview(self, session: AgentSession, rng: np.random.Generator) -> tuple[int, str]:
        seed = int(rng.integers(0, 2**31 - 1))
        messages = self.interview_messages(session)
        started = time.perf_counter()
        answer, replies, errors, failure = await self._ask(
            messages, lambda text: check_interview(text, self.config), seed, None, interview_schema(self.config)
        )
        accounting = self._accounting(replies, errors)
        fallback_reason = None
        if answer is None:
            fallback_reason = (
                failure
                or f"{FALLBACK_INVALID_ANSWER}: the interview answer was invalid {len(errors)} times (last: {errors[-1]})"
            )
        record = {k: accounting[k] for k in ("prompt_tokens", "completion_tokens", "cost_usd")} | {
            "cached": accounting["extra"]["cached"],
            "fallback": answer is None,
            "fallback_reason": fallback_reason,
            "latency_s": time.perf_counter() - started,
        }
        with self.usage.lock:
            self.interview_accounting[session.user_id] = record
        if answer is None:
            lo, hi = self.config.satisfaction_range
            with self.usage.lock:
                self.usage.fallbacks += 1
            log.warning("LLM brain: exit interview of user %s fell back: %s", session.user_id, fallback_reason)
            return (lo + hi) // 2, f"fallback: {fallback_reason}; midpoint recorded"
        return answer.satisfaction, answer.reason.strip()

    async def aclose_connections(self) -> None:
        """Close the HTTP connections held on the running event loop (the runner calls it
        when its loop ends); the brain stays usable."""
        await self.transport.aclose_connections()

    def close(self) -> None:
        """Close the cache file and the HTTP connections (a closed brain reopens neither)."""
        self.transport.close()

    def fingerprint(self) -> str:
        """What, besides the name, makes this brain's events what they are: the endpoint
        (without credentials), the configuration that shapes requests, answers and costs, and
        the prompts and checks themselves (their source).  Transport settings (timeouts,
        retries, concurrency, cache) change how fast, not what: they are left out."""
        transport_only = {
            "trace_share",
            "trace_experiment_id",
            "api_key_env",
            "api_key_required",
            "timeout_s",
            "max_attempts",
            "backoff_s",
            "backoff_max_s",
            "backoff_jitter",
            "retry_after_max_s",
            "decision_deadline_s",
            "concurrency",
            "http_client",
            "cache_path",
            "cache",
            "base_url",
        }
        h = hashlib.sha256(self.transport.endpoint.encode("utf-8"))
        h.update(self.config.model_dump_json(exclude=transport_only).encode("utf-8"))
        for module in (prompts, answers):
            h.update(inspect.getsource(module).encode("utf-8"))
        return h.hexdigest()

    # -- reflection (Agent4Rec §2.1.2) ----------------------------------------------------

    def reflection(self, user_id: int) -> str | None:
        """The agent's latest reflection in this session, as the page prompts show it."""
        with self._posters_lock:
            held = self._reflections.get(user_id)
        return held[1] if held else None

    async def _reflect(self, session: AgentSession, rng: np.random.Generator) -> dict | None:
        """Every `reflect_every` actions, ask the agent to sum up its recent experiences
        (`prompts.reflection_text`); the answer becomes its preference state in the page
        prompts that follow.  Returns the reflection's accounting, None when none was asked.
        A new session (empty short-term memory) forgets the last session's reflection; a
        reflection that fails is recorded (usage, the step's `extra`) and the agent goes on
        with its previous state."""
        c, uid = self.config, session.user_id
        n = len(session.short_term)
        with self._posters_lock:
            if n == 0:
                self._reflections.pop(uid, None)
            due = (
                bool(c.reflect_every)
                and n > 0
                and n % c.reflect_every == 0
                and self._reflections.get(uid, (None,))[0] != n
            )
        if not due:
            return None
        seed = int(rng.integers(0, 2**31 - 1))
        answer, replies, errors, failure = await self._ask(
            self.reflection_messages(session), lambda text: check_reflection(text, c), seed, None, reflection_schema(c)
        )
        accounting = self._accounting(replies, errors)
        with self._posters_lock:
            previous = self._reflections.get(uid, (None, None))[1]
            if answer is None:
                reason = (
                    failure
                    or f"{FALLBACK_INVALID_ANSWER}: the reflection answer was invalid {len(errors)} times (last: {errors[-1]})"
                )
                accounting["extra"]["fallback_reason"] = reason
                self._reflections[uid] = (n, previous)
            else:
                self._reflections[uid] = (
                    n,
                    prompts.reflection_state_text(answer.preferences.strip(), answer.satisfaction, answer.fatigue),
                )
        if answer is None:
            with self.usage.lock:
                self.usage.fallbacks += 1
            log.warning("LLM brain: reflection of user %s fell back: %s", uid, accounting["extra"]["fallback_reason"])
        return accounting

    def reflection_messages(self, session: AgentSession) -> list[dict]:
        c = self.config
        system = prompts.system_prompt(
            session.profile, c.fatigue.base_costs, c.fatigue.phi_min, c.fatigue.phi_max, self.noun
        )
        text = prompts.reflection_text(
            self._short_term(session), self._watched(session), c.satisfaction_range, c.interest_range, self.noun
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": text}]

    # -- prompts ----------------------------------------------------------------------------

    def displayed(self, session: AgentSession, observation: Observation) -> Observation:
        """The page as the agent is shown it: with `shuffle_page`, a home page's cards in an
        order drawn per agent and page visit (the same while the agent comes back to the page
        from its detail pages, a new one when it turns the page), so that a model that clicks
        by place on the page rather than by content shows in the events' `slot` and the
        report's click share by slot.  The sandbox's list keeps the arm's order."""
        if not self.config.shuffle_page or observation.page_type != "home" or len(observation.items) < 2:
            return observation
        visit = sum(e.action in (NEXT_PAGE, PREVIOUS_PAGE) for e in session.short_term)
        rng = np.random.default_rng([self.config.shuffle_seed, int(session.user_id), observation.page_number, visit])
        order = rng.permutation(len(observation.items))
        return dataclasses.replace(observation, items=tuple(observation.items[i] for i in order))

    def page_messages(self, session: AgentSession, observation: Observation) -> list[dict]:
        """The chat messages for one page (system: who the agent is; user: the rest), the
        cards in the order `displayed` gives."""
        c = self.config
        observation = self.displayed(session, observation)
        system = prompts.system_prompt(
            session.profile, c.fatigue.base_costs, c.fatigue.phi_min, c.fatigue.phi_max, self.noun
        )
        item_ids = (
            [card.item_id for card in observation.items]
            if observation.page_type == "home"
            else [observation.detail.card.item_id]
        )
        reflected = self.reflection(session.user_id) if session.short_term else None
        context = (
            "\n\n".join(
                [
                    prompts.fatigue_text(session),
                    prompts.memories_text(self.recall(session, item_ids, observation.page_type), self.noun),
                    prompts.short_term_text(self._short_term(session)),
                    *([reflected] if reflected else []),
                ]
            )
            + "\n"
        )
        parts = [{"type": "text", "text": context}]
        # A shuffled page does not say the arm's rank either: it would give the order back.
        parts += prompts.page_parts(
            observation, self._poster_parts, self.noun, show_rank=not c.shuffle_page, taken=_taken(session, item_ids)
        )
        parts.append(
            {"type": "text", "text": "\n" + prompts.answer_instructions(observation, c.rating_range, self.noun)}
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": prompts.merge_text_parts(parts)}]

    def interview_messages(self, session: AgentSession) -> list[dict]:
        c = self.config
        system = prompts.system_prompt(
            session.profile, c.fatigue.base_costs, c.fatigue.phi_min, c.fatigue.phi_max, self.noun
        )
        text = prompts.interview_text(
            self._short_term(session), self._watched(session), c.satisfaction_range, self.noun
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": text}]

    def recall(self, session: AgentSession, item_ids: Sequence[int], page_type: str) -> list[str]:
        """Memories retrieved by text (and poster) similarity to the movies on the page,
        one line each, strongest first per page movie; a memory recalled twice is shown once."""
        memory = session.memory
        if not isinstance(memory, LongTermMemory) or len(memory) == 0:
            return []
        # An agent that comes back to a page recalls the same memories (its long-term memory
        # does not change during a session): recalled once, kept in a bounded memo.
        key = (session.user_id, page_type, tuple(item_ids))
        with self._posters_lock:
            held = self._recalled.get(key)
            if held is not None and held[0] is memory:
                self._recalled.move_to_end(key)
                return list(held[1])
        lines = self._recall(memory, item_ids, page_type)
        with self._posters_lock:
            self._recalled[key] = (memory, lines)
            while len(self._recalled) > 4096:
                self._recalled.popitem(last=False)
        return list(lines)

    def _recall(self, memory: LongTermMemory, item_ids: Sequence[int], page_type: str) -> list[str]:
        c = self.config
        k_text = c.home_text_memories_per_item if page_type == "home" else c.detail_text_memories
        k_poster = c.home_poster_memories_per_item if page_type == "home" else c.detail_poster_memories
        vectors = memory.vectors
        known = set(vectors.item_ids[np.isin(vectors.item_ids, np.asarray(item_ids, dtype=np.int64))].tolist())
        recalled: dict[int, tuple] = {}  # memory movie id -> (recollection, page movie id, how)
        for item_id in item_ids:
            if item_id not in known:
                continue
            row = int(vectors.rows_of([item_id])[0])
            found = (
                [("story", r) for r in memory.retrieve_by_text(vectors.text[row], k_text, c.recall)] if k_text else []
            )
            if k_poster and vectors.poster.shape[1] > 0 and vectors.has_poster[row]:
                found += [("poster", r) for r in memory.retrieve_by_image(vectors.poster[row], k_poster, c.recall)]
            for how, r in found:
                if r.item_id not in recalled:
                    recalled[r.item_id] = (r, item_id, [how])
                elif recalled[r.item_id][1] == item_id and how not in recalled[r.item_id][2]:
                    recalled[r.item_id][2].append(how)  # recalled by story AND by poster
        lines = []
        for r, item_id, hows in recalled.values():
            what = f"its {hows[0]} resembles" if len(hows) == 1 else f"its {' and '.join(hows)} resemble"
            felt = f'; you felt: "{r.feeling}"' if r.feeling else ""
            lines.append(
                f"- {self._movie_name(r.item_id)}: you rated it {r.rating}/{c.rating_range[1]}{felt} "
                f"({what} [{item_id}], similarity {r.similarity:.2f})"
            )
        return lines

    # -- asking -----------------------------------------------------------------------------

    async def _ask(
        self,
        messages: list[dict],
        check: Callable[[str], object],
        seed: int,
        observation: Observation | None,
        schema: tuple[str, dict] | None = None,
    ):
        """Ask, validate, re-ask with the error up to `reasks` times, all within the
        decision's deadline; `schema` (name, JSON schema) constrains the answer where the
        endpoint takes one (`LLMClient.request`).  Returns (answer or None, replies, errors,
        failure): failure is the fallback reason when the endpoint failed or the deadline
        passed, else None."""
        c = self.config
        replies: list[Reply] = []
        errors: list[str] = []
        conversation = list(messages)
        try:
            async with asyncio.timeout(c.decision_deadline_s):
                for attempt in range(1 + c.reasks):
                    reply, answer, error = await self._answer(conversation, seed, check, schema)
                    replies.append(reply)
                    if error is None:
                        self.transport.remember(reply)  # only answers that passed the checks
                        return answer, replies, errors, None
                    errors.append(error)
                    log.info("LLM brain: invalid answer (attempt %d of %d): %s", attempt + 1, 1 + c.reasks, error)
                    conversation = conversation + [
                        {"role": "assistant", "content": reply.content},
                        {"role": "user", "content": prompts.reask_text(error, observation)},
                    ]
        except LLMTransportError as exc:
            return None, replies, errors, f"{FALLBACK_TRANSPORT}: {exc}"
        except TimeoutError:
            with self.usage.lock:
                self.usage.transport_failures += 1
            return (
                None,
                replies,
                errors,
                (
                    f"{FALLBACK_DEADLINE}: no valid answer from {self.transport.endpoint} within "
                    f"decision_deadline_s={c.decision_deadline_s:g} s ({len(replies)} replies, {len(errors)} invalid)"
                ),
            )
        return None, replies, errors, None

    async def _answer(
        self, conversation: list[dict], seed: int, check: Callable[[str], object], schema: tuple[str, dict] | None
    ):
        """One reply and its check: (reply, answer, None) or (reply, None, error).  A cached
        reply that fails today's checks is dropped from the cache and asked afresh."""
        reply = await self.transport.acomplete(conversation, seed, schema=schema)
        try:
            return reply, check(reply.content), None
        except AnswerError as exc:
            if not reply.cached:
                return reply, None, str(exc)
            log.info("LLM brain: cached answer %s fails the checks (%s); asking the endpoint", reply.key[:16], exc)
            self.transport.forget(reply)
        reply = await self.transport.acomplete(conversation, seed, use_cache=False, schema=schema)
        try:
            return reply, check(reply.content), None
        except AnswerError as exc:
            return reply, None, str(exc)

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
        return {"prompt_tokens": pt, "completion_tokens": ct, "cost_usd": self.transport.cost(pt, ct), "extra": extra}

    def _fallback(
        self, observation: Observation, errors: Sequence[str], failure: str | None, latency: float, accounting: dict
    ) -> Decision:
        action = (
            EXIT
            if EXIT in observation.legal_actions
            else BACK
            if BACK in observation.legal_actions
            else observation.legal_actions[-1]
        )
        with self.usage.lock:
            self.usage.fallbacks += 1
        if failure is None:
            failure = (
                f"{FALLBACK_INVALID_ANSWER}: the model's answer was invalid {len(errors)} times (last: {errors[-1]})"
            )
        log.warning("LLM brain: fallback to %s on a %s page: %s", action, observation.page_type, failure)
        accounting["extra"]["fallback"] = action
        return Decision(
            action=action,
            interest=self.config.fallback_interest,
            reason=f"fallback to {action}: {failure}",
            item_id=observation.detail.card.item_id if observation.page_type == "detail" else None,
            latency_s=latency,
            fallback_reason=failure,
            **accounting,
        )

    def _watched(self, session: AgentSession) -> list[str]:
        top = self.config.rating_range[1]
        return [
            f"- {self._movie_name(e.item_id)}: rated {e.rating}/{top}"
            for e in session.short_term
            if e.action == WATCH_AND_RATE and e.rating is not None
        ]

    def _short_term(self, session: AgentSession) -> str:
        entries = session.short_term[-self.config.short_term_max_steps :] if self.config.short_term_max_steps else []
        ids = {m for e in entries for m in (e.item_id, *e.caught_eye) if m is not None}
        return describe_short_term(entries, {m: self._movie_name(m) for m in ids})

    def _movie_name(self, item_id: int) -> str:
        cat = self.catalogue
        if cat is not None and item_id in cat:
            info = cat[item_id]
            genres = ", ".join(getattr(info, "genres", ()) or ())
            return f"{info.title}" + (f" ({genres})" if genres else "")
        return f"{self.noun} {item_id}"

    def _poster_parts(self, path: str | None, size: str) -> list[dict]:
        """Image part (vision) or palette caption (text-only) for one poster; memoised."""
        key = (str(path), size, self.vision)  # a probe may turn vision off after a priced prompt
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
        # A book's cover or a game's screenshot is not a poster: only movies keep the word.
        word = "Poster" if self.noun == prompts.MOVIE else "Image"
        if not path:
            return [{"type": "text", "text": f"{word}: none."}]
        if self.vision:
            side = c.image_max_side_small if size == "small" else c.image_max_side_large
            try:
                url = prompts.poster_data_url(path, side, c.image_jpeg_quality)
            except ValueError as exc:
                log.warning("LLM brain: %s", exc)
                return [{"type": "text", "text": f"{word}: unavailable."}]
            return [{"type": "image_url", "image_url": {"url": url, "detail": c.image_detail}}]
        try:
            return [{"type": "text", "text": prompts.poster_caption(path, word)}]
        except ValueError as exc:
            log.warning("LLM brain: %s", exc)
            return [{"type": "text", "text": f"{word}: unavailable."}]


def _taken(session: AgentSession, item_ids) -> dict[int, int]:
    """The shown items the agent already has in its long-term memory, with its rating: an
    agent at the simulation clock remembers its validation window, and an arm trained on the
    train window may show it what it took there (`ops.agents.clock`)."""
    memory = session.memory
    ids = getattr(memory, "item_ids", None)
    if ids is None or not len(ids):
        return {}
    shown = set(int(m) for m in item_ids)
    return {int(m): int(r) for m, r in zip(ids.tolist(), memory.ratings.tolist()) if int(m) in shown}

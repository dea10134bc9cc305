"""A fake OpenAI-compatible chat endpoint, for the LLM brain's tests, fault suite and benchmark
(one concept, the fake endpoint: its server, its scripted faults and the policies it answers with).

POST /v1/chat/completions answers in OpenAI's chat-completion JSON shape ("choices" with one
assistant message, "usage" with prompt and completion tokens).  What it answers comes, in
this order, from:

1. standing rules (`fail_when(predicate, status)`): every request whose body matches fails
   the same way — an endpoint that keeps failing for one agent;
2. a queue of scripted outcomes: `reply(content)`, `fail(status, headers)` (429 with
   Retry-After in either form, 503, 401 …), `garbage()` (a 200 whose body is not JSON),
   `truncated()` (a 200 that promises a whole body and closes the connection half-way),
   `slow(seconds)` (a valid answer, late);
3. `policy(body)`, a function of the request: `scripted_agent` plays a user who opens the
   first movie, watches it, pages on and leaves.

The client's capability probes (`ops.simulation.brains.llm.probes`: a tiny request with a
json_schema, one with a 1x1 image) are answered apart — they take no scripted outcome and are
not counted in `calls` or `requests`, but recorded in `probes` — and accepted unless told
otherwise: `refuse_schema(status, message)` / `refuse_json_object(...)` refuse the response
formats, `refuse_images(status, message)` every request carrying an image (llama.cpp's
HTTP 500 "image input is not supported" for a text-only model), probe or not.
`max_in_flight` is the most requests it was answering at once.

Every answer reports `prompt_tokens` and `completion_tokens` — 1,000 and 50 unless told
otherwise, or, with `count_tokens=True`, counted from the request really received and the
answer sent (`ops.simulation.brains.llm.tokens`, the count the cost estimate uses) — and
waits `latency_s` first (a benchmark's slow endpoint).  The fake counts its
calls and the tokens it reported, and records every request body and its Authorization
header (tests assert on both).

Served by aiohttp — an asyncio server whose waits cost no thread, so hundreds of slow
requests can be in flight on two cores:
- `with fake.serve() as base_url:` runs it on a thread of this process (tests);
- `python -m fakes.openai_server --latency-ms 300` runs it in a process of its own and
  prints its base URL (the benchmark and the kill -9 tests, so that the client's CPU is
  measured apart from the server's); `GET /fake/stats` returns its counts and CPU time.
  It stops on SIGTERM or SIGINT, or when its standard input ends if that is a pipe or a
  terminal, so it runs in the background too (`... > url.txt &`, `nohup`).  `spawn()`
  starts one and stops it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ops.simulation.observation import CLICK_MOVIE, EXIT, NEXT_PAGE, WATCH_AND_RATE

PROMPT_TOKENS, COMPLETION_TOKENS = 1000, 50
CHAT_COMPLETIONS = "/v1/chat/completions"


@dataclass
class Outcome:
    """How the fake answers one request."""

    status: int = 200
    content: str | None = None  # the assistant message; None: the policy's
    headers: dict = field(default_factory=dict)
    raw: bytes | None = None  # a body sent as it is (a 200 that is not a chat completion)
    truncate: bool = False  # Content-Length of the whole body, half of it sent, connection closed
    delay_s: float = 0.0  # waited before answering, on top of the fake's latency
    message: str | None = None  # an error's message (e.g. llama.cpp's "image input is not supported")


class FakeOpenAI:
    """The endpoint: standing rules, then scripted outcomes, then `policy(body)`; counts and
    records calls."""

    def __init__(
        self,
        policy: Callable[[dict], str] | None = None,
        *,
        latency_s: float = 0.0,
        prompt_tokens: int = PROMPT_TOKENS,
        completion_tokens: int = COMPLETION_TOKENS,
        record: bool = True,
        count_tokens: bool = False,
    ) -> None:
        self.policy = policy
        self.count_tokens = count_tokens
        self.latency_s = latency_s
        self.tokens_per_answer = (prompt_tokens, completion_tokens)
        self.record = record  # off for long benchmark runs, where the bodies would pile up
        self.requests: list[dict] = []
        self.auth: list[str | None] = []
        self.script: deque[Outcome] = deque()
        self.rules: list[tuple[Callable[[dict], bool], Outcome]] = []
        self.calls = 0
        self.probes: list[dict] = []
        self.probe_tokens = 0  # prompt and completion tokens of the probes answered
        self.refusals: dict[str, Outcome] = {}  # "json_schema" | "json_object" | "image" -> the refusal
        self.in_flight = 0
        self.max_in_flight = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._lock = threading.Lock()

    # -- scripting --------------------------------------------------------------------------

    def reply(self, content: str) -> None:
        """Queue one answer whose message content is `content`."""
        self._queue(Outcome(content=content))

    def fail(self, status: int, headers: dict | None = None, message: str | None = None) -> None:
        """Queue one HTTP error (e.g. 429 with Retry-After, 503, 401), with `message` as its error's text."""
        self._queue(Outcome(status=status, headers=dict(headers or {}), message=message))

    def garbage(
        self, body: bytes = b"<html><body>502 Bad Gateway</body></html>", content_type: str = "application/json"
    ) -> None:
        """Queue one HTTP 200 whose body is not a chat completion (a proxy's error page)."""
        self._queue(Outcome(raw=body, headers={"Content-Type": content_type}))

    def truncated(self) -> None:
        """Queue one HTTP 200 that declares its whole body and closes the connection half-way."""
        self._queue(Outcome(truncate=True))

    def slow(self, seconds: float, content: str | None = None) -> None:
        """Queue one valid answer (`content`, else the policy's) sent `seconds` late."""
        self._queue(Outcome(content=content, delay_s=seconds))

    def fail_when(self, predicate: Callable[[dict], bool], status: int = 500, headers: dict | None = None) -> None:
        """Every request whose body satisfies `predicate` fails with `status`, for good."""
        with self._lock:
            self.rules.append((predicate, Outcome(status=status, headers=dict(headers or {}))))

    def refuse_schema(
        self, status: int = 400, message: str = "response_format json_schema is not supported", keyword: str = ""
    ) -> None:
        """Every request with response_format json_schema is refused (an older server); with
        `keyword`, only a schema that uses it (a strict mode without "maxLength")."""
        self.refusals["json_schema"] = Outcome(status=status, message=message)
        self.refused_keyword = keyword

    def refuse_json_object(self, status: int = 400, message: str = "response_format json_object is not supported"):
        """Every request with response_format json_object is refused."""
        self.refusals["json_object"] = Outcome(status=status, message=message)

    def refuse_images(self, status: int = 500, message: str = "image input is not supported") -> None:
        """Every request carrying an image is refused (llama.cpp serving a text-only model)."""
        self.refusals["image"] = Outcome(status=status, message=message)

    def _refusal(self, body: dict) -> Outcome | None:
        kind = (body.get("response_format") or {}).get("type")
        if kind in self.refusals:
            keyword = getattr(self, "refused_keyword", "") if kind == "json_schema" else ""
            if not keyword or f'"{keyword}"' in json.dumps(body["response_format"]):
                return self.refusals[kind]
        if "image" in self.refusals and images(body, every=True):
            return self.refusals["image"]
        return None

    def _queue(self, outcome: Outcome) -> None:
        with self._lock:
            self.script.append(outcome)

    # -- the server-agnostic core ----------------------------------------------------------

    def respond(self, body: dict, headers: dict[str, str]) -> tuple[Outcome, bytes]:
        """The outcome for one request and the body to send (the wait is the server's)."""
        refusal = self._refusal(body)
        if _is_probe(body):
            with self._lock:
                self.probes.append(body)
                if refusal is None:  # a probe answered is paid for, counted apart from the calls
                    self.probe_tokens += sum(PROBE_TOKENS)
            if refusal is not None:
                return refusal, _json(_error(refusal.message or "refused", "invalid_request_error"))
            return Outcome(), _json(completion(PROBE_REPLY, body.get("model", "test-model"), *PROBE_TOKENS))
        with self._lock:
            self.calls += 1
            if self.record:
                self.requests.append(body)
                self.auth.append(headers.get("Authorization"))
            outcome = next((o for p, o in self.rules if p(body)), refusal)
            if outcome is None:
                outcome = self.script.popleft() if self.script else Outcome()
            policy = self.policy
        if outcome.status != 200:
            return outcome, _json(
                _error(
                    outcome.message
                    or ("try later" if outcome.status in (429,) or outcome.status >= 500 else "refused"),
                    "server_error",
                )
            )
        if outcome.raw is not None:
            return outcome, outcome.raw
        content = outcome.content
        if content is None:
            if policy is None:
                return Outcome(status=500), _json(_error("the fake has no scripted reply and no policy", "fake_error"))
            content = policy(body)
        prompt_tokens, completion_tokens = self.tokens_per_answer
        if self.count_tokens:
            from ops.simulation.brains.llm.tokens import prompt_tokens as count_prompt
            from ops.simulation.brains.llm.tokens import text_tokens

            prompt_tokens, completion_tokens = count_prompt(body.get("messages") or []), text_tokens(content)
        with self._lock:
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
        return outcome, _json(completion(content, body.get("model", "test-model"), prompt_tokens, completion_tokens))

    def stats(self) -> dict:
        with self._lock:
            return {
                "calls": self.calls,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
            }

    # -- serving ------------------------------------------------------------------------------

    @contextmanager
    def serve(self, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
        """Run on an aiohttp server on a thread of this process; yields the base URL a client
        wants (".../v1") and stops the server at the end.  What the client's probes found
        about an earlier fake is forgotten (a new fake may sit on a port reused)."""
        from ops.simulation.brains.llm.probes import forget_probes

        forget_probes()
        started = threading.Event()
        state: dict = {}

        def run() -> None:
            loop = asyncio.new_event_loop()
            state["loop"] = loop
            try:
                runner, url = loop.run_until_complete(self._start(host, port))
            except BaseException as exc:  # e.g. the port is taken: say so in the caller's thread
                state["error"] = exc
                started.set()
                return
            state["url"] = url
            started.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        thread.start()
        started.wait(30)
        if "error" in state:
            raise state["error"]
        try:
            yield state["url"]
        finally:
            state["loop"].call_soon_threadsafe(state["loop"].stop)
            thread.join(30)

    async def _start(self, host: str, port: int):
        from aiohttp import web

        app = web.Application(client_max_size=64 * 1024 * 1024)  # vision prompts carry images
        app.router.add_post(CHAT_COMPLETIONS, self._handle)
        app.router.add_get("/fake/stats", self._stats)
        # Stopping does not wait long for requests still being answered (a slow-reply fault).
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, host, port, backlog=1024)
        await site.start()
        bound = runner.addresses[0]
        return runner, f"http://{bound[0]}:{bound[1]}/v1"

    async def _handle(self, request):
        from aiohttp import web

        try:
            body = json.loads(await request.read())
        except ValueError:
            return web.Response(
                status=400,
                body=_json(_error("the request body is not JSON", "invalid_request_error")),
                content_type="application/json",
            )
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            outcome, payload = self.respond(body, dict(request.headers))
            wait = self.latency_s + outcome.delay_s
            if wait:
                await asyncio.sleep(wait)
        finally:
            with self._lock:
                self.in_flight -= 1
        headers = {"Content-Type": "application/json", **outcome.headers}
        if outcome.truncate:
            response = web.StreamResponse(status=200, headers=headers)
            response.content_length = len(payload)
            await response.prepare(request)
            await response.write(payload[: len(payload) // 2])
            request.transport.close()  # the client sees the connection end before the body does
            return response
        return web.Response(status=outcome.status, body=payload, headers=headers)

    async def _stats(self, request):
        from aiohttp import web

        return web.json_response({**self.stats(), "cpu_s": time.process_time()})


@contextmanager
def spawn(latency_ms: float = 0.0, policy: str = "scripted", host: str = "127.0.0.1") -> Iterator[str]:
    """Run the fake in a process of its own (`python -m fakes.openai_server`); yields its base
    URL and stops it at the end.  `stats(url)` reads its counts and CPU time."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fakes.openai_server",
            "--latency-ms",
            str(latency_ms),
            "--policy",
            policy,
            "--host",
            host,
        ],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("http://"):
            raise RuntimeError(f"fake OpenAI server did not start (said {line!r}, exit code {proc.poll()})")
        yield line
    finally:
        proc.stdin.close()  # the server stops when its stdin closes
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stats(base_url: str) -> dict:
    """Counts and CPU seconds of a spawned fake: {"calls", "prompt_tokens", "completion_tokens", "cpu_s"}."""
    import urllib.request

    root = base_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{root}/fake/stats", timeout=10) as response:  # noqa: S310 - 127.0.0.1 only
        return json.loads(response.read())


def completion(
    content: str,
    model: str = "test-model",
    prompt_tokens: int = PROMPT_TOKENS,
    completion_tokens: int = COMPLETION_TOKENS,
) -> dict:
    """The shape of an OpenAI chat completion."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def scripted_agent(body: dict) -> str:
    """A user who opens the first movie of page 1, watches it, then pages on and leaves; asked
    about a whole list (the per-item taste question), who would watch its first movie; asked
    to judge a log (`ops.studies.believability`), `scripted_judge`."""
    text = user_text(body)
    if JUDGE_QUESTION_MARK in text:
        return scripted_judge(body)
    if "Question: Do you feel satisfied" in text:
        return json.dumps({"satisfaction": 7, "reason": "I found a film I liked"})
    listed = list_ids(text)
    if listed is not None:
        return json.dumps({"watch": listed[:1]})
    legal = re.search(r"Legal actions: (.*)\.", text).group(1).split(", ")
    if "You are on the detail page" in text:
        return answer(action=WATCH_AND_RATE, rating=4, interest=5)
    page = int(re.search(r"You are on home page (\d+)", text).group(1))
    ids = [int(m) for m in re.findall(r"^\[(\d+)\]", text, re.M)]
    if page == 1 and "you have just arrived" in text:
        return answer(action=CLICK_MOVIE, item_id=ids[0], interest=4, caught_eye=[ids[0]])
    if NEXT_PAGE in legal and page == 1:
        return answer(action=NEXT_PAGE, interest=3)
    return answer(action=EXIT, interest=2)


# What the believability judge's question says (ops.studies.believability.JUDGE_QUESTION).
JUDGE_QUESTION_MARK = "how human does this user's behaviour read?"


def scripted_judge(body: dict) -> str:
    """A judge whose score is a function of the log it reads: 1 + the number of distinct
    reasons in it, at most 5 (so two logs' scores differ where their reasons do)."""
    log = user_text(body)
    reasons = set(re.findall(r'Reason: "([^"]*)"', log))
    return json.dumps({"score": min(5, 1 + len(reasons)), "reason": f"{len(reasons)} distinct reasons"})


def uniform_agent(body: dict) -> str:
    """A user who picks uniformly among the page's legal actions (a movie, a rating and an
    interest uniformly too), from a generator seeded by the request's own seed: the same
    request gets the same answer.  The behaviour of `UniformRandomBrain`, answered over HTTP."""
    import numpy as np

    text = user_text(body)
    rng = np.random.default_rng([int(body.get("seed") or 0), len(text)])
    reason = "a uniform random choice"
    if "Question: Do you feel satisfied" in text:
        return json.dumps({"satisfaction": int(rng.integers(1, 11)), "reason": reason})
    listed = list_ids(text)
    if listed is not None:  # the per-item taste question: each movie of the list, a coin flip
        return json.dumps({"watch": [m for m in listed if rng.random() < 0.5]})
    if "Pause and reflect" in text:  # the reflection prompt (Agent4Rec §2.1.2)
        return json.dumps(
            {
                "preferences": "I want more of what I rated well and less of the rest.",
                "satisfaction": int(rng.integers(1, 11)),
                "fatigue": int(rng.integers(1, 6)),
            }
        )
    legal = re.search(r"Legal actions: (.*)\.", text).group(1).split(", ")
    action = legal[int(rng.integers(len(legal)))]
    fields = {"action": action, "interest": int(rng.integers(1, 6)), "reason": reason}
    # Every key the format asks for, null where it does not apply, as a model answers.
    if "You are on the detail page" in text:
        fields["rating"] = int(rng.integers(1, 6)) if action == WATCH_AND_RATE else None
    else:
        ids = [int(m) for m in re.findall(r"^\[(\d+)\]", text, re.M)]
        fields["item_id"] = int(rng.choice(ids)) if action == CLICK_MOVIE else None
    return answer(**fields)


POLICIES: dict[str, Callable[[dict], str] | None] = {
    "scripted": scripted_agent,
    "uniform": uniform_agent,
    "judge": scripted_judge,
    "none": None,
}


def answer(**fields) -> str:
    """A valid page answer as JSON text: `fields` over a neutral default."""
    base = {"interest": 3, "caught_eye": [], "reason": "it fits my taste"}
    return json.dumps({**base, **fields})


LIST_QUESTION = "Here is a list of movies. For each one, decide whether you would watch it."


def list_ids(text: str) -> list[int] | None:
    """The ids of the list of a per-item question (`ops.studies.alignment.per_item.list_messages`),
    in order; None when `text` is not one."""
    if LIST_QUESTION not in text:
        return None
    return [int(m) for m in re.findall(r"^\[(\d+)\]", text.split(LIST_QUESTION, 1)[1], re.M)]


def user_text(body: dict) -> str:
    """The text of the last user message (content as a string or as parts)."""
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p["type"] == "text")


def system_text(body: dict) -> str:
    """The system message: who the agent is (its profile names its zip code)."""
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def images(body: dict, every: bool = False) -> list[str]:
    """The image URLs of the first user message (`every`: of every message)."""
    messages = body.get("messages") or []
    chosen = messages if every else [m for m in messages if m.get("role") == "user"][:1]
    urls = []
    for message in chosen:
        content = message.get("content")
        if isinstance(content, list):
            urls += [p["image_url"]["url"] for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
    return urls


PROBE_REPLY = '{"ok": true, "word": "yes", "n": 1, "ids": []}'
PROBE_TOKENS = (20, 10)  # prompt, completion tokens a probe's answer reports


def _is_probe(body: dict) -> bool:
    """A capability probe of `ops.simulation.brains.llm.probes` (its prompts, word for word)."""
    from ops.simulation.brains.llm.probes import PROBE_IMAGE_PART, PROBE_JSON_PROMPT

    messages = body.get("messages") or []
    if len(messages) != 1:
        return False
    content = messages[0].get("content")
    return content == PROBE_JSON_PROMPT or (isinstance(content, list) and PROBE_IMAGE_PART in content)


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGTERM or SIGINT, or until standard input ends when it is a pipe or a
    terminal (`spawn` closes it); print the base URL first.  Started in the background
    (`&`, `nohup`, a supervisor) its standard input is /dev/null or a file, which is not
    watched: a signal stops it."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--policy", choices=sorted(POLICIES), default="scripted")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    fake = FakeOpenAI(POLICIES[args.policy], latency_s=args.latency_ms / 1000.0, record=False)

    async def run() -> None:
        runner, url = await fake._start(args.host, args.port)
        print(url, flush=True)
        loop = asyncio.get_running_loop()
        closed = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, closed.set)
        if _watchable(sys.stdin):
            loop.add_reader(sys.stdin.fileno(), lambda: closed.set() if not sys.stdin.readline() else None)
        await closed.wait()
        await runner.cleanup()

    asyncio.run(run())


def _watchable(stream) -> bool:
    """Whether the end of `stream` is worth waiting for: a pipe, a socket or a terminal.  A
    regular file or /dev/null is at its end at once (and the event loop cannot poll one)."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # closed, or no descriptor at all
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(stream.fileno())


def _error(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "code": None}}


def _json(obj) -> bytes:
    return json.dumps(obj).encode()


if __name__ == "__main__":
    main()

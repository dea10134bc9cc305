"""A fake OpenAI-compatible chat endpoint, for the LLM brain's tests and benchmark.

POST /v1/chat/completions answers in OpenAI's chat-completion JSON shape ("choices" with one
assistant message, "usage" with prompt and completion tokens).  The content comes from a
queue of scripted replies first (`reply`; `fail` queues an HTTP error in OpenAI's error
shape), then from `policy`, a function of the request body: `scripted_agent` plays a user
who opens the first movie, watches it, pages on and leaves.  Every answer reports
`prompt_tokens` and `completion_tokens` (1,000 and 50 unless told otherwise), and waits
`latency_s` first when a benchmark asks for a slow endpoint.

The fake counts its calls and the tokens it reported, and records every request body and its
Authorization header (tests assert on both).  Many requests are in flight at once in the
benchmark, so the bookkeeping is under a lock and the delay is spent outside it.

Served through pytest-httpserver (werkzeug), in one of two ways:
- `fake.attach(httpserver)` registers it on a server someone else runs, e.g. pytest's
  `httpserver` fixture;
- `with fake.serve() as base_url:` starts its own threaded server, inside pytest or outside
  it (the benchmark), and stops it at the end.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ops.simulation.observation import CLICK_MOVIE, EXIT, NEXT_PAGE, WATCH_AND_RATE

PROMPT_TOKENS, COMPLETION_TOKENS = 1000, 50
CHAT_COMPLETIONS = "/v1/chat/completions"


class FakeOpenAI:
    """The endpoint: scripted replies first, then `policy(body)`; counts and records calls."""

    def __init__(
        self,
        policy: Callable[[dict], str] | None = None,
        *,
        latency_s: float = 0.0,
        prompt_tokens: int = PROMPT_TOKENS,
        completion_tokens: int = COMPLETION_TOKENS,
        record: bool = True,
    ) -> None:
        self.policy = policy
        self.latency_s = latency_s
        self.tokens_per_answer = (prompt_tokens, completion_tokens)
        self.record = record  # off for long benchmark runs, where the bodies would pile up
        self.requests: list[dict] = []
        self.auth: list[str | None] = []
        self.script: deque[tuple[int, str | None, dict]] = deque()
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._lock = threading.Lock()

    def reply(self, content: str) -> None:
        """Queue one answer whose message content is `content`."""
        with self._lock:
            self.script.append((200, content, {}))

    def fail(self, status: int, headers: dict | None = None) -> None:
        """Queue one HTTP error (e.g. 429 with Retry-After, 503)."""
        with self._lock:
            self.script.append((status, None, headers or {}))

    def attach(self, httpserver) -> FakeOpenAI:
        """Answer chat completions on a pytest-httpserver `HTTPServer` (e.g. the fixture)."""
        httpserver.expect_request(CHAT_COMPLETIONS, method="POST").respond_with_handler(self.werkzeug_handler)
        return self

    @contextmanager
    def serve(self, host: str = "127.0.0.1") -> Iterator[str]:
        """Run on a threaded server of its own; yields the base URL a client wants (".../v1")."""
        # werkzeug's access log is one INFO line per request: silence it, keep its errors.
        access_log = logging.getLogger("werkzeug")
        level = access_log.level
        if level < logging.WARNING:
            access_log.setLevel(logging.WARNING)
        server = _unlogged_server(host)
        server.start()
        try:
            self.attach(server)
            yield server.url_for("/v1")
        finally:
            server.clear()
            server.stop()
            access_log.setLevel(level)

    # -- the server-agnostic core ----------------------------------------------------------

    def respond(self, body: dict, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) for one request."""
        with self._lock:
            self.calls += 1
            if self.record:
                self.requests.append(body)
                self.auth.append(headers.get("Authorization"))
            status, content, extra = self.script.popleft() if self.script else (200, None, {})
            policy = self.policy
        if self.latency_s:
            time.sleep(self.latency_s)
        if status != 200:
            return status, {**extra, "Content-Type": "application/json"}, _json(_error("try later", "server_error"))
        if content is None:
            if policy is None:
                return 500, {"Content-Type": "application/json"}, _json(_error("the fake has no scripted reply and no policy", "fake_error"))
            content = policy(body)
        prompt_tokens, completion_tokens = self.tokens_per_answer
        with self._lock:
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
        payload = completion(content, body.get("model", "test-model"), prompt_tokens, completion_tokens)
        return 200, {"Content-Type": "application/json"}, _json(payload)

    # -- adapters -----------------------------------------------------------------------

    def werkzeug_handler(self, request):
        from werkzeug import Response

        status, headers, body = self.respond(request.get_json(), dict(request.headers))
        return Response(body, status=status, headers=headers)


def completion(content: str, model: str = "test-model", prompt_tokens: int = PROMPT_TOKENS,
               completion_tokens: int = COMPLETION_TOKENS) -> dict:
    """The shape of an OpenAI chat completion."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    }


def scripted_agent(body: dict) -> str:
    """A user who opens the first movie of page 1, watches it, then pages on and leaves."""
    text = user_text(body)
    if "Question: Do you feel satisfied" in text:
        return json.dumps({"satisfaction": 7, "reason": "I found a film I liked"})
    legal = re.search(r"Legal actions: (.*)\.", text).group(1).split(", ")
    if "You are on the detail page" in text:
        return answer(action=WATCH_AND_RATE, rating=4, interest=5)
    page = int(re.search(r"You are on home page (\d+)", text).group(1))
    ids = [int(m) for m in re.findall(r"^\[(\d+)\]", text, re.M)]
    if page == 1 and "you have just arrived" in text:
        return answer(action=CLICK_MOVIE, movie_id=ids[0], interest=4, caught_eye=[ids[0]])
    if NEXT_PAGE in legal and page == 1:
        return answer(action=NEXT_PAGE, interest=3)
    return answer(action=EXIT, interest=2)


def answer(**fields) -> str:
    """A valid page answer as JSON text: `fields` over a neutral default."""
    base = {"interest": 3, "caught_eye": [], "reason": "it fits my taste"}
    return json.dumps({**base, **fields})


def user_text(body: dict) -> str:
    """The text of the last user message (content as a string or as parts)."""
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p["type"] == "text")


def images(body: dict) -> list[str]:
    """The image URLs of the first user message."""
    content = [m for m in body["messages"] if m["role"] == "user"][0]["content"]
    if isinstance(content, str):
        return []
    return [p["image_url"]["url"] for p in content if p["type"] == "image_url"]


def _error(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "code": None}}


def _json(obj) -> bytes:
    return json.dumps(obj).encode()


def _unlogged_server(host: str):
    """A threaded pytest-httpserver that keeps no request log: the fake records what tests
    need, and a benchmark's thousands of requests would otherwise pile up in memory."""
    from pytest_httpserver import HTTPServer

    class UnloggedHTTPServer(HTTPServer):
        def application(self, request):
            request.get_data()
            return self.dispatch(request)

    return UnloggedHTTPServer(host=host, port=0, threaded=True)

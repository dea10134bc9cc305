"""The LLM brain: an agent decides through any OpenAI-compatible chat endpoint (docs/definitions.md
"Brains"; A/B Agent §2.4; Agent4Rec §2.1.3, §3.5).

Per page the brain builds one prompt (`ops.simulation.brains.prompts`) from the agent's profile,
the memories retrieved from its long-term memory by text similarity to the movies on the
page (and by poster similarity when the catalogue has poster vectors), the session so
far, its fatigue, and the page itself.  Posters go to vision models as images (base64 data
URLs of the poster files, downscaled); text-only models get a caption that says what it
is: a palette description measured from the image's pixels (`ops.agents.embeddings.poster_look`),
not a description of what the poster shows.

Every request asks for its answer as a strict JSON schema built from the answer and the page
(`answers.page_schema`: the legal actions, the ids shown, ratings in range, a bounded reason),
sent as `response_format: json_schema` where the endpoint takes it, else `json_object`, else
nothing (`structured_output`; `auto` probes the endpoint once, as `vision: auto` does with a
1x1 image; `probes`).  Every answer is JSON validated against a schema
(`PageAnswer`) and against the page (the
action must be legal, a clicked movie must be on the page, a rating in range).  An answer
that fails is re-asked ONCE with the error; if it fails again the brain records a safe
action — `exit` on a home page, `back` on a detail page — with `Decision.fallback_reason`
("invalid_answer: …", an event column).  Nothing is dropped silently.

Transport (`transport`): `openai.AsyncOpenAI` per event loop behind a semaphore; tenacity
retries with back-off and jitter on 429, 408/409, 5xx, timeouts, connection errors and 200s
whose body is not a chat completion, the server's Retry-After honoured (both forms, its own
cap), a deadline per decision.  A request still failing after every attempt, or a decision
past its deadline, becomes a fallback too ("transport: …" / "deadline: …"): the runner ends
that agent's session and fails the arm only past `max_failed_agents_share`.  A refusal
(bad key, bad request) stops the run.  Errors name the endpoint without credentials.

A response cache (SQLite, one row per request) keyed by the endpoint and the full request —
model, messages, sampling parameters, seed, response format — makes a re-run free and
identical; only answers that passed the checks are stored.  The sampling seed of each
request is drawn from the agent's generator, so a session is a pure function of (seed,
agent, arm) as the simulation loop requires, and repeated pages get fresh samples.  Token
counts come from the response's `usage`; cost from configurable prices per million tokens.

A share of the agent sessions (`trace_share`) is traced with MLflow Tracing (`tracing`):
one trace per session, a span per decision and per chat completion (tokens, cost, cache hit or
miss, retries), in the experiment the simulation step names and linked to its run.

The API key is read from the environment variable NAMED in the configuration when the
client is first needed; it is never stored on the configuration, logged, cached or put in
a decision.

Scale: `adecide` / `aexit_interview` are coroutines, so `ops.simulation.runner.simulate(...,
concurrency=n)` keeps n agents in flight on one event loop (`decide` / `exit_interview` run
them from synchronous code on a private loop).  `bench/llm_brain.py` measures it.
"""

from ops.simulation.brains.llm.answers import AnswerError, InterviewAnswer, PageAnswer, check_answer, check_interview
from ops.simulation.brains.llm.brain import LLMBrain
from ops.simulation.brains.llm.cache import ResponseCache, request_key
from ops.simulation.brains.llm.client import LLMClient, Reply, Usage
from ops.simulation.brains.llm.config import LLMBrainConfig
from ops.simulation.brains.llm.prompts import poster_caption, poster_data_url
from ops.simulation.brains.llm.transport import LLMEndpointError, LLMTransportError

__all__ = [
    "AnswerError",
    "InterviewAnswer",
    "LLMBrain",
    "LLMBrainConfig",
    "LLMClient",
    "LLMEndpointError",
    "LLMTransportError",
    "PageAnswer",
    "Reply",
    "ResponseCache",
    "Usage",
    "check_answer",
    "check_interview",
    "poster_caption",
    "poster_data_url",
    "request_key",
]

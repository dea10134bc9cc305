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

Scale: `decide` is synchronous (the runner calls it once per step).  Agents are
independent, so `ops.simulation.runner.simulate_arm(..., concurrency=n)` runs n agents at
once on threads sharing this brain (the client and the cache are thread-safe).
"""

from ops.simulation.brains.llm.answers import AnswerError, InterviewAnswer, PageAnswer, check_answer, check_interview
from ops.simulation.brains.llm.brain import LLMBrain
from ops.simulation.brains.llm.client import LLMClient, Reply, ResponseCache, Usage, request_key
from ops.simulation.brains.llm.config import LLMBrainConfig
from ops.simulation.brains.llm.prompts import poster_caption, poster_data_url

__all__ = [
    "AnswerError", "InterviewAnswer", "LLMBrain", "LLMBrainConfig", "LLMClient", "PageAnswer", "Reply", "ResponseCache",
    "Usage", "check_answer", "check_interview", "poster_caption", "poster_data_url", "request_key",
]

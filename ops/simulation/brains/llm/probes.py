"""What the endpoint takes, settled by probes: the structured output mode (`response_format`:
a strict json_schema per request, a schema without string lengths, json_object, or none) and
vision, where the configuration leaves them to `auto`.  One tiny probe request each before
the first call, remembered per endpoint and model for the process and beside the answers in
the response cache (a re-run from the cache needs no endpoint), charged to the run's bill and
recorded in `usage.facts()`.  A probe refused with 400/415/422 or "not supported" means the
feature is not there; a bad key or a wrong model (401/403/404) is raised as it is.
"""

from __future__ import annotations

import json
import logging
import threading

from ops.simulation.brains.llm.cache import request_key
from ops.simulation.brains.llm.transport import LLMEndpointError

log = logging.getLogger(__name__)

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


async def settle(client, feature: str):
    """What `feature` ("structured_output" or "vision") is at `client`'s endpoint and model
    (`client.LLMClient`): remembered, else from the response cache, else probed once (a
    probe's transport failure is not remembered: the next call probes again)."""
    key = (client.endpoint, client.config.model, feature)
    with _PROBED_LOCK:
        if key in _PROBED:
            return _PROBED[key]
    # The response cache keeps what was found beside the answers it shaped, so a re-run
    # from the cache needs no endpoint (and gets the same requests, so the same keys).
    cache = client.cache
    cache_key = request_key({"capability": feature, "model": client.config.model}, client.endpoint)
    held = cache.get(cache_key) if cache is not None else None
    if held is not None:
        value, how = json.loads(held["content"]), "from the response cache"
    else:
        value, how = await _PROBES[feature](client), "probed once"
        if cache is not None and client.config.cache == "readwrite":
            cache.put(cache_key, client.endpoint, client.config.model, _capability_row(json.dumps(value)))
    with _PROBED_LOCK:
        _PROBED.setdefault(key, value)
    log.info("LLM endpoint %s (model %s): %s %s (%s)", client.endpoint, client.config.model, feature, value, how)
    return value


def known(endpoint: str, model: str, feature: str):
    """What a probe of this process found (None: not probed)."""
    with _PROBED_LOCK:
        return _PROBED.get((endpoint, model, feature))


def forget_probes() -> None:
    """Forget what the probes found (tests; an endpoint restarted with other features)."""
    with _PROBED_LOCK:
        _PROBED.clear()


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


def without_keywords(schema, keywords: tuple[str, ...]):
    """`schema` with `keywords` removed at every level."""
    if isinstance(schema, dict):
        return {k: without_keywords(v, keywords) for k, v in schema.items() if k not in keywords}
    if isinstance(schema, list):
        return [without_keywords(v, keywords) for v in schema]
    return schema


async def _probe(client, messages: list[dict], answer_format: dict | None = None) -> bool:
    """One tiny request: True when the endpoint answers it, False when it refuses it as a
    request it cannot serve (400, 415, 422, or a "not supported" 500/501).  A bad key or a
    wrong path or model (401, 403, 404) is no answer about a feature: raised as it is."""
    c = client.config
    request: dict = {"model": c.model, "messages": messages, c.max_tokens_param: PROBE_MAX_TOKENS}
    if c.temperature is not None:
        request["temperature"] = c.temperature
    if answer_format is not None:
        request["response_format"] = answer_format
    with client.usage.lock:
        client.usage.probes += 1
    try:
        # Charged to the run's bill like any call: a tiny prompt (an image's tokens included).
        _, pt, ct, _ = await client.send(request, client.cost(PROBE_PROMPT_TOKENS, PROBE_MAX_TOKENS))
    except LLMEndpointError as exc:
        if exc.status in (401, 403, 404):
            raise
        log.info("LLM endpoint %s refused a probe: %s", client.endpoint, exc)
        return False
    with client.usage.lock:
        client.usage.probe_cost_usd += client.cost(pt, ct)
    return True


async def _probe_structured_output(client) -> str:
    """The first the endpoint takes of: json_schema; a schema without string lengths
    (strict modes that refuse minLength / maxLength — a reason may then run long, the
    rest is still enforced); json_object; else text."""
    messages = [{"role": "user", "content": PROBE_JSON_PROMPT}]
    for mode in ("json_schema", UNBOUNDED_SCHEMA, "json_object"):
        if await _probe(client, messages, response_format(mode, PROBE_SCHEMA)):
            return mode
    return "text"


async def _probe_vision(client) -> bool:
    content = [{"type": "text", "text": "What colour is this image? One word."}, PROBE_IMAGE_PART]
    return await _probe(client, [{"role": "user", "content": content}])


_PROBES = {"structured_output": _probe_structured_output, "vision": _probe_vision}


def _capability_row(content: str) -> dict:
    """A probe's finding as a row of the response cache (a reply's shape, no tokens)."""
    return {"content": content, "prompt_tokens": 0, "completion_tokens": 0, "usage_known": True}

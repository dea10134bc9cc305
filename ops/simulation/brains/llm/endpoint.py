"""Which endpoint the LLM brain calls, and whether it needs a key.

The endpoint, highest first: the configured base URL (`SIMAB_LLM_BASE_URL`, the `llm`
resource's `base_url`), else `$OPENAI_BASE_URL` (the OpenAI SDK's own variable), else
OpenAI's.  `resolve_endpoint` is the one place that says so; the client, the logged
parameters and the checks before a run all ask it.  An endpoint on the loopback needs no
key unless the configuration says it does (`key_required`).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import Literal, NamedTuple
from urllib.parse import urlsplit

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


class Endpoint(NamedTuple):
    """The endpoint's URL (it may carry a query token: show it through `ops.web.safe_endpoint`)
    and where it came from: "base_url" (the configuration), "OPENAI_BASE_URL" or "default"."""

    url: str
    origin: Literal["base_url", "OPENAI_BASE_URL", "default"]


def resolve_endpoint(base_url: str | None, environ: Mapping[str, str] | None = None) -> Endpoint:
    """The endpoint the client calls (module docstring); `environ` defaults to the process's."""
    env = os.environ if environ is None else environ
    if base_url:
        return Endpoint(base_url, "base_url")
    if env.get("OPENAI_BASE_URL"):
        return Endpoint(env["OPENAI_BASE_URL"], "OPENAI_BASE_URL")
    return Endpoint(OPENAI_DEFAULT_BASE_URL, "default")


def key_required(setting: bool | None, base_url: str | None) -> bool:
    """Whether an API key is needed: as `setting` says, else (None) unless the endpoint is on
    the loopback — a local llama.cpp, vLLM or Ollama takes none, a remote endpoint does."""
    if setting is not None:
        return bool(setting)
    return not is_loopback(resolve_endpoint(base_url).url)


def is_loopback(url: str) -> bool:
    """Whether `url`'s host is this machine: localhost, 127.0.0.0/8, ::1 or 0.0.0.0."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified

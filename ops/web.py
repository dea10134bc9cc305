"""What every client of an outside web service shares (TMDB, the LLM endpoint): secrets kept
out of text, endpoints named without their credentials, and the server's Retry-After.

- `redact(text)`: every registered secret, every `api_key=` / `key=` / `token=` / … query
  value, every bearer token and the user-info part of URLs (`https://user:pass@host`)
  replaced by `***`.  Use it on anything that may reach a log, an exception message, an
  MLflow parameter or Dagster metadata.
- `safe_endpoint(url)`: scheme, host, port and path of a URL, nothing else (no user info,
  no query, no fragment): how an endpoint is named in logs, cache keys and parameters.
- `register_secrets(secrets, loggers)`: remember secret values for `redact` and filter the
  named loggers' records through it (HTTP libraries log request lines at DEBUG).
- `parse_retry_after(value)`: Retry-After in both forms of RFC 9110 §10.2.3.
"""

from __future__ import annotations

import email.utils
import logging
import re
import threading
import time
from collections.abc import Iterable
from urllib.parse import urlsplit


def redact(text: object) -> str:
    """`text` with every registered secret, query credential, bearer token and URL user
    info replaced by ***."""
    s = str(text)
    s = _USERINFO.sub(r"\1***@", s)
    s = _QUERY_SECRET.sub(r"\1***", s)
    s = _BEARER.sub(r"\1***", s)
    with _SECRETS_LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        s = s.replace(secret, "***")
    return s


def safe_endpoint(url: str) -> str:
    """scheme://host[:port]/path of `url`: no user info, query or fragment (where gateways
    put tokens), so the result may be logged, recorded and used in cache keys."""
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.hostname:
        raise ValueError(f"not an absolute URL: {redact(url)!r}")
    host = parts.hostname
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"bad port in URL {redact(url)!r}: {exc}") from None
    netloc = host + (f":{port}" if port is not None else "")
    return f"{parts.scheme.lower()}://{netloc.lower()}{parts.path.rstrip('/')}"


def endpoint_host(url: str) -> str:
    """host[:port] of `url`, without credentials."""
    return urlsplit(safe_endpoint(url)).netloc


def secret_parameter(name: str) -> bool:
    """Whether a query parameter of this name carries a credential (api_key, key, token, …)."""
    return _QUERY_SECRET.fullmatch(f"{name}=x") is not None


def register_secrets(secrets: Iterable[str], loggers: Iterable[str] = ()) -> None:
    """Remember secret values for `redact`, and filter the named loggers' records through it."""
    with _SECRETS_LOCK:
        _SECRETS.update(s for s in secrets if s)
    for name in loggers:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After value: delay-seconds or an HTTP date (RFC 9110
    §10.2.3); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class RedactingFilter(logging.Filter):
    """Rewrites a log record's message (and traceback) with `redact` before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to logging's own reporting
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


# -- helpers ---------------------------------------------------------------------------------

_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()
# Query parameters that carry credentials in gateways' URLs (api_key=, key=, token=, …).
_QUERY_SECRET = re.compile(
    r"\b((?:api[_-]?key|access[_-]?token|token|key|secret|password|sig|signature|auth|code)=)[^&\s'\"]+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=\-]+")
# scheme://user[:password]@ — the user info of a URL.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)[^/@\s]+@")
_FILTER = RedactingFilter()

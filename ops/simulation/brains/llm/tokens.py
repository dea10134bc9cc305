"""How many tokens a chat request and its answer hold: one count, used by the cost estimate
(`ops.simulation.cost`) and by the fake endpoint (`fakes.openai_server`, `count_tokens=True`)
on the request it really received, so that the two can be compared.

Text: one token per four characters, rounded up — OpenAI's rule of thumb for English text
("one token ≈ 4 characters"); OpenAI's tokenizers need vocabulary files that are fetched from
the network on first use, which this project cannot do.  Against a real tokenizer the rule
is off by a roughly constant factor (prose ±15 %; JSON and numbers count more tokens per
character), the same for the estimate and for the run, so it cancels when the two are
compared and moves a dollar figure by that factor.  Chat structure: 3 tokens per message
and 3 to prime the reply (OpenAI cookbook, "How to count tokens with tiktoken").  Images:
OpenAI's vision pricing — "low" detail a flat 85 tokens; otherwise the image is scaled to
fit 2048×2048, then its shorter side to 768, and costs 85 + 170 per 512-pixel tile.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable, Mapping

from PIL import Image

CHARS_PER_TOKEN = 4.0
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3
IMAGE_BASE_TOKENS = 85
IMAGE_TILE_TOKENS = 170
IMAGE_TILE_SIDE = 512


def prompt_tokens(messages: Iterable[Mapping]) -> int:
    """Tokens of the chat messages of a request (text, images and the chat structure)."""
    total = TOKENS_PER_REPLY
    for message in messages:
        total += TOKENS_PER_MESSAGE + text_tokens(str(message.get("role", "")))
        content = message.get("content")
        if isinstance(content, str):
            total += text_tokens(content)
            continue
        for part in content or ():
            if part.get("type") == "text":
                total += text_tokens(part.get("text", ""))
            elif part.get("type") == "image_url":
                image = part.get("image_url") or {}
                total += image_tokens(image.get("url", ""), image.get("detail", "auto"))
    return total


def text_tokens(text: str) -> int:
    """Tokens of a text: its characters over four, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def image_tokens(url: str, detail: str = "auto", size: tuple[int, int] | None = None) -> int:
    """Tokens of one image part.  The size is read from a data URL's image (or given);
    an image whose size cannot be known counts as one tile."""
    if detail == "low":
        return IMAGE_BASE_TOKENS
    if size is None:
        size = _data_url_size(url)
    if size is None:
        return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS
    width, height = size
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    width, height = width * scale, height * scale
    tiles = math.ceil(width / IMAGE_TILE_SIDE) * math.ceil(height / IMAGE_TILE_SIDE)
    return IMAGE_BASE_TOKENS + IMAGE_TILE_TOKENS * tiles


def _data_url_size(url: str) -> tuple[int, int] | None:
    if not url.startswith("data:") or "," not in url:
        return None

    try:
        with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as img:
            return img.size
    except Exception:  # pillow raises many types for unreadable data
        return None

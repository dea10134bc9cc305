"""Poster files for MM-ML-1M: decoded and checked with pillow, stored by content hash.

Both metadata sources (the TMDB crawl and a local poster folder) end here, so a poster
on disk always decodes, is RGB, and is named by the SHA-256 of its bytes: the same image
fetched twice is stored once, and a half-written file can never carry a valid name
(writes go to a temporary file first and are renamed into place).
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from pydantic import BaseModel, Field

from ops.storage.atomic import atomic_write_bytes


class PosterError(ValueError):
    """The bytes are not a usable image; the message says why."""


class PosterStoreConfig(BaseModel):
    # JPEG quality for images that must be re-encoded (non-RGB, non-JPEG, or resized).
    jpeg_quality: int = Field(90, ge=1, le=100)
    # Images smaller than this on either side are rejected as placeholders or icons.
    min_side_px: int = Field(16, ge=1)
    # Characters of the hex digest used as a sub-folder, to keep folders small.
    shard_chars: int = Field(2, ge=0, le=8)


def store_poster(data: bytes, poster_dir: Path, config: PosterStoreConfig | None = None) -> Path:
    """Check `data` decodes as an image and store it (RGB) under its content hash.

    JPEG files already in RGB are kept byte for byte; anything else (PNG, palette, CMYK,
    greyscale, alpha) is re-encoded to an RGB JPEG.  Returns the absolute path.
    Raises PosterError when the bytes are not a decodable image.
    """
    config = config or PosterStoreConfig()
    image = decode_image(data, config)
    if image.format != "JPEG" or image.mode != "RGB":
        data = encode_jpeg(image.convert("RGB"), config)
    return write_content_addressed(data, Path(poster_dir), ".jpg", config)


def store_resized_poster(
    image, width: int, poster_dir: Path, config: PosterStoreConfig | None = None, upscale: bool = False
) -> Path:
    """Resize a decoded pillow image to `width` (keeping the aspect ratio) and store it.

    Without `upscale`, an image narrower than `width` keeps its own size: a 200-pixel poster
    does not become a blurred 500-pixel one.
    """
    from PIL import Image

    config = config or PosterStoreConfig()
    rgb = image.convert("RGB")
    if rgb.width != width and (upscale or rgb.width > width):
        height = max(1, round(rgb.height * width / rgb.width))
        rgb = rgb.resize((width, height), Image.Resampling.LANCZOS)
    return write_content_addressed(encode_jpeg(rgb, config), Path(poster_dir), ".jpg", config)


def decode_image(data: bytes, config: PosterStoreConfig | None = None):
    """A fully loaded pillow image, or PosterError naming what is wrong."""
    from PIL import Image, UnidentifiedImageError

    config = config or PosterStoreConfig()
    if not data:
        raise PosterError("empty body, not an image")
    try:
        with Image.open(io.BytesIO(data)) as probe:
            probe.verify()  # catches truncated and corrupt files that open() accepts
        image = Image.open(io.BytesIO(data))
        image.load()
    except UnidentifiedImageError:
        raise PosterError(f"not an image ({len(data)} bytes starting {data[:16]!r})") from None
    except Exception as exc:  # pillow raises OSError, SyntaxError, ValueError for bad files
        raise PosterError(f"image does not decode: {type(exc).__name__}: {exc}") from None
    if min(image.size) < config.min_side_px:
        raise PosterError(f"image is {image.size[0]}x{image.size[1]} px, smaller than {config.min_side_px} px")
    return image


def verify_poster_file(path: str | Path) -> str | None:
    """None when the file decodes as an image, else the reason (for data contracts)."""
    p = Path(path)
    if not p.is_file():
        return f"missing file {p}"
    try:
        decode_image(p.read_bytes())
    except PosterError as exc:
        return f"{p}: {exc}"
    return None


def encode_jpeg(image, config: PosterStoreConfig) -> bytes:
    buf = io.BytesIO()
    # optimize=False and no timestamped metadata: the same pixels give the same bytes.
    image.save(buf, format="JPEG", quality=config.jpeg_quality)
    return buf.getvalue()


def write_content_addressed(data: bytes, root: Path, suffix: str, config: PosterStoreConfig) -> Path:
    digest = hashlib.sha256(data).hexdigest()
    folder = root / digest[: config.shard_chars] if config.shard_chars else root
    target = (folder / f"{digest}{suffix}").resolve()
    if target.is_file() and target.stat().st_size == len(data):
        return target
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, data)
    return target

"""Poster files: decoded with pillow, RGB, named by content hash, written atomically."""

from __future__ import annotations

import hashlib
import io

import pytest
from PIL import Image

from ops.data.poster_store import PosterError, store_poster, verify_poster_file


def _bytes(image: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt)
    return buf.getvalue()


def test_rgb_jpeg_is_kept_byte_for_byte_and_stored_once(tmp_path):
    data = _bytes(Image.new("RGB", (40, 60), (1, 2, 3)), "JPEG")
    first = store_poster(data, tmp_path)
    assert first.read_bytes() == data
    assert first.name == hashlib.sha256(data).hexdigest() + ".jpg"
    assert store_poster(data, tmp_path) == first
    assert len([p for p in tmp_path.rglob("*") if p.is_file()]) == 1  # no temp files left behind


@pytest.mark.parametrize("mode,fmt", [("RGBA", "PNG"), ("P", "PNG"), ("L", "JPEG"), ("CMYK", "JPEG")])
def test_other_images_are_reencoded_to_rgb_jpeg(tmp_path, mode, fmt):
    path = store_poster(_bytes(Image.new(mode, (40, 60)), fmt), tmp_path)
    with Image.open(path) as im:
        assert (im.format, im.mode, im.size) == ("JPEG", "RGB", (40, 60))
    assert path.stem == hashlib.sha256(path.read_bytes()).hexdigest()


def test_broken_images_are_refused_with_a_reason(tmp_path):
    good = _bytes(Image.new("RGB", (200, 300), (9, 9, 9)), "JPEG")
    with pytest.raises(PosterError, match="not an image"):
        store_poster(b"<html>Bad Gateway</html>", tmp_path)
    with pytest.raises(PosterError, match="does not decode"):
        store_poster(good[: len(good) // 2], tmp_path)
    with pytest.raises(PosterError, match="smaller than 16 px"):
        store_poster(_bytes(Image.new("RGB", (1, 1)), "PNG"), tmp_path)
    with pytest.raises(PosterError, match="empty"):
        store_poster(b"", tmp_path)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_verify_poster_file_reports_missing_and_undecodable(tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"nope")
    assert verify_poster_file(store_poster(_bytes(Image.new("RGB", (20, 30)), "PNG"), tmp_path)) is None
    assert "not an image" in verify_poster_file(bad)
    assert "missing file" in verify_poster_file(tmp_path / "absent.jpg")

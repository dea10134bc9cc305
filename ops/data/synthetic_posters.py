"""Posters for the synthetic catalogue, drawn with pillow (docs/definitions.md#embedded-defaults).

A/B Agent §2.2 shows each movie's poster on the home page (small) and the detail page
(large), and §4 finds that the agents' choices depend on what the poster looks like.  The
synthetic catalogue therefore needs posters whose look carries information: the palette
follows the movie's main genre (horror dark, comedy bright, science fiction cool blue,
romance pink and red, westerns sepia ...), each genre belongs to one palette family
(warm / cool / dark / bright) that synthetic users have a hidden preference for, and the
layout (simple shapes and the title) varies per movie.

`write_posters` draws one poster per movie at the small and the large size and writes
them under `<poster_dir>/small/<item_id>.png` and `<poster_dir>/large/<item_id>.png`.
Drawing depends only on (seed, movie id, title, year, genres), so a re-run writes the
same bytes; files already holding those bytes are left untouched.
"""

from __future__ import annotations

import functools
import io
import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from ops.schema import GENRES

PALETTE_FAMILIES = ("warm", "cool", "dark", "bright")
RGB = tuple[int, int, int]


class GenrePalette(BaseModel):
    """How posters of one main genre look: background gradient, shape colours, text."""

    family: Literal["warm", "cool", "dark", "bright"]
    top: RGB
    bottom: RGB
    accents: tuple[RGB, ...]
    text: RGB


# Genre -> palette.  Families follow poster conventions: horror / thriller / noir / crime /
# mystery dark; comedy / children's / animation / musical / fantasy bright; action /
# adventure / romance / western warm (western in sepia); sci-fi / drama / documentary /
# war cool.
DEFAULT_PALETTES: dict[str, GenrePalette] = {
    "Action": GenrePalette(
        family="warm",
        top=(205, 60, 20),
        bottom=(250, 165, 40),
        accents=((30, 20, 20), (255, 230, 90), (120, 20, 10)),
        text=(255, 245, 220),
    ),
    "Adventure": GenrePalette(
        family="warm",
        top=(235, 175, 70),
        bottom=(130, 150, 60),
        accents=((90, 60, 20), (250, 220, 120), (40, 100, 60)),
        text=(255, 250, 230),
    ),
    "Animation": GenrePalette(
        family="bright",
        top=(255, 185, 225),
        bottom=(255, 240, 110),
        accents=((80, 200, 255), (255, 120, 80), (140, 230, 120)),
        text=(60, 30, 90),
    ),
    "Children's": GenrePalette(
        family="bright",
        top=(130, 215, 255),
        bottom=(255, 240, 130),
        accents=((255, 140, 60), (255, 90, 140), (120, 220, 100)),
        text=(40, 40, 120),
    ),
    "Comedy": GenrePalette(
        family="bright",
        top=(255, 225, 70),
        bottom=(255, 160, 60),
        accents=((235, 60, 60), (60, 160, 240), (255, 255, 255)),
        text=(40, 20, 20),
    ),
    "Crime": GenrePalette(
        family="dark",
        top=(18, 18, 24),
        bottom=(70, 25, 25),
        accents=((200, 160, 60), (140, 20, 20), (90, 90, 100)),
        text=(230, 200, 120),
    ),
    "Documentary": GenrePalette(
        family="cool",
        top=(205, 212, 218),
        bottom=(95, 125, 135),
        accents=((40, 60, 70), (240, 240, 235), (150, 170, 160)),
        text=(20, 30, 40),
    ),
    "Drama": GenrePalette(
        family="cool",
        top=(65, 85, 115),
        bottom=(155, 175, 195),
        accents=((230, 225, 210), (35, 45, 70), (120, 140, 170)),
        text=(245, 245, 240),
    ),
    "Fantasy": GenrePalette(
        family="bright",
        top=(185, 145, 255),
        bottom=(255, 215, 240),
        accents=((255, 240, 150), (120, 80, 200), (150, 255, 220)),
        text=(60, 20, 90),
    ),
    "Film-Noir": GenrePalette(
        family="dark",
        top=(10, 10, 10),
        bottom=(75, 75, 75),
        accents=((220, 220, 220), (40, 40, 40), (140, 140, 140)),
        text=(235, 235, 235),
    ),
    "Horror": GenrePalette(
        family="dark",
        top=(15, 4, 8),
        bottom=(65, 0, 12),
        accents=((160, 10, 20), (205, 195, 175), (40, 60, 30)),
        text=(225, 30, 30),
    ),
    "Musical": GenrePalette(
        family="bright",
        top=(255, 125, 205),
        bottom=(255, 215, 95),
        accents=((255, 255, 255), (120, 40, 160), (255, 240, 60)),
        text=(90, 10, 70),
    ),
    "Mystery": GenrePalette(
        family="dark",
        top=(18, 12, 38),
        bottom=(55, 45, 85),
        accents=((170, 140, 230), (230, 220, 180), (30, 20, 60)),
        text=(220, 210, 250),
    ),
    "Romance": GenrePalette(
        family="warm",
        top=(245, 130, 160),
        bottom=(185, 30, 65),
        accents=((255, 235, 240), (220, 50, 90), (255, 190, 200)),
        text=(255, 245, 250),
    ),
    "Sci-Fi": GenrePalette(
        family="cool",
        top=(8, 28, 85),
        bottom=(40, 145, 205),
        accents=((120, 240, 255), (200, 220, 255), (20, 60, 140)),
        text=(210, 245, 255),
    ),
    "Thriller": GenrePalette(
        family="dark",
        top=(10, 16, 26),
        bottom=(45, 50, 66),
        accents=((230, 200, 40), (150, 160, 175), (120, 20, 20)),
        text=(240, 220, 80),
    ),
    "War": GenrePalette(
        family="cool",
        top=(60, 72, 55),
        bottom=(115, 125, 95),
        accents=((40, 40, 30), (190, 170, 120), (150, 40, 30)),
        text=(235, 230, 210),
    ),
    "Western": GenrePalette(
        family="warm",
        top=(210, 170, 110),
        bottom=(125, 82, 42),
        accents=((70, 40, 20), (240, 215, 160), (160, 90, 40)),
        text=(60, 30, 10),
    ),
}


class PosterConfig(BaseModel):
    """Poster sizes and look.  Sizes follow TMDB's poster widths w92 / w185 (2:3)."""

    small_size: tuple[int, int] = (92, 138)  # home page (A/B Agent §2.3.1)
    large_size: tuple[int, int] = (185, 278)  # detail page
    image_format: Literal["PNG", "JPEG"] = "JPEG"  # as TMDB serves posters; encodes ~20x faster than PNG here
    jpeg_quality: int = Field(90, ge=1, le=95)
    png_compress_level: int = Field(1, ge=0, le=9)  # zlib level: 1 writes 3x faster than 6 for ~20 % larger files
    palettes: dict[str, GenrePalette] = Field(default_factory=lambda: dict(DEFAULT_PALETTES))
    colour_jitter: int = Field(14, ge=0)  # per-channel jitter of the background, so posters differ
    shapes_per_poster: tuple[int, int] = (3, 7)
    title_band_height: float = Field(0.26, gt=0, lt=1)  # share of the height under the title
    title_band_mix: float = Field(0.5, ge=0, le=1)  # how far the band moves from the gradient towards black / white
    secondary_accent_share: float = Field(0.3, ge=0, le=1)  # shapes coloured by the 2nd genre

    def model_post_init(self, __context: object) -> None:
        missing = [g for g in GENRES if g not in self.palettes]
        if missing:
            raise ValueError(f"PosterConfig.palettes lacks genre(s) {missing}")


def palette_family(genre: str, config: PosterConfig | None = None) -> str:
    """The palette family ("warm", "cool", "dark", "bright") of posters whose main genre is `genre`."""
    palettes = (config or PosterConfig()).palettes
    if genre not in palettes:
        raise ValueError(f"no poster palette for genre {genre!r}; known: {sorted(palettes)}")
    return palettes[genre].family


def write_posters(
    item_ids: Sequence[int],
    titles: Sequence[str],
    years: Sequence[int],
    main_genres: Sequence[Sequence[str]],
    poster_dir: Path,
    config: PosterConfig,
    seed: int,
) -> tuple[list[str], list[str]]:
    """Draw and write each movie's small and large poster; return their absolute paths.

    `main_genres[i]` lists movie i's genres with the main one first: the main genre picks
    the palette, the second (if any) colours some of the shapes.
    """
    poster_dir = Path(poster_dir).resolve()
    suffix = ".png" if config.image_format == "PNG" else ".jpg"
    small_dir, large_dir = poster_dir / "small", poster_dir / "large"
    small_dir.mkdir(parents=True, exist_ok=True)
    large_dir.mkdir(parents=True, exist_ok=True)
    small_paths, large_paths = [], []
    for item_id, title, year, genres in zip(item_ids, titles, years, main_genres, strict=True):
        spec = poster_spec(int(item_id), title, int(year), list(genres), config, seed)
        for size, folder, paths in (
            (config.small_size, small_dir, small_paths),
            (config.large_size, large_dir, large_paths),
        ):
            path = folder / f"{int(item_id)}{suffix}"
            _write_if_changed(path, _encode(render_poster(spec, size), config))
            paths.append(str(path))
    return small_paths, large_paths


SHAPE_KINDS = ("ellipse", "rectangle", "triangle", "figure")
SHAPE_CUMULATIVE = np.cumsum([0.35, 0.3, 0.2, 0.15])


@dataclass(frozen=True)
class Shape:
    kind: str  # "ellipse", "rectangle", "triangle", "figure"
    box: tuple[float, float, float, float]  # (x0, y0, x1, y1) as shares of width / height
    colour: RGB


@dataclass(frozen=True)
class PosterSpec:
    """Everything a poster shows, in size-free coordinates, so both sizes share one layout."""

    title: str
    year: int
    top: RGB
    bottom: RGB
    shapes: tuple[Shape, ...]
    band: RGB
    band_height: float
    text: RGB


def poster_spec(item_id: int, title: str, year: int, genres: list[str], config: PosterConfig, seed: int) -> PosterSpec:
    """Lay out one poster: jittered genre gradient, a few shapes, a title band."""
    if not genres:
        raise ValueError(f"movie {item_id} has no genre to choose a poster palette from")
    for genre in genres:
        if genre not in config.palettes:
            raise ValueError(f"movie {item_id}: no poster palette for genre {genre!r}")
    rng = np.random.default_rng([seed, item_id, 0x905_7E2])
    main = config.palettes[genres[0]]
    second = config.palettes[genres[1]] if len(genres) > 1 else main

    lo, hi = config.shapes_per_poster
    n_shapes = int(rng.integers(lo, hi + 1))
    noise = rng.integers(-config.colour_jitter, config.colour_jitter + 1, size=(n_shapes + 2, 3)).tolist()
    draws = rng.random((n_shapes, 7)).tolist()  # one row of uniforms per shape

    def jitter(colour: RGB, k: int) -> RGB:
        return tuple(min(255, max(0, c + d)) for c, d in zip(colour, noise[k]))  # type: ignore[return-value]

    top, bottom = jitter(main.top, 0), jitter(main.bottom, 1)
    shapes = []
    for k, (u_kind, u_w, u_h, u_x, u_y, u_src, u_col) in enumerate(draws):
        kind = SHAPE_KINDS[min(int(np.searchsorted(SHAPE_CUMULATIVE, u_kind, side="right")), len(SHAPE_KINDS) - 1)]
        w, h = 0.15 + 0.45 * u_w, 0.1 + 0.35 * u_h
        x0, y0 = -0.1 + (1.1 - w * 0.5) * u_x, (0.72 - h * 0.5) * u_y
        source = second if u_src < config.secondary_accent_share else main
        colour = source.accents[int(u_col * len(source.accents))]
        shapes.append(Shape(kind, (x0, y0, x0 + w, y0 + h), jitter(colour, k + 2)))
    # The band under the title moves from the gradient's end towards black behind light
    # text and towards white behind dark text, so the palette's text colour stays readable.
    towards = 0 if _luminance(main.text) >= 80 else 255
    band = tuple(int((1 - config.title_band_mix) * b + config.title_band_mix * towards) for b in bottom)
    return PosterSpec(
        title=title,
        year=year,
        top=top,
        bottom=bottom,
        shapes=tuple(shapes),
        band=band,
        band_height=config.title_band_height,
        text=main.text,  # type: ignore[arg-type]
    )


def render_poster(spec: PosterSpec, size: tuple[int, int]):
    """Render `spec` at `size` (width, height) as an RGB pillow image."""
    from PIL import Image, ImageDraw

    width, height = size
    t = np.linspace(0.0, 1.0, height)[:, None, None]
    gradient = (np.array(spec.top) * (1 - t) + np.array(spec.bottom) * t).astype(np.uint8)
    image = Image.fromarray(np.repeat(gradient, width, axis=1), "RGB")
    draw = ImageDraw.Draw(image)
    for shape in spec.shapes:
        x0, y0, x1, y1 = (shape.box[0] * width, shape.box[1] * height, shape.box[2] * width, shape.box[3] * height)
        if shape.kind == "ellipse":
            draw.ellipse((x0, y0, x1, y1), fill=shape.colour)
        elif shape.kind == "rectangle":
            draw.rectangle((x0, y0, x1, y1), fill=shape.colour)
        elif shape.kind == "triangle":
            draw.polygon([((x0 + x1) / 2, y0), (x1, y1), (x0, y1)], fill=shape.colour)
        else:  # a standing silhouette: head and body
            head = (x1 - x0) * 0.18
            cx = (x0 + x1) / 2
            draw.ellipse((cx - head, y0, cx + head, y0 + 2 * head), fill=shape.colour)
            draw.rectangle((cx - head * 1.4, y0 + 2 * head, cx + head * 1.4, max(y1, y0 + 3 * head)), fill=shape.colour)
    band_top = int(height * (1 - spec.band_height))
    draw.rectangle((0, band_top, width, height), fill=spec.band)
    title_font = _font(max(8, width // 11))
    year_font = _font(max(7, width // 15))
    chars_per_line = max(6, int(width / (title_font.size * 0.55)))
    lines = textwrap.wrap(spec.title, chars_per_line)[:3]
    y = band_top + 2
    for line in lines:
        draw.text((3, y), line, font=title_font, fill=spec.text)
        y += title_font.size + 1
    draw.text((3, min(y, height - year_font.size - 2)), str(spec.year), font=year_font, fill=spec.text)
    return image


@functools.lru_cache(maxsize=16)
def _font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def _luminance(colour: RGB) -> float:
    return 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]


def _encode(image, config: PosterConfig) -> bytes:
    buffer = io.BytesIO()
    if config.image_format == "PNG":
        image.save(buffer, format="PNG", compress_level=config.png_compress_level)
    else:
        image.save(buffer, format="JPEG", quality=config.jpeg_quality)
    return buffer.getvalue()


def _write_if_changed(path: Path, data: bytes) -> None:
    """Write atomically; leave a file that already holds these bytes untouched."""
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)

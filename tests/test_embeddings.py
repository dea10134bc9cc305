"""Embeddings: the text embedded per movie, the pillow palette/layout poster features, the
catalogue cache keyed by content digest, the OpenAI client path and the open_clip guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from fakes.agents import HashTextEmbedder, make_catalogue
from ops.agents.embeddings import (
    EmbeddingConfig,
    OpenAIEmbeddingConfig,
    OpenAITextEmbedder,
    OpenClipConfig,
    OpenClipPosterEmbedder,
    PaletteLayoutPosterEmbedder,
    embed_catalogue,
    movie_text,
    poster_look,
)
from ops.data.catalogue import build_catalogue
from ops.environment import OFFLINE_DEFAULTS

QUIET = EmbeddingConfig(show_progress=False)


def test_movie_text_names_what_the_pages_show_and_skips_what_is_missing():
    row = {
        "item_id": 1,
        "title": "Alien (1979)",
        "year": 1979,
        "genres": ["Horror", "Sci-Fi"],
        "directors": ["Ridley Scott"],
        "actors": ["Sigourney Weaver", "Tom Skerritt", "John Hurt", "Veronica Cartwright"],
        "overview": "x" * 1000,
    }
    text = movie_text(row, EmbeddingConfig(text_actors=3, text_overview_chars=50))
    assert text.startswith("Alien (1979). Genres: Horror, Sci-Fi. Released 1979. Directed by Ridley Scott.")
    assert "John Hurt" in text and "Veronica Cartwright" not in text
    assert text.endswith("x" * 50) and "x" * 51 not in text
    bare = movie_text({"item_id": 2, "title": "Heat (1995)", "year": None, "genres": [], "overview": None})
    assert bare == "Heat (1995)."


def _solid(colour, size=(40, 60)):
    return Image.new("RGB", size, colour)


def test_palette_layout_features_compare_colour_and_composition():
    emb = PaletteLayoutPosterEmbedder()
    top_light = _solid((20, 20, 20))
    top_light.paste((240, 240, 240), (0, 0, 40, 20))
    bottom_light = _solid((20, 20, 20))
    bottom_light.paste((240, 240, 240), (0, 40, 40, 60))
    red, orange, blue = _solid((210, 40, 30)), _solid((230, 120, 30)), _solid((30, 60, 210))
    vecs = emb.embed_images([red, orange, blue, top_light, bottom_light, red.copy()])
    assert vecs.shape == (6, emb.dim) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    cos = vecs @ vecs.T
    assert cos[0, 5] == pytest.approx(1.0, abs=1e-6)  # same image, same vector
    assert cos[0, 1] > cos[0, 2] + 0.2  # red is nearer orange than blue
    assert cos[3, 4] < 0.9  # same palette, light on top vs at the bottom: layout differs
    assert "palette-layout" in emb.name and "clip" not in emb.name.lower()


def test_poster_look_labels_tones():
    assert poster_look(_solid((220, 60, 40))) == "warm"
    assert poster_look(_solid((30, 60, 200))) == "cool"
    assert poster_look(_solid((10, 10, 15))) == "dark"
    assert poster_look(_solid((245, 240, 235))) == "bright"


def test_catalogue_embeds_each_movie_once_and_the_cache_keys_on_content(tmp_path):
    movies, meta = make_catalogue(tmp_path / "posters", n_per_genre=4)
    cache = tmp_path / "cache"
    text = HashTextEmbedder()
    vectors = embed_catalogue(build_catalogue(movies, meta), text, PaletteLayoutPosterEmbedder(), cache, QUIET)
    assert text.texts_embedded == movies.height
    assert vectors.item_ids.tolist() == sorted(movies.get_column("item_id").to_list())
    assert vectors.text.shape == (movies.height, text.dim) and vectors.has_poster.all()
    assert set(vectors.poster_look.tolist()) == {"cool", "warm", "dark"}

    again = HashTextEmbedder()
    vectors2 = embed_catalogue(build_catalogue(movies, meta), again, PaletteLayoutPosterEmbedder(), cache, QUIET)
    assert again.texts_embedded == 0  # everything came from the cache
    assert np.array_equal(vectors.text, vectors2.text) and np.array_equal(vectors.poster, vectors2.poster)
    assert vectors2.digest == vectors.digest

    changed = meta.with_columns(
        pl.when(pl.col("item_id") == 3)
        .then(pl.lit("An entirely new plot."))
        .otherwise(pl.col("overview"))
        .alias("overview")
    )
    third = HashTextEmbedder()
    vectors3 = embed_catalogue(build_catalogue(movies, changed), third, PaletteLayoutPosterEmbedder(), cache, QUIET)
    assert third.texts_embedded == 1
    assert vectors3.digest != vectors.digest
    row = vectors.rows_of([3])[0]
    assert not np.array_equal(vectors3.text[row], vectors.text[row])


def test_catalogue_without_metadata_or_poster(tmp_path):
    movies, meta = make_catalogue(tmp_path / "posters", n_per_genre=2)
    meta = meta.filter(pl.col("item_id") != 2)
    vectors = embed_catalogue(
        build_catalogue(movies, meta), HashTextEmbedder(), PaletteLayoutPosterEmbedder(), None, QUIET
    )
    row = vectors.rows_of([2])[0]
    assert not vectors.has_poster[row] and not vectors.poster[row].any() and vectors.poster_look[row] == ""
    assert vectors.has_poster.sum() == movies.height - 1
    none = embed_catalogue(build_catalogue(movies), HashTextEmbedder(), None, None, QUIET)
    assert none.poster.shape == (movies.height, 0) and not none.has_poster.any()


def test_undecodable_poster_is_named(tmp_path):
    movies, meta = make_catalogue(tmp_path / "posters", n_per_genre=1)
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not an image at all")
    meta = meta.with_columns(
        pl.when(pl.col("item_id") == 1).then(pl.lit(str(bad))).otherwise(pl.col("poster_small")).alias("poster_small")
    )
    with pytest.raises(ValueError, match="broken.jpg"):
        embed_catalogue(build_catalogue(movies, meta), HashTextEmbedder(), PaletteLayoutPosterEmbedder(), None, QUIET)


def _embedding_payload(texts, dim, shuffle=False):
    data = [
        {"object": "embedding", "index": i, "embedding": [float(i + 1)] + [0.0] * (dim - 2) + [1.0]}
        for i in range(len(texts))
    ]
    if shuffle:
        data = data[::-1]
    return {
        "object": "list",
        "data": data,
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }


def test_openai_embedder_calls_the_endpoint_with_the_key_from_the_environment(httpserver, monkeypatch):
    monkeypatch.setenv("SIMAB_TEST_KEY", "sk-test-123")
    httpserver.expect_request("/v1/embeddings", method="POST").respond_with_json(
        _embedding_payload(["a", "b", "c"], 8, shuffle=True)
    )
    emb = OpenAITextEmbedder(
        OpenAIEmbeddingConfig(base_url=httpserver.url_for("/v1"), api_key_env="SIMAB_TEST_KEY", dim=8)
    )
    out = emb.embed(["a", "b", "c"])
    assert out.shape == (3, 8)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    # Rows follow the input order even when the server answers out of order.
    assert out[0, 0] < out[1, 0] < out[2, 0]
    request, _ = httpserver.log[0]
    body = json.loads(request.data)
    assert body["model"] == "text-embedding-3-small" and body["input"] == ["a", "b", "c"]
    assert request.headers["Authorization"] == "Bearer sk-test-123"


def test_openai_embedder_retries_server_errors_then_succeeds(httpserver, monkeypatch):
    monkeypatch.setenv("SIMAB_TEST_KEY", "k")
    httpserver.expect_ordered_request("/v1/embeddings").respond_with_json({"error": {"message": "busy"}}, status=500)
    httpserver.expect_ordered_request("/v1/embeddings").respond_with_json(_embedding_payload(["a"], 4))
    emb = OpenAITextEmbedder(
        OpenAIEmbeddingConfig(base_url=httpserver.url_for("/v1"), api_key_env="SIMAB_TEST_KEY", dim=4, backoff_s=0.0)
    )
    assert emb.embed(["a"]).shape == (1, 4)
    assert len(httpserver.log) == 2


def test_openai_embedder_without_key_says_which_variable(monkeypatch):
    monkeypatch.delenv("SIMAB_ABSENT_KEY", raising=False)
    emb = OpenAITextEmbedder(OpenAIEmbeddingConfig(base_url="http://127.0.0.1:9/v1", api_key_env="SIMAB_ABSENT_KEY"))
    with pytest.raises(RuntimeError, match="SIMAB_ABSENT_KEY"):
        emb.embed(["a"])


def test_open_clip_refuses_to_run_without_local_weights(tmp_path):
    with pytest.raises(FileNotFoundError, match="weights_path"):
        OpenClipPosterEmbedder(OpenClipConfig(weights_path=None))
    with pytest.raises(FileNotFoundError, match="PaletteLayoutPosterEmbedder"):
        OpenClipPosterEmbedder(OpenClipConfig(weights_path=str(tmp_path / "missing.bin")))


def test_minilm_embeds_offline_with_packaged_weights():
    # A subprocess with the offline defaults set before Python starts (dependencies.md), so a
    # missing weight file fails fast instead of trying the network.
    code = (
        "from ops.agents.embeddings import MiniLMTextEmbedder; import numpy as np;"
        "e = MiniLMTextEmbedder(); v = e.embed(['a robot explores a distant planet', 'an android travels to another world', 'a recipe for apple pie']);"
        "print(v.shape[1], round(float(np.linalg.norm(v[0])), 4), float(v[0] @ v[1] - v[0] @ v[2]) > 0.2)"
    )
    env = dict(os.environ, **OFFLINE_DEFAULTS, TOKENIZERS_PARALLELISM="false")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parents[1],
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-3:] == ["384", "1.0", "True"]

"""The benchmarks: what a user or a reviewer reruns to check a figure the docs state.

Each is a module run from the repository root, `.venv/bin/python -m bench.<name> --help`,
and prints its figures beside a baseline measured in the same run on the same data (never a
timed test).  The ones that read the reference data take `SIMAB_SHARED_DATA=../shared/data`;
what they write goes under bench/out/ (ignored by git).  docs/development.md lists them and
docs/findings/ holds the figures they gave, each with its command.

This package also holds what several benchmarks share: the data and the agents they start
from (`load`, `prepare`, `agents_on`, `HashTextEmbedder`) and a lifecycle run in a home of
its own (`run_lifecycle`).  It imports nothing beyond the standard library at load, so a
benchmark can still set its thread counts before numpy loads (bench.ranking does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"


class HashTextEmbedder:
    """Hashed bag of words: a fast stand-in when MiniLM's cost is not what is measured."""

    name = "hash-bow-256"
    dim = 256

    def embed(self, texts):
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace(",", " ").replace(".", " ").split():
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def load(data: str, out: Path = OUT):
    """(users, movies, ratings, metadata, hidden tastes) of `data`: "synthetic" (the
    generator's default, posters under `out`) or "ml1m" (the reference copy, users 1-1999,
    with the local metadata and both poster folders as `make demo-ml1m` reads them, cached
    under `out`; no hidden tastes)."""
    if data == "synthetic":
        from ops.data.synthetic import SyntheticConfig, generate

        d = generate(SyntheticConfig(), out / "agents-synthetic-posters")
        return d.users, d.movies, d.ratings, d.metadata, d.hidden_tastes
    import polars as pl

    from fakes.shared_data import SHARED_DATA
    from ops.data.local_metadata import LocalMetadataConfig, load_local_metadata
    from ops.data.movielens import load_local

    tables = load_local(SHARED_DATA / "ml-1m")
    config = LocalMetadataConfig(
        metadata_path=SHARED_DATA / "ml-1m-metadata" / "movies_extrainfos.dat",
        poster_dirs=[SHARED_DATA / "ml-1m-posters-tmdb", SHARED_DATA / "ml-1m-posters"],
        progress=False,
    )
    meta = load_local_metadata(tables.movies, out / "agents-ml1m-metadata", config).metadata
    users = tables.users.filter(pl.col("user_id").is_in(tables.ratings.get_column("user_id").unique().implode()))
    return users, tables.movies, tables.ratings, meta, None


def prepare(data: str, text, cache: Path, out: Path = OUT):
    """The benchmarks' common start: `load(data, out)`, the chronological 7:2:1 split, MM-ML-1M
    and the agents built on the train window with `text` as the text embedder, cached in
    `cache`.  Returns (users, movies, ratings, split, frame, agents)."""
    from ops.data.catalogue import build_catalogue
    from ops.data.split import chronological_split

    users, movies, ratings, meta, _ = load(data, out)
    split = chronological_split(ratings)
    frame = build_catalogue(movies, meta)
    return users, movies, ratings, split, frame, agents_on(split.train, users, frame, text, cache)


def agents_on(train, users, frame, text, cache: Path):
    """The agents the benchmarks build: profiles and memories of `train`, `text` as the text
    embedder, the palette poster features, the catalogue embedding cached in `cache`."""
    from ops.agents.build import AgentsConfig, build_agents
    from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder

    return build_agents(
        train,
        users,
        frame,
        AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
        text,
        PaletteLayoutPosterEmbedder(),
        cache,
    )


def run_lifecycle(home: Path, env: dict[str, str], arms: str) -> int:
    """`python -m pipelines.lifecycle --arms ARMS` in `home` ($SIMAB_HOME, with its own
    $DAGSTER_HOME) with the settings `env` adds to the environment.  A home whose last run
    this function started with the same arms and settings is resumed (`--resume`: a killed
    benchmark goes on where it stopped); any other home gets a plain run, which reuses every
    step whose code, settings and inputs are those stored — the lifecycle refuses to resume
    a run of other arms or settings."""
    full = {**os.environ, **env, "SIMAB_HOME": str(home), "DAGSTER_HOME": str(home / "dagster_home")}
    settings = {"arms": arms, **{k: v for k, v in sorted(full.items()) if k.startswith("SIMAB_")}}
    record = home / "bench_run.json"
    same = record.is_file() and json.loads(record.read_text()) == settings
    resume = ["--resume"] if same and (home / "dagster_home").is_dir() else []
    home.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(settings, indent=1))
    command = [sys.executable, "-m", "pipelines.lifecycle", *resume, "--arms", arms]
    print(f"SIMAB_HOME={home} {' '.join(command[1:])}", flush=True)
    return subprocess.call(command, cwd=ROOT, env=full)

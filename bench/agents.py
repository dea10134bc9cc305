"""Benchmark of the agents: what building them costs, and what the embedded brain costs
per simulated session against the uniform random brain measured in the same run.

Data: the synthetic generator's default (1,000 users) or ../shared/data/ml-1m (users
1-1999, OMDb metadata, both poster folders; reference data, never shipped).  Chronological
7:2:1 split; Random and Pop arms (no training needed).  Prints:
- `build_agents` seconds per stage (catalogue embedding, profiles, memories, brain fit)
  and the fitted models' held-out AUC / RMSE;
- per arm: simulation seconds with the uniform random brain and the embedded brain, the
  ratio, and the simulated CTR / CVR / AR beside the offline NDCG@20 (rank agreement);
- on synthetic data: CTR on impressions matching the planted favourite genres vs others.

    .venv/bin/python bench/agents.py                      # synthetic default, MiniLM
    .venv/bin/python bench/agents.py --data ml1m          # ML-1M users 1-1999
    .venv/bin/python bench/agents.py --text hash          # skip MiniLM (hashed bag of words)

The catalogue embedding is cached under bench/out/agents-cache; pass --fresh to time a
cold embedding.  Results also go to bench/out/agents.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fakes.shared_data import SHARED_DATA  # noqa: E402
from ops.agents.build import AgentsConfig, build_agents  # noqa: E402
from ops.agents.embeddings import EmbeddingConfig, MiniLMTextEmbedder, PaletteLayoutPosterEmbedder  # noqa: E402
from ops.arms.recommenders import arm_config, evaluate_arm, top_k, train_arm  # noqa: E402
from ops.data.mm_ml_1m import build_mm_ml_1m  # noqa: E402
from ops.data.split import chronological_split  # noqa: E402
from ops.environment import offline_defaults  # noqa: E402
from ops.simulation.brains.embedded import fit_embedded_brain  # noqa: E402
from ops.simulation.brains.random_policy import UniformRandomBrain  # noqa: E402
from ops.simulation.catalogue import Catalogue  # noqa: E402
from ops.simulation.runner import SimulationConfig, simulate_arm  # noqa: E402

OUT = ROOT / "bench" / "out"


class HashTextEmbedder:
    """Hashed bag of words: a fast stand-in when MiniLM's cost is not what is measured."""

    name = "hash-bow-256"
    dim = 256

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace(",", " ").replace(".", " ").split():
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def load(data: str):
    if data == "synthetic":
        from ops.data.synthetic import SyntheticConfig, generate

        d = generate(SyntheticConfig(), OUT / "agents-synthetic-posters")
        return d.users, d.movies, d.ratings, d.metadata, d.hidden_tastes
    from ops.data.local_metadata import LocalMetadataConfig, load_local_metadata
    from ops.data.movielens import load_local

    tables = load_local(SHARED_DATA / "ml-1m")
    config = LocalMetadataConfig(
        metadata_path=SHARED_DATA / "ml-1m-metadata" / "movies_extrainfos.dat",
        poster_dirs=[SHARED_DATA / "ml-1m-posters-tmdb", SHARED_DATA / "ml-1m-posters"],
        progress=False,
    )
    meta = load_local_metadata(tables.movies, OUT / "agents-ml1m-metadata", config).metadata
    users = tables.users.filter(pl.col("user_id").is_in(tables.ratings.get_column("user_id").unique().implode()))
    return users, tables.movies, tables.ratings, meta, None


def prepare(data: str, text, cache: Path):
    """The benches' common start: `load(data)`, the chronological 7:2:1 split, MM-ML-1M and
    the agents built on the train window with `text` as the text embedder, cached in `cache`.
    Returns (users, movies, ratings, split, frame, agents)."""
    users, movies, ratings, meta, _ = load(data)
    split = chronological_split(ratings)
    frame = build_mm_ml_1m(movies, meta)
    return users, movies, ratings, split, frame, agents_on(split.train, users, frame, text, cache)


def agents_on(train, users, frame, text, cache: Path):
    """The agents the benches build: profiles and memories of `train`, `text` as the text
    embedder, the palette poster features, the catalogue embedding cached in `cache`."""
    return build_agents(
        train,
        users,
        frame,
        AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
        text,
        PaletteLayoutPosterEmbedder(),
        cache,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=("synthetic", "ml1m"), default="synthetic")
    ap.add_argument("--text", choices=("minilm", "hash"), default="minilm")
    ap.add_argument("--fresh", action="store_true", help="drop the embedding cache first (cold embedding)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    offline_defaults()

    users, movies, ratings, meta, hidden = load(args.data)
    split = chronological_split(ratings)
    cache = OUT / f"agents-cache-{args.data}"
    if args.fresh and cache.exists():
        shutil.rmtree(cache)
    text = MiniLMTextEmbedder() if args.text == "minilm" else HashTextEmbedder()
    t = time.perf_counter()
    catalogue_frame = build_mm_ml_1m(movies, meta)
    bundle = agents_on(split.train, users, catalogue_frame, text, cache)
    model = fit_embedded_brain(bundle, split.train, split.valid, users)
    bundle.timings_s.update(model.timings_s)
    build_s = time.perf_counter() - t
    p = model.params
    print(
        f"data {args.data}: {users.height} users, {movies.height} movies, {ratings.height} ratings; {len(bundle.profiles)} agents"
    )
    print(f"build_agents {build_s:.1f}s  " + "  ".join(f"{k} {v:.1f}s" for k, v in bundle.timings_s.items()))
    print(
        f"brain fit: {p.n_users} users, click AUC {p.click_auc_holdout:.3f}, like AUC {p.like_auc_holdout:.3f}, rating RMSE {p.rating_rmse_holdout:.3f} (held-out users)"
    )

    agents = np.array(sorted(bundle.profiles))
    movie_ids = movies.get_column("movie_id").to_numpy()
    exclude = split.train.select("user_id", "movie_id")
    catalogue = Catalogue.from_frame(catalogue_frame)
    sessions = bundle.sessions()
    sim = SimulationConfig(progress=False)
    favourite = (
        {u: set(f) for u, f in hidden.select("user_id", "favourite_genres").iter_rows()} if hidden is not None else None
    )
    genres = {m: set(g) for m, g in movies.select("movie_id", "genres").iter_rows()}
    results = {
        "data": args.data,
        "text": text.name,
        "agents": len(sessions),
        "build_s": build_s,
        "stages_s": bundle.timings_s,
        "arms": {},
    }
    for arm in ("random", "pop"):
        trained = train_arm(arm_config(arm), split.train, split.valid, users, catalogue_frame)
        ndcg = evaluate_arm(trained, split.train, split.test, movie_ids).ndcg_at_k
        lists = top_k(trained, agents, movie_ids, exclude)
        t = time.perf_counter()
        simulate_arm(arm, lists, sessions, catalogue, UniformRandomBrain(), sim, seed=args.seed)
        uniform_s = time.perf_counter() - t
        t = time.perf_counter()
        events = simulate_arm(arm, lists, sessions, catalogue, model.brain(), sim, seed=args.seed)
        embedded_s = time.perf_counter() - t
        shown = (
            events.filter(pl.col("page_type") == "home")
            .select("user_id", pl.col("shown").alias("movie_id"))
            .explode("movie_id")
            .drop_nulls()
            .unique()
        )
        clicks = set(events.filter(pl.col("action") == "click_movie").select("user_id", "movie_id").iter_rows())
        watched = events.filter(pl.col("action") == "watch_and_rate")
        row = {
            "uniform_s": uniform_s,
            "embedded_s": embedded_s,
            "ratio": embedded_s / uniform_s,
            "ctr": len(clicks) / shown.height,
            "cvr": watched.height / shown.height,
            "ar": watched.get_column("rating").mean(),
            "ndcg_at_20": ndcg,
        }
        line = (
            f"{arm:>6}: simulate {len(sessions)} agents  uniform {uniform_s:.2f}s  embedded {embedded_s:.2f}s  "
            f"ratio {row['ratio']:.1f}x | CTR {row['ctr']:.3f} CVR {row['cvr']:.3f} AR {row['ar']:.2f} | offline NDCG@20 {ndcg:.4f}"
        )
        if favourite is not None:
            match = np.array([bool(favourite[u] & genres[m]) for u, m in shown.iter_rows()])
            clicked = np.array([(u, m) in clicks for u, m in shown.iter_rows()])
            row["ctr_taste_match"], row["ctr_other"] = float(clicked[match].mean()), float(clicked[~match].mean())
            line += f" | CTR planted-taste {row['ctr_taste_match']:.3f} vs other {row['ctr_other']:.3f}"
        print(line)
        results["arms"][arm] = row
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "agents.json").write_text(json.dumps(results, indent=2, default=float))


if __name__ == "__main__":
    main()

"""A tiny seeded catalogue with planted tastes for the agent tests and benchmarks (profile, memory, brain).

Three taste groups (Sci-Fi, Romance, Horror fans).  Each genre has its own overview words,
director, actors, decade and poster colour, so every signal the agent reads (text, poster,
genre, credits, era) carries the taste.  Users rate movies of their genre high and others
low; timestamps run forward so a chronological split keeps every user in train.
`HashTextEmbedder` stands in for MiniLM in unit tests (a hashed bag of words: deterministic,
instant, and similar texts get similar vectors).
"""

from __future__ import annotations

import datetime as dt
import zlib
from pathlib import Path

import numpy as np
import polars as pl

from ops.schema import METADATA, MOVIES, RATINGS, USERS, conform

TASTES = {
    "Sci-Fi": dict(
        words="space robot alien planet galaxy starship",
        director="Ada Vector",
        actors=("Zed Nova", "Kim Orbit", "Lee Comet"),
        year=1980,
        colour=(30, 60, 200),
    ),
    "Romance": dict(
        words="love wedding kiss heart letter summer",
        director="Rosa Amour",
        actors=("Val Heart", "Sam Rose", "Ida Vow"),
        year=1950,
        colour=(220, 60, 40),
    ),
    "Horror": dict(
        words="night blood ghost scream cellar curse",
        director="Vlad Grim",
        actors=("Mort Dread", "Ivy Crypt", "Bo Fang"),
        year=1970,
        colour=(15, 15, 20),
    ),
}
GENRE_LIST = tuple(TASTES)


class HashTextEmbedder:
    """Hashed bag of words, L2-normalised: a stand-in text embedder for unit tests."""

    name = "test-hash-bow"
    dim = 64

    def __init__(self) -> None:
        self.calls = 0
        self.texts_embedded = 0

    def embed(self, texts):
        self.calls += 1
        self.texts_embedded += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace(",", " ").replace(".", " ").split():
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)


def make_catalogue(poster_dir: Path, n_per_genre: int = 20, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(movies, metadata) with posters written under `poster_dir`."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    poster_dir.mkdir(parents=True, exist_ok=True)
    movies, meta = [], []
    item_id = 1
    for genre, t in TASTES.items():
        for k in range(n_per_genre):
            year = t["year"] + int(rng.integers(0, 10))
            words = t["words"].split()
            overview = "A story of " + " ".join(rng.choice(words, 4)) + f" number {k}."
            colour = tuple(int(np.clip(c + rng.integers(-15, 16), 0, 255)) for c in t["colour"])
            path = poster_dir / f"{item_id}.png"
            img = Image.new("RGB", (40, 60), colour)
            img.paste(tuple(min(255, c + 40) for c in colour), (0, 0, 40, 15 + int(rng.integers(0, 20))))
            img.save(path)
            movies.append({"item_id": item_id, "title": f"{genre} Tale {k} ({year})", "year": year, "genres": [genre]})
            meta.append(
                {
                    "item_id": item_id,
                    "tmdb_id": 1000 + item_id,
                    "overview": overview,
                    "vote_average": float(np.round(rng.uniform(5.0, 8.0), 1)),
                    "vote_count": int(rng.integers(10, 1000)),
                    "release_date": dt.date(year, 6, 1),
                    "meta_genres": [genre],
                    "directors": [t["director"]] if k % 2 == 0 else [f"Other Director {item_id}"],
                    "actors": list(t["actors"]) + [f"Extra {item_id}"],
                    "poster_small": str(path),
                    "poster_large": str(path),
                    "metadata_source": "synthetic",
                }
            )
            item_id += 1
    return conform(pl.DataFrame(movies), MOVIES, "movies"), conform(pl.DataFrame(meta), METADATA, "metadata")


def make_users_and_ratings(movies: pl.DataFrame, n_users: int = 30, per_user: int = 24, seed: int = 0):
    """(users, ratings, favourite genre per user): each user rates its genre 4-5, others 1-3."""
    rng = np.random.default_rng(seed)
    genre_of = {m: g[0] for m, g in movies.select("item_id", "genres").iter_rows()}
    ids = np.array(sorted(genre_of))
    users, ratings, favourite = [], [], {}
    for u in range(1, n_users + 1):
        fav = GENRE_LIST[(u - 1) % len(GENRE_LIST)]
        favourite[u] = fav
        users.append(
            {
                "user_id": u,
                "gender": "MF"[u % 2],
                "age": 25,
                "occupation": u % 21,
                "zip": f"{10000 + u}",
                "has_ratings": True,
            }
        )
        own = [m for m in ids if genre_of[m] == fav]
        other = [m for m in ids if genre_of[m] != fav]
        # Fans mostly watch their genre (so taste shows in what is rated, not only how).
        picks = list(rng.choice(own, per_user * 2 // 3, replace=False)) + list(
            rng.choice(other, per_user // 3, replace=False)
        )
        for j, m in enumerate(rng.permutation(picks)):
            r = int(rng.integers(4, 6)) if genre_of[m] == fav else int(rng.integers(1, 4))
            ratings.append({"user_id": u, "item_id": int(m), "rating": r, "timestamp": 1_000_000 + 1000 * j + u})
    return (
        conform(pl.DataFrame(users), USERS, "users"),
        conform(pl.DataFrame(ratings), RATINGS, "ratings"),
        favourite,
    )


def split_by_time(ratings: pl.DataFrame, share: float = 0.75) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-user chronological cut, so that every user has train and validation ratings."""
    ordered = ratings.sort("user_id", "timestamp")
    rank = pl.col("timestamp").rank("ordinal").over("user_id")
    size = pl.len().over("user_id")
    train = ordered.filter(rank <= (size * share).floor())
    valid = ordered.filter(rank > (size * share).floor())
    return train, valid


def llm_world(
    root: Path, n_agents: int, n_per_genre: int = 6, per_user: int = 6, list_length: int = 10, arm: str = "pop"
) -> dict:
    """Everything a simulation needs, built from the planted catalogue under `root` (posters
    included; the same `root` gives the same world, byte for byte): catalogue (the sandbox's),
    profiles, memories, ratings, each agent's list (its first `list_length` unrated movies),
    the TOP_K table for `arm`, and session templates."""
    from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder, embed_catalogue
    from ops.agents.memory import build_long_term_memories
    from ops.agents.movie_facts import build_movie_facts
    from ops.agents.profile import build_profiles
    from ops.agents.session import AgentSession
    from ops.data.catalogue import build_catalogue
    from ops.simulation.catalogue import Catalogue

    movies, meta = make_catalogue(Path(root) / "posters", n_per_genre=n_per_genre)
    users, ratings, _ = make_users_and_ratings(movies, n_users=n_agents, per_user=per_user)
    catalogue = build_catalogue(movies, meta)
    vectors = embed_catalogue(
        catalogue, HashTextEmbedder(), PaletteLayoutPosterEmbedder(), None, EmbeddingConfig(show_progress=False)
    )
    facts = build_movie_facts(catalogue, ratings)
    looks = {int(m): str(look) for m, look in zip(vectors.item_ids, vectors.poster_look) if look}
    profiles = build_profiles(ratings, users, catalogue, facts=facts, poster_looks=looks)
    memories = build_long_term_memories(ratings, vectors)
    rated = {(u, m) for u, m in ratings.select("user_id", "item_id").iter_rows()}
    all_ids = sorted(movies.get_column("item_id").to_list())
    lists = {u: [m for m in all_ids if (u, m) not in rated][:list_length] for u in profiles}
    top_k = pl.DataFrame(
        [
            {"arm": arm, "user_id": u, "rank": r + 1, "item_id": m, "score": 1.0 / (r + 1)}
            for u in sorted(lists)
            for r, m in enumerate(lists[u])
        ],
        schema={"arm": pl.Utf8, "user_id": pl.Int64, "rank": pl.Int64, "item_id": pl.Int64, "score": pl.Float64},
    )
    return dict(
        catalogue=Catalogue.from_frame(catalogue),
        catalogue_frame=catalogue,
        profiles=profiles,
        memories=memories,
        ratings=ratings,
        lists=lists,
        top_k=top_k,
        agents=[AgentSession(u, profiles[u], memories[u], 0.0, 0.0) for u in sorted(profiles)],
    )


def synthetic_agents(root: Path, config, valid: bool = False) -> dict:
    """The synthetic generator's world for `config` (`ops.data.synthetic.SyntheticConfig`),
    split 7:2:1, its MM-ML-1M frame and agents built from the train window (and the
    validation window too, at the simulation clock, with `valid`), text by `HashTextEmbedder`
    and posters by their palette: data, split, frame, agents."""
    from ops.agents.build import AgentsConfig, build_agents
    from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder
    from ops.data.catalogue import build_catalogue
    from ops.data.split import chronological_split
    from ops.data.synthetic import generate

    data = generate(config, root / "posters")
    split = chronological_split(data.ratings)
    frame = build_catalogue(data.movies, data.metadata)
    agents = build_agents(
        split.train,
        data.users,
        frame,
        AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
        HashTextEmbedder(),
        PaletteLayoutPosterEmbedder(),
        root / "cache",
        valid=split.valid if valid else None,
    )
    return dict(data=data, split=split, frame=frame, agents=agents)

"""Agents in one call (docs/definitions.md#lifecycle, step 7): profiles and long-term memories.

`build_agents` embeds the catalogue once (cached), then builds every user's profile and
long-term memory from the train split only.  `Agents.sessions()` gives the session
templates the simulation runner starts from.  How an agent decides is the brain's business
(`ops.simulation.brains`); the embedded brain is fitted from these agents by
`ops.simulation.brains.embedded.fit_embedded_brain`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from pydantic import BaseModel

from ops.agents.embeddings import EmbeddingConfig, MovieVectors, PosterEmbedder, TextEmbedder, embed_catalogue
from ops.agents.memory import LongTermMemory, build_long_term_memories, memories_from_arrays, memories_to_arrays
from ops.agents.movie_facts import MovieFacts, build_movie_facts
from ops.agents.profile import AgentProfile, ProfileConfig, build_profiles, profiles_from_table, profiles_table
from ops.agents.session import AgentSession
from ops.codec import check_format, load_arrays, load_json, load_table, save_arrays, save_json, save_table


class AgentsConfig(BaseModel):
    profile: ProfileConfig = ProfileConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()


@dataclass(eq=False)
class Agents:
    """Every agent's profile and long-term memory, and the catalogue they perceive."""

    profiles: dict[int, AgentProfile]
    memories: dict[int, LongTermMemory]
    vectors: MovieVectors
    facts: MovieFacts
    config: AgentsConfig
    timings_s: dict[str, float] = field(default_factory=dict)

    def sessions(self, user_ids=None) -> list[AgentSession]:
        """Session templates (no fatigue spent, budget 0: the runner sets it from the tier)."""
        ids = sorted(self.profiles) if user_ids is None else sorted(int(u) for u in user_ids)
        return [AgentSession(u, self.profiles[u], self.memories[u], 0.0, 0.0) for u in ids]

    def save(self, folder: Path) -> None:
        """Into `folder`, without pickle: profiles as Parquet, memories and the catalogue's
        vectors and facts as `.npz` + JSON, configuration and timings as JSON (`ops.codec`)."""
        folder.mkdir(parents=True, exist_ok=True)
        save_json(
            folder / "agents.json",
            {
                "kind": "Agents",
                "format_version": 2,
                "config": self.config.model_dump(mode="json"),
                "timings_s": self.timings_s,
            },
        )
        save_table(folder / "profiles.parquet", profiles_table(self.profiles))
        save_arrays(folder / "memories.npz", memories_to_arrays(self.memories))
        self.vectors.save(folder / "vectors")
        self.facts.save(folder / "facts")

    @classmethod
    def load(cls, folder: Path) -> Agents:
        meta = load_json(folder / "agents.json")
        # Format 2: profiles carry the persona (ops.agents.persona).
        check_format(meta, "Agents", 2, folder / "agents.json")
        vectors = MovieVectors.load(folder / "vectors")
        return cls(
            profiles=profiles_from_table(load_table(folder / "profiles.parquet")),
            memories=memories_from_arrays(load_arrays(folder / "memories.npz"), vectors),
            vectors=vectors,
            facts=MovieFacts.load(folder / "facts"),
            config=AgentsConfig.model_validate(meta["config"]),
            timings_s=meta["timings_s"],
        )


def build_agents(
    train: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    config: AgentsConfig | None,
    text_embedder: TextEmbedder,
    poster_embedder: PosterEmbedder | None,
    cache_dir: str | Path | None = None,
) -> Agents:
    """Profiles and memories of every user with train ratings; `catalogue` is MM-ML-1M."""
    config = config or AgentsConfig()
    timings: dict[str, float] = {}
    t = time.perf_counter()
    vectors = embed_catalogue(catalogue, text_embedder, poster_embedder, cache_dir, config.embedding)
    timings["embed_catalogue"] = time.perf_counter() - t

    t = time.perf_counter()
    facts = build_movie_facts(catalogue, train)
    looks = {int(m): str(look) for m, look in zip(vectors.movie_ids, vectors.poster_look) if look}
    profiles = build_profiles(train, users, catalogue, config.profile, facts=facts, poster_looks=looks)
    timings["profiles"] = time.perf_counter() - t

    t = time.perf_counter()
    memories = build_long_term_memories(train, vectors)
    memories = {u: m for u, m in memories.items() if u in profiles}
    timings["memories"] = time.perf_counter() - t
    return Agents(profiles, memories, vectors, facts, config, timings)

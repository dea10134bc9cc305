"""Agents in one call (design.md lifecycle step 7): profiles, memories, embedded-brain parameters.

`build_agents` embeds the catalogue once (cached), builds every user's profile and
long-term memory from the train split, and fits the embedded brain on the train and
validation windows.  `AgentBundle.sessions()` gives the session templates the simulation
loop starts from, and `AgentBundle.brain()` the fitted `EmbeddedBrain`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from pydantic import BaseModel

from ops.agents.profile import AgentProfile, ProfileConfig, build_profiles
from ops.simulation.brains.embedded import BrainContext, EmbeddedBrain, EmbeddedBrainConfig, EmbeddedBrainParams, fit
from ops.agents.embeddings import EmbeddingConfig, PosterEmbedder, TextEmbedder, embed_catalogue
from ops.agents.memory import LongTermMemory, MovieFacts, MovieVectors, build_long_term_memories, build_movie_facts
from ops.simulation.observation import AgentSession


class AgentsConfig(BaseModel):
    profile: ProfileConfig = ProfileConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    brain: EmbeddedBrainConfig = EmbeddedBrainConfig()


@dataclass(eq=False)
class AgentBundle:
    profiles: dict[int, AgentProfile]
    memories: dict[int, LongTermMemory]
    params: EmbeddedBrainParams
    context: BrainContext
    config: AgentsConfig
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def vectors(self) -> MovieVectors:
        return self.context.vectors

    @property
    def facts(self) -> MovieFacts:
        return self.context.facts

    def brain(self, config: EmbeddedBrainConfig | None = None) -> EmbeddedBrain:
        """A fresh embedded brain (one per simulation partition: it caches per-user scores)."""
        return EmbeddedBrain(self.params, self.context, config or self.config.brain)

    def sessions(self, user_ids=None) -> list[AgentSession]:
        """Session templates (no fatigue spent, budget 0: the loop sets it from the tier)."""
        ids = sorted(self.profiles) if user_ids is None else sorted(int(u) for u in user_ids)
        return [AgentSession(u, self.profiles[u], self.memories[u], 0.0, 0.0) for u in ids]


def build_agents(
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame,
    movies: pl.DataFrame,
    metadata: pl.DataFrame | None,
    config: AgentsConfig | None,
    text_embedder: TextEmbedder,
    poster_embedder: PosterEmbedder | None,
    cache_dir: str | Path | None = None,
) -> AgentBundle:
    """Profiles and memories of every user with train ratings, and the fitted brain parameters."""
    config = config or AgentsConfig()
    timings: dict[str, float] = {}
    t = time.perf_counter()
    vectors = embed_catalogue(movies, metadata, text_embedder, poster_embedder, cache_dir, config.embedding)
    timings["embed_catalogue"] = time.perf_counter() - t

    t = time.perf_counter()
    facts = build_movie_facts(movies, metadata, train)
    looks = {int(m): str(l) for m, l in zip(vectors.movie_ids, vectors.poster_look) if l}
    profiles = build_profiles(train, users, movies, metadata, config.profile, facts=facts, poster_looks=looks)
    timings["profiles"] = time.perf_counter() - t

    t = time.perf_counter()
    memories = build_long_term_memories(train, vectors)
    memories = {u: m for u, m in memories.items() if u in profiles}
    timings["memories"] = time.perf_counter() - t

    t = time.perf_counter()
    context = BrainContext.build(vectors, facts, train, config.profile, users)
    params = fit(train, valid, memories, profiles, context, config.brain)
    timings["fit"] = time.perf_counter() - t
    return AgentBundle(profiles, memories, params, context, config, timings)

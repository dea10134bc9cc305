"""Agents in one call (docs/definitions.md#lifecycle, step 7): profiles and long-term memories.

`build_agents` embeds the catalogue once (cached), then builds the profile and long-term
memory of every user with ratings up to the agents' clock, or of the users the run reads
(`user_ids`: those simulated, calibrated or asked by a trust protocol); the social traits of
every user (`Agents.traits`, the population the agents are drawn from and their tiers cut
over) are kept either way.  With the validation window given, the agents stand at the
simulation clock (`ops.agents.clock`), the start of the test period, and remember their train
and validation interactions; without it, at the fit clock (the train window only).
`Agents.at_fit_clock()` is the same agents as the validation window found them: their
memories cut at the end of the train window, for what is fitted or checked on the validation
window (the embedded brain, its calibration, SimUSER's persona check).  `Agents.sessions()`
gives the session templates the simulation runner starts from.  How an agent decides is the brain's business
(`ops.simulation.brains`); the embedded brain is fitted from these agents by
`ops.simulation.brains.embedded.fit_embedded_brain`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from pydantic import BaseModel

from ops.agents.clock import Clock, history_until
from ops.agents.embeddings import EmbeddingConfig, MovieVectors, PosterEmbedder, TextEmbedder, embed_catalogue
from ops.agents.memory import LongTermMemory, build_long_term_memories, memories_from_arrays, memories_to_arrays
from ops.agents.movie_facts import MovieFacts, build_movie_facts
from ops.agents.profile import (
    AgentProfile,
    ProfileConfig,
    build_profiles,
    profiles_from_table,
    profiles_table,
    social_traits,
)
from ops.agents.session import AgentSession
from ops.storage.codec import check_format, load_arrays, load_json, load_table, save_arrays, save_json, save_table


class AgentsConfig(BaseModel):
    profile: ProfileConfig = ProfileConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()


@dataclass(eq=False)
class Agents:
    """The agents' profiles and long-term memories, the catalogue they perceive, and the
    social traits of every user they are drawn from (`traits`: `social_traits` of the train
    window, one row per user with enough train ratings to be an agent)."""

    profiles: dict[int, AgentProfile]
    memories: dict[int, LongTermMemory]
    vectors: MovieVectors
    facts: MovieFacts
    config: AgentsConfig
    timings_s: dict[str, float] = field(default_factory=dict)
    traits: pl.DataFrame | None = None
    # When the agents stand: None for agents of the train window alone (the fit clock);
    # else the run's clock, the agents at its simulation clock, `fit_lengths` each memory's
    # train part (its first entries), the part `at_fit_clock` keeps.
    clock: Clock | None = None
    fit_lengths: dict[int, int] | None = None

    @property
    def at_simulation_clock(self) -> bool:
        return self.fit_lengths is not None

    def at_fit_clock(self) -> Agents:
        """These agents as the validation window found them: memories cut at the end of the
        train window, agents without a train interaction left out; profiles as they are (a
        user's traits, not a prediction: docs/definitions.md#simulation-clock)."""
        if self.fit_lengths is None:
            return self
        fit = self.clock.fit if self.clock is not None else 0
        memories = {u: m.until(n, fit) for u, m in self.memories.items() if (n := self.fit_lengths.get(u, 0)) > 0}
        profiles = {u: p for u, p in self.profiles.items() if u in memories}
        return Agents(
            profiles, memories, self.vectors, self.facts, self.config, dict(self.timings_s), self.traits, self.clock
        )

    @property
    def population(self) -> np.ndarray:
        """Every user who could be an agent (sorted ids): whom samples are drawn from,
        whether or not their profile was built."""
        if self.traits is None:
            return np.array(sorted(self.profiles), dtype=np.int64)
        return self.traits.get_column("user_id").to_numpy().astype(np.int64)

    def sessions(self, user_ids=None) -> list[AgentSession]:
        """Session templates (no fatigue spent, budget 0: the runner sets it from the tier)."""
        ids = sorted(self.profiles) if user_ids is None else sorted(int(u) for u in user_ids)
        missing = [u for u in ids if u not in self.profiles]
        if missing:
            raise KeyError(
                f"{len(missing)} agent(s) asked for were not built, e.g. user {missing[0]}: the agents asset builds "
                f"the {len(self.profiles)} users the run reads (its agent sample, the embedded brain's fitting and "
                "calibration, the trust protocols); materialise it with the settings of the step that asks"
            )
        return [AgentSession(u, self.profiles[u], self.memories[u], 0.0, 0.0) for u in ids]

    def save(self, folder: Path) -> None:
        """Into `folder`, without pickle: profiles as Parquet, memories and the catalogue's
        vectors and facts as `.npz` + JSON, configuration and timings as JSON (`ops.storage.codec`)."""
        folder.mkdir(parents=True, exist_ok=True)
        save_json(
            folder / "agents.json",
            {
                "kind": "Agents",
                "format_version": 4,
                "config": self.config.model_dump(mode="json"),
                "timings_s": self.timings_s,
                "clock": None if self.clock is None else [self.clock.fit, self.clock.simulation],
            },
        )
        save_table(folder / "profiles.parquet", profiles_table(self.profiles))
        if self.traits is not None:
            save_table(folder / "traits.parquet", self.traits)
        arrays = memories_to_arrays(self.memories)
        if self.fit_lengths is not None:
            arrays["fit_lengths"] = np.asarray([self.fit_lengths.get(int(k), 0) for k in arrays["keys"]], np.int64)
        save_arrays(folder / "memories.npz", arrays)
        self.vectors.save(folder / "vectors")
        self.facts.save(folder / "facts")

    @classmethod
    def load(cls, folder: Path) -> Agents:
        meta = load_json(folder / "agents.json")
        # Format 2: profiles carry the persona (ops.agents.persona); 3: the population's traits;
        # 4: the agents' clock.
        check_format(meta, "Agents", 4, folder / "agents.json")
        vectors = MovieVectors.load(folder / "vectors")
        traits = folder / "traits.parquet"
        arrays = load_arrays(folder / "memories.npz")
        clock = meta.get("clock")
        memories = memories_from_arrays(arrays, vectors)
        if clock is not None:
            for memory in memories.values():
                memory.clock = int(clock[1])
        return cls(
            profiles=profiles_from_table(load_table(folder / "profiles.parquet")),
            memories=memories,
            vectors=vectors,
            facts=MovieFacts.load(folder / "facts"),
            config=AgentsConfig.model_validate(meta["config"]),
            timings_s=meta["timings_s"],
            traits=load_table(traits) if traits.is_file() else None,
            clock=None if clock is None else Clock(*clock),
            fit_lengths=None
            if "fit_lengths" not in arrays
            else dict(zip(arrays["keys"].tolist(), arrays["fit_lengths"].tolist())),
        )


def build_agents(
    train: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    config: AgentsConfig | None,
    text_embedder: TextEmbedder,
    poster_embedder: PosterEmbedder | None,
    cache_dir: str | Path | None = None,
    user_ids=None,
    valid: pl.DataFrame | None = None,
) -> Agents:
    """Profiles and memories of every user with ratings up to the agents' clock, or of those
    of `user_ids` (the traits of every user kept in `Agents.traits`); `catalogue` is MM-ML-1M.
    With `valid`, the agents stand at the simulation clock (module docstring)."""
    config = config or AgentsConfig()
    history = train if valid is None else history_until(train, valid)
    plain = history.drop("window", strict=False)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    vectors = embed_catalogue(catalogue, text_embedder, poster_embedder, cache_dir, config.embedding)
    timings["embed_catalogue"] = time.perf_counter() - t

    t = time.perf_counter()
    facts = build_movie_facts(catalogue, plain)
    looks = {int(m): str(look) for m, look in zip(vectors.item_ids, vectors.poster_look) if look}
    # Whom agents are drawn from: the users of the train window (the arms list them), their
    # traits read up to the agents' clock.
    traits = agent_population(plain, facts, config.profile).filter(
        pl.col("user_id").is_in(train.get_column("user_id").unique().implode())
    )
    chosen = None if user_ids is None else np.unique(np.asarray(user_ids, dtype=np.int64))
    profiles = build_profiles(
        plain, users, catalogue, config.profile, facts=facts, poster_looks=looks, user_ids=chosen, traits=traits
    )
    timings["profiles"] = time.perf_counter() - t

    t = time.perf_counter()
    read = history if chosen is None else history.filter(pl.col("user_id").is_in(pl.Series(chosen).implode()))
    memories = build_long_term_memories(read, vectors)
    memories = {u: m for u, m in memories.items() if u in profiles}
    fit_lengths = None
    if valid is not None:
        counts = dict(read.filter(pl.col("window") == 0).group_by("user_id").len().iter_rows())
        fit_lengths = {u: int(counts.get(u, 0)) for u in memories}
    clock = None if valid is None else Clock.of(train, valid)
    if clock is not None:
        for memory in memories.values():
            memory.clock = clock.simulation
    timings["memories"] = time.perf_counter() - t
    return Agents(profiles, memories, vectors, facts, config, timings, traits, clock, fit_lengths)


def agent_population(train: pl.DataFrame, facts: MovieFacts, config: ProfileConfig | None = None) -> pl.DataFrame:
    """The social traits of every user who can be an agent (`min_train_ratings` train
    ratings or more), sorted by user id: the population samples of agents are drawn from."""
    config = config or ProfileConfig()
    return social_traits(train, facts, config).filter(pl.col("activity") >= config.min_train_ratings)

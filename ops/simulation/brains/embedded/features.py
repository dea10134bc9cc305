"""Features of (agent, movie) pairs from the train window: memory retrieval by text and
poster, history statistics, crowd and demographic signals (package docstring, "Features").

`BrainContext` holds what all agents share; `agent_states` and `pair_features` score many
agents at once.

One concept, the embedded brain's features of (agent, movie) pairs and the shared context
they are computed from."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import polars as pl
from scipy import sparse
from threadpoolctl import ThreadpoolController

from ops.agents.clock import catalogue_at
from ops.agents.embeddings import MovieVectors
from ops.agents.memory import LongTermMemory, RecallWeights
from ops.agents.movie_facts import MovieFacts
from ops.agents.profile import (
    Credits,
    HistoryStats,
    PopulationStats,
    ProfileConfig,
    decade_index,
    memories_history_stats,
    movie_credits,
    population_stats,
)
from ops.simulation.brains.embedded.collab import (
    collab_item_factors,
    collab_profiles,
    graph_scores,
    item_neighbourhood_vectors,
    pathsim_neighbours,
)
from ops.simulation.brains.embedded.config import FEATURES, EmbeddedBrainConfig
from ops.storage.codec import check_format, load_arrays, load_json, save_arrays, save_json


@dataclass(eq=False)
class BrainContext:
    """Everything shared by all agents: the catalogue's vectors and facts, population stats."""

    vectors: MovieVectors
    facts: MovieFacts
    credits: Credits
    population: PopulationStats
    profile_config: ProfileConfig
    global_mean_rating: float
    vote_z: np.ndarray  # standardised vote average per catalogue row (0 where unknown)
    popularity_z: np.ndarray  # standardised log1p(train popularity)
    # the crowd's train mean rating, shrunk towards the global mean, minus the global mean
    crowd_rating: np.ndarray
    decade: np.ndarray  # DECADES index per row, -1 unknown
    # (gender|age group) x catalogue row: log((observed + prior) / (expected + prior)) train
    # ratings; groups named by `demographic_group`.  Empty without user demographics.
    demographic_lift: np.ndarray
    demographic_groups: dict[str, int]
    # (catalogue row, factor): PureSVD item factors of the train window's user x movie
    # matrix (`collab_factors`); (n, 0) when off or the window is too small.
    collab: np.ndarray = None  # type: ignore[assignment]
    # The catalogue as seen from the context's clock (`ops.agents.clock`): each item's trend
    # (recent against long-run popularity) and age (days since its first interaction, log),
    # standardised over the catalogue; zeros where the history says nothing.
    trend_z: np.ndarray = None  # type: ignore[assignment]
    age_z: np.ndarray = None  # type: ignore[assignment]
    # collab_family "pathsim": the item graph of SimUSER's knowledge-graph memory, each
    # item's `collab_neighbours` strongest neighbours by PathSim over item–user–item paths
    # (scipy CSR, catalogue row x catalogue row); None for the other families.
    neighbours: object = None
    # The instant the context reads the history at (unix seconds; 0: the history's end) and
    # the popularity half-life in days (inf: plain counts).
    clock: int = 0
    half_life_days: float = float("inf")

    def __post_init__(self) -> None:
        n = len(self.facts.item_ids)
        if self.collab is None:
            self.collab = np.zeros((n, 0), dtype=np.float32)
        for name in ("trend_z", "age_z"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(n))

    def similarity(self, kind: str, max_movies: int) -> np.ndarray | None:
        """The catalogue's movie x movie cosine matrix for "text" or "poster" (computed once,
        never pickled), or None when the catalogue is larger than `max_movies`."""
        if len(self.facts.item_ids) > max_movies:
            return None
        cache = self.__dict__.setdefault("_similarity", {})
        if kind not in cache:
            m = self.vectors.text if kind == "text" else self.vectors.poster
            cache[kind] = m @ m.T
        return cache[kind]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_similarity", None)
        return state

    def save(self, folder: Path, with_vectors: bool = True) -> None:
        """Into `folder`, without pickle: the catalogue's vectors (unless another context saved
        beside it holds them: `with_vectors` False) and facts (their own folders), the arrays
        and sparse credit matrices as `.npz`, the rest as JSON (`ops.storage.codec`)."""

        folder.mkdir(parents=True, exist_ok=True)
        if with_vectors:
            self.vectors.save(folder / "vectors")
        self.facts.save(folder / "facts")
        arrays = {name: getattr(self, name) for name in _CONTEXT_ARRAYS}
        arrays |= {f"population.{name}": getattr(self.population, name) for name in _POPULATION_ARRAYS}
        arrays["credits.looks"] = self.credits.looks
        for matrix_name in _CREDIT_MATRICES.values():
            matrix = getattr(self.credits, matrix_name)
            arrays |= {f"credits.{matrix_name}.{part}": getattr(matrix, part) for part in ("data", "indices", "indptr")}
            arrays[f"credits.{matrix_name}.shape"] = np.asarray(matrix.shape, dtype=np.int64)
        if self.neighbours is not None:
            arrays |= {f"neighbours.{part}": getattr(self.neighbours, part) for part in ("data", "indices", "indptr")}
        save_arrays(folder / "context.npz", arrays)
        save_json(
            folder / "context.json",
            {
                "kind": "BrainContext",
                "format_version": _CONTEXT_FORMAT,
                "profile_config": self.profile_config.model_dump(mode="json"),
                "global_mean_rating": self.global_mean_rating,
                "demographic_groups": self.demographic_groups,
                "credits": {name: list(getattr(self.credits, name)) for name in _CREDIT_MATRICES},
                "clock": self.clock,
                "half_life_days": None if not np.isfinite(self.half_life_days) else self.half_life_days,
            },
        )

    @classmethod
    def load(cls, folder: Path, vectors: MovieVectors | None = None) -> BrainContext:
        meta = load_json(folder / "context.json")
        check_format(meta, "BrainContext", _CONTEXT_FORMAT, folder / "context.json")
        arrays = load_arrays(folder / "context.npz")
        matrices = {
            name: sparse.csr_matrix(
                tuple(arrays[f"credits.{name}.{part}"] for part in ("data", "indices", "indptr")),
                shape=tuple(int(n) for n in arrays[f"credits.{name}.shape"]),
            )
            for name in _CREDIT_MATRICES.values()
        }
        credits = Credits(
            **{name: tuple(meta["credits"][name]) for name in _CREDIT_MATRICES},
            **matrices,
            looks=arrays["credits.looks"],
        )
        half_life = meta.get("half_life_days")
        n = len(arrays["vote_z"])
        neighbours = (
            sparse.csr_matrix(
                tuple(arrays[f"neighbours.{part}"] for part in ("data", "indices", "indptr")), shape=(n, n)
            )
            if "neighbours.data" in arrays
            else None
        )
        return cls(
            neighbours=neighbours,
            vectors=vectors if vectors is not None else MovieVectors.load(folder / "vectors"),
            facts=MovieFacts.load(folder / "facts"),
            credits=credits,
            population=PopulationStats(**{name: arrays[f"population.{name}"] for name in _POPULATION_ARRAYS}),
            profile_config=ProfileConfig.model_validate(meta["profile_config"]),
            global_mean_rating=meta["global_mean_rating"],
            demographic_groups=meta["demographic_groups"],
            clock=int(meta.get("clock") or 0),
            half_life_days=float("inf") if half_life is None else float(half_life),
            **{name: arrays[name] for name in _CONTEXT_ARRAYS if name in arrays},
        )

    @classmethod
    def build(
        cls,
        vectors: MovieVectors,
        facts: MovieFacts,
        train: pl.DataFrame,
        profile_config: ProfileConfig | None = None,
        users: pl.DataFrame | None = None,
        demographic_prior: float = 5.0,
        crowd_rating_prior: float = 10.0,
        collab_factors: int = 0,
        collab_family: str = "puresvd",
        clock: int | None = None,
        half_life_days: float = float("inf"),
    ) -> BrainContext:
        """The context of `train`, the history up to `clock` (default: its last timestamp),
        popularity weighted by recency with `half_life_days` (`ops.agents.clock`)."""
        if not np.array_equal(vectors.item_ids, facts.item_ids):
            raise ValueError("MovieVectors and MovieFacts must cover the same movies in the same order")
        profile_config = profile_config or ProfileConfig()
        looks = {int(m): str(look) for m, look in zip(vectors.item_ids, vectors.poster_look) if look}
        credits = movie_credits(facts, profile_config, looks, keywords=False)
        vote = facts.vote_average
        known = np.isfinite(vote)
        vote_z = np.zeros(len(vote))
        if known.sum() > 1:
            vote_z[known] = (vote[known] - vote[known].mean()) / max(vote[known].std(), 1e-6)
        clock = int(train.get_column("timestamp").max()) if clock is None and train.height else int(clock or 0)
        seen = catalogue_at(train, facts.item_ids, clock, half_life_days)
        logpop = np.log1p(seen.decayed)
        lift, groups = _demographic_lift(train, users, facts, demographic_prior)
        global_mean = float(train.get_column("rating").mean()) if train.height else 3.5
        n = facts.popularity.astype(np.float64)
        rated_mean = np.where(np.isfinite(facts.mean_rating), facts.mean_rating, global_mean)
        crowd = (n * rated_mean + crowd_rating_prior * global_mean) / np.maximum(
            n + crowd_rating_prior, 1e-9
        ) - global_mean
        return cls(
            vectors=vectors,
            facts=facts,
            credits=credits,
            population=population_stats(train, facts, credits.looks),
            profile_config=profile_config,
            global_mean_rating=global_mean,
            vote_z=vote_z,
            popularity_z=(logpop - logpop.mean()) / max(logpop.std(), 1e-6),
            crowd_rating=crowd,
            decade=decade_index(facts.year),
            demographic_lift=lift,
            demographic_groups=groups,
            collab=np.zeros((len(facts.item_ids), 0), dtype=np.float32)
            if collab_family == "pathsim"
            else (item_neighbourhood_vectors if collab_family == "itemknn" else collab_item_factors)(
                train, facts.item_ids, collab_factors
            ),
            neighbours=pathsim_neighbours(train, facts.item_ids, collab_factors)
            if collab_family == "pathsim"
            else None,
            trend_z=_standardised(seen.trend, seen.count > 0),
            age_z=_standardised(np.log1p(seen.age_days), seen.count > 0),
            clock=clock,
            half_life_days=float(half_life_days),
        )


def _standardised(values: np.ndarray, known: np.ndarray) -> np.ndarray:
    """`values` standardised over the `known` items, 0 for the others (the mean)."""
    out = np.zeros(len(values))
    if known.sum() > 1:
        v = values[known]
        out[known] = (v - v.mean()) / max(float(v.std()), 1e-6)
    return out


def demographic_group(gender: object, age: object) -> str | None:
    """The key of a (gender, age bracket) group, None when either is unknown."""
    if gender is None or age is None:
        return None
    return f"{gender}|{age}"


@dataclass(eq=False)
class AgentState:
    """One agent's memory in the form the features need; built once, reused across arms."""

    rows: np.ndarray  # memory rows into the catalogue
    centred: np.ndarray  # rating − user mean
    liked: np.ndarray  # bool
    ratings: np.ndarray
    mean_rating: float
    conformity: float  # −1 (most independent) .. +1 (most conforming)
    group: int  # row of ctx.demographic_lift, -1 unknown
    poster_ok: np.ndarray  # bool: the remembered movie has a poster
    stats: HistoryStats  # shared by the agents prepared together
    stat_row: int
    recent_rows: np.ndarray = None  # type: ignore[assignment]  # the `collab_recent` newest memory rows
    # Per memory, for recall (`ops.agents.memory.RecallWeights`): recency and importance.
    recency: np.ndarray = None  # type: ignore[assignment]
    importance: np.ndarray = None  # type: ignore[assignment]


def agent_states(
    memories: Mapping[int, LongTermMemory],
    profiles: Mapping[int, object],
    ctx: BrainContext,
    config: EmbeddedBrainConfig,
) -> dict[int, AgentState]:
    """States of many agents at once (their history statistics in one sparse pass).
    `profiles`: each agent's profile (AgentProfile); its conformity_score, gender and age
    are read, an agent without them counts as middling and of unknown group."""
    stats = memories_history_stats(memories, ctx.facts, ctx.population, ctx.credits, ctx.profile_config)
    recall = recall_weights(config, ctx)
    out = {}
    for i, uid in enumerate(stats.user_ids.tolist()):
        memory = memories[uid]
        ratings = memory.ratings.astype(np.float64)
        mean = float(stats.mean_rating[i]) if len(ratings) else ctx.global_mean_rating
        out[uid] = AgentState(
            rows=memory.rows,
            centred=ratings - mean,
            liked=ratings >= config.like_threshold,
            ratings=memory.ratings,
            mean_rating=mean,
            conformity=2.0 * float(getattr(profiles.get(uid), "conformity_score", 0.5)) - 1.0,
            group=ctx.demographic_groups.get(
                demographic_group(getattr(profiles.get(uid), "gender", None), getattr(profiles.get(uid), "age", None)),
                -1,
            ),
            poster_ok=ctx.vectors.has_poster[memory.rows],
            stats=stats,
            stat_row=i,
            recent_rows=memory.rows[np.argsort(memory.timestamps, kind="stable")[-config.collab_recent :]],
            recency=memory.recency(recall.half_life_days),
            importance=memory.importance(),
        )
    return out


@dataclass(eq=False)
class PairScores:
    """Features and model outputs for one agent's candidate movies (row = candidate)."""

    index: dict[int, int]  # movie id -> row
    rows: np.ndarray  # catalogue row per candidate
    features: np.ndarray  # (n, len(FEATURES))
    click_logit: np.ndarray
    like_logit: np.ndarray
    rating_mean: np.ndarray
    text_neighbour: np.ndarray  # memory position of the closest liked memory by text, -1 none
    poster_neighbour: np.ndarray


def pair_features(
    agents: Sequence[AgentState],
    candidates: Sequence[np.ndarray],
    ctx: BrainContext,
    config: EmbeddedBrainConfig,
    retrieval: bool = True,
    credits: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features of every (agent, candidate row) pair, stacked agent by agent.

    Returns (features (P, len(FEATURES)), text neighbour, poster neighbour): a neighbour is
    the position in the agent's memory of the closest liked movie among the k retrieved,
    -1 when none.  All agents must share one `HistoryStats` (`agent_states`).  Without
    `retrieval` the memory-retrieval features are left at 0 (`RETRIEVAL_FEATURES`: what a
    bound on them can stand in for, `ops.studies.mirror`), without `credits` the detail
    page's credit matches (the home page shows no credits).
    """
    lengths = np.array([len(c) for c in candidates], dtype=np.int64)
    P = int(lengths.sum())
    X = np.zeros((P, len(FEATURES)))
    text_nn = np.full(P, -1, dtype=np.int64)
    poster_nn = np.full(P, -1, dtype=np.int64)
    if P == 0:
        return X, text_nn, poster_nn
    stats = agents[0].stats
    if any(a.stats is not stats for a in agents):
        raise ValueError("pair_features: agents must share one HistoryStats; group them first")
    col = {f: j for j, f in enumerate(FEATURES)}
    pm = np.concatenate([np.asarray(c, dtype=np.int64) for c in candidates])
    pa = np.repeat(np.arange(len(agents)), lengths)
    srow = np.array([a.stat_row for a in agents], dtype=np.int64)[pa]

    # Long-term memory retrieval, by text and by poster (A/B Agent §2.4.2): one small
    # matrix product per agent.
    use_posters = config.use_posters and ctx.vectors.poster.shape[1] > 0
    text, poster = ctx.vectors.text, ctx.vectors.poster

    if use_posters:
        ctx.similarity("poster", config.similarity_cache_max_movies)
    ctx.similarity("text", config.similarity_cache_max_movies)  # one big product, all BLAS threads
    # Thousands of small products: BLAS threads cost more to wake than they save
    # (measured 10x slower with 2 OpenBLAS threads on a 20 x 150 x 384 product).
    if retrieval:
        with _blas_threads().limit(limits=1, user_api="blas"):
            _retrieval_loop(agents, lengths, pm, X, text_nn, poster_nn, col, text, poster, use_posters, ctx, config)
    return _rest_of_features(agents, lengths, pm, pa, srow, stats, X, text_nn, poster_nn, col, ctx, credits)


@functools.cache
def _blas_threads() -> ThreadpoolController:
    """The process's thread pools, found once: `threadpool_limits` looks every loaded library
    up again at each call (0.5 ms alone, more in a process that has torch loaded), and the
    per-item protocols call `pair_features` once per agent and question (py-spy: a fifth of
    taste_alignment's time on a 1 M-row log)."""
    return ThreadpoolController()


# The features memory retrieval computes (`_retrieval_loop`).
RETRIEVAL_FEATURES = ("text_familiarity", "text_affinity", "poster_familiarity", "poster_affinity")


def recall_weights(config: EmbeddedBrainConfig, ctx: BrainContext) -> RecallWeights:
    """The recall weights the features use: the configured (fitted) ones, else plain
    similarity; their half-life is the context's popularity half-life where it has one."""
    weights = config.recall or RecallWeights()
    if config.recall is None and np.isfinite(ctx.half_life_days):
        weights = weights.model_copy(update={"half_life_days": ctx.half_life_days})
    return weights


def _demographic_lift(train: pl.DataFrame, users: pl.DataFrame | None, facts: MovieFacts, prior: float):
    if users is None or not {"user_id", "gender", "age"} <= set(users.columns) or train.height == 0:
        return np.zeros((0, len(facts.item_ids)), dtype=np.float32), {}
    rows = {int(m): i for i, m in enumerate(facts.item_ids.tolist())}
    joined = (
        train.select("user_id", "item_id")
        .join(users.select("user_id", "gender", "age"), on="user_id", how="inner")
        .drop_nulls(["gender", "age"])
    )  # a domain without demographics (docs/data_model.md) has no groups
    keys = sorted({demographic_group(g, a) for g, a in joined.select("gender", "age").unique().iter_rows()} - {None})
    groups = {k: i for i, k in enumerate(keys)}
    counts = np.zeros((len(keys), len(rows)))
    per = joined.group_by("gender", "age", "item_id").len()
    g_idx = np.array(
        [groups[demographic_group(g, a)] for g, a in per.select("gender", "age").iter_rows()], dtype=np.int64
    )
    m_idx = np.array([rows.get(int(m), -1) for m in per.get_column("item_id").to_list()], dtype=np.int64)
    ok = m_idx >= 0
    np.add.at(counts, (g_idx[ok], m_idx[ok]), per.get_column("len").to_numpy()[ok])
    total = counts.sum()
    expected = counts.sum(axis=1, keepdims=True) * counts.sum(axis=0, keepdims=True) / max(total, 1.0)
    return np.log((counts + prior) / (expected + prior)).astype(np.float32), groups


def _retrieval_loop(agents, lengths, pm, X, text_nn, poster_nn, col, text, poster, use_posters, ctx, config) -> None:
    offsets = np.r_[0, np.cumsum(lengths)]
    max_movies = config.similarity_cache_max_movies
    fam, aff, nn = _batched_retrieval(text, ctx.similarity("text", max_movies), agents, pm, offsets, None, config)
    X[:, col["text_familiarity"]], X[:, col["text_affinity"]], text_nn[:] = fam, aff, nn
    if use_posters:
        ok = [a.poster_ok for a in agents]
        fam, aff, nn = _batched_retrieval(poster, ctx.similarity("poster", max_movies), agents, pm, offsets, ok, config)
        has = ctx.vectors.has_poster[pm]
        X[:, col["poster_familiarity"]] = np.where(has, fam, 0.0)
        X[:, col["poster_affinity"]] = np.where(has, aff, 0.0)
        poster_nn[:] = np.where(has, nn, -1)


def _batched_retrieval(matrix, sim, agents, pm, offsets, memory_ok, config, max_bytes: int = 1 << 26):
    """Top-k retrieval for every (agent, candidate) pair, agents batched by size.

    Agents are grouped by (memory size, candidate count) rounded up a little; each
    group's similarities are gathered from the catalogue's cosine matrix `sim` (or, without
    it, one stacked product of the vectors), padded entries masked out.  The k retrieved
    are the most similar, ties (to 1e-5, so float noise cannot flip them) going to the most
    recent memory, as in `LongTermMemory.retrieve_by_text`.
    """
    P = int(offsets[-1])
    fam, aff = np.zeros(P), np.zeros(P)
    nn = np.full(P, -1, dtype=np.int64)
    weights = config.recall
    weighted = weights is not None and not weights.plain
    buckets: dict[tuple[int, int], list[int]] = {}
    for i, agent in enumerate(agents):
        m, c = len(agent.rows), int(offsets[i + 1] - offsets[i])
        if m and c and (memory_ok is None or memory_ok[i].any()):
            buckets.setdefault((_round_up(m), _round_up(c)), []).append(i)
    d = 0 if sim is not None else matrix.shape[1]
    for (L, C), members in sorted(buckets.items()):
        step = max(1, max_bytes // (4 * d * (L + C) + 40 * C * L))
        for start in range(0, len(members), step):
            chunk = members[start : start + step]
            B = len(chunk)
            mem_idx = np.zeros((B, L), dtype=np.int64)
            mem_ok = np.zeros((B, L), dtype=bool)
            centred = np.zeros((B, L))
            liked = np.zeros((B, L), dtype=bool)
            cand_idx = np.zeros((B, C), dtype=np.int64)
            bonus = np.zeros((B, L))  # recency and importance (RecallWeights)
            for b, i in enumerate(chunk):
                a = agents[i]
                m, lo, hi = len(a.rows), offsets[i], offsets[i + 1]
                mem_idx[b, :m] = a.rows
                mem_ok[b, :m] = True if memory_ok is None else memory_ok[i]
                centred[b, :m] = a.centred
                liked[b, :m] = a.liked
                cand_idx[b, : hi - lo] = pm[lo:hi]
                if weighted:
                    bonus[b, :m] = weights.recency * a.recency + weights.importance * a.importance
            if sim is not None:
                sims = sim[cand_idx[:, :, None], mem_idx[:, None, :]]  # (B, C, L)
            else:
                sims = np.matmul(matrix[cand_idx], matrix[mem_idx].transpose(0, 2, 1))
            sims[np.broadcast_to(~mem_ok[:, None, :], sims.shape)] = -np.inf
            k = min(config.retrieval_k, L)
            score = sims.astype(np.float64)
            if weighted:  # Generative Agents' recall: min-max relevance + recency + importance
                lo_s = np.where(np.isfinite(score), score, np.inf).min(axis=2, keepdims=True)
                hi_s = np.where(np.isfinite(score), score, -np.inf).max(axis=2, keepdims=True)
                score = (score - lo_s) / np.maximum(hi_s - lo_s, 1e-9) + bonus[:, None, :]
            key = np.round(score, 5) + np.arange(L) * (1e-5 / (L + 1))  # later memory wins a tie
            top = np.argpartition(-key, k - 1, axis=2)[..., :k] if k < L else np.broadcast_to(np.arange(L), sims.shape)
            s_top = np.take_along_axis(sims, top, axis=2).astype(np.float64)
            # The neighbour named in a reason is the most similar liked memory recalled (its
            # similarity, not the recall score that also weighs recency and importance).
            closeness = key if not weighted else np.round(sims.astype(np.float64), 5) + np.arange(L) * (1e-5 / (L + 1))
            k_top = np.take_along_axis(closeness, top, axis=2)
            valid = np.isfinite(s_top)
            s0 = np.where(valid, s_top, 0.0)
            f = s0.sum(axis=2) / np.maximum(valid.sum(axis=2), 1)
            w = np.clip(s0, 0.0, None)
            c_top = np.take_along_axis(np.broadcast_to(centred[:, None, :], sims.shape), top, axis=2)
            af = (w * c_top).sum(axis=2) / (w.sum(axis=2) + 1e-6)
            l_top = np.take_along_axis(np.broadcast_to(liked[:, None, :], sims.shape), top, axis=2)
            liked_score = np.where(l_top & valid, k_top, -np.inf)
            best = np.argmax(liked_score, axis=2)
            picked = np.take_along_axis(top, best[..., None], axis=2)[..., 0]
            n_best = np.where(np.isfinite(liked_score.max(axis=2)), picked, -1)
            for b, i in enumerate(chunk):
                lo, hi = offsets[i], offsets[i + 1]
                fam[lo:hi], aff[lo:hi], nn[lo:hi] = f[b, : hi - lo], af[b, : hi - lo], n_best[b, : hi - lo]
    return fam, aff, nn


# Collaborative vectors wider than this are dotted agent by agent (`_rest_of_features`).
_WIDE_COLLAB = 256


def _round_up(n: int) -> int:
    """n rounded up to one of 8 steps per power of two (at most 12.5 % padding)."""
    n = max(int(n), 8)
    step = 1 << max(n.bit_length() - 4, 0)
    return -(-n // step) * step


def _rest_of_features(agents, lengths, pm, pa, srow, stats, X, text_nn, poster_nn, col, ctx, credits=True):
    X[:, col["user_mean"]] = np.array([a.mean_rating for a in agents])[pa] - ctx.global_mean_rating
    g = ctx.facts.genres[pm].astype(np.float64)
    ng = np.maximum(g.sum(axis=1), 1.0)
    X[:, col["genre_lift"]] = (g * stats.genre_lift[srow]).sum(axis=1) / ng
    X[:, col["genre_deviation"]] = (g * stats.genre_deviation[srow]).sum(axis=1) / ng
    dec = ctx.decade[pm]
    X[:, col["era_lift"]] = np.where(dec >= 0, stats.decade_lift[srow, np.maximum(dec, 0)], 0.0)
    conformity = np.array([a.conformity for a in agents])[pa]
    X[:, col["vote"]] = ctx.vote_z[pm]
    X[:, col["vote_x_conformity"]] = ctx.vote_z[pm] * conformity
    X[:, col["popularity"]] = ctx.popularity_z[pm]
    X[:, col["popularity_x_conformity"]] = ctx.popularity_z[pm] * conformity
    # The head of the popularity curve: on logs where a few items take most interactions
    # (Steam) the rate of interaction grows faster than exp(linear in log popularity) there.
    X[:, col["popularity_head"]] = np.maximum(ctx.popularity_z[pm], 0.0) ** 2
    X[:, col["trend"]] = ctx.trend_z[pm]
    X[:, col["age"]] = ctx.age_z[pm]
    X[:, col["crowd_rating"]] = ctx.crowd_rating[pm]
    X[:, col["crowd_rating_x_conformity"]] = ctx.crowd_rating[pm] * conformity
    group = np.array([a.group for a in agents], dtype=np.int64)[pa]
    if ctx.demographic_lift.shape[0]:
        X[:, col["demographic_lift"]] = np.where(group >= 0, ctx.demographic_lift[np.maximum(group, 0), pm], 0.0)
    if ctx.neighbours is not None:
        X[:, col["collab"]], X[:, col["collab_recent"]] = graph_scores(agents, pa, pm, ctx)
    elif ctx.collab.shape[1] > _WIDE_COLLAB:
        # One column per train user (item-kNN): agent by agent, so that no pairs x users
        # array is built (the mirror scores every movie for each agent).
        every, recent = collab_profiles(agents, ctx)
        offsets = np.r_[0, np.cumsum(lengths)]
        for i in range(len(agents)):
            lo, hi = offsets[i], offsets[i + 1]
            item = ctx.collab[pm[lo:hi]].astype(np.float64)
            X[lo:hi, col["collab"]], X[lo:hi, col["collab_recent"]] = item @ every[i], item @ recent[i]
    elif ctx.collab.shape[1]:
        every, recent = collab_profiles(agents, ctx)
        item = ctx.collab[pm].astype(np.float64)
        X[:, col["collab"]] = (every[pa] * item).sum(axis=1)
        X[:, col["collab_recent"]] = (recent[pa] * item).sum(axis=1)
    if not credits:
        return X, text_nn, poster_nn
    # Credits: liked movies by the same director / with the same top actors: each agent's
    # liked credits against every movie's in one sparse product, then the pairs gathered.
    agent_rows, pair_agent = np.unique(srow, return_inverse=True)

    def matches(per_agent, per_movie) -> np.ndarray:
        products = (per_agent[agent_rows] @ per_movie.T).tocsr()
        return np.asarray(products[pair_agent, pm], dtype=np.float64).ravel()

    dm, am = ctx.credits.director_matrix, ctx.credits.actor_matrix
    liked_dir, disliked_dir = matches(stats.liked_directors, dm), matches(stats.disliked_directors, dm)
    X[:, col["director_match"]] = np.log1p(liked_dir) - np.log1p(disliked_dir)
    X[:, col["actor_match"]] = np.log1p(matches(stats.liked_actors, am))
    return X, text_nn, poster_nn


# ---------------------------------------------------------------------------------------
# Fitting on the train and validation windows


# What `BrainContext.save` writes to its `.npz`: its own arrays, the population shares and
# the credits' sparse matrices (named by the tuple of names each indexes).
# Every array field of BrainContext, read from the class so that a field added later is saved too.
_CONTEXT_ARRAYS = tuple(f.name for f in fields(BrainContext) if f.type == "np.ndarray")
# 2: crowd_rating (collab, trend_z, age_z and the clock, added later, are optional: absent =
# off, zeros, the history's end)
_CONTEXT_FORMAT = 2
_POPULATION_ARRAYS = ("genre_share", "decade_share", "look_share")
_CREDIT_MATRICES = {"directors": "director_matrix", "actors": "actor_matrix", "keywords": "keyword_matrix"}

"""The embedded brain: the offline default way an agent decides (design.md "Brains").

It reads what an LLM brain would read — the page (A/B Agent §2.3), the agent's profile
(§2.4.1), memories retrieved from long-term memory by text and by poster similarity
(§2.4.2), the session so far (short-term memory) and its fatigue (§2.4.4) — and turns them
into actions with a few parameters fitted on data instead of a prompt.

Features of a (user, movie) pair, all from the TRAIN window (`pair_features`):
- text_familiarity / poster_familiarity: mean cosine similarity of the movie to the k
  remembered movies retrieved by text / by poster (how much it resembles what the user
  watches at all);
- text_affinity / poster_affinity: the rating-weighted similarity of those k memories,
  Σ sim·(rating − user mean) / Σ sim (does it resemble what the user rated highly);
- genre_lift, genre_deviation: over the movie's genres, the user's over-representation of
  the genre (log share ratio against all users) and mean rating gap in it;
- era_lift: the same log share ratio for the movie's release decade;
- vote, popularity: vote average and log train popularity, standardised over the
  catalogue, each also multiplied by the conformity trait (−1 most independent … +1 most
  conforming): conformists follow the crowd (Agent4Rec §2.1.1);
- user_mean: the user's mean rating minus the global mean (SimUSER's pickiness);
- demographic_lift: how much more than expected people of the agent's gender and age
  group rated the movie in the train window, log((observed + 5) / (expected + 5)) — the
  profile's demographics, which an LLM reads as "people like me tend to watch …";
- director_match, actor_match (detail page only: the home page does not show credits):
  how often the user liked movies by the same director / with the same top actors.

Fitting (`fit`), on the train and validation windows only — the test window is never read:
1. click model (home page): users with validation ratings; positives = the movies each
   rated in the validation window; negatives = movies the user rated in neither window,
   `negatives_per_positive` per positive, half drawn uniformly from the catalogue and half
   in proportion to train popularity (so the model must separate taste from popularity).
   A logistic regression (scikit-learn, L2) on the home-page features.
2. like model (detail page): on the validation positives, label = rating >= 4; a
   logistic regression on all features.
3. rating model: least squares (ridge) of the validation rating on all features; its
   residual standard deviation is the spread of sampled ratings.
Click × like is P(rated in the validation window and rated >= 4): the label the issue
names, split in two because the home page and the detail page show different things.
A share of the users (`holdout_share`) is held out and the held-out AUCs and RMSE are
stored with the parameters.  Not fitted (no log records them): the position effect on the
home page, the watch/exit/interest mappings and the satisfaction formula; their constants
sit in `EmbeddedBrainConfig` with the reason for each.

Decisions (`EmbeddedBrain.decide`), each drawn from the generator the loop passes in, so a
session is a pure function of (seed, agent, arm):
- home page, first look at a page: each card catches the eye with probability
  sigmoid(click logit − position_decay·(slot − 1) + click_bias); the agent then clicks the
  caught cards best first, coming back to the page after each detail page.  With nothing
  left it moves on or exits, more likely to exit when tired and when the page bores it.
- detail page: watch with probability sigmoid(like logit + watch_bias), rating = the
  rating model's mean plus Gaussian noise, rounded into 1..5; otherwise back.
- interest (1–5, drives fatigue): cut points on the page's best click probability (home)
  or the like probability (detail).
- exit interview: satisfaction 1..10 from likes, dislikes, interest and pickiness.
Every action carries a short reason built from the features that drove it.

Speed: `prepare` scores every (agent, shown movie) pair of an arm in one batch — the
history statistics as sparse matrix products, the memory retrieval as gathers from the
catalogue's cosine matrix (computed once per context), agents grouped by memory size — so
`decide` is a few dictionary look-ups and float operations.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.agents.profile import (
    DECADES,
    Credits,
    HistoryStats,
    PopulationStats,
    ProfileConfig,
    decade_index,
    memories_history_stats,
    movie_credits,
    population_stats,
)
from ops.agents.memory import LongTermMemory, MovieFacts, MovieVectors
from ops.simulation.observation import (
    BACK,
    CLICK_MOVIE,
    EXIT,
    NEXT_PAGE,
    WATCH_AND_RATE,
    AgentSession,
    Decision,
    Observation,
    ShortTermEntry,
)
from ops.schema import GENRES

HOME_FEATURES = (
    "user_mean",
    "text_familiarity",
    "text_affinity",
    "poster_familiarity",
    "poster_affinity",
    "genre_lift",
    "genre_deviation",
    "era_lift",
    "vote",
    "vote_x_conformity",
    "popularity",
    "popularity_x_conformity",
    "demographic_lift",
)
DETAIL_FEATURES = HOME_FEATURES + ("director_match", "actor_match")
FEATURES = DETAIL_FEATURES


class EmbeddedBrainConfig(BaseModel):
    # Long-term memory retrieval: memories recalled per query (A/B Agent §2.4.2 retrieves
    # "relevant records"; 10 keeps a handful of strong neighbours without averaging away).
    retrieval_k: int = Field(10, ge=1)
    # Catalogues up to this size get a precomputed movie x movie cosine matrix (float32,
    # 60 MB for ML-1M's 3,883 movies), so retrieval is a gather instead of a product per
    # agent; larger catalogues fall back to one small product per agent.
    similarity_cache_max_movies: int = Field(8000, ge=0)
    # Vision ablation (A/B Agent §3.5, Table 5 "w/o vision"): False zeroes poster features.
    use_posters: bool = True
    # Ratings at or above this count as liked (A/B Agent label, design.md lifecycle 5).
    like_threshold: int = 4

    # -- fitting (train and validation windows) --
    negatives_per_positive: int = Field(4, ge=1)
    popular_negative_share: float = Field(0.5, ge=0, le=1)
    fit_max_users: int = Field(3000, ge=1)
    fit_max_positives_per_user: int = Field(30, ge=1)
    holdout_share: float = Field(0.2, ge=0, lt=1)
    l2_c: float = Field(1.0, gt=0)  # inverse L2 strength of both logistic models
    ridge_alpha: float = Field(1.0, ge=0)
    fit_seed: int = 0

    # -- home page --
    # Shift of the fitted click log-odds.  The click model is fitted with 1 positive per
    # `negatives_per_positive` negatives; 0 keeps that base rate.
    click_bias: float = 0.0
    # Eyes scan a page top to bottom: each slot lower costs this much log-odds (not in any
    # log, so not fitted; A/B Agent §3.1 shows 5 items per page).
    position_decay: float = 0.1
    # Interest 1..5 on a home page: 1 + number of these cut points the page's best click
    # probability reaches.
    home_interest_cuts: tuple[float, float, float, float] = (0.15, 0.3, 0.5, 0.7)
    # Leaving instead of turning the page: sigmoid(bias + fatigue_weight·spent/budget
    # + interest_weight·(3 − interest)).  A/B Agent §2.4.4: fatigue and low interest
    # drive exits; Table 6 case 4 exits at 25/30 fatigue on an uninteresting page.
    exit_bias: float = -2.0
    exit_fatigue_weight: float = 2.5
    exit_interest_weight: float = 0.7

    # -- detail page --
    # Watch probability = sigmoid(like log-odds + watch_bias): most clicks end in a watch
    # (A/B Agent Table 2: CVR / CTR between 0.5 and 0.8).
    watch_bias: float = 0.8
    # Spread of sampled ratings, as a multiple of the rating model's residual sd.
    rating_noise: float = 1.0
    detail_interest_cuts: tuple[float, float, float, float] = (0.3, 0.5, 0.7, 0.85)

    # -- exit interview (Agent4Rec §3.3: satisfaction 1..10) --
    satisfaction_base: float = 4.0
    satisfaction_per_like: float = 1.5
    satisfaction_per_watch: float = 0.3  # watched but not liked
    satisfaction_per_dislike: float = -1.0  # watched and rated <= 2
    satisfaction_interest_weight: float = 0.8  # per point of mean home interest above 3
    satisfaction_pickiness: dict[str, float] = {"not picky": 0.5, "moderately picky": 0.0, "extremely picky": -0.7}
    satisfaction_noise_sd: float = 0.5
    satisfaction_range: tuple[int, int] = (1, 10)
    rating_range: tuple[int, int] = (1, 5)


class LinearModel(BaseModel):
    """A linear score on named features, in raw (unstandardised) feature units."""

    features: list[str]
    coef: list[float]
    intercept: float

    def score(self, X: np.ndarray, columns: Sequence[str] = FEATURES) -> np.ndarray:
        idx = [list(columns).index(f) for f in self.features]
        return X[:, idx] @ np.asarray(self.coef) + self.intercept


class EmbeddedBrainParams(BaseModel):
    """What `fit` learned; saved as JSON beside the run."""

    version: int = 1
    click: LinearModel
    like: LinearModel
    rating: LinearModel
    rating_residual_sd: float
    n_users: int
    n_positives: int
    n_negatives: int
    holdout_users: int
    click_auc_holdout: float | None
    like_auc_holdout: float | None
    rating_rmse_holdout: float | None
    global_mean_rating: float
    text_model: str
    poster_model: str
    catalogue_digest: str
    seed: int

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(self.model_dump_json(indent=2))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "EmbeddedBrainParams":
        try:
            return cls.model_validate(json.loads(Path(path).read_text()))
        except Exception as exc:
            raise ValueError(f"embedded brain parameters {path} cannot be read: {exc}") from exc


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
    decade: np.ndarray  # DECADES index per row, -1 unknown
    # (gender|age group) x catalogue row: log((observed + prior) / (expected + prior)) train
    # ratings; groups named by `demographic_group`.  Empty without user demographics.
    demographic_lift: np.ndarray
    demographic_groups: dict[str, int]

    def similarity(self, kind: str, max_movies: int) -> np.ndarray | None:
        """The catalogue's movie x movie cosine matrix for "text" or "poster" (computed once,
        never pickled), or None when the catalogue is larger than `max_movies`."""
        if len(self.facts.movie_ids) > max_movies:
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

    @classmethod
    def build(
        cls,
        vectors: MovieVectors,
        facts: MovieFacts,
        train: pl.DataFrame,
        profile_config: ProfileConfig | None = None,
        users: pl.DataFrame | None = None,
        demographic_prior: float = 5.0,
    ) -> "BrainContext":
        if not np.array_equal(vectors.movie_ids, facts.movie_ids):
            raise ValueError("MovieVectors and MovieFacts must cover the same movies in the same order")
        profile_config = profile_config or ProfileConfig()
        looks = {int(m): str(l) for m, l in zip(vectors.movie_ids, vectors.poster_look) if l}
        credits = movie_credits(facts, profile_config, looks, keywords=False)
        vote = facts.vote_average
        known = np.isfinite(vote)
        vote_z = np.zeros(len(vote))
        if known.sum() > 1:
            vote_z[known] = (vote[known] - vote[known].mean()) / max(vote[known].std(), 1e-6)
        logpop = np.log1p(facts.popularity.astype(np.float64))
        lift, groups = _demographic_lift(train, users, facts, demographic_prior)
        return cls(
            vectors=vectors,
            facts=facts,
            credits=credits,
            population=population_stats(train, facts, credits.looks),
            profile_config=profile_config,
            global_mean_rating=float(train.get_column("rating").mean()) if train.height else 3.5,
            vote_z=vote_z,
            popularity_z=(logpop - logpop.mean()) / max(logpop.std(), 1e-6),
            decade=decade_index(facts.year),
            demographic_lift=lift,
            demographic_groups=groups,
        )


def demographic_group(gender: object, age: object) -> str | None:
    """The key of a (gender, age bracket) group, None when either is unknown."""
    if gender is None or age is None:
        return None
    return f"{gender}|{age}"


def _demographic_lift(train: pl.DataFrame, users: pl.DataFrame | None, facts: MovieFacts, prior: float):
    if users is None or not {"user_id", "gender", "age"} <= set(users.columns) or train.height == 0:
        return np.zeros((0, len(facts.movie_ids)), dtype=np.float32), {}
    rows = {int(m): i for i, m in enumerate(facts.movie_ids.tolist())}
    joined = train.select("user_id", "movie_id").join(users.select("user_id", "gender", "age"), on="user_id", how="inner")
    keys = sorted({demographic_group(g, a) for g, a in joined.select("gender", "age").unique().iter_rows()} - {None})
    groups = {k: i for i, k in enumerate(keys)}
    counts = np.zeros((len(keys), len(rows)))
    per = joined.group_by("gender", "age", "movie_id").len()
    g_idx = np.array([groups[demographic_group(g, a)] for g, a in per.select("gender", "age").iter_rows()], dtype=np.int64)
    m_idx = np.array([rows.get(int(m), -1) for m in per.get_column("movie_id").to_list()], dtype=np.int64)
    ok = m_idx >= 0
    np.add.at(counts, (g_idx[ok], m_idx[ok]), per.get_column("len").to_numpy()[ok])
    total = counts.sum()
    expected = counts.sum(axis=1, keepdims=True) * counts.sum(axis=0, keepdims=True) / max(total, 1.0)
    return np.log((counts + prior) / (expected + prior)).astype(np.float32), groups


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


def agent_states(
    memories: Mapping[int, LongTermMemory], profiles: Mapping[int, object], ctx: BrainContext, config: EmbeddedBrainConfig
) -> dict[int, AgentState]:
    """States of many agents at once (their history statistics in one sparse pass).
    `profiles`: each agent's profile (AgentProfile); its conformity_score, gender and age
    are read, an agent without them counts as middling and of unknown group."""
    stats = memories_history_stats(memories, ctx.facts, ctx.population, ctx.credits, ctx.profile_config)
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
            group=ctx.demographic_groups.get(demographic_group(getattr(profiles.get(uid), "gender", None), getattr(profiles.get(uid), "age", None)), -1),
            poster_ok=ctx.vectors.has_poster[memory.rows],
            stats=stats,
            stat_row=i,
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
    agents: Sequence[AgentState], candidates: Sequence[np.ndarray], ctx: BrainContext, config: EmbeddedBrainConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features of every (agent, candidate row) pair, stacked agent by agent.

    Returns (features (P, len(FEATURES)), text neighbour, poster neighbour): a neighbour is
    the position in the agent's memory of the closest liked movie among the k retrieved,
    -1 when none.  All agents must share one `HistoryStats` (`agent_states`).
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
    from threadpoolctl import threadpool_limits

    if use_posters:
        ctx.similarity("poster", config.similarity_cache_max_movies)
    ctx.similarity("text", config.similarity_cache_max_movies)  # one big product, all BLAS threads
    # Thousands of small products: BLAS threads cost more to wake than they save
    # (measured 10x slower with 2 OpenBLAS threads on a 20 x 150 x 384 product).
    with threadpool_limits(limits=1, user_api="blas"):
        _retrieval_loop(agents, lengths, pm, X, text_nn, poster_nn, col, text, poster, use_posters, ctx, config)
    return _rest_of_features(agents, lengths, pm, pa, srow, stats, X, text_nn, poster_nn, col, ctx)


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
            for b, i in enumerate(chunk):
                a = agents[i]
                m, lo, hi = len(a.rows), offsets[i], offsets[i + 1]
                mem_idx[b, :m] = a.rows
                mem_ok[b, :m] = True if memory_ok is None else memory_ok[i]
                centred[b, :m] = a.centred
                liked[b, :m] = a.liked
                cand_idx[b, : hi - lo] = pm[lo:hi]
            if sim is not None:
                sims = sim[cand_idx[:, :, None], mem_idx[:, None, :]]  # (B, C, L)
            else:
                sims = np.matmul(matrix[cand_idx], matrix[mem_idx].transpose(0, 2, 1))
            sims[np.broadcast_to(~mem_ok[:, None, :], sims.shape)] = -np.inf
            k = min(config.retrieval_k, L)
            key = np.round(sims.astype(np.float64), 5) + np.arange(L) * (1e-5 / (L + 1))  # later memory wins a tie
            top = np.argpartition(-key, k - 1, axis=2)[..., :k] if k < L else np.broadcast_to(np.arange(L), sims.shape)
            s_top = np.take_along_axis(sims, top, axis=2).astype(np.float64)
            k_top = np.take_along_axis(key, top, axis=2)
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


def _round_up(n: int) -> int:
    """n rounded up to one of 8 steps per power of two (at most 12.5 % padding)."""
    n = max(int(n), 8)
    step = 1 << max(n.bit_length() - 4, 0)
    return -(-n // step) * step


def _rest_of_features(agents, lengths, pm, pa, srow, stats, X, text_nn, poster_nn, col, ctx):
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
    group = np.array([a.group for a in agents], dtype=np.int64)[pa]
    if ctx.demographic_lift.shape[0]:
        X[:, col["demographic_lift"]] = np.where(group >= 0, ctx.demographic_lift[np.maximum(group, 0), pm], 0.0)
    # Credits: liked movies by the same director / with the same top actors (sparse rows).
    dm, am = ctx.credits.director_matrix[pm], ctx.credits.actor_matrix[pm]
    liked_dir = np.asarray(stats.liked_directors[srow].multiply(dm).sum(axis=1)).ravel()
    disliked_dir = np.asarray(stats.disliked_directors[srow].multiply(dm).sum(axis=1)).ravel()
    liked_act = np.asarray(stats.liked_actors[srow].multiply(am).sum(axis=1)).ravel()
    X[:, col["director_match"]] = np.log1p(liked_dir) - np.log1p(disliked_dir)
    X[:, col["actor_match"]] = np.log1p(liked_act)
    return X, text_nn, poster_nn


# ---------------------------------------------------------------------------------------
# Fitting on the train and validation windows
# ---------------------------------------------------------------------------------------


def fit(
    train: pl.DataFrame,
    valid: pl.DataFrame,
    memories: Mapping[int, LongTermMemory],
    profiles: Mapping[int, object],
    ctx: BrainContext,
    config: EmbeddedBrainConfig | None = None,
) -> EmbeddedBrainParams:
    """Fit the click, like and rating models (module docstring, "Fitting")."""
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.metrics import roc_auc_score

    config = config or EmbeddedBrainConfig()
    rng = np.random.default_rng(np.random.SeedSequence([config.fit_seed, 5150]))
    rated = pl.concat([train.select("user_id", "movie_id"), valid.select("user_id", "movie_id")])
    rated_by_user = {u: set(ms) for u, ms in rated.group_by("user_id").agg(pl.col("movie_id")).iter_rows()}
    valid_by_user = {
        u: (np.asarray(ms), np.asarray(rs))
        for u, ms, rs in valid.group_by("user_id").agg(pl.col("movie_id"), pl.col("rating")).sort("user_id").iter_rows()
    }
    fit_users = [u for u in sorted(valid_by_user) if u in memories and len(memories[u])]
    if len(fit_users) < 2:
        raise ValueError(f"embedded brain fit: {len(fit_users)} users have both train and validation ratings; need >= 2")
    if len(fit_users) > config.fit_max_users:
        fit_users = sorted(rng.choice(fit_users, config.fit_max_users, replace=False).tolist())
    n_hold = int(round(len(fit_users) * config.holdout_share)) if len(fit_users) >= 10 else 0
    holdout = set(rng.choice(fit_users, n_hold, replace=False).tolist()) if n_hold else set()

    pop_p = (ctx.facts.popularity + 1.0) / (ctx.facts.popularity + 1.0).sum()
    states = agent_states({u: memories[u] for u in fit_users}, profiles, ctx, config)
    agents, candidates, labels, ratings_all, held = [], [], [], [], []
    for u in fit_users:
        movies_u, ratings_u = valid_by_user[u]
        if len(movies_u) > config.fit_max_positives_per_user:
            pick = rng.choice(len(movies_u), config.fit_max_positives_per_user, replace=False)
            movies_u, ratings_u = movies_u[pick], ratings_u[pick]
        pos_rows = ctx.vectors.rows_of(movies_u)
        neg_rows = _sample_negatives(rng, len(pos_rows) * config.negatives_per_positive, pop_p, rated_by_user[u], ctx, config)
        agents.append(states[u])
        candidates.append(np.concatenate([pos_rows, neg_rows]))
        labels.append(np.r_[np.ones(len(pos_rows)), np.zeros(len(neg_rows))])
        ratings_all.append(np.r_[ratings_u.astype(np.float64), np.full(len(neg_rows), np.nan)])
        held.append(np.full(len(pos_rows) + len(neg_rows), u in holdout))
    Xc, _, _ = pair_features(agents, candidates, ctx, config)
    yc, hc, r_all = np.concatenate(labels), np.concatenate(held), np.concatenate(ratings_all)
    is_pos = yc == 1
    Xp, rp, hp = Xc[is_pos], r_all[is_pos], hc[is_pos]
    yl = (rp >= config.like_threshold).astype(float)

    home_idx = [FEATURES.index(f) for f in HOME_FEATURES]
    click = _fit_logistic(LogisticRegression, Xc[~hc][:, home_idx], yc[~hc], HOME_FEATURES, config)
    like = _fit_logistic(LogisticRegression, Xp[~hp], yl[~hp], DETAIL_FEATURES, config)
    rating, resid_sd = _fit_ridge(Ridge, Xp[~hp], rp[~hp], DETAIL_FEATURES, config)

    def auc(model: LinearModel, X, y):
        return float(roc_auc_score(y, model.score(X))) if len(np.unique(y)) == 2 else None

    return EmbeddedBrainParams(
        click=click,
        like=like,
        rating=rating,
        rating_residual_sd=resid_sd,
        n_users=len(fit_users),
        n_positives=int(yc.sum()),
        n_negatives=int((1 - yc).sum()),
        holdout_users=len(holdout),
        click_auc_holdout=auc(click, Xc[hc], yc[hc]) if hc.any() else None,
        like_auc_holdout=auc(like, Xp[hp], yl[hp]) if hp.any() else None,
        rating_rmse_holdout=float(np.sqrt(np.mean((rating.score(Xp[hp]) - rp[hp]) ** 2))) if hp.any() else None,
        global_mean_rating=ctx.global_mean_rating,
        text_model=ctx.vectors.text_model,
        poster_model=ctx.vectors.poster_model if config.use_posters else "none",
        catalogue_digest=ctx.vectors.digest,
        seed=config.fit_seed,
    )


def _sample_negatives(rng, n, pop_p, rated: set, ctx: BrainContext, config: EmbeddedBrainConfig) -> np.ndarray:
    """n catalogue rows the user rated in neither window: a share by popularity, the rest uniform."""
    n_pop = int(round(n * config.popular_negative_share))
    want = {"uniform": n - n_pop, "popular": n_pop}
    got: dict[str, list[int]] = {"uniform": [], "popular": []}
    ids = ctx.facts.movie_ids
    for _ in range(50):  # rejection sampling: a user rated a small share of the catalogue
        for kind in got:
            short = want[kind] - len(got[kind])
            if short <= 0:
                continue
            draw = rng.integers(0, len(ids), 2 * short) if kind == "uniform" else rng.choice(len(ids), 2 * short, p=pop_p)
            got[kind] += [r for r in draw.tolist() if int(ids[r]) not in rated][:short]
        if all(len(got[k]) == want[k] for k in got):
            return np.asarray(got["uniform"] + got["popular"], dtype=np.int64)
    raise ValueError("embedded brain fit: cannot sample negatives (a user rated nearly the whole catalogue)")


def _fit_logistic(cls, X, y, names, config) -> LinearModel:
    if len(np.unique(y)) < 2:
        raise ValueError(f"embedded brain fit: the labels for {names[-1]!r}-model are all {y[:1]}; need both classes")
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 1e-9, sd, 1.0)
    model = cls(C=config.l2_c, max_iter=2000).fit((X - mu) / sd, y)
    coef = model.coef_[0] / sd
    return LinearModel(features=list(names), coef=coef.tolist(), intercept=float(model.intercept_[0] - coef @ mu))


def _fit_ridge(cls, X, y, names, config) -> tuple[LinearModel, float]:
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 1e-9, sd, 1.0)
    model = cls(alpha=config.ridge_alpha).fit((X - mu) / sd, y)
    coef = model.coef_ / sd
    lin = LinearModel(features=list(names), coef=coef.tolist(), intercept=float(model.intercept_ - coef @ mu))
    resid = y - lin.score(X)
    return lin, float(resid.std()) if len(resid) > 1 else 1.0


# ---------------------------------------------------------------------------------------
# The brain
# ---------------------------------------------------------------------------------------


class EmbeddedBrain:
    """Brain protocol (ops.simulation.observation.Brain) with fitted parameters; no network."""

    def __init__(self, params: EmbeddedBrainParams, ctx: BrainContext, config: EmbeddedBrainConfig | None = None) -> None:
        self.params = params
        self.ctx = ctx
        self.config = config or EmbeddedBrainConfig()
        # The name goes into every event row: a "w/o vision" simulation (Table 5) must stay
        # distinguishable from the seeing one downstream (read-out, augmentation).
        self.name = "embedded" + ("" if self.config.use_posters else ":no-vision")
        if ctx.vectors.digest != params.catalogue_digest:
            raise ValueError(
                "embedded brain parameters were fitted on another catalogue "
                f"(digest {params.catalogue_digest[:12]}…, catalogue {ctx.vectors.digest[:12]}…): refit them"
            )
        self._agents: dict[int, AgentState] = {}
        self._click_terms = _terms(params.click)
        self._like_terms = _terms(params.like)
        self._scores: dict[int, PairScores] = {}

    # -- batch work --------------------------------------------------------------------

    def prepare(self, sessions: Sequence[AgentSession], shown: Mapping[int, Sequence[int]]) -> None:
        """Score every (user, shown movie) pair once; `decide` then only looks them up."""
        self._score_many([(s, shown.get(s.user_id, ())) for s in sessions])

    def click_probability(self, session: AgentSession, movie_ids: Sequence[int], slot: int = 1) -> np.ndarray:
        """P(a card catches the eye) at a given page slot (1..5): the home-page decision's core."""
        scores = self._ensure(session, movie_ids)
        logit = scores.click_logit[[scores.index[int(m)] for m in movie_ids]]
        return _sigmoid(logit - self.config.position_decay * (slot - 1) + self.config.click_bias)

    def like_probability(self, session: AgentSession, movie_ids: Sequence[int]) -> np.ndarray:
        scores = self._ensure(session, movie_ids)
        return _sigmoid(scores.like_logit[[scores.index[int(m)] for m in movie_ids]])

    # -- one step ----------------------------------------------------------------------

    def decide(self, session: AgentSession, observation: Observation, rng: np.random.Generator) -> Decision:
        if observation.page_type == "detail":
            return self._detail_page(session, observation, rng)
        return self._home_page(session, observation, rng)

    def _home_page(self, session: AgentSession, obs: Observation, rng: np.random.Generator) -> Decision:
        c = self.config
        ids = [card.movie_id for card in obs.items]
        scores = self._ensure(session, ids)
        logits = scores.click_logit
        # Plain floats: a handful of cards per page, where numpy's per-call cost dominates.
        p = [_sigmoid1(float(logits[scores.index[m]]) - c.position_decay * slot + c.click_bias) for slot, m in enumerate(ids)]
        best_p = max(p, default=0.0)
        interest = 1 + sum(best_p >= cut for cut in c.home_interest_cuts)
        clicked = {e.movie_id for e in session.short_term if e.action == CLICK_MOVIE}
        caught = _carried_caught_eye(session.short_term, obs.page_number)
        if caught is None:  # a fresh look at this page
            u = rng.random(len(ids)).tolist()
            caught = tuple(m for m, ui, pi in zip(ids, u, p) if ui < pi and m not in clicked)
        remaining = [m for m in caught if m not in clicked and m in scores.index]
        if remaining and CLICK_MOVIE in obs.legal_actions:
            best = max(remaining, key=lambda m: (p[ids.index(m)], -ids.index(m)))
            return Decision(
                action=CLICK_MOVIE,
                interest=interest,
                reason=self._reason(session, scores, scores.index[best], self._click_terms, positive=True),
                movie_id=best,
                caught_eye=caught,
            )
        if NEXT_PAGE in obs.legal_actions:
            fatigue = session.fatigue_spent / max(session.fatigue_budget, 1e-9)
            p_exit = _sigmoid1(c.exit_bias + c.exit_fatigue_weight * fatigue + c.exit_interest_weight * (3 - interest))
            if rng.random() >= p_exit:
                why = "nothing else here fits my taste" if caught else f"page {obs.page_number} doesn't fit my taste"
                return Decision(NEXT_PAGE, interest, f"{why}; looking further", caught_eye=caught)
            why = f"tired ({session.fatigue_spent:.0f}/{session.fatigue_budget:.0f} fatigue)"
            if interest <= 2:
                why += f" and page {obs.page_number} holds little for me"
            return Decision(EXIT, interest, why, caught_eye=caught)
        why = "reached the end of the recommendations" if obs.page_number > 1 else "nothing more to see"
        if ids and not caught:
            top = ids[p.index(best_p)]
            why += f"; even {self.ctx.facts.titles[int(scores.rows[scores.index[top]])]} did not tempt me"
        return Decision(EXIT, interest, why, caught_eye=caught)

    def _detail_page(self, session: AgentSession, obs: Observation, rng: np.random.Generator) -> Decision:
        c = self.config
        movie_id = obs.detail.card.movie_id
        scores = self._ensure(session, [movie_id])
        i = scores.index[movie_id]
        like_logit = float(scores.like_logit[i])
        p_like = _sigmoid1(like_logit)
        interest = 1 + sum(p_like >= cut for cut in c.detail_interest_cuts)
        u, z = rng.random(), rng.standard_normal()
        if WATCH_AND_RATE in obs.legal_actions and u < _sigmoid1(like_logit + c.watch_bias):
            lo, hi = c.rating_range
            mean = float(scores.rating_mean[i])
            rating = min(hi, max(lo, int(round(mean + c.rating_noise * self.params.rating_residual_sd * z))))
            liked = rating >= c.like_threshold
            return Decision(
                action=WATCH_AND_RATE,
                interest=interest,
                reason=f"rated {rating}: " + self._reason(session, scores, i, self._like_terms, positive=liked),
                movie_id=movie_id,
                rating=rating,
            )
        reason = "not for me: " + self._reason(session, scores, i, self._like_terms, positive=False)
        return Decision(BACK, interest, reason, movie_id=movie_id)

    def exit_interview(self, session: AgentSession, rng: np.random.Generator) -> tuple[int, str]:
        c = self.config
        watched = [(e.movie_id, e.rating) for e in session.short_term if e.action == WATCH_AND_RATE and e.rating is not None]
        likes = [m for m, r in watched if r >= c.like_threshold]
        dislikes = [m for m, r in watched if r <= 2]
        home = [e.interest for e in session.short_term if e.page_type == "home"]
        mean_interest = sum(home) / len(home) if home else 3.0
        pickiness = getattr(session.profile, "pickiness", "moderately picky")
        score = (
            c.satisfaction_base
            + c.satisfaction_per_like * len(likes)
            + c.satisfaction_per_watch * (len(watched) - len(likes) - len(dislikes))
            + c.satisfaction_per_dislike * len(dislikes)
            + c.satisfaction_interest_weight * (mean_interest - 3.0)
            + c.satisfaction_pickiness.get(pickiness, 0.0)
            + c.satisfaction_noise_sd * float(rng.standard_normal())
        )
        lo, hi = c.satisfaction_range
        satisfaction = min(hi, max(lo, int(round(score))))
        titles = self.ctx.facts.titles
        rows = self.ctx.facts
        named = ", ".join(titles[rows.row(m)] for m in likes[:2])
        if likes:
            reason = f"liked {len(likes)} of {len(watched)} watched ({named})"
        elif watched:
            reason = f"watched {len(watched)} but liked none"
        else:
            reason = "found nothing worth watching"
        reason += "; the pages " + ("suited my taste" if mean_interest >= 3.5 else "were hit and miss" if mean_interest >= 2.5 else "rarely matched my taste")
        return satisfaction, reason

    # -- scoring -----------------------------------------------------------------------

    def _ensure(self, session: AgentSession, movie_ids: Sequence[int]) -> PairScores:
        scores = self._scores.get(session.user_id)
        if scores is not None and all(int(m) in scores.index for m in movie_ids):
            return scores
        self._score_many([(session, movie_ids)])
        return self._scores[session.user_id]

    def _score_many(self, requests: Sequence[tuple[AgentSession, Sequence[int]]]) -> None:
        """Score the (agent, movie) pairs not scored yet, all agents in one batch."""
        fresh = {}
        for session, _ in requests:
            uid = session.user_id
            if uid not in self._agents and uid not in fresh:
                memory = session.memory
                if not isinstance(memory, LongTermMemory):
                    raise TypeError(f"embedded brain: agent {uid} has no LongTermMemory (got {type(memory).__name__})")
                if memory.vectors is not self.ctx.vectors and memory.vectors.digest != self.ctx.vectors.digest:
                    raise ValueError(f"embedded brain: agent {uid}'s memory points at another catalogue")
                fresh[uid] = session
        if fresh:
            profiles = {u: s.profile for u, s in fresh.items()}
            self._agents.update(agent_states({u: s.memory for u, s in fresh.items()}, profiles, self.ctx, self.config))
        # Group by the HistoryStats chunk the agents were prepared with (one per batch).
        groups: dict[int, list[tuple[int, list[int]]]] = {}
        for session, movie_ids in requests:
            uid = session.user_id
            known = self._scores.get(uid)
            new = [int(m) for m in dict.fromkeys(movie_ids) if known is None or int(m) not in known.index]
            if new:
                groups.setdefault(id(self._agents[uid].stats), []).append((uid, new))
        for items in groups.values():
            agents = [self._agents[u] for u, _ in items]
            rows = [self.ctx.vectors.rows_of(new) for _, new in items]
            X, tnn, pnn = pair_features(agents, rows, self.ctx, self.config)
            click, like, mean = self.params.click.score(X), self.params.like.score(X), self.params.rating.score(X)
            start = 0
            for (uid, new), r in zip(items, rows):
                sl = slice(start, start + len(new))
                start += len(new)
                self._add_scores(uid, new, r, X[sl], click[sl], like[sl], mean[sl], tnn[sl], pnn[sl])

    def _add_scores(self, uid, new, rows, X, click, like, mean, tnn, pnn) -> None:
        scores = self._scores.get(uid)
        if scores is None:
            self._scores[uid] = PairScores({m: i for i, m in enumerate(new)}, rows, X, click, like, mean, tnn, pnn)
            return
        base = len(scores.index)
        scores.index.update({m: base + i for i, m in enumerate(new)})
        self._scores[uid] = PairScores(
            scores.index,
            np.r_[scores.rows, rows],
            np.vstack([scores.features, X]),
            np.r_[scores.click_logit, click],
            np.r_[scores.like_logit, like],
            np.r_[scores.rating_mean, mean],
            np.r_[scores.text_neighbour, tnn],
            np.r_[scores.poster_neighbour, pnn],
        )

    # -- reasons -----------------------------------------------------------------------

    def _reason(self, session: AgentSession, scores: PairScores, i: int, terms, positive: bool) -> str:
        """The two features that pushed the decision most, in words."""
        idx, coef, names = terms
        contrib = scores.features[i, idx] * coef
        order = np.argsort(-contrib if positive else contrib, kind="stable")
        phrases: list[str] = []
        for j in order.tolist():
            value = contrib[j]
            if (value <= 0 if positive else value >= 0) or len(phrases) == 2:
                break
            phrase = self._phrase(session, scores, i, names[j], positive)
            if phrase and phrase not in phrases:
                phrases.append(phrase)
        if not phrases:
            return "a close call" if positive else "nothing about it stands out"
        return "; ".join(phrases)

    def _genre_names(self, row: int) -> list[str]:
        return [GENRES[j] for j in np.flatnonzero(self.ctx.facts.genres[row])]

    def _phrase(self, session: AgentSession, scores: PairScores, i: int, feature: str, positive: bool) -> str | None:
        facts = self.ctx.facts
        movie_row = int(scores.rows[i])
        user = self._agents[session.user_id]
        stats, srow = user.stats, user.stat_row
        if feature in ("genre_lift", "genre_deviation"):
            genres = self._genre_names(movie_row)
            if not genres:
                return None
            pref = {g: stats.genre_lift[srow, GENRES.index(g)] + stats.genre_deviation[srow, GENRES.index(g)] for g in genres}
            g = max(pref, key=pref.get) if positive else min(pref, key=pref.get)
            return f"{g} matches my taste" if positive else f"{g} is not my genre"
        if feature in ("text_affinity", "text_familiarity", "poster_affinity", "poster_familiarity"):
            nn = scores.poster_neighbour[i] if feature.startswith("poster") else scores.text_neighbour[i]
            what = "poster" if feature.startswith("poster") else "story"
            if positive and nn >= 0:
                title = facts.titles[int(user.rows[nn])]
                return f"{what} like {title}, which I rated {int(user.ratings[nn])}"
            return f"{what} unlike the films I enjoyed" if not positive else f"{what} looks like my kind of film"
        if feature == "era_lift":
            dec = self.ctx.decade[movie_row]
            return (f"from the {DECADES[dec]}s, an era I like" if positive else f"from the {DECADES[dec]}s, not my era") if dec >= 0 else None
        if feature in ("vote", "vote_x_conformity"):
            vote = facts.vote_average[movie_row]
            if not np.isfinite(vote):
                return None
            return f"well reviewed ({vote:.1f}/10)" if positive else f"weak reviews ({vote:.1f}/10)"
        if feature in ("popularity", "popularity_x_conformity"):
            return "a popular pick" if positive else "too obscure for me"
        if feature == "director_match":
            directors = facts.directors[movie_row]
            return (f"directed by {directors[0]}, whose films I liked" if positive else f"directed by {directors[0]}, not my director") if directors else None
        if feature == "actor_match":
            liked = stats.liked_actors[srow]
            names = self.ctx.credits.actors
            fav = {names[j] for j in liked.indices[liked.data > 0]}
            actors = [a for a in facts.actors[movie_row][: self.ctx.profile_config.actors_per_movie] if a in fav]
            return f"stars {actors[0]}, whom I like" if actors and positive else None
        if feature == "demographic_lift":
            profile = session.profile
            gender = {"M": "men", "F": "women"}.get(getattr(profile, "gender", None), "people")
            age = getattr(profile, "age_label", None)
            who = f"{gender} aged {age}" if age else gender
            return f"popular with {who}, like me" if positive else f"not what {who} like me watch"
        if feature == "user_mean":
            return "I rarely rate highly" if not positive else "I enjoy most films"
        return None


def _carried_caught_eye(short_term: Sequence[ShortTermEntry], page_number: int) -> tuple[int, ...] | None:
    """The caught-eye set of this page visit when coming back from its detail pages.

    A visit continues while the steps since its last home-page step are detail-page steps
    and that home step clicked a movie on this same page; otherwise the page is looked at
    afresh (a new page, or the same page reached again by next / previous).
    """
    for e in reversed(short_term):
        if e.page_type == "detail":
            continue
        if e.action == CLICK_MOVIE and e.page_number == page_number:
            return e.caught_eye
        return None
    return None


def _terms(model: LinearModel) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    return np.array([FEATURES.index(f) for f in model.features]), np.asarray(model.coef), tuple(model.features)


def _sigmoid1(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-min(30.0, max(-30.0, x))))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))

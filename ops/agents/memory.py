"""The agent's memory (A/B Agent §2.4.2): long-term memory with text and visual retrieval.

- `LongTermMemory` — one per agent: its train interactions as row indices into the shared
  catalogue matrices (`ops.agents.embeddings.MovieVectors`) plus ratings and timestamps.  `retrieve_by_text` / `retrieve_by_image` return the
  remembered interactions most similar (cosine) to a text or an image query, the two
  retrieval paths of the paper.
- Memory writing (Agent4Rec §2.1.2, SimUSER §3.2 episodic memory): `LongTermMemory.grow`
  returns a copy with new watches appended — the movie, its rating and the agent's feeling
  (the reason it gave) — which the same two retrievals then find; the memory it was called
  on is left as it was, so a memory stored after an earlier round is never changed.
  `written_memories` / `grow_memories` carry the watches of simulated rounds as a table.
- `ShortTermEntry` — one step of the current session as the agent remembers it (page, what
  caught the eye, interest 1–5, action); `describe_short_term` renders a session for people.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.agents.embeddings import MovieVectors


class RecallWeights(BaseModel):
    """How a memory is chosen for recall (Generative Agents' retrieval, Park et al. 2023, as
    SimUSER's episodic memory takes it up): score = relevance + `recency` × recency +
    `importance` × importance, each in [0, 1] — relevance the cosine similarity to the query
    scaled between the agent's least and most similar memory (min-max, as Generative Agents
    normalises it), recency 0.5 ** (age / `half_life_days`) at the memory's clock, importance
    how far the rating sits from the agent's mean (|rating − mean| / 2: a film loved or hated
    is remembered).  All zero: the most similar memories, as before recency counted."""

    recency: float = Field(0.0, ge=0)
    importance: float = Field(0.0, ge=0)
    half_life_days: float = Field(30.0, gt=0)

    @property
    def plain(self) -> bool:
        return self.recency == 0 and self.importance == 0


@dataclass(frozen=True)
class Recollection:
    """One remembered interaction returned by a retrieval."""

    item_id: int
    rating: int
    timestamp: int
    similarity: float
    # How the agent felt about it, in its own words ("" for the train history, which
    # records no feeling; a simulated watch keeps the reason the agent gave).
    feeling: str = ""


@dataclass(eq=False)
class LongTermMemory:
    """An agent's train interactions, pointing into the shared `MovieVectors`."""

    user_id: int
    vectors: MovieVectors = field(repr=False)
    rows: np.ndarray  # int64 row indices into `vectors`, oldest first
    ratings: np.ndarray  # int64 1..5
    timestamps: np.ndarray  # int64 unix seconds
    # One feeling per memory, or () when none was recorded (the train history).
    feelings: tuple[str, ...] = ()
    # The instant the memory stands at (unix seconds; `ops.agents.clock`), which recency
    # counts from; 0: its newest memory.
    clock: int = 0

    def __post_init__(self) -> None:
        if self.feelings and len(self.feelings) != len(self.rows):
            raise ValueError(
                f"memory of user {self.user_id}: {len(self.feelings)} feelings for {len(self.rows)} memories"
            )

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def item_ids(self) -> np.ndarray:
        return self.vectors.item_ids[self.rows]

    def retrieve_by_text(
        self, query_vec: np.ndarray, k: int, weights: RecallWeights | None = None
    ) -> list[Recollection]:
        """The k remembered interactions whose movie text is most similar to the query (with
        `weights`, the k best by relevance, recency and importance: `RecallWeights`)."""
        return self._retrieve(self.vectors.text, query_vec, k, self.rows, None, weights)

    def retrieve_by_image(
        self, query_vec: np.ndarray, k: int, weights: RecallWeights | None = None
    ) -> list[Recollection]:
        """The k remembered interactions whose poster is most similar to the query image.

        Memories of movies without a poster are never returned.
        """
        keep = self.vectors.has_poster[self.rows]
        return self._retrieve(self.vectors.poster, query_vec, k, self.rows, keep, weights)

    def recency(self, half_life_days: float) -> np.ndarray:
        """Each memory's recency at the memory's clock: 0.5 ** (age in days / half-life)."""
        now = self.clock or (int(self.timestamps.max()) if len(self.timestamps) else 0)
        age = np.maximum(now - self.timestamps.astype(np.float64), 0.0) / 86_400.0
        return 0.5 ** (age / half_life_days)

    def importance(self) -> np.ndarray:
        """Each memory's importance: how far its rating sits from the agent's mean, / 2."""
        r = self.ratings.astype(np.float64)
        return np.minimum(np.abs(r - r.mean()) / 2.0, 1.0) if len(r) else r

    def feeling(self, j: int) -> str:
        return self.feelings[j] if self.feelings else ""

    def grow(self, item_ids, ratings, timestamps, feelings) -> LongTermMemory:
        """A copy with these watches appended (memory writing); this memory is untouched.

        Timestamps must not precede the newest memory: memories stay oldest first, and a
        retrieval's tie goes to the most recent one.
        """
        item_ids = np.asarray(item_ids, dtype=np.int64)
        stamps = np.asarray(timestamps, dtype=np.int64)
        feelings = tuple(str(f) for f in feelings)
        if not (len(item_ids) == len(stamps) == len(feelings) == len(np.asarray(ratings))):
            raise ValueError(
                f"memory of user {self.user_id}: watches, ratings, timestamps and feelings differ in length"
            )
        if len(stamps) and len(self.timestamps) and stamps.min() < self.timestamps.max():
            raise ValueError(
                f"memory of user {self.user_id}: a new memory is older than the newest one ({stamps.min()} < {self.timestamps.max()})"
            )
        if len(stamps) and np.any(np.diff(stamps) < 0):
            raise ValueError(f"memory of user {self.user_id}: new memories must come oldest first")
        old = self.feelings or ("",) * len(self.rows)
        return LongTermMemory(
            self.user_id,
            self.vectors,
            np.concatenate([self.rows, self.vectors.rows_of(item_ids)]),
            np.concatenate([self.ratings, np.asarray(ratings, dtype=np.int64)]),
            np.concatenate([self.timestamps, stamps]),
            old + feelings if feelings else self.feelings,
            max(self.clock, int(stamps.max())) if self.clock and len(stamps) else self.clock,
        )

    def until(self, n: int, clock: int) -> LongTermMemory:
        """This memory's first `n` entries, standing at `clock` (an earlier clock's memory)."""
        return LongTermMemory(
            self.user_id,
            self.vectors,
            self.rows[:n],
            self.ratings[:n],
            self.timestamps[:n],
            self.feelings[:n] if self.feelings else (),
            clock,
        )

    def _retrieve(
        self,
        matrix: np.ndarray,
        query_vec: np.ndarray,
        k: int,
        rows: np.ndarray,
        keep: np.ndarray | None = None,
        weights: RecallWeights | None = None,
    ) -> list[Recollection]:
        q = np.asarray(query_vec, dtype=np.float32).ravel()
        if q.shape[0] != matrix.shape[1]:
            raise ValueError(f"query has dim {q.shape[0]}, the memory's vectors have dim {matrix.shape[1]}")
        norm = float(np.linalg.norm(q))
        if norm == 0 or len(rows) == 0 or k <= 0:
            return []
        sims = matrix[rows] @ (q / norm)  # rows are unit length: dot product = cosine
        candidates = np.arange(len(rows)) if keep is None else np.flatnonzero(keep)
        if len(candidates) == 0:
            return []
        # Most similar first (or best by relevance, recency and importance); ties (to 1e-5,
        # so float noise cannot flip them) go to the most recent memory, so the same query
        # always returns the same memories.
        key = np.round(recall_scores(sims[candidates][None, :], self, weights, candidates)[0], 5)
        order = candidates[np.lexsort((-self.timestamps[candidates], -candidates, -key))[:k]]
        return [
            Recollection(
                int(self.vectors.item_ids[rows[j]]),
                int(self.ratings[j]),
                int(self.timestamps[j]),
                float(sims[j]),
                self.feeling(j),
            )
            for j in order
        ]


def recall_scores(
    sims: np.ndarray, memory: LongTermMemory, weights: RecallWeights | None, entries: np.ndarray | None = None
) -> np.ndarray:
    """The recall score of each memory `entries` (default all) for each query row of `sims`
    (queries x those entries): the similarity itself without weights, else `RecallWeights`'
    sum."""
    sims = sims.astype(np.float64)
    if weights is None or weights.plain:
        return sims
    entries = np.arange(len(memory)) if entries is None else entries
    lo, hi = sims.min(axis=1, keepdims=True), sims.max(axis=1, keepdims=True)
    relevance = (sims - lo) / np.maximum(hi - lo, 1e-9)
    return (
        relevance
        + weights.recency * memory.recency(weights.half_life_days)[entries][None, :]
        + weights.importance * memory.importance()[entries][None, :]
    )


def build_long_term_memories(train: pl.DataFrame, vectors: MovieVectors) -> dict[int, LongTermMemory]:
    """One `LongTermMemory` per user of `train` (RATINGS schema), oldest interaction first."""
    from ops.schema import RATINGS, conform

    # A history up to the simulation clock (`ops.agents.clock.history_until`) keeps each
    # memory's train part first, whatever the timestamps at the windows' boundary.
    window = train.get_column("window") if "window" in train.columns else None
    ordered = conform(train, RATINGS, "train")
    if window is not None:
        ordered = ordered.with_columns(window.alias("window"))
    ordered = ordered.sort(["user_id", *(["window"] if window is not None else []), "timestamp", "item_id"])
    users = ordered.get_column("user_id").to_numpy()
    rows = vectors.rows_of(ordered.get_column("item_id").to_numpy())
    ratings = ordered.get_column("rating").to_numpy().astype(np.int64)
    stamps = ordered.get_column("timestamp").to_numpy().astype(np.int64)
    if len(users) == 0:
        return {}
    starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
    ends = np.r_[starts[1:], len(users)]
    return {
        int(users[s]): LongTermMemory(int(users[s]), vectors, rows[s:e], ratings[s:e], stamps[s:e])
        for s, e in zip(starts, ends)
    }


def memories_to_arrays(memories: Mapping[int, LongTermMemory]) -> dict[str, np.ndarray]:
    """Every memory as flat arrays for storage: keys and lengths in the mapping's order, then
    the rows, ratings and timestamps of all memories end to end (`memories_from_arrays`)."""
    values = list(memories.values())

    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(m, name) for m in values]) if values else np.zeros(0, np.int64)

    return {
        "keys": np.asarray(list(memories), dtype=np.int64),
        "user_ids": np.asarray([m.user_id for m in values], dtype=np.int64),
        "lengths": np.asarray([len(m) for m in values], dtype=np.int64),
        "rows": joined("rows"),
        "ratings": joined("ratings"),
        "timestamps": joined("timestamps"),
    }


def memories_from_arrays(arrays: Mapping[str, np.ndarray], vectors: MovieVectors) -> dict[int, LongTermMemory]:
    """The inverse of `memories_to_arrays`; every memory points into `vectors`."""
    ends = np.cumsum(arrays["lengths"])
    starts = ends - arrays["lengths"]
    return {
        int(key): LongTermMemory(
            int(user), vectors, arrays["rows"][s:e], arrays["ratings"][s:e], arrays["timestamps"][s:e]
        )
        for key, user, s, e in zip(arrays["keys"], arrays["user_ids"], starts, ends)
    }


def grow_memories(memories: Mapping[int, LongTermMemory], written: pl.DataFrame) -> dict[int, LongTermMemory]:
    """Every agent's memory grown by its rows of `written` (WRITTEN_MEMORIES, in time order
    per agent): new objects for the agents with new memories, the others as they were;
    `memories` itself is not changed."""
    from ops.schema import WRITTEN_MEMORIES, conform

    written = conform(written, WRITTEN_MEMORIES, "written memories").sort("user_id", "timestamp")
    unknown = sorted(set(written.get_column("user_id").unique().to_list()) - set(memories))
    if unknown:
        raise ValueError(f"written memories name agents without a long-term memory: {unknown[:10]}")
    grown = dict(memories)
    for (user_id,), part in written.group_by("user_id", maintain_order=True):
        grown[user_id] = memories[user_id].grow(
            part.get_column("item_id").to_numpy(),
            part.get_column("rating").to_numpy(),
            part.get_column("timestamp").to_numpy(),
            part.get_column("feeling").to_list(),
        )
    return grown


@dataclass
class ShortTermEntry:
    """One step of the session as the agent remembers it (A/B Agent §2.4.2, short-term memory)."""

    step: int
    page_type: Literal["home", "detail"]
    page_number: int
    caught_eye: tuple[int, ...]
    interest: int
    action: str
    item_id: int | None = None
    rating: int | None = None


def describe_short_term(entries: Sequence[ShortTermEntry], titles: dict[int, str] | None = None) -> str:
    """The session so far, one line per step, as a person (or an LLM prompt) would read it."""
    titles = titles or {}
    lines = []
    for e in entries:
        where = (
            f"home page {e.page_number}" if e.page_type == "home" else f"detail page (from home page {e.page_number})"
        )
        what = e.action
        if e.item_id is not None:
            what += f" {titles.get(e.item_id, e.item_id)}"
        if e.rating is not None:
            what += f" rated {e.rating}"
        eye = ", ".join(str(titles.get(m, m)) for m in e.caught_eye)
        lines.append(f"{e.step}. {where}: interest {e.interest}/5" + (f", noticed {eye}" if eye else "") + f"; {what}")
    return "\n".join(lines)

"""The agent's memory (A/B Agent §2.4.2): long-term memory with text and visual retrieval.

- `LongTermMemory` — one per agent: its train interactions as row indices into the shared
  catalogue matrices (`ops.agents.embeddings.MovieVectors`) plus ratings and timestamps.  `retrieve_by_text` / `retrieve_by_image` return the
  remembered interactions most similar (cosine) to a text or an image query, the two
  retrieval paths of the paper.
- `ShortTermEntry` — one step of the current session as the agent remembers it (page, what
  caught the eye, interest 1–5, action); `describe_short_term` renders a session for people.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import polars as pl

from ops.agents.embeddings import MovieVectors


@dataclass(frozen=True)
class Recollection:
    """One remembered interaction returned by a retrieval."""

    movie_id: int
    rating: int
    timestamp: int
    similarity: float


@dataclass(eq=False)
class LongTermMemory:
    """An agent's train interactions, pointing into the shared `MovieVectors`."""

    user_id: int
    vectors: MovieVectors = field(repr=False)
    rows: np.ndarray  # int64 row indices into `vectors`, oldest first
    ratings: np.ndarray  # int64 1..5
    timestamps: np.ndarray  # int64 unix seconds

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def movie_ids(self) -> np.ndarray:
        return self.vectors.movie_ids[self.rows]

    def retrieve_by_text(self, query_vec: np.ndarray, k: int) -> list[Recollection]:
        """The k remembered interactions whose movie text is most similar to the query."""
        return self._retrieve(self.vectors.text, query_vec, k, self.rows)

    def retrieve_by_image(self, query_vec: np.ndarray, k: int) -> list[Recollection]:
        """The k remembered interactions whose poster is most similar to the query image.

        Memories of movies without a poster are never returned.
        """
        keep = self.vectors.has_poster[self.rows]
        return self._retrieve(self.vectors.poster, query_vec, k, self.rows, keep)

    def _retrieve(
        self, matrix: np.ndarray, query_vec: np.ndarray, k: int, rows: np.ndarray, keep: np.ndarray | None = None
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
        # Most similar first; ties (to 1e-5, so float noise cannot flip them) go to the
        # most recent memory, so the same query always returns the same memories.
        key = np.round(sims[candidates].astype(np.float64), 5)
        order = candidates[np.lexsort((-self.timestamps[candidates], -candidates, -key))[:k]]
        return [
            Recollection(int(self.vectors.movie_ids[rows[j]]), int(self.ratings[j]), int(self.timestamps[j]), float(sims[j]))
            for j in order
        ]


def build_long_term_memories(train: pl.DataFrame, vectors: MovieVectors) -> dict[int, LongTermMemory]:
    """One `LongTermMemory` per user of `train` (RATINGS schema), oldest interaction first."""
    from ops.schema import RATINGS, conform

    ordered = conform(train, RATINGS, "train").sort(["user_id", "timestamp", "movie_id"])
    users = ordered.get_column("user_id").to_numpy()
    rows = vectors.rows_of(ordered.get_column("movie_id").to_numpy())
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
        int(key): LongTermMemory(int(user), vectors, arrays["rows"][s:e], arrays["ratings"][s:e], arrays["timestamps"][s:e])
        for key, user, s, e in zip(arrays["keys"], arrays["user_ids"], starts, ends)
    }


@dataclass
class ShortTermEntry:
    """One step of the session as the agent remembers it (A/B Agent §2.4.2, short-term memory)."""

    step: int
    page_type: Literal["home", "detail"]
    page_number: int
    caught_eye: tuple[int, ...]
    interest: int
    action: str
    movie_id: int | None = None
    rating: int | None = None



def describe_short_term(entries: Sequence[ShortTermEntry], titles: dict[int, str] | None = None) -> str:
    """The session so far, one line per step, as a person (or an LLM prompt) would read it."""
    titles = titles or {}
    lines = []
    for e in entries:
        where = f"home page {e.page_number}" if e.page_type == "home" else f"detail page (from home page {e.page_number})"
        what = e.action
        if e.movie_id is not None:
            what += f" {titles.get(e.movie_id, e.movie_id)}"
        if e.rating is not None:
            what += f" rated {e.rating}"
        eye = ", ".join(str(titles.get(m, m)) for m in e.caught_eye)
        lines.append(f"{e.step}. {where}: interest {e.interest}/5" + (f", noticed {eye}" if eye else "") + f"; {what}")
    return "\n".join(lines)

"""The agent's memory (A/B Agent §2.4.2): long-term memory with text and visual retrieval.

- `MovieVectors` — the shared catalogue matrices: every movie's text and poster embedding,
  computed once (`ops.agents.embeddings.embed_catalogue`).  No agent copies a vector.
- `MovieFacts` — the shared per-movie facts an agent can perceive (genres, era, vote
  average, popularity, credits), in the same row order.
- `LongTermMemory` — one per agent: its train interactions as row indices into the shared
  matrices plus ratings and timestamps.  `retrieve_by_text` / `retrieve_by_image` return the
  remembered interactions most similar (cosine) to a text or an image query, the two
  retrieval paths of the paper.
- Short-term memory is the session's `list[ops.simulation.observation.ShortTermEntry]` (page, what
  caught the eye, interest 1–5, action); `describe_short_term` renders it for people.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ops.simulation.observation import ShortTermEntry
from ops.schema import GENRES


@dataclass(frozen=True, eq=False)
class MovieVectors:
    """Catalogue embeddings; row i is movie `movie_ids[i]` (ascending). Rows are L2-normalised."""

    movie_ids: np.ndarray  # int64, ascending
    text: np.ndarray  # float32 (n, d_text)
    poster: np.ndarray  # float32 (n, d_poster); zero rows where has_poster is False
    has_poster: np.ndarray  # bool (n,)
    poster_look: np.ndarray  # object (n,): "warm" / "cool" / "dark" / "bright", "" without poster
    text_model: str
    poster_model: str
    digest: str  # content digest of the whole catalogue (data version)

    def __post_init__(self) -> None:
        n = len(self.movie_ids)
        if np.any(np.diff(self.movie_ids) <= 0):
            raise ValueError("MovieVectors.movie_ids must be strictly ascending")
        for name in ("text", "poster", "has_poster", "poster_look"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"MovieVectors.{name} has {len(getattr(self, name))} rows, movie_ids has {n}")

    def rows_of(self, movie_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Row indices of `movie_ids`; ValueError naming the ids not in the catalogue."""
        ids = np.asarray(movie_ids, dtype=np.int64)
        rows = np.searchsorted(self.movie_ids, ids)
        rows = np.minimum(rows, len(self.movie_ids) - 1)
        bad = self.movie_ids[rows] != ids if len(self.movie_ids) else np.ones(len(ids), bool)
        if np.any(bad):
            raise ValueError(f"movie ids not in the embedded catalogue: {ids[bad][:10].tolist()}")
        return rows


@dataclass(frozen=True, eq=False)
class MovieFacts:
    """What an agent can perceive about each catalogue movie, in `MovieVectors` row order."""

    movie_ids: np.ndarray
    titles: list[str]
    genres: np.ndarray  # float32 (n, len(GENRES)) multi-hot
    year: np.ndarray  # float64, NaN when unknown
    vote_average: np.ndarray  # float64 0..10, NaN when unknown
    popularity: np.ndarray  # int64: train ratings of the movie (the crowd's attention)
    mean_rating: np.ndarray  # float64: mean train rating, NaN when unrated
    directors: list[tuple[str, ...]]
    actors: list[tuple[str, ...]]
    overview: list[str]

    def row(self, movie_id: int) -> int:
        i = int(np.searchsorted(self.movie_ids, movie_id))
        if i >= len(self.movie_ids) or self.movie_ids[i] != movie_id:
            raise ValueError(f"movie id {movie_id} is not in the catalogue")
        return i


def build_movie_facts(movies: pl.DataFrame, metadata: pl.DataFrame | None, train: pl.DataFrame) -> MovieFacts:
    """Facts per movie from MOVIES, METADATA and the train ratings (popularity, mean rating)."""
    from ops.agents.embeddings import catalogue_table

    table = catalogue_table(movies, metadata)
    ids = table.get_column("movie_id").to_numpy().astype(np.int64)
    stats = (
        train.group_by("movie_id")
        .agg(pl.len().alias("n"), pl.col("rating").mean().alias("mean"))
        .join(table.select("movie_id"), on="movie_id", how="right")
        .sort("movie_id")
    )
    genre_index = {g: j for j, g in enumerate(GENRES)}
    multi_hot = np.zeros((len(ids), len(GENRES)), dtype=np.float32)
    for i, gs in enumerate(table.get_column("genres").to_list()):
        for g in gs or ():
            if g in genre_index:
                multi_hot[i, genre_index[g]] = 1.0
    year = table.get_column("year").cast(pl.Float64).to_numpy()
    release_year = table.get_column("release_date").dt.year().cast(pl.Float64).to_numpy()
    year = np.where(np.isnan(year), release_year, year)
    return MovieFacts(
        movie_ids=ids,
        titles=table.get_column("title").to_list(),
        genres=multi_hot,
        year=year,
        vote_average=table.get_column("vote_average").cast(pl.Float64).fill_null(float("nan")).to_numpy(),
        popularity=stats.get_column("n").fill_null(0).to_numpy().astype(np.int64),
        mean_rating=stats.get_column("mean").cast(pl.Float64).fill_null(float("nan")).to_numpy(),
        directors=[tuple(x or ()) for x in table.get_column("directors").to_list()],
        actors=[tuple(x or ()) for x in table.get_column("actors").to_list()],
        overview=[x or "" for x in table.get_column("overview").to_list()],
    )


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

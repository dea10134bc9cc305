"""What an agent can perceive about each catalogue movie (A/B Agent §2.3.1, §2.4.1).

`MovieFacts` holds, in the row order of the catalogue's embeddings
(`ops.agents.embeddings.MovieVectors`): genres, era, vote average, the crowd's attention
(train popularity and mean rating), credits and overview.  Profiles, the embedded brain's
features and the LLM prompts all read these shared arrays; no agent copies them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl

from ops.schema import GENRES, MM_ML_1M, conform


@dataclass(frozen=True, eq=False)
class MovieFacts:
    """What an agent can perceive about each catalogue movie, in `MovieVectors` row order."""

    item_ids: np.ndarray
    titles: list[str]
    genres: np.ndarray  # float32 (n, len(GENRES)) multi-hot
    year: np.ndarray  # float64, NaN when unknown
    vote_average: np.ndarray  # float64 0..10, NaN when unknown
    popularity: np.ndarray  # int64: train ratings of the movie (the crowd's attention)
    mean_rating: np.ndarray  # float64: mean train rating, NaN when unrated
    directors: list[tuple[str, ...]]
    actors: list[tuple[str, ...]]
    overview: list[str]
    # The category names of `genres`' columns: MovieLens's 18 genres on a MovieLens
    # catalogue, the catalogue's own categories (sorted) on any other (docs/data_model.md).
    genre_names: tuple[str, ...] = GENRES
    item_noun: str = "movie"  # what the domain calls an item (dataset.json)

    def at(self, history: pl.DataFrame) -> MovieFacts:
        """These facts with the crowd's attention (popularity, mean rating) read from
        `history` instead: the catalogue as the crowd knows it at another clock
        (`ops.agents.clock`)."""
        popularity, mean_rating = _crowd(self.item_ids, history)
        return replace(self, popularity=popularity, mean_rating=mean_rating)

    def row(self, item_id: int) -> int:
        i = int(np.searchsorted(self.item_ids, item_id))
        if i >= len(self.item_ids) or self.item_ids[i] != item_id:
            raise ValueError(f"movie id {item_id} is not in the catalogue")
        return i

    def save(self, folder: Path) -> None:
        """Into `folder`: the numeric columns as `.npz`, the texts and credits as JSON (no pickle)."""
        from ops.storage.codec import save_arrays, save_json

        folder.mkdir(parents=True, exist_ok=True)
        save_arrays(folder / "facts.npz", {name: getattr(self, name) for name in _ARRAYS})
        save_json(
            folder / "facts.json",
            {
                "kind": "MovieFacts",
                "format_version": 1,
                "titles": self.titles,
                "overview": self.overview,
                "directors": [list(d) for d in self.directors],
                "actors": [list(a) for a in self.actors],
                "genre_names": list(self.genre_names),
                "item_noun": self.item_noun,
            },
        )

    @classmethod
    def load(cls, folder: Path) -> MovieFacts:
        from ops.storage.codec import check_format, load_arrays, load_json

        meta = load_json(folder / "facts.json")
        check_format(meta, "MovieFacts", 1, folder / "facts.json")
        return cls(
            **load_arrays(folder / "facts.npz"),
            titles=meta["titles"],
            overview=meta["overview"],
            directors=[tuple(d) for d in meta["directors"]],
            actors=[tuple(a) for a in meta["actors"]],
            # Facts saved before other domains were MovieLens's.
            genre_names=tuple(meta.get("genre_names", GENRES)),
            item_noun=meta.get("item_noun", "movie"),
        )


def build_movie_facts(catalogue: pl.DataFrame, train: pl.DataFrame) -> MovieFacts:
    """Facts per movie from the MM-ML-1M catalogue (`ops.schema.MM_ML_1M`, the `catalogue`
    asset) and the train ratings (popularity, mean rating)."""
    table = conform(catalogue, MM_ML_1M, "catalogue").sort("item_id")
    ids = table.get_column("item_id").to_numpy().astype(np.int64)
    popularity, mean_rating = _crowd(ids, train)
    names = genre_vocabulary(table)
    genre_index = {g: j for j, g in enumerate(names)}
    multi_hot = np.zeros((len(ids), len(names)), dtype=np.float32)
    for i, gs in enumerate(table.get_column("genres").to_list()):
        for g in gs or ():
            if g in genre_index:
                multi_hot[i, genre_index[g]] = 1.0
    year = table.get_column("year").cast(pl.Float64).to_numpy()
    release_year = table.get_column("release_date").dt.year().cast(pl.Float64).to_numpy()
    year = np.where(np.isnan(year), release_year, year)
    return MovieFacts(
        item_ids=ids,
        titles=table.get_column("title").to_list(),
        genres=multi_hot,
        year=year,
        vote_average=table.get_column("vote_average").cast(pl.Float64).fill_null(float("nan")).to_numpy(),
        popularity=popularity,
        mean_rating=mean_rating,
        directors=[tuple(x or ()) for x in table.get_column("directors").to_list()],
        actors=[tuple(x or ()) for x in table.get_column("actors").to_list()],
        overview=[x or "" for x in table.get_column("overview").to_list()],
        genre_names=names,
        item_noun=item_noun(table),
    )


def _crowd(ids: np.ndarray, ratings: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(ratings per movie, mean rating per movie: NaN when unrated) of `ids`, sorted ids."""
    stats = (
        ratings.group_by("item_id")
        .agg(pl.len().alias("n"), pl.col("rating").mean().alias("mean"))
        .join(pl.DataFrame({"item_id": ids}, schema={"item_id": ratings.schema["item_id"]}), on="item_id", how="right")
        .sort("item_id")
    )
    return (
        stats.get_column("n").fill_null(0).to_numpy().astype(np.int64),
        stats.get_column("mean").cast(pl.Float64).fill_null(float("nan")).to_numpy(),
    )


def genre_vocabulary(catalogue: pl.DataFrame) -> tuple[str, ...]:
    """MovieLens's genres (in their order, so MovieLens figures stay as they were) when the
    catalogue's categories are among them, else the catalogue's own categories, sorted."""
    seen = set(catalogue.get_column("genres").explode().drop_nulls().to_list())
    return GENRES if seen <= set(GENRES) else tuple(sorted(seen))


def item_noun(catalogue: pl.DataFrame) -> str:
    """The domain's noun from the catalogue's `item_noun` column; "movie" when it has none."""
    if "item_noun" not in catalogue.columns:
        return "movie"
    nouns = catalogue.get_column("item_noun").drop_nulls()
    return str(nouns[0]) if nouns.len() else "movie"


# The numeric fields, saved as one `.npz`.
_ARRAYS = ("item_ids", "genres", "year", "vote_average", "popularity", "mean_rating")

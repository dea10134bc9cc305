"""The catalogue as the sandbox shows it: one `MovieInfo` per movie of MM-ML-1M.

Built once per simulation from the `catalogue` asset (`Catalogue.from_frame`); the sandbox
renders home-page cards and detail pages from it, and brains name remembered movies with
it.  Cards are immutable and memoised, so every session showing a movie at a position
shares one object.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import polars as pl

from ops.schema import MM_ML_1M, conform
from ops.simulation.observation import ItemCard


@dataclass(frozen=True)
class MovieInfo:
    """One movie of MM-ML-1M as the sandbox shows it (MovieLens fields + metadata)."""

    item_id: int
    title: str
    vote_average: float | None = None
    genres: tuple[str, ...] = ()
    poster_small: str | None = None
    overview: str | None = None
    vote_count: int | None = None
    release_date: str | None = None  # ISO date
    directors: tuple[str, ...] = ()
    actors: tuple[str, ...] = ()
    poster_large: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()  # any domain: (name, value), docs/data_model.md


class Catalogue:
    """The movies the sandbox can show, by movie id."""

    def __init__(self, movies: Mapping[int, MovieInfo] | Iterable[MovieInfo], item_noun: str = "movie") -> None:
        # What the domain calls an item: the prompts and pages say it (dataset.json).
        self.item_noun = item_noun
        self._cards: dict[tuple[int, int], ItemCard] = {}
        if isinstance(movies, Mapping):
            self._movies = dict(movies)
        else:
            self._movies = {}
            for info in movies:
                if info.item_id in self._movies:
                    raise ValueError(f"catalogue: item_id {info.item_id} appears twice")
                self._movies[info.item_id] = info

    @classmethod
    def from_frame(cls, catalogue: pl.DataFrame) -> Catalogue:
        """Build from the MM-ML-1M table (`ops.schema.MM_ML_1M`, the `catalogue` asset).
        Home-page genres are the MovieLens genres, falling back to the metadata's own when
        MovieLens has none."""
        frame = conform(catalogue, MM_ML_1M, "catalogue")
        duplicated = frame.filter(pl.col("item_id").is_duplicated()).get_column("item_id").unique().sort().to_list()
        if duplicated:
            raise ValueError(f"table 'catalogue': item_id not unique, e.g. {duplicated[:5]}")
        frame = frame.with_columns(pl.col("release_date").dt.to_string("%Y-%m-%d"))
        columns = {name: frame.get_column(name).to_list() for name in frame.columns}
        infos = []
        for i, item_id in enumerate(columns["item_id"]):
            genres = columns["genres"][i] or columns["meta_genres"][i] or ()
            infos.append(
                MovieInfo(
                    item_id=item_id,
                    title=columns["title"][i],
                    vote_average=columns["vote_average"][i],
                    genres=tuple(genres),
                    poster_small=columns["poster_small"][i],
                    overview=columns["overview"][i],
                    vote_count=columns["vote_count"][i],
                    release_date=columns["release_date"][i],
                    directors=tuple(columns["directors"][i] or ()),
                    actors=tuple(columns["actors"][i] or ()),
                    poster_large=columns["poster_large"][i],
                    attributes=attribute_pairs(columns["attributes"][i]),
                )
            )
        nouns = [n for n in columns["item_noun"] if n]
        return cls(infos, item_noun=nouns[0] if nouns else "movie")

    def card(self, item_id: int, position: int) -> ItemCard:
        """The home-page card of a movie at a list position (cards are immutable, so one
        object serves every session that shows this movie at this position)."""
        key = (item_id, position)
        card = self._cards.get(key)
        if card is None:
            info = self[item_id]
            card = self._cards[key] = ItemCard(
                item_id=item_id,
                position=position,
                title=info.title,
                vote_average=info.vote_average,
                genres=info.genres,
                poster_small=info.poster_small,
            )
        return card

    def __getitem__(self, item_id: int) -> MovieInfo:
        try:
            return self._movies[item_id]
        except KeyError:
            raise KeyError(f"catalogue has no item_id {item_id}") from None

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._movies

    def __len__(self) -> int:
        return len(self._movies)

    def item_ids(self) -> list[int]:
        return list(self._movies)


def attribute_pairs(text: str | None) -> tuple[tuple[str, str], ...]:
    """The `attributes` JSON object as (name, value) pairs to show; lists joined by commas."""
    if not text:
        return ()

    def shown(value) -> str:
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        if isinstance(value, bool):
            return "yes" if value else "no"
        return str(value)

    return tuple((str(k).replace("_", " "), shown(v)) for k, v in json.loads(text).items() if v not in (None, "", []))

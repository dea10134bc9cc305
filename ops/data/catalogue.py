"""MM-ML-1M: MovieLens-1M movies joined with their metadata and posters (A/B Agent §2.2).

`build_catalogue` joins the movies table with a METADATA table (from the TMDB crawl, the
local source or the synthetic generator) and `coverage_table` summarises the result in
the shape of the paper's Table 1: per feature, its type, how many movies have it, and its
range (text fields: character length; numbers: min/max; dates: earliest/latest).

Table 1 as published (ML-1M, TMDB): Title 3,822 [2, 72]; Overview 3,814 [13, 991];
Genres 3,789 [5, 64]; Rating 3,822 [0, 10]; Vote Count 3,822 [0, 30,002]; Release Date
3,820 [1911-05-05, 2024-06-07]; Directors 3,810 [3, 172]; Actors 3,785 [8, 5,101];
Poster 3,814; 6,040 users, 3,952 movies, sparsity 0.0419.
"""

from __future__ import annotations

import polars as pl

from ops.schema import METADATA, MM_ML_1M, MOVIES, conform

COVERAGE = {
    "feature": pl.Utf8,
    "type": pl.Utf8,  # "Text", "Numerical", "Date", "Image", "-"
    "count": pl.Int64,  # movies with a value (for the last rows: the figure itself)
    "min_value": pl.Float64,  # text: shortest length; numbers: minimum; null for dates/images
    "max_value": pl.Float64,
    "min": pl.Utf8,  # as printed in Table 1 (dates ISO)
    "max": pl.Utf8,
    "range": pl.Utf8,  # "[min, max]" or "-"
}

# Separator used to measure list fields as text, as the paper's Genres / Directors /
# Actors ranges are character lengths of the whole list.
LIST_JOIN = ", "


def build_catalogue(movies: pl.DataFrame, metadata: pl.DataFrame | None = None) -> pl.DataFrame:
    """Every movie of `movies` with its metadata columns (null where there is none): the
    one catalogue (`ops.schema.MM_ML_1M`) that arms, agents, the sandbox and augmentation read.

    `metadata` None (or empty) gives the MovieLens fields alone.  Raises ValueError when
    metadata repeats a movie id or names movies the table lacks.
    """
    movies = conform(movies, MOVIES, "movies")
    if movies.get_column("item_id").is_duplicated().any():
        dup = movies.filter(pl.col("item_id").is_duplicated())["item_id"].unique().sort()
        raise ValueError(f"table 'movies': item_id not unique, e.g. {dup.head(10).to_list()}")
    metadata = conform(pl.DataFrame(schema=METADATA) if metadata is None else metadata, METADATA, "metadata")
    dup = metadata.filter(pl.col("item_id").is_duplicated())["item_id"].unique().sort()
    if dup.len():
        raise ValueError(f"metadata has several rows for movie ids {dup.head(10).to_list()}")
    orphans = metadata.join(movies.select("item_id"), on="item_id", how="anti")["item_id"].sort()
    if orphans.len():
        raise ValueError(
            f"metadata has {orphans.len()} movie ids not in the movies table, e.g. {orphans.head(10).to_list()}"
        )
    joined = movies.join(metadata, on="item_id", how="left")
    return conform(joined, MM_ML_1M, "catalogue").sort("item_id")


def has_metadata(catalogue: pl.DataFrame) -> bool:
    """Whether any movie of the catalogue carries metadata (a source other than 'none')."""
    fields = [name for name in METADATA if name != "item_id" and name in catalogue.columns]
    return (
        bool(catalogue.select(pl.any_horizontal(pl.col(fields).is_not_null()).any()).item())
        if fields and catalogue.height
        else False
    )


def coverage_table(
    mm: pl.DataFrame,
    ratings: pl.DataFrame | None = None,
    users: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Table 1 of A/B Agent for an MM-ML-1M frame (COVERAGE schema), one row per feature.

    Title is counted for the movies that have a metadata record, measured without the
    MovieLens year suffix and with the article moved back to the front.  Poster counts
    movies with both poster files.  User count, movie count and sparsity are added when
    `ratings` (and `users`) are given.
    """
    from ops.data.tmdb_match import parse_movielens_title

    mm = conform(mm, MM_ML_1M, "catalogue")
    has_meta = mm.filter(pl.col("metadata_source").is_not_null())
    titles = pl.Series(
        "title", [parse_movielens_title(t).title if t else None for t in has_meta["title"].to_list()], pl.Utf8
    )

    rows = [
        _text_row("Title", titles),
        _text_row("Overview", mm["overview"]),
        _text_row("Genres", _joined(mm["meta_genres"])),
        _number_row("Rating", mm["vote_average"]),
        _number_row("Vote Count", mm["vote_count"]),
        _date_row("Release Date", mm["release_date"]),
        _text_row("Directors", _joined(mm["directors"])),
        _text_row("Actors", _joined(mm["actors"])),
        _plain_row(
            "Poster",
            "Image",
            mm.filter(pl.col("poster_small").is_not_null() & pl.col("poster_large").is_not_null()).height,
        ),
    ]
    if ratings is not None:
        n_users = users.height if users is not None else ratings["user_id"].n_unique()
        n_movies = mm.height
        rows.append(_plain_row("User Count", "-", n_users))
        rows.append(_plain_row("Movie Count", "-", n_movies))
        sparsity = ratings.height / (n_users * n_movies) if n_users and n_movies else None
        rows.append(
            {
                **_plain_row("Sparsity", "-", None),
                "min_value": sparsity,
                "max_value": sparsity,
                "min": None if sparsity is None else f"{sparsity:.4f}",
                "max": None if sparsity is None else f"{sparsity:.4f}",
                "range": "-" if sparsity is None else f"{sparsity:.4f}",
            }
        )
    return pl.DataFrame(rows, schema=COVERAGE)


def _joined(lists: pl.Series) -> pl.Series:
    """A list column as one text per movie (null for null or empty lists)."""
    joined = lists.list.join(LIST_JOIN)
    return pl.Series(lists.name, [None if (v is None or v == "") else v for v in joined.to_list()], pl.Utf8)


def _text_row(feature: str, values: pl.Series) -> dict:
    present = values.drop_nulls().filter(values.drop_nulls().str.strip_chars() != "")
    lengths = present.str.len_chars()
    return _range_row(feature, "Text", present.len(), lengths.min(), lengths.max())


def _number_row(feature: str, values: pl.Series) -> dict:
    present = values.drop_nulls()
    return _range_row(feature, "Numerical", present.len(), present.min(), present.max())


def _date_row(feature: str, values: pl.Series) -> dict:
    present = values.drop_nulls()
    lo, hi = present.min(), present.max()
    row = _plain_row(feature, "Date", present.len())
    if lo is not None:
        row.update(min=lo.isoformat(), max=hi.isoformat(), range=f"[{lo.isoformat()}, {hi.isoformat()}]")
    return row


def _range_row(feature: str, kind: str, count: int, lo, hi) -> dict:
    row = _plain_row(feature, kind, count)
    if lo is not None:
        row.update(
            min_value=float(lo), max_value=float(hi), min=_fmt(lo), max=_fmt(hi), range=f"[{_fmt(lo)}, {_fmt(hi)}]"
        )
    return row


def _plain_row(feature: str, kind: str, count: int | None) -> dict:
    return {
        "feature": feature,
        "type": kind,
        "count": count,
        "min_value": None,
        "max_value": None,
        "min": None,
        "max": None,
        "range": "-",
    }


def _fmt(value) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"

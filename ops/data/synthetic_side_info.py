"""The synthetic source's TMDB-like side information: what the TMDB crawl gives a real
catalogue (ids, overviews, votes, release dates, TMDB genre names, credits, posters), drawn
from the planted catalogue of `ops.data.synthetic`.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from ops.data.synthetic_text import overview

# ML-1M genre -> TMDB genre name (TMDB has no Film-Noir; "Children's" is "Family").
TMDB_GENRE_NAMES = {"Children's": "Family", "Sci-Fi": "Science Fiction", "Musical": "Music", "Film-Noir": "Crime"}


def side_information(
    config,
    rng: np.random.Generator,
    catalogue,
    item_ids: np.ndarray,
    poster_small: list[str],
    poster_large: list[str],
) -> pl.DataFrame:
    """The METADATA rows of the synthetic catalogue: TMDB-like ids, overviews, a vote average
    that follows the planted quality and a vote count that follows the popularity
    (`config`: `ops.data.synthetic.SyntheticConfig`, `catalogue` its planted catalogue), the
    posters' paths as written."""
    n = len(item_ids)
    tmdb_ids = rng.choice(np.arange(10_000, 10_000 + 50 * n), size=n, replace=False)
    vote_average = np.clip(
        config.vote_average_mean
        + config.vote_average_quality_scale * catalogue.quality
        + config.vote_average_noise * rng.standard_normal(n),
        0.0,
        10.0,
    ).round(1)
    vote_count = np.exp(
        config.vote_count_log_mean
        + config.vote_count_log_popularity_scale * catalogue.popularity_z
        + config.vote_count_log_noise * rng.standard_normal(n)
    ).astype(np.int64)
    release = [dt.date(int(y), 1, 1) + dt.timedelta(days=int(rng.integers(0, 365))) for y in catalogue.years]
    overviews = [overview(rng, gs) for gs in catalogue.genres]
    meta_genres = [list(dict.fromkeys(TMDB_GENRE_NAMES.get(g, g) for g in gs)) for gs in catalogue.genres]
    return pl.DataFrame(
        {
            "item_id": item_ids,
            "tmdb_id": tmdb_ids,
            "overview": overviews,
            "vote_average": vote_average,
            "vote_count": vote_count,
            "release_date": release,
            "meta_genres": meta_genres,
            "directors": [[catalogue.director_names[d]] for d in catalogue.director],
            "actors": catalogue.actors,
            "poster_small": poster_small,
            "poster_large": poster_large,
            "metadata_source": ["synthetic"] * n,
        }
    )

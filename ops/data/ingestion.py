"""Lifecycle step 1: users, items and ratings from the configured source (the `movielens`
asset of group `ingestion` stores them).

`synthetic` generates MovieLens-shaped data with planted tastes offline; `local` reads a
folder of ML-1M `*.dat` or ML-100K `u.*` files; `download` fetches the official GroupLens
archive; `files`, `steam` and `steam-download` read any domain (docs/data_model.md).  Only
the synthetic source has hidden tastes; the synthetic, files and Steam sources carry their
own side information (metadata and images); the others give empty frames there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ops.data.domain import load_files
from ops.data.movielens import load_local
from ops.data.movielens_download import download
from ops.data.steam import load_steam
from ops.data.steam_download import CITATION_NOTICE, download_steam, load_steam_download
from ops.data.synthetic import SyntheticConfig, generate
from ops.schema import GROUND_TRUTH, HIDDEN_TASTES, METADATA


@dataclass(frozen=True)
class Ingested:
    """The tables of a source and where they came from."""

    users: pl.DataFrame
    movies: pl.DataFrame
    ratings: pl.DataFrame
    origin: str  # e.g. "synthetic(seed=0)", "local:/path"
    tastes: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=HIDDEN_TASTES))
    side_info: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=METADATA))
    extra: dict[str, str] = field(default_factory=dict)  # what a later run may pin (downloaded files' SHA-256)
    # GROUND_TRUTH: the judge of the verdict where the source has one (a planted world's exact
    # probabilities and random bucket; a team's random_exposure file); empty elsewhere.
    truth: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=GROUND_TRUTH))

    @property
    def density(self) -> float:
        return self.ratings.height / max(self.users.height * self.movies.height, 1)

    def metrics(self) -> dict[str, float | int]:
        """The sizes of the tables, their density and the mean rating."""
        return {
            "users": self.users.height,
            "users_with_ratings": int(self.users.get_column("has_ratings").sum()),
            "movies": self.movies.height,
            "ratings": self.ratings.height,
            "density": self.density,
            "mean_rating": float(self.ratings.get_column("rating").mean() or 0.0),
        }


def ingest(
    root: Path,
    log: Callable[[str], None],
    *,
    source: str,
    seed: int = 0,
    local_path: str = "",
    files_path: str = "",
    steam_path: str = "",
    steam_min_interactions: int = 1,
    steam_url: str = "",
    steam_sha256_reviews: str = "",
    steam_sha256_games: str = "",
    dataset: str = "ml-1m",
    synthetic_users: int = 0,
    synthetic_movies: int = 0,
    synthetic_exposure_bias: float = 1.0,
) -> Ingested:
    """The tables of `source`; downloads are cached under `root`/downloads and synthetic
    posters written under `root`/posters; `log` hears the licence notices and what was read."""
    if source == "synthetic":
        overrides = {"seed": seed, "exposure_bias": synthetic_exposure_bias}
        if synthetic_users:
            overrides["n_users"] = synthetic_users
        if synthetic_movies:
            overrides["n_movies"] = synthetic_movies
        data = generate(SyntheticConfig(**overrides), root / "posters" / f"synthetic-{seed}")
        return Ingested(
            data.users,
            data.movies,
            data.ratings,
            f"synthetic(seed={seed})",
            data.hidden_tastes,
            data.metadata,
            truth=data.truth,
        )
    if source in ("files", "steam", "steam-download"):
        extra: dict[str, str] = {}
        if source == "steam-download":
            log(CITATION_NOTICE)
            sha256 = {"reviews": steam_sha256_reviews, "games": steam_sha256_games}
            files = download_steam(root / "downloads" / "steam", base_url=steam_url, sha256=sha256)
            # What was downloaded, so that a later run can pin it (SIMAB_STEAM_SHA256_*).
            extra = {f"sha256 {name}": digest for name, digest in files.sha256.items()}
            log(f"Steam files: {files.sha256} from {files.urls}")
            tables = load_steam_download(files, steam_min_interactions)
            origin = f"steam-download:{files.reviews.parent}"
        elif source == "files":
            if not files_path:
                raise ValueError("source 'files' needs files_path (SIMAB_FILES_PATH): a folder in docs/data_model.md")
            tables = load_files(files_path)
            origin = f"files:{Path(files_path).expanduser()}"
        else:
            tables = load_steam(steam_path, steam_min_interactions)
            origin = f"steam:{Path(steam_path).expanduser()}"
            log("Steam data (UCSD McAuley lab): research use with citation; never redistribute it.")
        log(f"{origin}: {tables.counts}")
        return Ingested(
            tables.users,
            tables.movies,
            tables.ratings,
            origin,
            side_info=tables.metadata,
            extra=extra,
            truth=tables.truth,
        )
    if source == "local":
        if not local_path:
            raise ValueError("source 'local' needs local_path: a folder with ML-1M *.dat or ML-100K u.* files")
        folder = Path(local_path).expanduser()
    else:
        log("MovieLens data: research use only, no redistribution; cite Harper & Konstan (2015).")
        folder = download(dataset, root / "downloads")
    tables = load_local(folder)
    return Ingested(tables.users, tables.movies, tables.ratings, f"{source}:{folder}")

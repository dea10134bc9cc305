"""Lifecycle step 1: MovieLens users, movies and ratings, from the configured source.

`synthetic` (default) generates MovieLens-shaped data with planted tastes offline;
`local` reads a folder of ML-1M `*.dat` or ML-100K `u.*` files; `download` fetches the
official GroupLens archive (checksum-verified, cached, resumable); `files`, `steam` and
`steam-download` read any domain (docs/data_model.md).  The synthetic source also
yields its hidden tastes (for tests that check later stages recover them) and its side
information (metadata and posters); other sources yield empty frames there.

The three tables pass their data contracts before anything is stored
(`data_contracts.checks.stop_before_storing`): a bad source fails the step and leaves the
stored tables as they were.
"""

from pathlib import Path

import polars as pl
from dagster import AssetExecutionContext, AssetOut, Config, DataVersion, MaterializeResult, multi_asset
from pydantic import Field

from data_contracts.checks import movies_verdict, ratings_verdict, stop_before_storing, users_verdict
from ops.schema import HIDDEN_TASTES, METADATA
from ops.settings import Dataset, Source, config_default, current
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root, frame_digest

GROUP = "ingestion"


def default_steam_path() -> str:
    """$SIMAB_SHARED_DATA/steam-australian: the reference copy beside the clone (never shipped)."""
    return str(current().shared_data / "steam-australian")


class IngestionConfig(Config):
    """Which MovieLens source to use ($SIMAB_SOURCE, $SIMAB_LOCAL_PATH, $SIMAB_DATASET fill it
    in through `pipelines.run_config`)."""

    source: Source = Field(
        default=config_default("source"), description="synthetic | local | download | files | steam | steam-download"
    )
    local_path: str = Field(default="", description="folder for source=local")
    files_path: str = Field(default="", description="folder for source=files (docs/data_model.md)")
    steam_path: str = Field(default="", description="folder for source=steam (interactions.csv, items.jsonl)")
    steam_min_interactions: int = Field(
        default=config_default("steam_min_interactions"), ge=1, description="steam: keep users with at least this many"
    )
    steam_url: str = Field(default="", description="steam-download: base URL of the two files (default: the lab's)")
    steam_sha256_reviews: str = Field(default="", description="steam-download: pinned SHA-256 of the reviews file")
    steam_sha256_games: str = Field(default="", description="steam-download: pinned SHA-256 of the games file")
    dataset: Dataset = Field(default=config_default("dataset"), description="archive for source=download")
    seed: int = Field(default=0, description="seed of the synthetic generator")
    synthetic_users: int = Field(default=0, description="synthetic: number of users (0 = generator default)")
    synthetic_movies: int = Field(default=0, description="synthetic: number of movies (0 = generator default)")


@multi_asset(
    outs={
        "users": AssetOut(
            group_name=GROUP,
            code_version="1",
            description="MovieLens users (ML-1M codes); users without ratings flagged",
        ),
        "movies": AssetOut(group_name=GROUP, code_version="1", description="MovieLens movies: title, year, genres"),
        "ratings": AssetOut(group_name=GROUP, code_version="1", description="MovieLens ratings 1..5 with timestamps"),
        "planted_tastes": AssetOut(
            group_name=GROUP, code_version="1", description="synthetic source only: each user's hidden tastes"
        ),
        "synthetic_side_info": AssetOut(
            group_name=GROUP,
            code_version="1",
            description="the source's own side information (synthetic, files, steam): metadata and images",
        ),
    },
    compute_kind="polars",
)
def movielens(context: AssetExecutionContext, config: IngestionConfig, mlflow_tracking: MlflowTracking):
    """Load or generate the three MovieLens tables."""
    from ops.data.plots import activity_and_popularity, rating_distribution

    tastes = pl.DataFrame(schema=HIDDEN_TASTES)
    extra_meta: dict[str, str] = {}
    side_info = pl.DataFrame(schema=METADATA)
    if config.source == "synthetic":
        from ops.data.synthetic import SyntheticConfig, generate

        overrides = {"seed": config.seed}
        if config.synthetic_users:
            overrides["n_users"] = config.synthetic_users
        if config.synthetic_movies:
            overrides["n_movies"] = config.synthetic_movies
        data = generate(SyntheticConfig(**overrides), data_root() / "posters" / f"synthetic-{config.seed}")
        users, movies, ratings, tastes, side_info = (
            data.users,
            data.movies,
            data.ratings,
            data.hidden_tastes,
            data.metadata,
        )
        origin = f"synthetic(seed={config.seed})"
    elif config.source in ("files", "steam", "steam-download"):
        if config.source == "steam-download":
            from ops.data.steam_download import CITATION_NOTICE, download_steam, load_steam_download

            context.log.info(CITATION_NOTICE)
            files = download_steam(
                data_root() / "downloads" / "steam",
                base_url=config.steam_url,
                sha256={"reviews": config.steam_sha256_reviews, "games": config.steam_sha256_games},
            )
            # What was downloaded, so that a later run can pin it (SIMAB_STEAM_SHA256_*).
            extra_meta = {f"sha256 {name}": digest for name, digest in files.sha256.items()}
            context.log.info(f"Steam files: {files.sha256} from {files.urls}")
            tables = load_steam_download(files, config.steam_min_interactions)
            origin = f"steam-download:{files.reviews.parent}"
        elif config.source == "files":
            from ops.data.domain import load_files

            if not config.files_path:
                raise ValueError("source 'files' needs files_path (SIMAB_FILES_PATH): a folder in docs/data_model.md")
            tables = load_files(config.files_path)
            origin = f"files:{Path(config.files_path).expanduser()}"
        else:
            from ops.data.steam import load_steam

            tables = load_steam(config.steam_path or default_steam_path(), config.steam_min_interactions)
            origin = f"steam:{Path(config.steam_path or default_steam_path()).expanduser()}"
            context.log.info("Steam data (UCSD McAuley lab): research use with citation; never redistribute it.")
        users, movies, ratings, side_info = tables.users, tables.movies, tables.ratings, tables.metadata
        context.log.info(f"{origin}: {tables.counts}")
    else:
        from ops.data.movielens import load_local
        from ops.data.movielens_download import download

        if config.source == "local":
            if not config.local_path:
                raise ValueError("source 'local' needs local_path: a folder with ML-1M *.dat or ML-100K u.* files")
            folder = Path(config.local_path).expanduser()
        else:
            context.log.info("MovieLens data: research use only, no redistribution; cite Harper & Konstan (2015).")
            folder = download(config.dataset, data_root() / "downloads")
        tables = load_local(folder)
        users, movies, ratings = tables.users, tables.movies, tables.ratings
        origin = f"{config.source}:{folder}"

    stop_before_storing(
        {
            "users": users_verdict(users),
            "movies": movies_verdict(movies),
            "ratings": ratings_verdict(ratings, users, movies),
        },
        stored="users, movies, ratings, planted_tastes, synthetic_side_info",
    )
    density = ratings.height / max(users.height * movies.height, 1)
    params = {"source": config.source, "origin": origin, "seed": config.seed}
    params.update({key.replace(" ", "_"): value for key, value in extra_meta.items()})
    with mlflow_tracking.asset_run(context, params=params):
        mlflow_tracking.tag_parent(context, {"data_source": config.source})
        mlflow_tracking.log_metrics(
            {
                "users": users.height,
                "users_with_ratings": int(users.get_column("has_ratings").sum()),
                "movies": movies.height,
                "ratings": ratings.height,
                "density": density,
                "mean_rating": float(ratings.get_column("rating").mean() or 0.0),
            }
        )
        digests = {
            name: mlflow_tracking.log_frame(df, name)
            for name, df in (("users", users), ("movies", movies), ("ratings", ratings))
        }
        mlflow_tracking.log_figure(rating_distribution(ratings), "plots/rating_distribution.png")
        mlflow_tracking.log_figure(activity_and_popularity(ratings), "plots/activity_and_popularity.png")

    context.log.info(
        f"{origin}: {users.height} users, {movies.height} movies, {ratings.height} ratings (density {density:.4f})"
    )
    meta = {"source": origin, **extra_meta}
    yield MaterializeResult(
        asset_key="users",
        value=users,
        data_version=DataVersion(digests["users"]),
        metadata={**meta, "rows": users.height},
    )
    yield MaterializeResult(
        asset_key="movies",
        value=movies,
        data_version=DataVersion(digests["movies"]),
        metadata={**meta, "rows": movies.height},
    )
    yield MaterializeResult(
        asset_key="ratings",
        value=ratings,
        data_version=DataVersion(digests["ratings"]),
        metadata={**meta, "rows": ratings.height, "density": density},
    )
    yield MaterializeResult(
        asset_key="planted_tastes",
        value=tastes,
        data_version=DataVersion(frame_digest(tastes)),
        metadata={"rows": tastes.height},
    )
    yield MaterializeResult(
        asset_key="synthetic_side_info",
        value=side_info,
        data_version=DataVersion(frame_digest(side_info)),
        metadata={"rows": side_info.height},
    )

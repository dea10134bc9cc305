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

from dagster import AssetExecutionContext, AssetOut, Config, DataVersion, MaterializeResult, multi_asset
from pydantic import Field

from data_contracts.checks import movies_verdict, ratings_verdict, stop_before_storing, users_verdict
from ops.data.data_figures import activity_and_popularity, rating_distribution
from ops.data.ingestion import ingest
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
    synthetic_exposure_bias: float = Field(
        default=config_default("synthetic_exposure_bias"),
        ge=0,
        description="synthetic: the logging policy's lean on popularity (0 none, 1 default, 2.5 strong; "
        "$SIMAB_SYNTHETIC_EXPOSURE_BIAS)",
    )


@multi_asset(
    outs={
        "users": AssetOut(
            group_name=GROUP,
            kinds={"polars"},
            code_version="1",
            description="MovieLens users (ML-1M codes); users without ratings flagged",
        ),
        "movies": AssetOut(
            group_name=GROUP, kinds={"polars"}, code_version="1", description="MovieLens movies: title, year, genres"
        ),
        "ratings": AssetOut(
            group_name=GROUP, kinds={"polars"}, code_version="1", description="MovieLens ratings 1..5 with timestamps"
        ),
        "planted_tastes": AssetOut(
            group_name=GROUP,
            kinds={"polars"},
            code_version="1",
            description="synthetic source only: each user's hidden tastes",
        ),
        "ground_truth": AssetOut(
            group_name=GROUP,
            code_version="1",
            kinds={"polars"},
            description="the judge of the verdict where there is one (docs/definitions.md#the-truth): a planted "
            "world's exact click and like probabilities and random bucket, or a team's random_exposure file; read only "
            "to measure, never by the agents or the arms (a random bucket's calibration half may calibrate the click "
            "decision, and is then not judged)",
        ),
        "synthetic_side_info": AssetOut(
            group_name=GROUP,
            kinds={"polars"},
            code_version="1",
            description="the source's own side information (synthetic, files, steam): metadata and images",
        ),
    },
)
def ingestion(context: AssetExecutionContext, config: IngestionConfig, mlflow_tracking: MlflowTracking):
    """Load or generate the users, items and interactions (MovieLens's three tables, on any domain)."""
    steam_path = config.steam_path or default_steam_path()
    data = ingest(data_root(), context.log.info, **{**config.model_dump(), "steam_path": steam_path})
    users, movies, ratings = data.users, data.movies, data.ratings
    stop_before_storing(
        {
            "users": users_verdict(users),
            "movies": movies_verdict(movies),
            "ratings": ratings_verdict(ratings, users, movies),
        },
        stored="users, movies, ratings, planted_tastes, ground_truth, synthetic_side_info",
    )
    params = {"source": config.source, "origin": data.origin, "seed": config.seed}
    params.update({key.replace(" ", "_"): value for key, value in data.extra.items()})
    with mlflow_tracking.asset_run(context, params=params):
        mlflow_tracking.tag_parent(context, {"data_source": config.source})
        mlflow_tracking.log_metrics(data.metrics())
        digests = {
            name: mlflow_tracking.log_frame(df, name)
            for name, df in (("users", users), ("movies", movies), ("ratings", ratings))
        }
        mlflow_tracking.log_figure(rating_distribution(ratings), "plots/rating_distribution.png")
        mlflow_tracking.log_figure(activity_and_popularity(ratings), "plots/activity_and_popularity.png")
    context.log.info(
        f"{data.origin}: {users.height} users, {movies.height} movies, {ratings.height} ratings "
        f"(density {data.density:.4f})"
    )
    meta = {"source": data.origin, **data.extra}
    rows = {"users": {}, "movies": {}, "ratings": {"density": data.density}}
    for name, frame in (("users", users), ("movies", movies), ("ratings", ratings)):
        yield MaterializeResult(
            asset_key=name,
            value=frame,
            data_version=DataVersion(digests[name]),
            metadata={**meta, "rows": frame.height, **rows[name]},
        )
    for name, frame in (
        ("planted_tastes", data.tastes),
        ("ground_truth", data.truth),
        ("synthetic_side_info", data.side_info),
    ):
        yield MaterializeResult(
            asset_key=name,
            value=frame,
            data_version=DataVersion(frame_digest(frame)),
            metadata={"rows": frame.height},
        )

"""Lifecycle step 2: TMDB metadata and posters joined to MovieLens → MM-ML-1M (A/B Agent §2.2).

`movie_metadata` comes from the configured source: `tmdb` (the real crawl, resumable),
`local` (a metadata file plus poster folders, for offline use), `synthetic` (what the
synthetic generator drew), or `none`.  `auto` takes the synthetic side information when the
ratings are synthetic and `none` otherwise.  `catalogue` joins it to the movies table and
logs the coverage table in the shape of the paper's Table 1.
"""

from pathlib import Path

import polars as pl
from dagster import AssetExecutionContext, Config, DataVersion, MaterializeResult, MetadataValue, asset
from pydantic import Field

from data_contracts.checks import metadata_verdict, stop_before_storing
from ops.data.catalogue import build_catalogue, coverage_table
from ops.data.local_metadata import LocalMetadataConfig, load_local_metadata
from ops.figures import table_markdown
from ops.schema import METADATA, conform
from ops.settings import MetadataSource, config_default
from resources.mlflow_tracking import MlflowTracking
from resources.storage import data_root
from resources.tmdb import TmdbResource

GROUP = "catalogue"


class MetadataConfig(Config):
    """Where metadata and posters come from ($SIMAB_METADATA_SOURCE, $SIMAB_METADATA_PATH,
    $SIMAB_POSTER_DIRS, $SIMAB_LINKS_PATH fill it in through `pipelines.run_config`)."""

    source: MetadataSource = Field(
        default=config_default("metadata_source"), description="auto | synthetic | local | tmdb | none"
    )
    metadata_path: str = Field(
        default="", description="local: metadata file (e.g. movies_extrainfos.dat); empty = posters only"
    )
    poster_dirs: list[str] = Field(
        default=[], description="local: folders of posters named <item_id>.jpg, in order of preference"
    )
    links_path: str = Field(
        default="", description="MovieLens links table (movieId, imdbId, tmdbId); empty = match titles"
    )


@asset(group_name=GROUP, code_version="1", kinds={"polars"})
def movie_metadata(
    context: AssetExecutionContext,
    config: MetadataConfig,
    movies: pl.DataFrame,
    synthetic_side_info: pl.DataFrame,
    tmdb: TmdbResource,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """Per-movie overview, vote average and count, release date, genres, directors, actors, posters."""
    source = config.source
    if source == "auto":
        # The source's own side information when it has some (synthetic, files, steam).
        source = "synthetic" if synthetic_side_info.height else "none"
    links = _read_links(config.links_path) if config.links_path else None
    failures = None
    if source == "synthetic":
        if synthetic_side_info.height == 0:
            raise ValueError(
                "metadata source 'synthetic' needs a source with side information (ingestion source synthetic, files or steam)"
            )
        metadata = synthetic_side_info
    elif source == "local":
        local = LocalMetadataConfig(
            metadata_path=Path(config.metadata_path) if config.metadata_path else None,
            poster_dirs=[Path(p) for p in config.poster_dirs],
        )
        result = load_local_metadata(movies, data_root() / "metadata" / "local", local, links=links)
        metadata, failures = result.metadata, result.failures
    elif source == "tmdb":
        result = tmdb.crawl(movies, data_root() / "metadata" / "tmdb", links=links)
        metadata, failures = result.metadata, result.failures
    else:
        metadata = pl.DataFrame(schema=METADATA)
    metadata = conform(metadata, METADATA, "movie_metadata")
    # The contract before anything is stored (data_contracts.checks says why).
    stop_before_storing({"movie_metadata": metadata_verdict(metadata, movies)}, stored="movie_metadata")

    if source == "synthetic" and metadata.height:
        # files / steam side information travels the synthetic path; name it as it is.
        source = metadata.get_column("metadata_source").drop_nulls().head(1).str.split(":").list.first().item()
    with mlflow_tracking.asset_run(context, params={"source": source, "links": bool(links is not None)}):
        mlflow_tracking.log_metrics(
            {
                "movies": movies.height,
                "with_metadata": metadata.height,
                "failures": 0 if failures is None else failures.height,
            }
        )
        digest = mlflow_tracking.log_frame(metadata, "movie_metadata", role="output")
        if failures is not None and failures.height:
            mlflow_tracking.log_table(failures, "metadata_failures")
    meta = {"source": source, "rows": metadata.height, "coverage": metadata.height / max(movies.height, 1)}
    if failures is not None:
        meta["failures"] = failures.height
        meta["failure examples"] = MetadataValue.md(table_markdown(failures.head(20)))
    return MaterializeResult(value=metadata, data_version=DataVersion(digest), metadata=meta)


@asset(group_name=GROUP, code_version="1", kinds={"polars"})
def catalogue(
    context: AssetExecutionContext,
    movies: pl.DataFrame,
    movie_metadata: pl.DataFrame,
    ratings: pl.DataFrame,
    users: pl.DataFrame,
    mlflow_tracking: MlflowTracking,
) -> MaterializeResult:
    """The one catalogue: the movies table joined with metadata and poster paths (null where a
    movie has none), with its Table 1 coverage."""
    mm = build_catalogue(movies, movie_metadata)
    coverage = coverage_table(mm, ratings=ratings, users=users)
    coverage_md = table_markdown(coverage.select("feature", "type", "count", "range"))
    with mlflow_tracking.asset_run(context):
        mlflow_tracking.log_table(coverage, "coverage_table1")
        mlflow_tracking.log_text(coverage_md, "tables/coverage_table1.md")
        mlflow_tracking.log_metrics(
            {
                f"coverage_{row['feature'].lower().replace(' ', '_')}": row["count"]
                for row in coverage.iter_rows(named=True)
            }
        )
        digest = mlflow_tracking.log_frame(mm, "catalogue", role="output")
    return MaterializeResult(
        value=mm,
        data_version=DataVersion(digest),
        metadata={"rows": mm.height, "coverage (A/B Agent Table 1)": MetadataValue.md(coverage_md)},
    )


def _read_links(path: str) -> pl.DataFrame:
    return pl.read_csv(path, infer_schema_length=10000)

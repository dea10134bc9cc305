"""The contracts as blocking Dagster asset checks.

A failing check has severity ERROR and is blocking, so nothing downstream of the table
materialises in that run; its description and metadata list every failed expectation
with offending examples, readable in the Dagster UI.
"""

from __future__ import annotations

import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, AssetIn, MetadataValue, asset_check

from data_contracts.suites import (
    ContractConfig,
    coverage_problems,
    metadata_frame_for_contract,
    metadata_suite,
    movies_suite,
    ratings_suite,
    users_suite,
)
from data_contracts.validate import ContractReport, validate_frame
from ops.data.poster_store import verify_poster_file


def contract_result(report: ContractReport, extra_problems: list[str] | None = None) -> AssetCheckResult:
    problems = [f.message() for f in report.findings] + list(extra_problems or [])
    summary = report.summary() + "".join(f"\n- {p}" for p in extra_problems or [])
    return AssetCheckResult(
        passed=not problems,
        severity=AssetCheckSeverity.ERROR,
        description=summary[:2000],
        metadata={
            "rows": report.rows,
            "expectations": report.evaluated,
            "failed": len(problems),
            "problems": MetadataValue.md("\n".join(f"- {p}" for p in problems) or "none"),
        },
    )


@asset_check(asset="users", blocking=True, description="great-expectations: unique ids, MovieLens demographic codes")
def users_contract(users: pl.DataFrame) -> AssetCheckResult:
    return contract_result(validate_frame(users, users_suite(ContractConfig())))


@asset_check(asset="movies", blocking=True, description="great-expectations: unique ids, titles, plausible years")
def movies_contract(movies: pl.DataFrame) -> AssetCheckResult:
    return contract_result(validate_frame(movies, movies_suite(ContractConfig())))


@asset_check(
    asset="ratings",
    blocking=True,
    additional_ins={"users": AssetIn("users"), "movies": AssetIn("movies")},
    description="great-expectations: rating 1..5, unique (user, movie), timestamps in range, ratings→users/movies integrity, density",
)
def ratings_contract(ratings: pl.DataFrame, users: pl.DataFrame, movies: pl.DataFrame) -> AssetCheckResult:
    suite = ratings_suite(users.get_column("user_id").to_list(), movies.get_column("movie_id").to_list(), ContractConfig())
    return contract_result(validate_frame(ratings, suite))


@asset_check(
    asset="movie_metadata",
    blocking=True,
    additional_ins={"movies": AssetIn("movies")},
    description="great-expectations: vote average 0..10, vote count ≥ 0, dates parse, coverage floor; posters decode (pillow)",
)
def movie_metadata_contract(movie_metadata: pl.DataFrame, movies: pl.DataFrame) -> AssetCheckResult:
    if movie_metadata.height == 0:
        # No metadata source configured: nothing to check, and later stages use MovieLens fields only.
        return AssetCheckResult(passed=True, description="no metadata (source 'none')", metadata={"rows": 0})
    report = validate_frame(
        metadata_frame_for_contract(movie_metadata), metadata_suite(movies.get_column("movie_id").to_list(), ContractConfig())
    )
    config = ContractConfig()
    bad = undecodable_posters(movie_metadata)
    extra = coverage_problems(movie_metadata, movies.height, config.metadata_coverage_floor)
    extra += [f"poster does not decode: {reason}" for reason in bad[:10]]
    if len(bad) > 10:
        extra.append(f"... and {len(bad) - 10} more undecodable posters")
    return contract_result(report, extra)


def undecodable_posters(metadata: pl.DataFrame) -> list[str]:
    """The reason for every referenced poster file that is missing or does not decode."""
    paths = pl.concat([metadata.get_column("poster_small"), metadata.get_column("poster_large")]).drop_nulls().unique().sort()
    return [reason for reason in map(verify_poster_file, paths.to_list()) if reason]


CONTRACT_CHECKS = [users_contract, movies_contract, ratings_contract, movie_metadata_contract]

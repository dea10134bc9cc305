"""The contracts, run twice: inside the step that produces a table, before it is stored
(`stop_before_storing`), and as blocking Dagster asset checks on what was stored.

Why in the producing step: a blocking asset check runs only after its asset's output has
been written, so on its own it stops what is downstream but cannot save what it guards —
a bad ratings file used to overwrite `users`, `movies`, `ratings` and `movie_metadata`
before the check failed, and later re-simulations broke.  The alternative, storing each
version aside and moving a "current" pointer once the checks pass, would make every reader
resolve pointers, record Dagster materialisations of data nobody reads, and need garbage
collection.  Validating first keeps one rule: what is stored has passed its contract.  The
step fails with every finding in its message and metadata; nothing is written, so every
stored asset stays byte-identical and downstream runs keep working on the previous data.

The asset checks stay: the Dagster UI shows each contract on the stored table (its
description and metadata list every failed expectation with offending examples), and they
still guard a table produced by anything else.  Both paths call the same `*_verdict`
functions, so they cannot disagree; within one process a verdict is kept for the content it
was reached on (the frames' digests, the poster files' sizes and times), so the check that
follows its producing step reads the step's verdict instead of validating the same table
again, and a table produced anywhere else, or changed since, is validated afresh.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, AssetIn, Failure, MetadataValue, asset_check

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
from resources.storage import frame_digest

# Verdicts reached in this process, by what they were reached on (`_remembered`).
_VERDICTS: dict[tuple, Verdict] = {}
_REMEMBERED = 32


@dataclass(frozen=True)
class Verdict:
    """One table's contract: its summary and every problem, in words a person reads."""

    table: str
    rows: int
    expectations: int
    summary: str
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


def users_verdict(users: pl.DataFrame) -> Verdict:
    return _remembered(("users", frame_digest(users)), lambda: _users_verdict(users))


def movies_verdict(movies: pl.DataFrame) -> Verdict:
    return _remembered(
        ("movies", frame_digest(movies)), lambda: _verdict(validate_frame(movies, movies_suite(ContractConfig())))
    )


def ratings_verdict(ratings: pl.DataFrame, users: pl.DataFrame, movies: pl.DataFrame) -> Verdict:
    key = ("ratings", frame_digest(ratings), frame_digest(users), frame_digest(movies))
    return _remembered(key, lambda: _ratings_verdict(ratings, users, movies))


def metadata_verdict(movie_metadata: pl.DataFrame, movies: pl.DataFrame) -> Verdict:
    """Value ranges and dates (great-expectations), coverage floor, posters that decode."""
    key = ("metadata", frame_digest(movie_metadata), frame_digest(movies), *_poster_stats(movie_metadata))
    return _remembered(key, lambda: _metadata_verdict(movie_metadata, movies))


def _remembered(key: tuple, reach: Callable[[], Verdict]) -> Verdict:
    """The verdict reached on `key` in this process, reached now if it was not (module
    docstring): the producing step's verdict serves the asset check that follows it."""
    if key not in _VERDICTS:
        if len(_VERDICTS) >= _REMEMBERED:
            del _VERDICTS[next(iter(_VERDICTS))]
        _VERDICTS[key] = reach()
    return _VERDICTS[key]


def _poster_stats(metadata: pl.DataFrame) -> list[tuple]:
    """(path, size, modification time) of every poster file the metadata names, so that a
    poster written, changed or removed since gives another key."""
    out = []
    for path in _poster_paths(metadata):
        try:
            stat = os.stat(path)
            out.append((path, stat.st_size, stat.st_mtime_ns))
        except OSError:
            out.append((path, None, None))
    return out


def _users_verdict(users: pl.DataFrame) -> Verdict:
    # MovieLens users all carry demographics, a zip among them; a domain's users may have none.
    demographics = users.get_column("gender").is_not_null().all()
    return _verdict(validate_frame(users, users_suite(ContractConfig(), demographics=demographics)))


def _ratings_verdict(ratings: pl.DataFrame, users: pl.DataFrame, movies: pl.DataFrame) -> Verdict:
    suite = ratings_suite(users.get_column("user_id"), movies.get_column("item_id"), ContractConfig())
    return _verdict(validate_frame(ratings, suite))


def _metadata_verdict(movie_metadata: pl.DataFrame, movies: pl.DataFrame) -> Verdict:
    if movie_metadata.height == 0:
        # No metadata source configured: nothing to check, and later stages use MovieLens fields only.
        return Verdict("metadata", 0, 0, "no metadata (source 'none')")
    config = ContractConfig()
    report = validate_frame(
        metadata_frame_for_contract(movie_metadata), metadata_suite(movies.get_column("item_id"), config)
    )
    bad = undecodable_posters(movie_metadata)
    extra = coverage_problems(movie_metadata, movies.height, config.metadata_coverage_floor)
    extra += [f"poster does not decode: {reason}" for reason in bad[:10]]
    if len(bad) > 10:
        extra.append(f"... and {len(bad) - 10} more undecodable posters")
    return _verdict(report, extra)


def stop_before_storing(verdicts: Mapping[str, Verdict], stored: str) -> None:
    """Raise a Dagster `Failure` listing every broken contract, before the step outputs
    anything; `stored` names what therefore keeps its previous value."""
    broken = {name: v for name, v in verdicts.items() if not v.passed}
    if not broken:
        return
    lines = [
        f"blocking data contract(s) failed: {', '.join(broken)}; nothing was stored ({stored} keep their previous values)"
    ]
    for verdict in broken.values():
        lines += [f"{verdict.table}: {len(verdict.problems)} problem(s) on {verdict.rows} rows"] + [
            f"- {p}" for p in verdict.problems
        ]
    raise Failure(
        description="\n".join(lines)[:4000],
        metadata={
            f"{name} problems": MetadataValue.md("\n".join(f"- {p}" for p in v.problems)) for name, v in broken.items()
        },
        allow_retries=False,
    )


def contract_result(verdict: Verdict) -> AssetCheckResult:
    return AssetCheckResult(
        passed=verdict.passed,
        severity=AssetCheckSeverity.ERROR,
        description=verdict.summary[:2000],
        metadata={
            "rows": verdict.rows,
            "expectations": verdict.expectations,
            "failed": len(verdict.problems),
            "problems": MetadataValue.md("\n".join(f"- {p}" for p in verdict.problems) or "none"),
        },
    )


@asset_check(asset="users", blocking=True, description="great-expectations: unique ids, MovieLens demographic codes")
def users_contract(users: pl.DataFrame) -> AssetCheckResult:
    return contract_result(users_verdict(users))


@asset_check(asset="movies", blocking=True, description="great-expectations: unique ids, titles, plausible years")
def movies_contract(movies: pl.DataFrame) -> AssetCheckResult:
    return contract_result(movies_verdict(movies))


@asset_check(
    asset="ratings",
    blocking=True,
    additional_ins={"users": AssetIn("users"), "movies": AssetIn("movies")},
    description="great-expectations: rating 1..5, unique (user, movie), timestamps in range, ratings→users/movies integrity, density",
)
def ratings_contract(ratings: pl.DataFrame, users: pl.DataFrame, movies: pl.DataFrame) -> AssetCheckResult:
    return contract_result(ratings_verdict(ratings, users, movies))


@asset_check(
    asset="movie_metadata",
    blocking=True,
    additional_ins={"movies": AssetIn("movies")},
    description="great-expectations: vote average 0..10, vote count ≥ 0, dates parse, coverage floor; posters decode (pillow)",
)
def movie_metadata_contract(movie_metadata: pl.DataFrame, movies: pl.DataFrame) -> AssetCheckResult:
    return contract_result(metadata_verdict(movie_metadata, movies))


def undecodable_posters(metadata: pl.DataFrame) -> list[str]:
    """The reason for every referenced poster file that is missing or does not decode."""
    return [reason for reason in map(verify_poster_file, _poster_paths(metadata)) if reason]


def _poster_paths(metadata: pl.DataFrame) -> list[str]:
    if metadata.height == 0:
        return []
    paths = pl.concat([metadata.get_column("poster_small"), metadata.get_column("poster_large")])
    return paths.drop_nulls().unique().sort().to_list()


CONTRACT_CHECKS = [users_contract, movies_contract, ratings_contract, movie_metadata_contract]


def _verdict(report: ContractReport, extra_problems: list[str] | None = None) -> Verdict:
    extra = list(extra_problems or [])
    return Verdict(
        table=report.table,
        rows=report.rows,
        expectations=report.evaluated,
        summary=report.summary() + "".join(f"\n- {p}" for p in extra),
        problems=[f.message() for f in report.findings] + extra,
    )

"""The UCSD McAuley lab's original Steam files: the `steam-download` source.

`download_steam(cache_dir, ...)` fetches `australian_user_reviews.json.gz` and
`steam_games.json.gz` (resumable with HTTP Range, bounded retries, progress: the MovieLens
download's fetch), checks each is a whole gzip and, when a SHA-256 is given, that it is that
file; `load_steam_download(...)` then reads them into the tables the `steam` source produces
(`ops.data.steam.steam_tables`: the same year-less dates, duplicate pairs, games without
metadata, sparse users).

The lab publishes no checksums, so none is built in: the first download pins nothing unless
the user sets SIMAB_STEAM_SHA256_REVIEWS / SIMAB_STEAM_SHA256_GAMES; the SHA-256 of what was
downloaded is returned (and stored in the ingestion step's metadata) so that it can be pinned.

The files are not JSON: each line is a Python literal (single quotes, True/False), read with
`ast.literal_eval` — never `eval` — line by line from the gzip stream.  Research use with
citation (Kang & McAuley, ICDM 2018; Wan & McAuley, RecSys 2018; Pathak, Gupta & McAuley,
RecSys 2017); the data is downloaded at the user's request and never shipped.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import logging
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ops.data.domain import DataFileError, DomainTables
from ops.data.movielens_download import (  # the resumable fetch is the same for any file
    DownloadConfig,
    _fetch,
    with_retries,
)
from ops.data.steam import games_frame, posted_timestamp, reviews_frame, steam_tables

logger = logging.getLogger(__name__)

REVIEWS, GAMES = "reviews", "games"
# Where the lab serves them (https://cseweb.ucsd.edu/~jmcauley/datasets.html#steam_data): the
# review file on the lab's site, the game catalogue on its author's page.  A base URL
# (SIMAB_STEAM_URL, e.g. a mirror) replaces both: <base>/<file name>.
STEAM_FILES: dict[str, tuple[str, str]] = {
    REVIEWS: (
        "australian_user_reviews.json.gz",
        "https://mcauleylab.ucsd.edu/public_datasets/data/steam/australian_user_reviews.json.gz",
    ),
    GAMES: ("steam_games.json.gz", "https://cseweb.ucsd.edu/~wckang/steam_games.json.gz"),
}
CITATION_NOTICE = (
    "Steam data from the UCSD McAuley lab: research use with citation (Kang & McAuley, ICDM 2018; "
    "Wan & McAuley, RecSys 2018; Pathak, Gupta & McAuley, RecSys 2017); never redistribute it."
)
_SHA256 = re.compile(r"[0-9a-f]{64}")


class SteamDownloadError(RuntimeError):
    """A Steam file could not be fetched or is not the file it should be."""


@dataclass(frozen=True)
class SteamFiles:
    reviews: Path
    games: Path
    sha256: dict[str, str]  # file name -> SHA-256 of the verified file
    urls: dict[str, str]  # file name -> where it came from


def steam_urls(base_url: str = "") -> dict[str, str]:
    """role -> URL: the lab's, or <base_url>/<file name> for each file when a base is given."""
    if not base_url.strip():
        return {role: url for role, (_, url) in STEAM_FILES.items()}
    return {role: base_url.strip().rstrip("/") + "/" + name for role, (name, _) in STEAM_FILES.items()}


def download_steam(
    cache_dir: Path | str,
    *,
    base_url: str = "",
    sha256: dict[str, str] | None = None,
    progress: bool = True,
    config: DownloadConfig | None = None,
) -> SteamFiles:
    """Both files in `cache_dir`, downloaded when not already there and verified.

    sha256: role ("reviews", "games") -> expected SHA-256; a role left out is checked only for
    being a whole gzip, and its digest is returned for pinning.  A cached file that verifies
    is reused without any request; an interrupted download resumes from `<name>.part`.
    """
    config = config or DownloadConfig()
    cache_dir = Path(cache_dir).expanduser()
    cache_dir.mkdir(parents=True, exist_ok=True)
    expected = {role: _expected(role, value) for role, value in (sha256 or {}).items() if value}
    urls = steam_urls(base_url)
    paths: dict[str, Path] = {}
    digests: dict[str, str] = {}
    for role, (name, _) in STEAM_FILES.items():
        paths[role], digests[name] = _fetch_verified(cache_dir / name, urls[role], expected.get(role), config, progress)
    return SteamFiles(
        reviews=paths[REVIEWS],
        games=paths[GAMES],
        sha256=digests,
        urls={STEAM_FILES[role][0]: url for role, url in urls.items()},
    )


def load_steam_download(files: SteamFiles, min_interactions: int = 5) -> DomainTables:
    """The `steam` source's tables from the original files."""
    counts: dict[str, int] = {}
    reviews = _reviews_frame(files.reviews, counts)
    games = games_frame(literal_lines(files.games))
    return steam_tables(
        reviews, games, counts, files.reviews, f"steam-download:{files.reviews.parent}", min_interactions
    )


# --------------------------------------------------------------------------------------
# reading the Python-literal lines
# --------------------------------------------------------------------------------------


def literal_lines(path: Path) -> Iterator[tuple[int, dict]]:
    """(line, dict) for each non-blank line of a gzip of Python literals; a bad line stops with
    DataFileError naming the file and the line."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    record = ast.literal_eval(text)
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
                    raise DataFileError(path, line, None, f"not a Python literal: {exc}: {text[:120]!r}") from exc
                if not isinstance(record, dict):
                    raise DataFileError(path, line, None, f"a {type(record).__name__}, not a dict: {text[:120]!r}")
                yield line, record
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise DataFileError(path, None, None, f"not a readable gzip of UTF-8 text: {exc}") from exc


def _reviews_frame(path: Path, counts: dict[str, int]) -> pl.DataFrame:
    """One row per review of australian_user_reviews: {'user_id', 'reviews': [{'item_id',
    'recommend', 'posted', ...}]} per line."""
    users, items, liked, stamps, order = [], [], [], [], []
    yearless = records = 0
    for line, record in literal_lines(path):
        records += 1
        user = str(record.get("user_id") or "").strip()
        if not user:
            raise DataFileError(path, line, "user_id", "empty user id")
        reviews = record.get("reviews")
        if not isinstance(reviews, list):
            raise DataFileError(path, line, "reviews", f"not a list of reviews: {type(reviews).__name__}")
        for k, review in enumerate(reviews):
            where = f"reviews[{k}]"
            if not isinstance(review, dict):
                raise DataFileError(path, line, where, "not a dict")
            item = str(review.get("item_id") or "").strip()
            if not item.isdigit():
                raise DataFileError(path, line, f"{where}.item_id", f"{item!r} is not a Steam app id")
            recommend = review.get("recommend")
            if not isinstance(recommend, bool):
                raise DataFileError(path, line, f"{where}.recommend", f"{recommend!r} is not True/False")
            seconds, no_year = posted_timestamp(str(review.get("posted") or ""), path, line, f"{where}.posted")
            yearless += no_year
            users.append(user)
            items.append(int(item))
            liked.append(int(recommend))
            stamps.append(seconds)
            order.append(len(order))  # file order breaks timestamp ties between duplicate pairs
    counts.update(user_records_read=records, reviews_read=len(users), yearless_dates_assumed_crawl_year=yearless)
    return reviews_frame(users, items, liked, stamps, order)


# --------------------------------------------------------------------------------------
# fetching and verifying
# --------------------------------------------------------------------------------------


def _expected(role: str, value: str) -> str:
    if role not in STEAM_FILES:
        raise ValueError(f"unknown Steam file {role!r}; expected one of {sorted(STEAM_FILES)}")
    value = value.strip().lower()
    if not _SHA256.fullmatch(value):
        raise ValueError(f"SHA-256 of the Steam {role} file must be 64 hex digits, not {value!r}")
    return value


def _fetch_verified(
    target: Path, url: str, expected: str | None, config: DownloadConfig, progress: bool
) -> tuple[Path, str]:
    if target.exists():
        actual = sha256_of(target)
        if expected is None or actual == expected:
            return target, actual
        # Kept where it is until a copy that verifies replaces it.
        logger.warning("%s has SHA-256 %s, not the pinned %s; downloading it again", target, actual, expected)
    logger.warning("Downloading %s. %s", url, CITATION_NOTICE)
    part = target.with_name(target.name + ".part")
    _with_retries(lambda: _fetch(url, part, config, progress), url, config)
    actual = sha256_of(part)
    if expected is not None and actual != expected:
        problem = f"checksum mismatch: SHA-256 expected {expected}, actual {actual} ({part.stat().st_size} bytes)"
    else:
        problem = _gzip_problem(part)
    if problem is not None:
        rejected = target.with_name(target.name + ".rejected")
        os.replace(part, rejected)
        kept = f"; the cached {target} is untouched" if target.exists() else ""
        raise SteamDownloadError(
            f"{target.name} downloaded from {url} is unusable: {problem}. It was moved to {rejected}{kept}; "
            f"the next call downloads it again from the start."
        )
    if target.exists():
        os.replace(target, target.with_name(target.name + ".previous"))
    os.replace(part, target)
    logger.info("%s: SHA-256 %s%s", target.name, actual, "" if expected else " (not pinned: SIMAB_STEAM_SHA256_*)")
    return target, actual


def _with_retries(call, url: str, config: DownloadConfig):
    hint = (
        "Offline, or the lab's site moved? Put the two files on a reachable server and set SIMAB_STEAM_URL "
        "to its folder, or use SIMAB_SOURCE=steam with a flattened copy."
    )
    return with_retries(call, url, config, SteamDownloadError, hint)


def _gzip_problem(path: Path) -> str | None:
    """None when the file is a whole gzip (its CRC and length check out)."""
    try:
        with gzip.open(path, "rb") as fh:
            while fh.read(1 << 20):
                pass
    except (OSError, EOFError, zlib.error) as exc:
        return f"not a whole gzip file, truncated or corrupt ({exc})"
    return None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

"""MovieLens from GroupLens: the "download" source (docs/definitions.md#lifecycle, step 1).

`download(dataset, cache_dir)` fetches the official GroupLens archive (checksum-verified,
cached, resumable, with bounded retries), unzips it safely and returns the folder, ready for
`ops.data.movielens.load_local`.  What cannot be fetched, verified or unpacked stops with
`MovieLensDownloadError`, which says how to use the local source instead.

The MovieLens licence allows research use only, forbids redistribution and asks for a
citation (Harper & Konstan 2015): the data is downloaded at the user's request, never
shipped, and `LICENCE_NOTICE` is logged before each download starts.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import time
import zipfile
from pathlib import Path, PurePosixPath

import requests
from pydantic import BaseModel, Field

from ops.data.movielens import Dataset

logger = logging.getLogger(__name__)

# Published MD5 of the official archives.  GroupLens serves `<name>.zip.md5` beside each
# archive ("MD5 (ml-1m.zip) = c4d9eecfca2ab87c1945afe126590906", copy kept in
# AKSW/frankgraphbench datasets/ml-1m.zip.md5); the same two values are used by
# eli-osherovich/papers_with_code datasets/movielens/dl_config.py and other loaders.
ARCHIVE_MD5: dict[str, str] = {
    "ml-1m": "c4d9eecfca2ab87c1945afe126590906",
    "ml-100k": "0e33842e24a9c977be4e0107933c0723",
}

LICENCE_NOTICE = (
    "MovieLens data belongs to GroupLens Research (University of Minnesota): research use only, "
    "no redistribution without permission, no commercial use, and cite F. Maxwell Harper and "
    "Joseph A. Konstan. 2015. The MovieLens Datasets: History and Context. ACM TiiS 5, 4, "
    "Article 19. https://doi.org/10.1145/2827872"
)


class MovieLensDownloadError(RuntimeError):
    """The official archive could not be fetched, verified or unpacked."""


class DownloadConfig(BaseModel):
    """How `download` talks to GroupLens.  Defaults are operational choices, not from a paper."""

    base_url: str = "https://files.grouplens.org/datasets/movielens/"
    timeout_s: float = Field(30.0, gt=0)  # per connect and per read, not for the whole file
    max_attempts: int = Field(5, ge=1)  # connection errors, timeouts, 5xx, 429
    backoff_initial_s: float = Field(1.0, ge=0)  # exponential back-off between attempts
    backoff_max_s: float = Field(30.0, ge=0)
    chunk_bytes: int = Field(1 << 16, gt=0)


def download(
    dataset: Dataset,
    cache_dir: Path | str,
    *,
    base_url: str | None = None,
    checksum: str | None = "known",
    progress: bool = True,
    timeout: float | None = None,
    config: DownloadConfig | None = None,
) -> Path:
    """Fetch `<dataset>.zip` from GroupLens into `cache_dir`, verify it, unzip it; return the folder.

    checksum: "known" (default) = the published MD5 in ARCHIVE_MD5; "published" = read
    `<dataset>.zip.md5` from the same base URL (cached beside the archive); an MD5 hex string;
    None = no checksum, only the zip's own CRCs are checked.
    A verified archive already in `cache_dir` is reused without any request.  An interrupted
    download resumes from `<dataset>.zip.part` with an HTTP Range request.
    """
    if dataset not in ARCHIVE_MD5:
        raise ValueError(f"unknown MovieLens dataset {dataset!r}; expected one of {sorted(ARCHIVE_MD5)}")
    config = (config or DownloadConfig()).model_copy(
        update={k: v for k, v in {"base_url": base_url, "timeout_s": timeout}.items() if v is not None}
    )
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    url = config.base_url.rstrip("/") + f"/{dataset}.zip"
    archive = cache_dir / f"{dataset}.zip"

    expected = _expected_md5(dataset, checksum, url, cache_dir, config)
    if archive.exists():
        problem = _archive_problem(archive, expected)
        if problem is None:
            return _extract(archive, cache_dir / dataset)
        _move_aside(archive, problem)

    logger.warning("Downloading %s. %s", url, LICENCE_NOTICE)
    part = archive.with_name(archive.name + ".part")
    _fetch_with_retries(url, part, config, progress, dataset)
    problem = _archive_problem(part, expected)
    if problem is not None:
        rejected = _move_aside(part, problem)
        raise MovieLensDownloadError(
            f"archive {archive.name} downloaded from {url} is unusable: {problem}. It was moved to {rejected}; "
            f"the next call downloads it again from the start."
        )
    os.replace(part, archive)
    return _extract(archive, cache_dir / dataset)


# --------------------------------------------------------------------------------------
# fetching (bounded retries, resume), verifying and unzipping
# --------------------------------------------------------------------------------------


class _TransientError(Exception):
    """Worth another attempt: a 5xx / 429 answer, or a body cut short."""


class _FatalHTTPError(Exception):
    """Not worth another attempt (404 and the like)."""


_TRANSIENT = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError, _TransientError)


def _expected_md5(dataset: str, checksum: str | None, url: str, cache_dir: Path, config: DownloadConfig) -> str | None:
    if checksum is None:
        logger.warning("No checksum for %s: only the zip's own CRCs will be checked", dataset)
        return None
    if checksum == "known":
        return ARCHIVE_MD5[dataset]
    if checksum == "published":
        cached = cache_dir / f"{dataset}.zip.md5"
        if not cached.exists():
            text = _with_retries(lambda: _get_text(url + ".md5", config), url + ".md5", config, dataset)
            _atomic_write(cached, text)
        text = cached.read_text(encoding="latin-1")
        found = re.search(r"\b([0-9a-fA-F]{32})\b", text)
        if not found:
            cached.unlink()
            raise MovieLensDownloadError(f"{url}.md5 holds no MD5 value: {text[:200]!r}")
        return found.group(1).lower()
    if not re.fullmatch(r"[0-9a-fA-F]{32}", checksum):
        raise ValueError(f"checksum must be 'known', 'published', None or 32 hex digits (MD5), not {checksum!r}")
    return checksum.lower()


def _archive_problem(path: Path, expected_md5: str | None) -> str | None:
    """None when the archive is whole; otherwise what is wrong with it."""
    if expected_md5 is not None:
        actual = _md5(path)
        if actual != expected_md5:
            return f"checksum mismatch (MD5 expected {expected_md5}, actual {actual}, {path.stat().st_size} bytes)"
    try:
        with zipfile.ZipFile(path) as zf:
            broken = zf.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        return f"not a readable zip archive, truncated or corrupt ({exc})"
    if broken is not None:
        return f"zip member {broken!r} fails its CRC check (corrupt archive)"
    return None


def _fetch_with_retries(url: str, part: Path, config: DownloadConfig, progress: bool, dataset: str) -> None:
    _with_retries(lambda: _fetch(url, part, config, progress), url, config, dataset)


def _with_retries(call, url: str, config: DownloadConfig, dataset: str):
    return with_retries(call, url, config, MovieLensDownloadError, _local_hint(dataset))


def with_retries(call, url: str, config: DownloadConfig, error: type[Exception], hint: str):
    """Bounded retries with exponential back-off; each attempt resumes from what is on disk.
    A refusal (404, 403, ...) or the last failure is raised as `error`, with `hint` saying what
    to do instead (any source that downloads a file shares this)."""
    import tenacity

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(config.max_attempts),
        wait=tenacity.wait_exponential(multiplier=config.backoff_initial_s, max=config.backoff_max_s),
        retry=tenacity.retry_if_exception_type(_TRANSIENT),
        before_sleep=lambda state: logger.warning(
            "attempt %d for %s failed (%s); retrying", state.attempt_number, url, state.outcome.exception()
        ),
        reraise=True,
    )
    try:
        return retrying(call)
    except _FatalHTTPError as exc:
        raise error(f"{url}: {exc}. {hint}") from exc
    except _TRANSIENT as exc:
        raise error(
            f"could not download {url} after {config.max_attempts} attempt(s): {exc}. "
            f"Any partial download is kept and resumes on the next call. {hint}"
        ) from exc


def _local_hint(dataset: str) -> str:
    return (
        f"If this machine is offline or cannot reach GroupLens, use the local source instead: get {dataset}.zip "
        f"on a machine with access, unzip it, and set `source: local` with `folder:` pointing at the unzipped "
        f"{dataset} folder (the one holding {'users.dat, movies.dat, ratings.dat' if dataset == 'ml-1m' else 'u.data, u.item, u.user'})."
    )


def _get_text(url: str, config: DownloadConfig) -> str:
    response = requests.get(url, timeout=config.timeout_s)
    _raise_for_status(response, url)
    return response.text


def _raise_for_status(response: requests.Response, url: str) -> None:
    if response.status_code >= 500 or response.status_code == 429:
        raise _TransientError(f"server answered {response.status_code} {response.reason}")
    if response.status_code >= 400:
        raise _FatalHTTPError(f"server answered {response.status_code} {response.reason}")


def _fetch(url: str, part: Path, config: DownloadConfig, progress: bool) -> None:
    """One attempt: continue `part` with a Range request, or start it over on a plain 200."""
    from tqdm import tqdm

    offset = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    with requests.get(url, headers=headers, stream=True, timeout=config.timeout_s) as response:
        if response.status_code == 416 and offset:
            total = _content_range_total(response.headers.get("Content-Range", ""))
            if total == offset:  # the previous run got every byte but stopped before verifying
                return
            part.unlink()
            raise _TransientError(f"server refused the resume range for {part.name} (416); starting over")
        _raise_for_status(response, url)
        if response.status_code == 206:
            start = _content_range_start(response.headers.get("Content-Range", ""))
            if start != offset:
                part.unlink()
                raise _TransientError(f"server resumed at byte {start}, not {offset}; starting over")
            total = _content_range_total(response.headers.get("Content-Range", ""))
            mode = "ab"
        else:
            if offset:
                logger.info("server ignored the Range request for %s; downloading from the start", url)
            offset = 0
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            mode = "wb"
        with (
            part.open(mode) as fh,
            tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                desc=part.name.removesuffix(".part"),
                disable=not progress,
            ) as bar,
        ):
            for chunk in response.iter_content(chunk_size=config.chunk_bytes):
                fh.write(chunk)
                bar.update(len(chunk))
            fh.flush()
            os.fsync(fh.fileno())
    size = part.stat().st_size
    if total is not None and size < total:
        raise _TransientError(f"connection closed after {size} of {total} bytes")


def _content_range_start(value: str) -> int | None:
    found = re.match(r"bytes\s+(\d+)-", value)
    return int(found.group(1)) if found else None


def _content_range_total(value: str) -> int | None:
    found = re.search(r"/(\d+)\s*$", value)
    return int(found.group(1)) if found else None


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _move_aside(path: Path, problem: str) -> Path:
    """Keep a rejected file for inspection under another name, so the next try starts clean."""
    rejected = path.with_name(path.name.removesuffix(".part") + ".rejected")
    os.replace(path, rejected)
    logger.warning("%s rejected (%s); moved to %s", path, problem, rejected)
    return rejected


_MARKER = ".simab-archive-md5"  # inside the unzipped folder: which archive it came from


def _extract(archive: Path, target: Path) -> Path:
    """Unzip `archive` into `target` (atomically, refusing unsafe member paths); reuse a finished one."""
    md5 = _md5(archive)
    marker = target / _MARKER
    if marker.exists() and marker.read_text().strip() == md5:
        return target
    staging = target.with_name(f".{target.name}.unzipping")
    if staging.exists():
        shutil.rmtree(staging)  # our own leftover from an interrupted unzip
    staging.mkdir()
    with zipfile.ZipFile(archive) as zf:
        _check_member_paths(zf, archive, staging)
        zf.extractall(staging)
    entries = list(staging.iterdir())
    # The official archives hold one top folder (ml-1m/...); keep its content, not the wrapper.
    content = entries[0] if len(entries) == 1 and entries[0].is_dir() else staging
    _atomic_write(content / _MARKER, md5 + "\n")
    if target.exists():
        stale = target.with_name(f"{target.name}.stale-{int(time.time())}")
        os.replace(target, stale)
        logger.warning("%s did not come from %s; moved it to %s", target, archive.name, stale)
    os.replace(content, target)
    shutil.rmtree(staging, ignore_errors=True)
    return target


def _check_member_paths(zf: zipfile.ZipFile, archive: Path, root: Path) -> None:
    root = root.resolve()
    for info in zf.infolist():
        name = info.filename.replace("\\", "/")
        is_symlink = (info.external_attr >> 16) & 0o170000 == 0o120000
        parts = PurePosixPath(name).parts
        escapes = name.startswith("/") or ".." in parts or (parts and ":" in parts[0])
        if is_symlink or escapes or not (root / name).resolve().is_relative_to(root):
            raise MovieLensDownloadError(
                f"archive {archive} holds an unsafe member path {info.filename!r} "
                f"({'symbolic link' if is_symlink else 'leaves the extraction folder'}); refusing to unzip it"
            )


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)

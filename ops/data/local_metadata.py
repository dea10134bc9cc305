"""MM-ML-1M without TMDB: a local metadata file plus folders of posters named by movie id.

For a user who already has a metadata dump (an OMDb scrape, a TMDB export, a CSV) and
poster images, this assembles the same METADATA table the TMDB crawl produces
(A/B Agent §2.2, Table 1), with `metadata_source = "local:<file name>"`.

The default layout is the OMDb-style ML-1M dump (MeLU's `movies_extrainfos.dat`):
UTF-8, `::`-separated, 11 fields
`movieId::title::year::rated::released::genre::director::writer::actors::plot::poster_url`.
OMDb has no TMDB vote average or vote count: those stay null rather than being invented.
Other layouts are a matter of configuration: `.csv`, `.parquet` and `.jsonl` files are read
by their header, and `columns` says which file column feeds which METADATA field.

Posters: the first folder (in configured order) holding `<item_id>.<ext>` wins; the image
is decoded with pillow and stored twice under its content hash: a small variant for the
home page and a large one for the detail page (widths as TMDB's w185 / w500).
"""

from __future__ import annotations

import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, Field

from ops.data.poster_store import PosterError, PosterStoreConfig, decode_image, store_poster, store_resized_poster
from ops.schema import METADATA, conform
from ops.storage.checkpoint import JsonlCheckpoint

log = logging.getLogger(__name__)

# The MeLU / OMDb dump of ML-1M (shared/data README, "ml-1m-metadata").
OMDB_FIELDS = (
    "item_id",
    "title",
    "year",
    "rated",
    "released",
    "genre",
    "director",
    "writer",
    "actors",
    "plot",
    "poster_url",
)
OMDB_COLUMNS = {
    "item_id": "item_id",
    "overview": "plot",
    "release_date": "released",
    "meta_genres": "genre",
    "directors": "director",
    "actors": "actors",
}
# METADATA fields a local file may supply, and how each is read.
_TEXT_FIELDS = ("overview",)
_LIST_FIELDS = ("meta_genres", "directors", "actors")
_NUMBER_FIELDS = {"tmdb_id": int, "vote_count": int, "vote_average": float}


class LocalMetadataConfig(BaseModel):
    """Where the local metadata and posters are, and how the file is laid out."""

    metadata_path: Path | None = None  # None: posters only
    # Layout of delimited text files (".dat", ".txt", anything not csv/parquet/jsonl).
    separator: str = "::"
    fields: tuple[str, ...] = OMDB_FIELDS
    encoding: str = "utf-8"
    # METADATA field -> file column.  Fields left out stay null.
    columns: dict[str, str] = Field(default_factory=lambda: dict(OMDB_COLUMNS))
    missing_values: tuple[str, ...] = ("", "N/A", "NA", "null", "None")
    # OMDb writes "22 Nov 1995"; ISO dates are accepted too.
    date_formats: tuple[str, ...] = ("%d %b %Y", "%Y-%m-%d", "%Y/%m/%d", "%d/%m/%Y")
    list_separator: str = ","
    # OMDb marks roles after a name: "Gary Goldman(co-director)"; keep the name only.
    strip_role_notes: bool = True
    # Poster folders in order of preference (the first one holding an id wins).
    poster_dirs: list[Path] = Field(default_factory=list)
    poster_extensions: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".webp")
    # Widths matching TMDB's w185 (home page) and w500 (detail page), §2.3.1.
    poster_small_width: int = Field(185, ge=16)
    poster_large_width: int = Field(500, ge=16)
    upscale: bool = False  # never blow a 200-px poster up to 500 px by default
    posters: PosterStoreConfig = PosterStoreConfig()
    workers: int = Field(2, ge=1)
    progress: bool = True


@dataclass
class LocalMetadataResult:
    metadata: pl.DataFrame  # METADATA, metadata_source = "local:<file>"
    failures: pl.DataFrame  # ops.data.tmdb.FAILURES: item_id, title, stage, reason
    stats: dict[str, Any] = field(default_factory=dict)


def load_local_metadata(
    movies: pl.DataFrame,
    out_dir: str | Path,
    config: LocalMetadataConfig,
    links: pl.DataFrame | None = None,
) -> LocalMetadataResult:
    """METADATA for `movies` from the configured file and poster folders.

    A movie gets a row when the file has it or a poster folder has it.  Movies with
    neither, and posters that do not decode, are listed in `failures`.  Posters are written
    under `out_dir/posters/` (content-hash names); `out_dir/local_posters.jsonl` records
    what is done so that a re-run only redoes what is missing.
    """
    from ops.data.tmdb import FAILURES, links_to_tmdb_ids

    out = Path(out_dir)
    item_ids = movies.get_column("item_id").cast(pl.Int64).to_list()
    titles = dict(zip(item_ids, movies.get_column("title").to_list()))
    source = f"local:{config.metadata_path.name}" if config.metadata_path else "local:posters"

    records = read_metadata_file(config.metadata_path, config) if config.metadata_path else {}
    unknown = sorted(set(records) - set(titles))
    if unknown:
        log.warning(
            "%s has %d movie ids not in the movies table (ignored), e.g. %s",
            config.metadata_path,
            len(unknown),
            unknown[:5],
        )
    tmdb_ids = links_to_tmdb_ids(links) if links is not None else {}

    posters, poster_failures = build_posters(item_ids, out, config)
    rows, failures = [], []
    for item_id in item_ids:
        rec = records.get(item_id)
        poster = posters.get(item_id)
        if rec is None and config.metadata_path:
            failures.append(
                {
                    "item_id": item_id,
                    "title": titles[item_id],
                    "stage": "match",
                    "reason": f"movie id not in {config.metadata_path.name}",
                }
            )
        if item_id in poster_failures:
            failures.append(
                {
                    "item_id": item_id,
                    "title": titles[item_id],
                    "stage": "poster",
                    "reason": poster_failures[item_id],
                }
            )
        if rec is None and poster is None:
            continue
        row = {name: None for name in METADATA}
        row.update(rec or {})
        row["item_id"] = item_id
        if row.get("tmdb_id") is None:
            row["tmdb_id"] = tmdb_ids.get(item_id)
        if poster:
            row["poster_small"], row["poster_large"] = poster["poster_small"], poster["poster_large"]
        row["metadata_source"] = source
        rows.append(row)
    metadata = conform(
        pl.DataFrame(rows, schema=METADATA) if rows else pl.DataFrame(schema=METADATA), METADATA, "metadata"
    )
    failures_df = pl.DataFrame(failures, schema=FAILURES).sort("item_id", "stage", maintain_order=True)
    stats = {
        "movies": len(item_ids),
        "with_metadata": sum(1 for m in item_ids if m in records),
        "with_poster": len(posters),
        "rows": metadata.height,
        "ids_not_in_movies": len(unknown),
    }
    log.info("local metadata from %s: %s", source, stats)
    return LocalMetadataResult(metadata.sort("item_id"), failures_df, stats)


def read_metadata_file(path: str | Path, config: LocalMetadataConfig) -> dict[int, dict[str, Any]]:
    """{item_id: METADATA fields (typed)} from the file; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"local metadata file {path} does not exist")
    if "item_id" not in config.columns:
        raise ValueError("LocalMetadataConfig.columns must map 'item_id' to a file column")
    bad = sorted(set(config.columns) - set(METADATA))
    if bad:
        raise ValueError(f"LocalMetadataConfig.columns names unknown METADATA fields {bad}; known: {list(METADATA)}")
    out: dict[int, dict[str, Any]] = {}
    for line_no, raw in _read_rows(path, config):
        where = f"{path}:{line_no}"
        item_id = _parse_int(raw.get(config.columns["item_id"]), config)
        if item_id is None:
            raise ValueError(
                f"{where}: column {config.columns['item_id']!r} is not a movie id: {raw.get(config.columns['item_id'])!r}"
            )
        if item_id in out:
            raise ValueError(f"{where}: movie id {item_id} appears twice")
        out[item_id] = _typed_fields(raw, config, where)
    return out


def build_posters(
    item_ids: list[int], out_dir: Path, config: LocalMetadataConfig
) -> tuple[dict[int, dict], dict[int, str]]:
    """({item_id: {"poster_small", "poster_large"}}, {item_id: reason}) for the poster folders."""
    from tqdm import tqdm

    if not config.poster_dirs:
        return {}, {}
    for folder in config.poster_dirs:
        if not Path(folder).is_dir():
            raise FileNotFoundError(f"poster folder {folder} does not exist")
    poster_dir = out_dir / "posters"
    sources = {m: p for m in item_ids if (p := find_poster_file(m, config)) is not None}
    checkpoint = JsonlCheckpoint(out_dir / "local_posters.jsonl", key="item_id")
    todo = [m for m in sources if not _still_valid(checkpoint.get(m), sources[m])]

    def work(item_id: int) -> dict:
        src = sources[item_id]
        rec: dict[str, Any] = {"item_id": item_id, "source": str(src), "source_size": src.stat().st_size}
        try:
            small, large = make_poster_variants(src.read_bytes(), poster_dir, config)
            rec.update(poster_small=str(small), poster_large=str(large))
        except PosterError as exc:
            rec["error"] = f"{src}: {exc}"
        return rec

    with ThreadPoolExecutor(max_workers=config.workers) as pool:
        for rec in tqdm(
            pool.map(work, todo), total=len(todo), desc="posters", unit="movie", disable=not config.progress
        ):
            checkpoint.append(rec)
    posters, failures = {}, {}
    for item_id in sources:
        rec = checkpoint.get(item_id)
        if rec.get("error"):
            failures[item_id] = rec["error"]
        else:
            posters[item_id] = {"poster_small": rec["poster_small"], "poster_large": rec["poster_large"]}
    return posters, failures


def make_poster_variants(data: bytes, poster_dir: Path, config: LocalMetadataConfig) -> tuple[Path, Path]:
    """(small, large) poster paths; a variant that needs no resizing keeps the original bytes."""
    image = decode_image(data, config.posters)
    paths = []
    for width in (config.poster_small_width, config.poster_large_width):
        if image.width <= width and not config.upscale:
            paths.append(store_poster(data, poster_dir, config.posters))
        else:
            paths.append(store_resized_poster(image, width, poster_dir, config.posters, upscale=config.upscale))
    return paths[0], paths[1]


def find_poster_file(item_id: int, config: LocalMetadataConfig) -> Path | None:
    for folder in config.poster_dirs:
        for ext in config.poster_extensions:
            candidate = Path(folder) / f"{item_id}{ext}"
            if candidate.is_file():
                return candidate
    return None


# ---------------------------------------------------------------------------------------
# Helpers


def _read_rows(path: Path, config: LocalMetadataConfig):
    """(line number, {column: raw text}) for each record of the file."""
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        frame = pl.read_csv(path, separator="\t" if suffix == ".tsv" else ",", infer_schema=False, encoding="utf8")
        yield from ((i + 2, row) for i, row in enumerate(frame.to_dicts()))
    elif suffix == ".parquet":
        frame = pl.read_parquet(path)
        yield from (
            (i + 1, {k: None if v is None else v for k, v in row.items()}) for i, row in enumerate(frame.to_dicts())
        )
    elif suffix in (".jsonl", ".ndjson"):
        with open(path, encoding=config.encoding) as fh:
            for i, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        yield i, json.loads(line)
                    except ValueError as exc:
                        raise ValueError(f"{path}:{i}: not JSON: {exc}") from None
    else:
        try:
            with open(path, encoding=config.encoding, newline="") as fh:
                for i, line in enumerate(fh, start=1):
                    line = line.rstrip("\r\n")
                    if not line.strip():
                        continue
                    parts = line.split(config.separator)
                    if len(parts) != len(config.fields):
                        raise ValueError(
                            f"{path}:{i}: {len(parts)} fields separated by {config.separator!r}, expected {len(config.fields)} {config.fields}"
                        )
                    yield i, dict(zip(config.fields, parts))
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not {config.encoding} text ({exc})") from None


def _typed_fields(raw: dict[str, Any], config: LocalMetadataConfig, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, column in config.columns.items():
        if name == "item_id":
            continue
        if column not in raw:
            raise ValueError(f"{where}: column {column!r} (for {name}) is absent; columns are {sorted(raw)}")
        value = raw[column]
        if name in _TEXT_FIELDS:
            out[name] = _clean(value, config)
        elif name in _LIST_FIELDS:
            out[name] = _split_list(value, config)
        elif name == "release_date":
            out[name] = _parse_date(value, config, where)
        elif name in _NUMBER_FIELDS:
            out[name] = _parse_number(value, _NUMBER_FIELDS[name], config, where, name)
        elif name in ("poster_small", "poster_large", "metadata_source"):
            raise ValueError(f"{name} comes from the poster folders and the source name, not from a file column")
    return out


def _clean(value: Any, config: LocalMetadataConfig) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if text in config.missing_values else text


def _split_list(value: Any, config: LocalMetadataConfig) -> list[str] | None:
    if isinstance(value, list):
        items = [str(v).strip() for v in value]
    else:
        text = _clean(value, config)
        if text is None:
            return None
        items = [part.strip() for part in text.split(config.list_separator)]
    if config.strip_role_notes:
        items = [re.sub(r"\s*\([^)]*\)\s*$", "", item).strip() for item in items]
    unique: dict[str, None] = {}
    for item in items:
        if item and item not in config.missing_values:
            unique.setdefault(item, None)
    return list(unique) or None


def _parse_date(value: Any, config: LocalMetadataConfig, where: str):
    text = _clean(value, config)
    if text is None:
        return None
    for fmt in config.date_formats:
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    raise ValueError(f"{where}: release date {text!r} matches none of {config.date_formats}")


def _parse_int(value: Any, config: LocalMetadataConfig) -> int | None:
    text = _clean(value, config)
    try:
        return int(float(text)) if text is not None else None
    except ValueError:
        return None


def _parse_number(value: Any, kind: type, config: LocalMetadataConfig, where: str, name: str):
    text = _clean(value, config)
    if text is None:
        return None
    try:
        return kind(float(text.replace(",", ""))) if kind is int else float(text)
    except ValueError:
        raise ValueError(f"{where}: {name} {text!r} is not a number") from None


def _still_valid(record: dict | None, source: Path) -> bool:
    """A checkpointed poster is reused when its source is unchanged and its files exist."""
    if record is None or record.get("source") != str(source) or record.get("source_size") != source.stat().st_size:
        return False
    if record.get("error"):
        return True
    return all(record.get(k) and Path(record[k]).is_file() for k in ("poster_small", "poster_large"))

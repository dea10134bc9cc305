"""Poster files present and decodable (design.md step 3, issue 3 contracts)."""

from __future__ import annotations

from pathlib import Path

import polars as pl


def undecodable_posters(metadata: pl.DataFrame, columns: tuple[str, ...] = ("poster_small", "poster_large")) -> list[tuple[str, str]]:
    """(path, reason) for every referenced poster file that is missing or does not decode."""
    from PIL import Image

    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for column in columns:
        if column not in metadata.columns:
            continue
        for path in metadata.get_column(column).drop_nulls().to_list():
            if path in seen:
                continue
            seen.add(path)
            if not Path(path).is_file():
                problems.append((path, "missing"))
                continue
            try:
                with Image.open(path) as image:
                    image.load()
            except Exception as exc:  # pillow raises many types for broken files
                problems.append((path, f"{type(exc).__name__}: {exc}"))
    return problems

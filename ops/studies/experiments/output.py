"""One experiment's folder, `$SIMAB_HOME/experiments/<name>/`: `table.md` (ours beside the
paper, the protocol differences, the verdicts), `table.csv` (the numbers, one row per
table row, intervals as their own columns), further CSVs and the figures under `plots/`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from ops.storage.atomic import atomic_write_bytes


def experiment_markdown(
    title: str,
    body: Sequence[str],
    differences: Sequence[str],
    figures: Sequence[Path],
    folder: Path,
    notes: Sequence[str] = (),
) -> str:
    """The Markdown page: title, the tables (`body`), what differs from the paper's protocol,
    any notes, the figures (relative to `folder`)."""
    lines = [f"# {title}", "", *body, "## Protocol differences from the paper", ""]
    lines += [f"- {d}" for d in differences] + [""]
    lines += [*notes] + ([""] if notes else [])
    if figures:
        lines += ["## Figures", ""] + [f"![{p.stem}]({p.relative_to(folder)})" for p in figures] + [""]
    return "\n".join(lines)


def write_experiment(
    folder: Path, markdown: str, table: pl.DataFrame, extra: Mapping[str, pl.DataFrame] | None = None
) -> dict[str, Path]:
    """Write `table.md`, `table.csv` and `<name>.csv` for each extra table (atomically)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": folder / "table.md", "csv": folder / "table.csv"}
    atomic_write_bytes(paths["markdown"], markdown.encode("utf-8"))
    atomic_write_bytes(paths["csv"], table.write_csv().encode("utf-8"))
    for name, frame in (extra or {}).items():
        paths[name] = folder / f"{name}.csv"
        atomic_write_bytes(paths[name], frame.write_csv().encode("utf-8"))
    return paths

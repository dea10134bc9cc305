"""The basics every figure and table shares: pyplot on the Agg backend (no display is
needed; the assets log figures to MLflow), `save_figure`, and `table_markdown` (a frame) and `rows_markdown`
(rows of written cells), the one way a table is written for a report or the Dagster UI: tabulate's.  The figures themselves live with their
stage: `ops.data.data_figures` (the data) and `ops.readout.readout_figures` (the read-outs)."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """`matplotlib.pyplot` with the Agg backend set first (imported here, not at module
    level, so that `import ops` stays fast)."""
    import matplotlib  # lazy: matplotlib (half a second to import), for figures only

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after the backend is set

    return plt


def save_figure(fig, path: str | Path) -> Path:
    """A figure as PNG at `path` (folders made), then closed so figures do not pile up."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def rows_markdown(header, rows) -> list[str]:
    """Rows of cells already written out (text; None is an empty cell) under `header`, as the
    lines of a GitHub Markdown table (tabulate's), each cell exactly as written: no number parsing."""
    from tabulate import tabulate  # lazy: tabulate, for tables only

    body = [["" if v is None else str(v) for v in row] for row in rows]
    return tabulate(body, headers=list(header), tablefmt="github", disable_numparse=True).splitlines()


def table_markdown(frame, floatfmt: str | None = None) -> str:
    """A table (Polars) as a GitHub Markdown table without the index; `floatfmt`: how its
    floats are written (tabulate's, e.g. ".4f"; default its general format)."""
    return frame.to_pandas().to_markdown(index=False, **({"floatfmt": floatfmt} if floatfmt else {}))

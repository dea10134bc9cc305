"""The report as one self-contained HTML page: whatever the Markdown report holds (every
section, whoever added it) rendered, the figures embedded as data URIs, so the file can be
mailed, opened from an MLflow artefact or served by the viewer as it is."""

from __future__ import annotations

import base64
import html
import mimetypes
from pathlib import Path

from markdown_it import MarkdownIt

from ops.readout.verdict import VERDICT_HEADING


def report_html(markdown: str, folder: Path, title: str = "simab report") -> str:
    """The Markdown report as one HTML page; images whose path lies under `folder` are
    embedded as data URIs (others keep their address)."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(markdown)
    root = Path(folder).resolve()
    for token in tokens:
        for child in token.children or []:
            if child.type == "image":
                src = str(child.attrGet("src") or "")
                embedded = _data_uri(root, src)
                if embedded is not None:
                    child.attrSet("src", embedded)
    body = _verdict_section(md.renderer.render(tokens, md.options, {}))
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_REPORT_CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )


_REPORT_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:70rem;margin:1rem auto;padding:0 1rem;color:#222}"
    "table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0 1rem}th,td{border:1px solid #ddd;padding:.2rem .45rem}"
    "th{background:#f4f4f4}img{max-width:100%}"
    "#verdict{border:2px solid #4c72b0;border-radius:6px;padding:.2rem 1rem;margin:0 0 1.5rem}"
    "#verdict img{max-height:22rem}"
    "#verdict blockquote{background:#fff4e5;border-left:4px solid #e08a00;margin:.5rem 0;padding:.3rem .8rem}"
)


def _verdict_section(body: str) -> str:
    """The verdict's heading and everything up to the next section inside <section
    id="verdict">, so that it can be styled and found (the screenshot test)."""
    start = body.find(f"<h2>{VERDICT_HEADING}</h2>")
    if start < 0:
        return body
    end = body.find("<h2>", start + 4)
    end = len(body) if end < 0 else end
    return body[:start] + '<section id="verdict">\n' + body[start:end] + "</section>\n" + body[end:]


def _data_uri(root: Path, src: str) -> str | None:
    """A relative image path under `root` as a data URI; None for anything else (an
    absolute path, a URL, a path leaving the folder, a missing file)."""
    if not src or "://" in src or src.startswith(("/", "data:")):
        return None
    path = (root / src).resolve()
    if root not in path.parents or not path.is_file():
        return None
    kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode("ascii")

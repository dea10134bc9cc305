"""The HTML report: whatever the Markdown report holds, as one page with its figures inside."""

from __future__ import annotations

import base64

from ops.readout.report_html import report_html


def test_the_markdown_becomes_one_page_with_the_figures_embedded(tmp_path):
    folder = tmp_path / "run-1"
    (folder / "plots").mkdir(parents=True)
    png = b"\x89PNG\r\n\x1a\n" + b"figure bytes"
    (folder / "plots" / "ab_ctr.png").write_bytes(png)
    (tmp_path / "secret.png").write_bytes(b"outside the report")
    markdown = (
        "# simab report\n\n## A section someone added\n\n| arm | CTR |\n|---|---|\n| pop | 0.2 [0.1, 0.3] |\n\n"
        "![ab_ctr](plots/ab_ctr.png)\n![outside](../secret.png)\n![missing](plots/none.png)\n<script>alert(1)</script>\n"
    )
    page = report_html(markdown, folder)
    assert page.startswith("<!doctype html>") and "<h2>A section someone added</h2>" in page
    assert "<td>pop</td>" in page and "<td>0.2 [0.1, 0.3]</td>" in page
    assert f'src="data:image/png;base64,{base64.b64encode(png).decode()}"' in page
    # Only files inside the report's folder are read; raw HTML in the Markdown is not passed through.
    assert 'src="../secret.png"' in page and base64.b64encode(b"outside the report").decode() not in page
    assert 'src="plots/none.png"' in page and "<script>" not in page

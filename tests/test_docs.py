"""The product's own docs: every doc a file cites is in the repository (with the section it
names), and the asset-graph picture lists every asset of the default graph."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".venv", "data", ".git", "__pycache__", ".pytest_cache", ".import_linter_cache"}


def _files():
    for path in ROOT.rglob("*"):
        if path.is_file() and path.suffix in {".py", ".md"} and not SKIP & set(path.relative_to(ROOT).parts):
            yield path


def _anchors(markdown: str) -> set[str]:
    return {
        re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", markdown, re.M)
    }


def test_no_file_cites_a_document_the_repository_does_not_hold():
    # A citation: a path under docs/ anywhere, or a Markdown link to a .md file in a .md file.
    cited = re.compile(r"(?<![\w/.-])(docs/[\w.-]+\.md)(#[\w-]+)?")
    linked = re.compile(r"\]\(([\w./-]+\.md)(#[\w-]+)?\)")
    missing = []
    for path in _files():
        if path == Path(__file__):
            continue
        text = path.read_text(encoding="utf-8")
        assert "design" + ".md" not in text, (
            f"{path.relative_to(ROOT)} cites the design card, which is not in the repository: cite docs/"
        )
        found = [(ROOT / name, name, anchor) for name, anchor in cited.findall(text)]
        if path.suffix == ".md":
            found += [(path.parent / name, name, anchor) for name, anchor in linked.findall(text)]
        for target, name, anchor in found:
            if not target.exists():
                missing.append(f"{path.relative_to(ROOT)}: {name}")
            elif anchor and anchor[1:] not in _anchors(target.read_text(encoding="utf-8")):
                missing.append(f"{path.relative_to(ROOT)}: {name}{anchor} (no such section)")
    assert missing == []


def test_the_asset_graph_picture_is_current():
    import importlib.util

    spec = importlib.util.spec_from_file_location("asset_graph", ROOT / "docs" / "asset_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = (ROOT / "docs" / "asset_graph.md").read_text(encoding="utf-8")
    assert committed == module.page(), "docs/asset_graph.md is stale: python docs/asset_graph.py"
    from pipelines.definitions import build_definitions

    for key in build_definitions(environ={}).resolve_asset_graph().get_all_asset_keys():
        assert f"    {key.to_user_string()}\n" in committed, key

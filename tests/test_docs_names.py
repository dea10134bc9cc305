"""The README and docs/ name only what exists: relative links (and their anchors), `make`
targets, `simab` subcommands and `SIMAB_*` settings.  A renamed target or setting, a moved
page or a retitled section fails here instead of misleading a reader."""

import re
from pathlib import Path

import pytest

from ops.settings import declared

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "plugins").glob("*/README.md")])

LINK = re.compile(r"\]\(([^)\s]+)\)")
MAKE = re.compile(r"(?<![\w-])make ([a-z][a-z0-9-]*)")
SIMAB = re.compile(r"(?<![\w./-])simab ([a-z][a-z-]*)")
SETTING = re.compile(r"\bSIMAB_[A-Z0-9_]*[A-Z0-9]\b")


def _code(text: str) -> str:
    """The text inside code spans and fenced blocks: where commands are written."""
    fenced = re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return "\n".join(fenced + spans)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][a-z0-9-]*):", text, flags=re.M))


def test_every_phony_target_of_the_makefile_exists():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    phony = set(re.search(r"^\.PHONY:(.*)$", text, flags=re.M).group(1).split())
    assert phony and not sorted(phony - _make_targets()), "the Makefile declares targets it does not define"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_exists(page):
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading with the anchor #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_make_target_named_exists(page):
    named = set(MAKE.findall(_code(page.read_text(encoding="utf-8"))))
    missing = sorted(named - _make_targets())
    assert not missing, f"{page.relative_to(ROOT)} names make targets the Makefile lacks: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_setting_named_is_declared(page):
    names = {f"SIMAB_{n.upper()}" for n in declared()}
    named = set(SETTING.findall(page.read_text(encoding="utf-8")))
    missing = sorted(named - names)
    assert not missing, f"{page.relative_to(ROOT)} names settings ops/settings.py does not declare: {missing}"


def test_the_checks_catch_what_they_look_for(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A title\n\n[x](missing.md) [y](#a-title) [z](#nope)\n\n`make nosuchtarget` `SIMAB_NOPE`\n")
    links = LINK.findall(page.read_text())
    assert links == ["missing.md", "#a-title", "#nope"]
    assert _anchors(page) == {"a-title"}
    assert MAKE.findall(_code(page.read_text())) == ["nosuchtarget"]
    assert "nosuchtarget" not in _make_targets() and "test" in _make_targets()
    assert SETTING.findall(page.read_text()) == ["SIMAB_NOPE"]
    assert _slug("Sparse implicit logs: agents that see list quality, arms that learn") == (
        "sparse-implicit-logs-agents-that-see-list-quality-arms-that-learn"
    )

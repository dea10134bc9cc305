"""What a stored value depends on besides its inputs, as short digests: the source of the code
that computes it, the settings it is computed with, the files those settings name.

The lifecycle reuses a stored asset when none of these changed and its inputs did not
(`pipelines.versions`), so each digest errs on the side of a recompute: a stale value
reused after a change is worse than a value computed twice.

`source_digest(module)` covers the module's file and every module of this project it
imports, directly or through others, at the top of a file or inside a function (a lazy
import is still code the value depends on).  Each file counts as its syntax tree with the
docstrings dropped: a change of code counts, a change of a comment, a docstring or the
formatting does not.  A dependency installed from a package index (torch, deepctr-torch,
an arm plug-in) is not followed: its version changes with the environment, not the project.

`value_digest(value)` is a digest of any JSON-able value (settings, run config).

`path_fingerprint(value)` names, for every string in `value` that is a path on this
machine, the size and modification time of that file, or of each entry of that folder (not
deeper): a data file edited in place under the same setting counts as a change.
"""

from __future__ import annotations

import ast
import atexit
import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ops.settings import PROJECT_ROOT

DIGEST_CHARS = 12  # of a SHA-256 hex digest: enough to tell versions apart, short in a tag


def value_digest(value: Any) -> str:
    """A digest of a JSON-able value (keys sorted, anything else as its `str`)."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def source_digest(module: str, root: Path = PROJECT_ROOT) -> str:
    """A digest of `module`'s code and of every project module it imports (see above)."""
    files = sorted(import_closure(module, root))
    return value_digest([[name, _file_digest(path)] for name, path in files])


def import_closure(module: str, root: Path = PROJECT_ROOT) -> set[tuple[str, Path]]:
    """(module, file) of `module` and every project module it imports, directly or not; a
    package's `__init__` counts for each module imported from it (Python runs it)."""
    return set(_closure(module, root))


@functools.cache
def _closure(module: str, root: Path) -> tuple[tuple[str, Path], ...]:
    seen: dict[str, Path] = {}
    todo = [module, *_parents(module)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name, root)
        if path is None:
            continue
        seen[name] = path
        todo.extend(_project_imports(path, name, root))
    return tuple(seen.items())


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _module_file(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _project_imports(path: Path, module: str, root: Path) -> list[str]:
    """The project modules `path` imports (and their packages), wherever the import stands."""
    stat = path.stat()
    return list(_resolved_imports(path, module, root, stat.st_mtime_ns, stat.st_size))


# Every asset's closure walks most of the project: resolving each file's imports once per
# process, not once per closure, took a new process's `build_definitions()` from 1.5 to 0.5
# CPU seconds.  The file's mtime and size are in the key, so an edited file is resolved again.
@functools.lru_cache(maxsize=4096)
def _resolved_imports(path: Path, module: str, root: Path, mtime_ns: int, size: int) -> tuple[str, ...]:
    del mtime_ns, size  # part of the cache key only
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: list[str] = []
    for level, base, aliases in _parsed(path)[1]:
        if level:
            parts = package.split(".")
            parts = parts[: len(parts) - level + 1]
            base = ".".join([*parts, *([base] if base else [])])
        # `from a.b import c`: c is a module of package a.b or a name defined in it.
        names += [base, *(f"{base}.{alias}" for alias in aliases)] if aliases is not None else [base]
    found = []
    for name in dict.fromkeys(names):
        for candidate in [*_parents(name), name]:
            if _module_file(candidate, root) is not None:
                found.append(candidate)
    return tuple(found)


def _file_digest(path: Path) -> str:
    return _parsed(path)[0]


def _parsed(path: Path) -> tuple[str, list[tuple[int, str, list[str] | None]]]:
    """(digest of the syntax tree without docstrings, the imports: (level, module, names))."""
    stat = path.stat()
    return _parse(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=1024)
def _parse(path: Path, mtime_ns: int, size: int) -> tuple[str, list[tuple[int, str, list[str] | None]]]:
    del mtime_ns, size  # part of the cache key only: an edited file is parsed again
    source = path.read_bytes()
    # Parsing every project file took most of a new process's 1.5 s `build_definitions`
    # (each `simab run`, Dagster code-location load, Celery worker): the results are kept on
    # disk by the file's content (and the Python version, whose syntax trees they are).
    key = hashlib.sha256(source + sys.version.encode()).hexdigest()
    kept = _kept().get(key)
    if kept is not None:
        try:
            digest, imports = kept
            return str(digest), [
                (int(level), str(name), aliases and list(map(str, aliases))) for level, name, aliases in imports
            ]
        except (TypeError, ValueError):
            pass  # an entry of another shape: parsed again, and replaced
    parsed = _parse_source(source, path)
    _keep(key, parsed)
    return parsed


def _parse_source(source: bytes, path: Path) -> tuple[str, list[tuple[int, str, list[str] | None]]]:
    tree = ast.parse(source.decode("utf-8"), filename=str(path))
    imports: list[tuple[int, str, list[str] | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports += [(0, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports.append((node.level, node.module or "", [alias.name for alias in node.names]))
        elif isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode("utf-8")).hexdigest()[:DIGEST_CHARS], imports


CACHE_ENTRIES = 4096  # files' parsed syntax kept on disk, about 0.5 kB each


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "simab" / "source-syntax.json"


@functools.cache
def _kept() -> dict[str, list]:
    """The parsed files kept by earlier processes ({} where there is no readable cache)."""
    try:
        kept = json.loads(_cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def _keep(key: str, parsed: tuple[str, list]) -> None:
    """Adds one parsed file to the cache, written when the process ends."""
    kept = _kept()
    if not _unsaved:
        atexit.register(_save)
    kept[key] = [parsed[0], [list(entry) for entry in parsed[1]]]
    _unsaved.add(key)


_unsaved: set[str] = set()


def _save() -> None:
    """The cache, written whole and atomically (a concurrent writer's entries may be lost,
    never half-written); an unwritable cache only makes the next process slower."""
    path = _cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        kept = _kept()
        # The newest entries only: every edit of a file adds one, and the file is read whole.
        newest = dict(list(kept.items())[-CACHE_ENTRIES:])
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as out:
            json.dump(newest, out)
        os.replace(out.name, path)
    except OSError:
        pass
    _unsaved.clear()


def path_fingerprint(value: Any) -> list:
    """[path, size, mtime] of each file, [path, [[entry, size, mtime], …]] of each folder,
    that a string in `value` (nested lists and dicts too) names; [] when none does."""
    found = []
    for text in sorted(set(_strings(value))):
        if os.sep not in text or "://" in text:
            continue
        for part in text.split(os.pathsep):  # a list of folders in one setting (poster dirs)
            path = Path(part).expanduser()
            try:
                if path.is_file():
                    found.append([part, *_stat(path)])
                elif path.is_dir():
                    entries = sorted((e.name, *_stat(Path(e.path))) for e in os.scandir(path))
                    found.append([part, value_digest(entries)])
            except OSError:
                continue  # unreadable: the step that reads it says so
    return found


def _stat(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)

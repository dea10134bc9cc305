"""No import circle anywhere in the product's packages, counting what the linter cannot see.

import-linter's contract ("no import circle between sibling modules", pyproject.toml) reads
import statements, module-level and inside functions alike; it cannot see what a module loads
by name.  The arms' registry loads every module of `ops/arms/kinds/` with importlib
(`ops.arms.registry.kind_class`): here those loads are edges of the graph too, and no module
the registry reaches that way may reach the registry, the trained kinds' lookups or the
MLflow module back; the brains' registry loads `ops/simulation/kinds/` the same way, and the
stored values' codecs (`resources.storage.VALUE_TYPES`) load their modules by name.  Every
`importlib.import_module` call in the product is one of those three, or the whole-graph test
fails until its loads are edges here too.
"""

from __future__ import annotations

import pkgutil
import re
from pathlib import Path

import grimp

import ops.arms.kinds
import ops.simulation.kinds
from resources.storage import VALUE_TYPES

PACKAGES = ("ops", "assets", "pipelines", "resources", "data_contracts", "viewer")
ROOT = Path(__file__).resolve().parents[1]
# The modules that load others by name, each modelled as edges in `_graph` (the count: calls).
BY_NAME = {"ops/arms/registry.py": 2, "ops/simulation/kinds/__init__.py": 1, "resources/storage.py": 2}

LOOKUPS = ("ops.arms.registry", "ops.arms.recommenders", "ops.arms.model_registry")


def _brain_modules() -> list[str]:
    """The modules `brain_kind` may load (`__main__`, the listing command, it never does)."""
    return [m.name for m in pkgutil.iter_modules(ops.simulation.kinds.__path__) if not m.name.startswith("_")]


def _graph():
    graph = grimp.build_graph(*PACKAGES)
    for module in pkgutil.iter_modules(ops.arms.kinds.__path__):
        # What `importlib.import_module` in the registry does, as an edge.
        graph.add_import(importer="ops.arms.registry", imported=f"ops.arms.kinds.{module.name}")
    for name in _brain_modules():
        graph.add_import(importer="ops.simulation.kinds", imported=f"ops.simulation.kinds.{name}")
    for type_name, codecs in VALUE_TYPES.items():
        for module in {type_name.rsplit(".", 1)[0], *(c.split(":")[0] for c in codecs if c)}:
            graph.add_import(importer="resources.storage", imported=module)
    return graph


def _circles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_load_by_name_in_the_product_is_an_edge_of_the_graph():
    calls = {
        str(path.relative_to(ROOT)): len(re.findall(r"import_module\(|__import__\(", path.read_text()))
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
    }
    assert {path: n for path, n in calls.items() if n} == BY_NAME


def test_no_import_circle_in_the_products_packages_loads_by_name_included():
    graph = _graph()
    assert graph.find_shortest_chain(importer="resources.storage", imported="ops.arms.model_registry")
    assert _circles(graph) == []


def test_a_circle_is_found_where_there_is_one():
    graph = _graph()
    # What the registry's docstring warns of: a kind that asked the registry back.
    graph.add_import(importer="ops.arms.kinds.pop", imported="ops.arms.registry")
    assert any({"ops.arms.registry", "ops.arms.kinds.pop"} <= set(c) for c in _circles(graph))


def test_no_arm_kind_or_module_it_imports_reaches_the_registry_back():
    graph = _graph()
    kinds = [f"ops.arms.kinds.{m.name}" for m in pkgutil.iter_modules(ops.arms.kinds.__path__)]
    assert "ops.arms.kinds.deepfm" in kinds and "ops.arms.kinds.pop" in kinds
    back = {
        (kind, lookup): graph.find_shortest_chain(importer=kind, imported=lookup)
        for kind in [*kinds, "ops.arms.trained", "ops.arms.deepctr", "ops.arms.base"]
        for lookup in LOOKUPS
    }
    assert {k: chain for k, chain in back.items() if chain} == {}


def test_the_registry_reaches_the_kinds_and_the_trained_base_without_a_circle():
    graph = _graph()
    # The loads are there: the registry reaches a kind and, through it, the DeepCTR base.
    assert graph.find_shortest_chain(importer="ops.arms.registry", imported="ops.arms.deepctr")
    assert graph.find_shortest_chain(importer="ops.arms.recommenders", imported="ops.arms.registry")
    assert graph.find_shortest_chain(importer="ops.arms.model_registry", imported="ops.arms.registry")
    # ... and nothing in the graph, static or loaded by name, leads from the registry back to it.
    for module in graph.find_upstream_modules("ops.arms.registry"):
        assert not graph.find_shortest_chain(importer=module, imported="ops.arms.registry"), module


def test_no_brain_kind_reaches_the_brains_registry_back():
    graph = _graph()
    names = _brain_modules()
    assert {"embedded", "llm", "base"} <= set(names)
    back = {
        name: graph.find_shortest_chain(importer=f"ops.simulation.kinds.{name}", imported="ops.simulation.kinds")
        for name in names
    }
    assert {name: chain for name, chain in back.items() if chain} == {}

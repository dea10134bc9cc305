"""No import circle through the registries of arms and of brains, counting what the linter
cannot see.

import-linter's contract ("no import circle between sibling modules", pyproject.toml) reads
import statements, module-level and inside functions alike; it cannot see what a module loads
by name.  The arms' registry loads every module of `ops/arms/kinds/` with importlib
(`ops.arms.registry.kind_class`): here those loads are edges of the graph too, and no module
the registry reaches that way may reach the registry, the trained kinds' lookups or the
MLflow module back.
"""

from __future__ import annotations

import pkgutil

import grimp

import ops.arms.kinds
import ops.simulation.kinds

LOOKUPS = ("ops.arms.registry", "ops.arms.recommenders", "ops.arms.model_registry")


def _brain_modules() -> list[str]:
    """The modules `brain_kind` may load (`__main__`, the listing command, it never does)."""
    return [m.name for m in pkgutil.iter_modules(ops.simulation.kinds.__path__) if not m.name.startswith("_")]


def _graph():
    graph = grimp.build_graph("ops")
    for module in pkgutil.iter_modules(ops.arms.kinds.__path__):
        # What `importlib.import_module` in the registry does, as an edge.
        graph.add_import(importer="ops.arms.registry", imported=f"ops.arms.kinds.{module.name}")
    for name in _brain_modules():
        graph.add_import(importer="ops.simulation.kinds", imported=f"ops.simulation.kinds.{name}")
    return graph


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

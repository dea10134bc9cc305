"""The brain registry (`ops.simulation.kinds`): every brain found by name, a new kind is one
new file, a plug-in's kind an entry point, and nothing outside the registry compares a
brain's name."""

from __future__ import annotations

import ast
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import ops.simulation.kinds as kinds
from ops.preflight.bill import brain_of
from ops.settings import SettingError, Settings
from ops.simulation.brains.llm import LLMBrainConfig
from ops.simulation.kinds import Bill, BrainSources, UnknownBrain, brain_kind, brain_names
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate
from ops.studies.alignment.protocols import NotMeasurable, ProtocolSettings, open_protocol
from tests.test_simulation import world

ROOT = Path(__file__).resolve().parents[1]
BUILT_IN = {"embedded", "embedded-no-vision", "llm", "llm-no-vision", "uniform-random"}

# One new file in the registry's folder, and no other edit: a brain that leaves at once.
NEW_KIND = """
from ops.simulation.kinds import BrainKind
from ops.simulation.observation import Decision


class LeavesAtOnce:
    name = "leaves-at-once"
    decides_offline = True

    def prepare(self, sessions, shown):
        return None

    def decide(self, session, observation, rng):
        return Decision("exit", 1, "not in the mood")

    def exit_interview(self, session, rng):
        return 2, "left at once"


class LeavesAtOnceKind(BrainKind):
    name = "leaves-at-once"
    summary = "exits on the first page"
    brain_class = LeavesAtOnce
    answers = frozenset({"rating"})

    def brain(self, sources):
        return LeavesAtOnce()
"""


def test_the_built_in_kinds_carry_what_the_steps_read():
    assert BUILT_IN <= set(brain_names())
    embedded, llm, uniform = brain_kind("embedded"), brain_kind("llm"), brain_kind("uniform_random")
    assert embedded.decides_offline and uniform.decides_offline and not llm.decides_offline
    assert embedded.seeing(False).name == "embedded-no-vision" and llm.seeing(False).name == "llm-no-vision"
    assert embedded.seeing(True) is embedded and uniform.seeing(False).name == "uniform-random"
    assert (embedded.per_item, llm.per_item, uniform.per_item) == ("scores", "asks", "")
    assert llm.reads_personas and not embedded.reads_personas
    sources = BrainSources(llm=LLMBrainConfig(concurrency=7), bill=Bill("/tmp/none.json", 2.5, "x"))
    assert (llm.concurrency(sources), embedded.concurrency(sources)) == (7, 1)
    assert uniform.simulation_estimate(sources, "pop", None, [], None, [], None) is None
    described = llm.describe(sources)
    assert described["brain"] == "llm" and described["llm_max_cost_usd"] == 2.5 and described["llm_concurrency"] == 7
    with pytest.raises(UnknownBrain, match="known: embedded"):
        brain_kind("telepathy")
    with pytest.raises(SettingError, match="SIMAB_BRAIN='telepathy'"):
        brain_of(Settings(brain="telepathy"))


def test_a_new_brain_kind_is_one_new_file(tmp_path, monkeypatch):
    (tmp_path / "leaves_at_once.py").write_text(NEW_KIND)
    # The registry's folder with the new file in it, without writing into the checkout.
    monkeypatch.setattr(kinds, "__path__", [*kinds.__path__, str(tmp_path)])
    assert "leaves-at-once" in brain_names()
    kind = brain_of(Settings(brain="leaves_at_once"))
    assert (
        kind.name == "leaves-at-once"
        and kind.decides_offline
        and kind.describe(BrainSources()) == {"brain": "leaves-at-once"}
    )
    cat, top_k, agents = world(4)
    events = simulate(kind.brain(BrainSources()), agents, top_k, cat, SimulationConfig(progress=False), seed=1)
    assert events.get_column("action").to_list() == ["exit", "exit_interview"] * 4
    assert set(events.get_column("brain")) == {"leaves-at-once"}
    # It answers the protocols it says it answers, and no other.
    with pytest.raises(NotMeasurable, match="the leaves-at-once brain does not answer it"):
        open_protocol("taste", "taste", kind, BrainSources(), None, None, None, None, ProtocolSettings())


def test_a_plug_in_brings_its_kind_through_an_entry_point(tmp_path, monkeypatch):
    (tmp_path / "brought_brain.py").write_text(NEW_KIND.replace('name = "leaves-at-once"', 'name = "brought"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    point = EntryPoint(name="brought", value="brought_brain:LeavesAtOnceKind", group=kinds.ENTRY_POINT_GROUP)
    monkeypatch.setattr(kinds, "entry_points", lambda group: [point] if group == kinds.ENTRY_POINT_GROUP else [])
    assert "brought" in brain_names()
    assert brain_kind("brought").brain(BrainSources()).name == "brought"


def brain_name_comparisons(source: str, names: set[str]) -> list[str]:
    """The comparisons in `source` of a value with a brain's name: a string (alone or in a
    tuple, list or set) that is a brain's name, or any string compared with a variable or
    attribute called brain, brain_name or brain_kind."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        strings = {
            c.value
            for side in sides
            for c in ([side] if isinstance(side, ast.Constant) else getattr(side, "elts", []))
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        }
        named = {
            side.id if isinstance(side, ast.Name) else side.attr
            for side in sides
            if isinstance(side, ast.Name | ast.Attribute)
        }
        if strings & names or (strings and named & {"brain", "brain_name", "brain_kind"}):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_the_brains_compares_a_brain_name():
    names = set(brain_names()) | {name.replace("-", "_") for name in brain_names()}
    assert brain_name_comparisons("if config.brain == 'random':\n    pass", names)  # the check can fail
    assert brain_name_comparisons("x = kind in ('embedded', 'x')", names)
    own = (ROOT / "ops" / "simulation" / "kinds", ROOT / "ops" / "simulation" / "brains")
    offenders = []
    for folder in ("assets", "pipelines", "ops", "resources"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if any(path.is_relative_to(o) for o in own):
                continue
            offenders += [f"{path.relative_to(ROOT)}:{hit}" for hit in brain_name_comparisons(path.read_text(), names)]
    assert not offenders, "compare brain names in the brain kinds (ops/simulation/kinds), not here:\n" + "\n".join(
        offenders
    )


def test_the_events_name_the_kind_that_wrote_them():
    found = kinds.kinds_in_events(["embedded:no-vision", "llm:gpt-4o-mini", "someone-else"])
    assert {k.name for k in found} >= {"embedded", "llm"} and all(
        k.event_family() in {"embedded", "llm"} for k in found
    )

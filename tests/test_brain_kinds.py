"""The brain registry (`ops.simulation.kinds`): every brain found by name, a new kind is one
new file, a plug-in's kind an entry point, and nothing outside the registry compares a
brain's name."""

from __future__ import annotations

import ast
from importlib.metadata import EntryPoint
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

import ops.simulation.kinds as kinds
from ops.agents.session import AgentSession
from ops.preflight.bill import brain_of
from ops.settings import SettingError, Settings
from ops.simulation.brains.llm import LLMBrainConfig
from ops.simulation.catalogue import Catalogue, MovieInfo
from ops.simulation.kinds import Bill, BrainSources, UnknownBrain, brain_kind, brain_names
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate
from ops.studies.alignment.protocols import NotMeasurable, ProtocolSettings, measure_taste, open_protocol
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
    assert brain_kind(embedded, vision=False).name == "embedded-no-vision"
    assert brain_kind(llm, vision=False).name == "llm-no-vision"
    assert brain_kind(embedded, vision=True) is embedded and brain_kind(uniform, vision=False).name == "uniform-random"
    # How each answers the papers' per-item taste question: its scores cut, asked, not at all.
    ways = SimpleNamespace(cut=lambda score: "cut", ask=lambda brain: "ask", answer_with=lambda answerer: "own")
    assert [k.answer_taste(None, ways) for k in (embedded, llm, uniform)] == ["cut", "ask", None]
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


def test_a_kind_file_defines_exactly_one_kind_named_after_it(tmp_path, monkeypatch):
    """The arms' rule for brains too: the one BrainKind subclass the module defines (not one
    it imports), with the module's name; a file that breaks it is named."""
    (tmp_path / "misnamed.py").write_text(NEW_KIND)  # defines leaves-at-once, not misnamed
    (tmp_path / "twin.py").write_text(
        "from ops.simulation.kinds.embedded import Embedded\n\n\nclass Twin(Embedded):\n    name = 'twin'\n"
    )
    monkeypatch.setattr(kinds, "__path__", [*kinds.__path__, str(tmp_path)])
    with pytest.raises(UnknownBrain, match=r"misnamed\.py must define exactly one BrainKind subclass"):
        brain_kind("misnamed")
    # It imports Embedded and defines Twin: Twin is its kind.
    assert type(brain_kind("twin")).__name__ == "Twin"


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


# One new file with a parameter of its own: a brain that pages through `pages` home pages.
PATIENT_KIND = """
from ops.simulation.kinds import BrainKind
from ops.simulation.observation import Decision


class Patient:
    name = "patient"
    decides_offline = True

    def __init__(self, pages):
        self.pages = pages

    def prepare(self, sessions, shown):
        return None

    def decide(self, session, observation, rng):
        action = "exit" if observation.page_number >= self.pages else "next_page"
        return Decision(action, 3, f"page {observation.page_number}")

    def exit_interview(self, session, rng):
        return 3, "done"


class PatientKind(BrainKind):
    name = "patient"
    summary = "pages through a number of home pages, then leaves"
    brain_class = Patient

    def __init__(self, vision=True, pages: int = 1):
        super().__init__(vision)
        self.pages = pages

    def brain(self, sources):
        return Patient(self.pages)
"""


def test_a_new_brain_kind_in_one_file_brings_its_own_parameter(tmp_path, monkeypatch):
    """The arms' way for brains: the kind's own field in its own file, defaulted there, set
    after its name (`SIMAB_BRAIN="patient;pages=3"`), logged, refused on another kind."""
    (tmp_path / "patient.py").write_text(PATIENT_KIND)
    monkeypatch.setattr(kinds, "__path__", [*kinds.__path__, str(tmp_path)])
    cat, top_k, agents = world(3)

    def pages(spec):
        kind = brain_of(Settings(brain=spec))
        events = simulate(kind.brain(BrainSources()), agents, top_k, cat, SimulationConfig(progress=False), seed=1)
        return kind, events.filter(pl.col("action") == "next_page").height

    default, paged = pages("patient"), pages("patient;pages=3")
    assert (default[0].pages, default[1]) == (1, 0)  # the file's default: leaves on page 1
    assert (paged[0].pages, paged[1]) == (3, 3 * 2)  # two pages turned by each of three agents
    assert paged[0].describe(BrainSources()) == {"brain": "patient", "pages": 3}
    with pytest.raises(SettingError, match="brain 'embedded' takes no parameter 'pages'; it takes vision"):
        brain_of(Settings(brain="embedded;pages=3"))
    # No vision is a parameter of a kind, the same for every kind, not a kind of its own.
    assert brain_kind("embedded;vision=false").name == "embedded-no-vision" == brain_kind("embedded_no_vision").name
    assert not brain_kind("llm-no-vision").sees_posters and type(brain_kind("llm-no-vision")).__name__ == "LLM"
    assert "patient" in brain_names() and "patient-no-vision" not in brain_names()  # it sees no posters
    with pytest.raises(UnknownBrain, match="unknown brain 'patient-no-vision'"):
        brain_kind("patient-no-vision")


# One new file: a brain that knows which movies are to each agent's taste (the planted ones,
# which the step offers among the sources under a name of its own) and answers the papers'
# per-item taste question with its own scores, cut at the thresholds the protocol fits.
TASTE_KIND = """
from ops.simulation.kinds import BrainKind
from ops.simulation.observation import Decision


class KnowsThePlant:
    name = "knows-the-plant"
    decides_offline = True

    def __init__(self, planted):
        self.planted = planted

    def prepare(self, sessions, shown):
        return None

    def decide(self, session, observation, rng):
        liked = tuple(c.item_id for c in observation.items if c.item_id in self.planted[session.user_id])
        return Decision("exit", 3, "looked at the page", caught_eye=liked)

    def exit_interview(self, session, rng):
        return 5, "fine"


class KnowsThePlantKind(BrainKind):
    name = "knows-the-plant"
    summary = "knows the planted tastes"
    brain_class = KnowsThePlant
    answers = frozenset({"taste"})

    def brain(self, sources):
        return KnowsThePlant(sources["planted"])

    def answer_taste(self, brain, question):
        return question.cut(lambda session, movies: [float(m in brain.planted[session.user_id]) for m in movies])
"""


def test_a_new_brain_kind_in_one_file_answers_the_taste_protocol(tmp_path, monkeypatch):
    (tmp_path / "knows_the_plant.py").write_text(TASTE_KIND)
    monkeypatch.setattr(kinds, "__path__", [*kinds.__path__, str(tmp_path)])
    # Each user's taste is 30 planted movies it rates: 15 in train, 8 in validation, 7 in test.
    rng = np.random.default_rng(3)
    rows, planted = {"train": [], "valid": [], "test": []}, {}
    for u in range(1, 41):
        movies = rng.choice(np.arange(1, 401), 30, replace=False)
        planted[u] = set(movies.tolist())
        for name, chunk, t0 in (
            ("train", movies[:15], 1000),
            ("valid", movies[15:23], 3000),
            ("test", movies[23:], 5000),
        ):
            rows[name] += [(u, int(m), 4, t0 + i) for i, m in enumerate(chunk)]
    schema = {"user_id": pl.Int64, "item_id": pl.Int64, "rating": pl.Int64, "timestamp": pl.Int64}
    train, valid, test = (pl.DataFrame(rows[k], schema=schema, orient="row") for k in ("train", "valid", "test"))
    templates = {u: AgentSession(u, SimpleNamespace(activity_tier="medium"), None, 0.0, 0.0) for u in planted}
    agents = SimpleNamespace(
        profiles=templates,
        population=np.array(sorted(templates), dtype=np.int64),
        sessions=lambda users=None: [templates[u] for u in (users or sorted(templates))],
    )
    catalogue = Catalogue(MovieInfo(m, f"M{m}", 6.0, ("Drama",)) for m in range(1, 401))
    sources = BrainSources(catalogue=catalogue, planted=planted)

    kind = brain_kind("knows-the-plant")
    settings = ProtocolSettings(n_agents=30, n_bootstrap=50)
    with open_protocol("taste", "taste", kind, sources, agents, train, valid, test, settings) as opening:
        result = measure_taste(opening, agents, train, valid, test, np.arange(1, 401))
    assert result.brain == "knows-the-plant" and result.per_item is not None
    f1 = result.per_item.filter(pl.col("metric") == "f1")
    assert f1.get_column("ratio").to_list() == ["1:1", "1:3", "1:9", "1:4"] and f1.get_column("agents").min() == 30
    assert f1.get_column("mean").to_list() == [1.0] * 4  # it knows the plant: every list judged right
    assert sorted(result.thresholds) == ["1:1", "1:3", "1:4", "1:9"]
    sandbox = result.summary.filter(pl.col("metric") == "f1").get_column("mean").to_list()
    assert sandbox == [1.0] * 4


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

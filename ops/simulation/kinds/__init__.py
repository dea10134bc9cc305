"""The registry of brains: every brain simab can run, by name, built-in or brought
(docs/definitions.md#brains).

A brain kind is one class, `BrainKind`, in one file: a module of this package whose name is
the kind's name with `-` written `_` (`embedded_no_vision.py` is `embedded-no-vision`; either
spelling finds it), or an
entry point of group "simab.brains" in an installed package (`[project.entry-points."simab.brains"]`,
`name = "package.module:KindClass"`).  `brain_kind(name)` imports that one module and nothing
else, as RecBole's `get_model` finds a model by its name, so a new kind is one new file and no
other edit; `brain_names()` lists the modules' names without importing them.

A kind carries what the rest of simab needs to know about its brain, so that nothing outside
this package compares a brain's name:
- `brain(sources)`: a fresh brain (`ops.simulation.brains.protocol.Brain`) built from what
  the run offers (`BrainSources`: the catalogue, the run's bill, and by name what particular
  kinds read — the fitted embedded brain, the LLM endpoint's configuration, a plug-in's own);
- `decides_offline`: the brain's own flag (a decision costs no request to a metered
  endpoint), which the sensitivity ladder's skip and the bills read;
- `concurrency(sources)`: agents in flight at once;
- `simulation_estimate(...)` / `protocol_estimate(...)`: the bill of a simulation or a trust
  protocol before its first call, or None: free;
- `answers`: the trust protocols it answers (`PROTOCOLS`), through its decisions (the sandbox
  protocols); `answer_taste(brain, question)` how its brain answers the papers' per-item
  taste question (its own scores cut at thresholds the protocol fits, one question per list,
  or an answerer of its own), None: not at all; `list_response(sources)` its calibration to
  list quality, where it has one;
- `fitted_through(sources)`: the last timestamp it was fitted on (the leakage guard of the
  protocols), `refitted(...)` the same kind fitted on other windows (the papers' hold-out);
- `reads_personas`: whether SimUSER's matched persona reaches it; `reads_poster_vectors`:
  whether it sees posters through the embedded brain's poster vectors (SimUSER's thumbnail
  experiment embeds each version's posters for it) or the catalogue's image files;
- `sees_posters` / `without_posters`: the kind of the same brain without posters (the A/B
  Agent Table 5 "w/o vision" ablation), `seeing(vision)` picks one;
- `describe(sources)`: parameters safe to log (MLflow, Dagster metadata).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, ClassVar

from ops.settings import config_default

ENTRY_POINT_GROUP = "simab.brains"
# Who decides when nothing says ($SIMAB_BRAIN's default: the offline brain, nothing to pay).
DEFAULT_BRAIN: str = config_default("brain")
BRAIN_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
# The trust protocols a brain may answer (ops.studies.alignment).
PROTOCOLS = ("taste", "rating", "list_quality", "sensitivity")


class UnknownBrain(ValueError):
    """A brain name no module of this package and no entry point defines."""


@dataclass(frozen=True)
class Bill:
    """Where a brain that pays per call charges it: the run's bill file (`ops.simulation.
    budget.RunBudget`), the run's cap in USD (0: none) and the step the calls are charged to."""

    path: str
    cap_usd: float
    label: str


class BrainSources(Mapping[str, Any]):
    """What a kind may build its brain from, as the step offers it.  Every kind may read the
    catalogue the agents browse, the run's bill (None: calls are not charged) and the fatigue
    costs the agent is told; beside them a mapping of what particular kinds read, by name —
    "embedded": the fitted embedded brain (`ops.simulation.brains.embedded.EmbeddedBrainModel`,
    the `embedded_brain` asset), "llm": the LLM endpoint's configuration (`LLMBrainConfig`,
    from the `llm` resource) — which a kind of its own extends with its own names
    (`BrainSources(catalogue=…, my_model=…)`, read as `sources["my_model"]`)."""

    def __init__(self, catalogue: Any = None, bill: Bill | None = None, fatigue: Any = None, **parts: Any) -> None:
        self.catalogue = catalogue
        self.bill = bill
        self.fatigue = fatigue
        self._parts = dict(parts)

    def __getitem__(self, name: str) -> Any:
        return self._parts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    def replace(self, **changes: Any) -> BrainSources:
        """These sources with `changes`: the catalogue, bill, fatigue or a part by its name."""
        fields = {"catalogue": self.catalogue, "bill": self.bill, "fatigue": self.fatigue, **self._parts}
        return BrainSources(**{**fields, **changes})

    def with_catalogue(self, catalogue) -> BrainSources:
        return self.replace(catalogue=catalogue)

    # One step's sources, not a value: two are the same only when they are one.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"BrainSources(catalogue={self.catalogue!r}, bill={self.bill!r}, parts={sorted(self._parts)})"


class BrainKind:
    """One kind of brain (module docstring).  A subclass sets `name` (its module's name with
    `_` written `-`, or its entry point's) and `brain_class`, and overrides `brain`; the
    defaults describe a free brain that answers every protocol through its decisions."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # The class of the brains it makes: their `decides_offline` is the kind's.
    brain_class: ClassVar[type] = object
    # The first part of the brain's name in the events' `brain` column ("llm" of "llm:gpt-4o-mini").
    family: ClassVar[str] = ""
    answers: ClassVar[frozenset[str]] = frozenset(PROTOCOLS)
    reads_personas: ClassVar[bool] = False
    # The fewest users with interactions in both the train and the validation window that
    # the brain is fitted on (0: it fits nothing); the preflight checks a log against it.
    min_fit_users: ClassVar[int] = 0
    # Whether it reads posters as the fitted embedded brain's poster vectors (a changed
    # poster must then be embedded again), rather than from the catalogue's image files.
    reads_poster_vectors: ClassVar[bool] = False
    sees_posters: ClassVar[bool] = False
    # The kind of this brain without posters; "" when it sees none (it is its own).
    without_posters: ClassVar[str] = ""

    @property
    def decides_offline(self) -> bool:
        # As the Brain protocol: a brain that does not say so is taken to pay per decision.
        return bool(getattr(self.brain_class, "decides_offline", False))

    def brain(self, sources: BrainSources):
        raise NotImplementedError(f"brain kind {self.name!r} makes no brain")

    def seeing(self, vision: bool) -> BrainKind:
        """This kind, or with `vision` False its twin without posters."""
        return self if vision or not self.without_posters else brain_kind(self.without_posters)

    def concurrency(self, sources: BrainSources) -> int:
        """Agents in flight at once (the runner's `concurrency`)."""
        return 1

    def describe(self, sources: BrainSources) -> dict[str, str | float | int | bool]:
        """Parameters safe to log: no key, no secret."""
        return {"brain": self.name}

    def fitted_through(self, sources: BrainSources) -> int | None:
        """The last timestamp of the data the brain was fitted on; None when it fits nothing."""
        return None

    def refitted(self, sources: BrainSources, agents, train, valid, users) -> BrainSources:
        """The sources with the brain fitted again on `train` / `valid` for `agents` (the
        papers' hold-out); a kind that fits nothing asks the same brain."""
        return sources

    def answer_taste(self, brain, question):
        """The papers' per-item taste question — the agent shown a whole list says for every
        item whether it would watch it (`ops.studies.alignment.per_item.TasteQuestion`) — as
        `brain`, one of this kind's, answers it: (answerer, thresholds or None), the answerer
        (agent template, movies, ratio) -> the movies it would watch.  `question` offers the
        ways: `question.cut(scorer)` — yes where `scorer(session, movies)`, one score per
        movie for an agent arriving on the site, reaches a threshold per ratio the protocol
        fits on lists it holds out; `question.ask(brain)` — one structured request per list
        to a brain that talks to an endpoint; `question.answer_with(answerer)` — the kind's
        own.  None (the default): it does not answer it."""
        return None

    def list_response(self, sources: BrainSources):
        """The calibration of its response to list quality, when it has one (`ListResponse`)."""
        return None

    def simulation_estimate(self, sources: BrainSources, arm, top_k, sessions, config, users, estimate_config):
        """What simulating `users` on `arm` would cost (`ops.simulation.cost.CostEstimate`); None: free."""
        return None

    def protocol_estimate(self, sources: BrainSources, label: str, run, agents: int):
        """What a protocol (`run(meter)`, dry-run) asked of `agents` agents would cost; None: free."""
        return None

    def event_family(self) -> str:
        return self.family or self.name


@dataclass(frozen=True)
class BrainFactory:
    """Fresh brains of one kind from the same sources (a study that needs a new brain per
    round or per simulation), and how many agents they take in flight."""

    kind: BrainKind
    sources: BrainSources

    def brain(self):
        return self.kind.brain(self.sources)

    @property
    def concurrency(self) -> int:
        return self.kind.concurrency(self.sources)


def brain_names() -> list[str]:
    """Every kind's name, built-in (the modules of this package, not imported) and brought
    (entry points), sorted."""
    own = [m.name.replace("_", "-") for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
    brought = [ep.name.replace("_", "-") for ep in entry_points(group=ENTRY_POINT_GROUP)]
    return sorted(set(own) | set(brought))


def brain_kind(name: str) -> BrainKind:
    """The kind named `name` (module docstring); UnknownBrain naming the known ones."""
    if isinstance(name, BrainKind):
        return name
    text = str(name).strip().replace("_", "-")
    if not BRAIN_NAME.match(text):
        raise UnknownBrain(f"brain {name!r}: a brain's name is 1-64 of a-z, 0-9, '_' and '-'; known: {_known()}")
    module_name = text.replace("-", "_")
    if any(m.name == module_name for m in pkgutil.iter_modules(__path__)):
        module = importlib.import_module(f"{__name__}.{module_name}")
        kinds = [k for k in vars(module).values() if _is_kind(k) and k.name == text]
        if len(kinds) != 1:
            raise UnknownBrain(
                f"brain {text!r}: {module.__file__} must define one BrainKind subclass with name = {text!r}, "
                f"found {len(kinds)}"
            )
        return kinds[0]()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name.replace("_", "-") == text:
            kind = ep.load()
            if not _is_kind(kind):
                raise UnknownBrain(f"brain {text!r}: entry point {ep.value} is not a BrainKind subclass")
            return kind()
    raise UnknownBrain(f"unknown brain {text!r}; known: {_known()}")


def kinds_in_events(brains: Iterable[str]) -> list[BrainKind]:
    """The kinds whose brains wrote events with these `brain` column values ("embedded:no-vision",
    "llm:gpt-4o-mini", …); a name no kind claims is left out."""
    families = {str(b).split(":")[0] for b in brains}
    return [kind for kind in map(brain_kind, brain_names()) if kind.event_family() in families]


def _is_kind(value) -> bool:
    return isinstance(value, type) and issubclass(value, BrainKind) and value is not BrainKind and bool(value.name)


def _known() -> str:
    return ", ".join(brain_names())

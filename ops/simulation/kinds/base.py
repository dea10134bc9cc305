"""What a brain kind is (`BrainKind`) and what it builds its brain from (`BrainSources`), the
run's bill and the kinds' errors: the base every kind's file imports (`ops/simulation/kinds/`,
the package's module docstring says what a kind carries).  The registry that finds a kind
by its name is the package itself (`ops.simulation.kinds.brain_kind`); the kinds import this
module, never the package's lookups, so the package can load them by name without a circle
(`tests/test_import_circles.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

# The trust protocols a brain may answer (ops.studies.alignment).
PROTOCOLS = ("taste", "rating", "list_quality", "sensitivity")
# After a kind's name: the kind without posters (`BrainKind.posters`), "embedded-no-vision".
NO_VISION = "-no-vision"


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
    # Whether its brain can see posters.  One that can also runs without them, a parameter of
    # the kind (A/B Agent Table 5's "w/o vision" ablation): `vision=False`, named `<name>-no-vision`.
    posters: ClassVar[bool] = False

    def __init__(self, vision: bool = True) -> None:
        self.sees_posters = self.posters and bool(vision)
        if self.posters and not vision:
            self.name = f"{type(self).name}{NO_VISION}"  # type: ignore[misc]  # the condition partitions' key
        # What the spec gave the kind (`SIMAB_BRAIN="name;key=value"`), set by the registry.
        self.params: dict[str, Any] = {}

    @property
    def decides_offline(self) -> bool:
        # As the Brain protocol: a brain that does not say so is taken to pay per decision.
        return bool(getattr(self.brain_class, "decides_offline", False))

    def brain(self, sources: BrainSources):
        raise NotImplementedError(f"brain kind {self.name!r} makes no brain")

    def concurrency(self, sources: BrainSources) -> int:
        """Agents in flight at once (the runner's `concurrency`)."""
        return 1

    def describe(self, sources: BrainSources) -> dict[str, str | float | int | bool]:
        """Parameters safe to log: no key, no secret (the spec's own parameters, vision aside)."""
        return {"brain": self.name, **{k: v for k, v in self.params.items() if k != "vision"}}

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

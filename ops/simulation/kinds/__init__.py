"""The registry of brains: every brain simab can run, by name, built-in or brought
(docs/definitions.md#brains).

A brain kind is one class, a subclass of `BrainKind` (`ops.simulation.kinds.base`, which is
what a kind's file imports: never this module, which loads the kinds), in one file: a module
of this package whose name is the kind's name with `-` written `_` (`uniform_random.py` is
`uniform-random`; either spelling finds it), defining exactly one `BrainKind` subclass of that
name — the rule the arms' registry applies to `ops/arms/kinds/` — or an entry point
of group "simab.brains" in an installed package (`[project.entry-points."simab.brains"]`,
`name = "package.module:KindClass"`).  `brain_kind(name)` imports that one module and nothing
else, as RecBole's `get_model` finds a model by its name, so a new kind is one new file and no
other edit.  A kind's own parameters are its constructor's, given after its name as arm specs
give theirs (`SIMAB_BRAIN="leaves-later;patience=2"`); `vision` is every kind's (`vision=false`:
the brain without posters, written `embedded-no-vision` too).  `brain_names()` lists the kinds
and the no-vision names of those that see posters: the experiments' condition partitions.

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
- `posters` / `sees_posters`: whether the kind's brain can see posters, and this one does
  (`vision=False`, A/B Agent Table 5's "w/o vision" ablation: `brain_kind(name, vision=False)`);
- `describe(sources)`: parameters safe to log (MLflow, Dagster metadata).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points

from ops.arms.base import constructor_parameters, key_values
from ops.settings import config_default
from ops.simulation.kinds.base import NO_VISION, PROTOCOLS, Bill, BrainKind, BrainSources, UnknownBrain

__all__ = [
    "DEFAULT_BRAIN",
    "PROTOCOLS",
    "Bill",
    "BrainFactory",
    "BrainKind",
    "BrainSources",
    "UnknownBrain",
    "brain_kind",
    "brain_names",
    "kinds_in_events",
]

ENTRY_POINT_GROUP = "simab.brains"
# Who decides when nothing says ($SIMAB_BRAIN's default: the offline brain, nothing to pay).
DEFAULT_BRAIN: str = config_default("brain")
BRAIN_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
# Modules of this package that are no kind: the kinds' base.
NOT_KINDS = frozenset({"base"})


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
    """Every kind's name, built-in (the modules of this package) and brought (entry points),
    and beside each that can see posters its name without them (`embedded-no-vision`), sorted."""
    own = [
        m.name.replace("_", "-")
        for m in pkgutil.iter_modules(__path__)
        if not m.name.startswith("_") and m.name not in NOT_KINDS
    ]
    brought = [ep.name.replace("_", "-") for ep in entry_points(group=ENTRY_POINT_GROUP)]
    names = set(own) | set(brought)
    return sorted(names | {f"{name}{NO_VISION}" for name in names if _sees_posters(name)})


def _sees_posters(name: str) -> bool:
    try:
        return _class(name).posters
    except UnknownBrain:  # a kind that cannot load is named, not described: the list must not fail on it
        return False


def brain_kind(name: str | BrainKind, vision: bool = True) -> BrainKind:
    """The kind `name` names (module docstring): a kind's name, then its own parameters as
    `;key=value` pairs (`embedded;vision=false`; the name with `-no-vision` after it is
    `vision=false`); with `vision` False the kind without posters (a kind that sees none is
    its own).  UnknownBrain naming the known ones, or the parameters the kind takes."""
    if isinstance(name, BrainKind):
        if vision or not name.sees_posters:
            return name
        kind, params = type(name), dict(name.params)
    else:
        head, *pairs = str(name).split(";")
        head = head.strip().replace("_", "-")
        try:
            params = key_values(pairs)
        except ValueError as exc:
            raise UnknownBrain(f"brain {name!r}: {exc}") from None
        if head.endswith(NO_VISION) and not _defined(head):
            head, params = head.removesuffix(NO_VISION), {**params, "vision": False}
            if not _class(head).posters:
                raise UnknownBrain(f"unknown brain {name!r}; known: {_known()}")
        kind = _class(head)
    if not vision:
        params["vision"] = False
    takes = constructor_parameters(kind, exclude=set())  # None: it takes any
    for key in params if takes is not None else ():
        if key not in takes:
            raise UnknownBrain(f"brain {kind.name!r} takes no parameter {key!r}; it takes {', '.join(sorted(takes))}")
    made = kind(**params)
    made.params = params
    return made


def _defined(text: str) -> bool:
    module_name = text.replace("-", "_")
    return module_name not in NOT_KINDS and any(m.name == module_name for m in pkgutil.iter_modules(__path__))


def _class(text: str) -> type[BrainKind]:
    if not BRAIN_NAME.match(text):
        raise UnknownBrain(f"brain {text!r}: a brain's name is 1-64 of a-z, 0-9, '_' and '-'; known: {_known()}")
    if _defined(text):
        module = importlib.import_module(f"{__name__}.{text.replace('-', '_')}")
        # The arms' rule (`ops.arms.registry`): the one subclass the module defines (a kind it
        # imports, as the LLM kind imports the embedded one, is not counted), named after the file.
        kinds = [k for k in vars(module).values() if _is_kind(k) and k.__module__ == module.__name__]
        if len(kinds) != 1 or kinds[0].name != text:
            raise UnknownBrain(
                f"brain {text!r}: {module.__file__} must define exactly one BrainKind subclass, with name = "
                f"{text!r}; found {[(k.__name__, k.name) for k in kinds] or 'none'}"
            )
        return kinds[0]
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name.replace("_", "-") == text:
            kind = ep.load()
            if not _is_kind(kind):
                raise UnknownBrain(f"brain {text!r}: entry point {ep.value} is not a BrainKind subclass")
            return kind
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

"""The registry of brains: every brain simab can run, by name, built-in or brought
(docs/definitions.md#brains).

A brain kind is one class, a subclass of `BrainKind` (`ops.simulation.kinds.base`, which is
what a kind's file imports: never this module, which loads the kinds), in one file: a module
of this package whose name is the kind's name with `-` written `_` (`embedded_no_vision.py`
is `embedded-no-vision`; either spelling finds it), defining exactly one `BrainKind` subclass
of that name — the rule the arms' registry applies to `ops/arms/kinds/` — or an entry point
of group "simab.brains" in an installed package (`[project.entry-points."simab.brains"]`,
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
  Agent Table 5 "w/o vision" ablation), which `brain_kind(name, vision=False)` gives;
- `describe(sources)`: parameters safe to log (MLflow, Dagster metadata).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points

from ops.settings import config_default
from ops.simulation.kinds.base import PROTOCOLS, Bill, BrainKind, BrainSources, UnknownBrain

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
    """Every kind's name, built-in (the modules of this package, not imported) and brought
    (entry points), sorted."""
    own = [
        m.name.replace("_", "-")
        for m in pkgutil.iter_modules(__path__)
        if not m.name.startswith("_") and m.name not in NOT_KINDS
    ]
    brought = [ep.name.replace("_", "-") for ep in entry_points(group=ENTRY_POINT_GROUP)]
    return sorted(set(own) | set(brought))


def brain_kind(name: str | BrainKind, vision: bool = True) -> BrainKind:
    """The kind named `name` (module docstring), or with `vision` False its twin without
    posters (`BrainKind.without_posters`; a kind that sees none is its own); UnknownBrain
    naming the known ones."""
    kind = _kind(name)
    return kind if vision or not kind.without_posters else _kind(kind.without_posters)


def _kind(name: str | BrainKind) -> BrainKind:
    if isinstance(name, BrainKind):
        return name
    text = str(name).strip().replace("_", "-")
    if not BRAIN_NAME.match(text):
        raise UnknownBrain(f"brain {name!r}: a brain's name is 1-64 of a-z, 0-9, '_' and '-'; known: {_known()}")
    module_name = text.replace("-", "_")
    if module_name not in NOT_KINDS and any(m.name == module_name for m in pkgutil.iter_modules(__path__)):
        module = importlib.import_module(f"{__name__}.{module_name}")
        # The arms' rule (`ops.arms.registry`): the one subclass the module defines (a kind it
        # imports, as the no-vision twins import theirs, is not counted), named after the file.
        kinds = [k for k in vars(module).values() if _is_kind(k) and k.__module__ == module.__name__]
        if len(kinds) != 1 or kinds[0].name != text:
            raise UnknownBrain(
                f"brain {text!r}: {module.__file__} must define exactly one BrainKind subclass, with name = "
                f"{text!r}; found {[(k.__name__, k.name) for k in kinds] or 'none'}"
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

"""The registry of arm kinds: every arm simab can run, found by name, built-in or brought.
The one place a name resolves, as RecBole finds a model (`recbole.utils.get_model`).

An arm is named by a spec, one entry of `$SIMAB_ARMS` (comma-separated):

    name                               a registered arm: a kind (random, pop, fm, deepfm, afn, …;
                                       mf, multvae, … from an installed package) or an alias a
                                       kind declares (deepfm_data50, deepfm_user_id_only, …)
    name=kind;key=value;…              a registered kind with parameters, e.g.
                                       deepfm_half=deepfm;train_fraction=0.5;feature_set=user_id_only
    name=lists:/path/lists.parquet     a lists file (`ops.arms.lists_file`): Parquet or CSV;
                                       `;fill=pop` or `;fill=none` after it says what a
                                       list shorter than 20 becomes (`ops/arms/kinds/lists.py`)
    name=mlflow:models:/prod/3         an MLflow model by URI (`ops/arms/kinds/mlflow.py`)
    mirror                             the simulation brain's own ranking (`ops/arms/kinds/mirror.py`)
    base@k                             the shorthand a kind claims (`ArmBase.shorthand`): `pop@5`
                                       is `pop-at-5=degraded;base=pop;slots=5`, Pop's lists with 5
                                       of their 20 slots replaced by random unseen items
                                       (`ops/arms/kinds/degraded.py`; a quality ladder:
                                       pop,pop@5,pop@10,pop@15,pop@20)

`name` is the arm's partition key in Dagster and its MLflow registered-model suffix, so it is
kept to lower-case letters, digits, `_` and `-` (`ARM_NAME`).  Values are read as JSON when
they parse (0.5, true, [64, 32]) and as text otherwise.

Kinds are registered by name in one table, `KINDS`, through the same `register`: the
built-ins, one file each in `ops/arms/kinds/` (the kind `<name>` is the one `ArmBase`
subclass defined in `ops/arms/kinds/<name>.py`: a new file is a new kind, found by its name,
no table lists them), and the installed packages' entry points
(`[project.entry-points."simab.arms"]`, each naming an `ops.arms.base.ArmBase` subclass); a
built-in name is never taken over by a package.  Everything particular to a kind is said by
its class: what it can do (`has_capability`: `can_refit`, `slow_to_train`, …, never its
name), the parameters a spec may give it (`ArmBase.spec_parameters`: a trained built-in's
are its configuration's fields, its own among them; a parameter its kind does not take is
refused when the arm is made), the other names it answers to (`aliases`: DeepFM's Table 3
and 4 variants) and the `base@k` shorthand it claims.  `name=<kind>:<source>` gives the
source to the constructor parameter its class names (`source_param`: a lists file's `path`,
an MLflow model's `uri`); `;key=value` pairs after the source are parameters.  An arm spec
declared with `declare` (the settings do it for `$SIMAB_ARMS`) becomes a known arm name.

The kinds are imported by name (`importlib`), when a name is first looked up: a new file is a
new kind, and nothing here imports torch, deepctr, mlflow or a plug-in until an arm of theirs
is made.  The kinds import `ops.arms.base` and `ops.arms.trained`, never this module, and the
trained kinds' lookups live here (`trained_kind`, `arm_config`, `trained_arm`,
`load_trained`): no module this one loads finds its way back to it (`tests/test_import_circles.py`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import pkgutil
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ops.arms.base import ArmBase, accepted_settings, constructor_parameters, key_values
from ops.arms.trained import ArmConfig, TrainedArm, read_manifest

KINDS_PACKAGE = "ops.arms.kinds"
ENTRY_POINT_GROUP = "simab.arms"
ARM_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_KIND_NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,63}$")
# `base@k`: the shorthand a kind claims (`ArmBase.shorthand`).
SHORTHAND = re.compile(r"^(?P<base>[a-z0-9][a-z0-9_-]{0,50})@(?P<k>[0-9]{1,3})$")
# `name=<kind>:<source>`: a kind whose constructor takes a source (its `source_param`).
SOURCED = re.compile(r"^(?P<kind>[a-z0-9][a-z0-9_-]{0,63}):(?P<source>.+)$", re.DOTALL)
# `;key=value` after a source: a parameter of the kind (`fill=pop`), never part of a path.
SOURCE_PARAMETER = re.compile(r"^[a-z_][a-z0-9_]*=[^/]*$")

Factory = Callable[..., Any]  # factory(name, **params) -> an unfitted Arm


@dataclass(frozen=True)
class ArmSpec:
    """One arm: its name, what it is (a registered kind, `lists:PATH` or `mlflow:URI`) and
    its parameters."""

    name: str
    target: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        sourced = SOURCED.match(self.target)
        return sourced["kind"] if sourced else self.target

    @property
    def source(self) -> str:
        """The path of a lists file, the URI of an MLflow model: what follows `<kind>:`; ""
        for a kind named alone."""
        sourced = SOURCED.match(self.target)
        return sourced["source"] if sourced else ""

    def text(self) -> str:
        """The spec as written in `$SIMAB_ARMS`."""
        if self.target == self.name and not self.params:
            return self.name
        return ";".join([f"{self.name}={self.target}", *(f"{k}={json.dumps(v)}" for k, v in self.params.items())])

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "params": self.params}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> ArmSpec:
        return cls(record["name"], record["target"], dict(record.get("params") or {}))


def parse_arm_spec(text: str) -> ArmSpec:
    """An `ArmSpec` from one `$SIMAB_ARMS` entry (module docstring); ValueError naming the
    entry and what is wrong."""
    text = text.strip()
    shorthand = SHORTHAND.match(text)
    if shorthand:
        return _shorthand_spec(text, shorthand["base"], int(shorthand["k"]))
    head, _, rest = text.partition("=")
    name = head.strip()
    if not ARM_NAME.match(name):
        raise ValueError(
            f"arm spec {text!r}: name {name!r} must be 1-64 of a-z, 0-9, '_' and '-', starting with a letter or digit "
            "(it is a Dagster partition key and an MLflow model name)"
        )
    if not _:
        return ArmSpec(name, name)
    # A source keeps its ';' (a path, a URI) but for the `;key=value` pairs that end it.
    target, *pairs = _source_and_parameters(rest) if SOURCED.match(rest) else rest.split(";")
    try:
        params = key_values(pairs)
    except ValueError as exc:
        raise ValueError(f"arm spec {text!r}: {exc}") from None
    target = target.strip()
    if not target or target.endswith(":"):
        raise ValueError(
            f"arm spec {text!r}: nothing after '=' names what the arm is (a kind, lists:PATH or mlflow:URI)"
        )
    return ArmSpec(name, target, params)


def _source_and_parameters(rest: str) -> list[str]:
    """`kind:source;key=value;…` as [`kind:source`, `key=value`, …]: the trailing pairs whose
    value holds no '/' are parameters (`ours=lists:/data/ours.csv;fill=pop`), the rest the source."""
    parts = rest.split(";")
    cut = len(parts)
    while cut > 1 and SOURCE_PARAMETER.match(parts[cut - 1].strip()):
        cut -= 1
    return [";".join(parts[:cut]), *parts[cut:]]


def _shorthand_spec(text: str, base: str, k: int) -> ArmSpec:
    """The spec of `base@k`, from the one registered kind that claims the shorthand."""
    _load_kinds()
    claimed = []
    for kind, factory in KINDS.items():
        cls = _class_of(factory)
        made = cls.shorthand(base, k) if cls is not None and issubclass(cls, ArmBase) else None
        if made is not None:
            claimed.append((kind, *made))
    if len(claimed) != 1:
        owners = ", ".join(kind for kind, *_ in claimed) or "no kind"
        raise ValueError(f"arm spec {text!r}: 'base@k' is the shorthand of exactly one arm kind, claimed by {owners}")
    kind, name, params = claimed[0]
    return ArmSpec(name, kind, params)


# ---------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------

KINDS: dict[str, Factory] = {}
BUILT_IN = "ops/arms/kinds"  # the origin of a kind found in the kinds package
_DECLARED: dict[str, ArmSpec] = {}
_entry_points_loaded = False


class UnknownKind(ValueError):
    """No file `ops/arms/kinds/<name>.py`."""


def kind_names() -> list[str]:
    """The built-in kinds, sorted: the modules of `ops/arms/kinds/` (none is imported)."""
    package = importlib.import_module(KINDS_PACKAGE)
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if _KIND_NAME.match(m.name))


def kind_class(name: str) -> type[ArmBase]:
    """The class of built-in kind `name`; UnknownKind when there is no such file."""
    if name not in kind_names():
        raise UnknownKind(f"no arm kind {name!r} in {KINDS_PACKAGE} (known: {kind_names()})")
    return _class_in(f"{KINDS_PACKAGE}.{name}")


@functools.cache
def _class_in(module_name: str) -> type[ArmBase]:
    module = importlib.import_module(module_name)
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, ArmBase) and value.__module__ == module_name
    ]
    if len(found) != 1:
        raise TypeError(
            f"{module.__file__}: an arm kind's module defines exactly one ArmBase subclass, "
            f"found {[c.__name__ for c in found] or 'none'}"
        )
    return found[0]


def register(kind: str, factory: Factory, replace: bool = False) -> None:
    """Register `factory(name, **params) -> Arm` (an `ArmBase` subclass, or a lazy one) as arm
    kind `kind`."""
    if not ARM_NAME.match(kind):
        raise ValueError(f"arm kind {kind!r}: must be 1-64 of a-z, 0-9, '_' and '-'")
    if kind in KINDS and KINDS[kind] is not factory and not replace:
        raise ValueError(f"arm kind {kind!r} is registered already")
    KINDS[kind] = factory


def declare(spec: ArmSpec | str) -> ArmSpec:
    """Make `spec` a known arm (by its name) for this process: the settings declare the specs
    of `$SIMAB_ARMS` as they are read, so that every process that reads them (a step's too)
    finds what each of their names stands for."""
    spec = parse_arm_spec(spec) if isinstance(spec, str) else spec
    known = _DECLARED.get(spec.name)
    if known is not None and spec.target == spec.name and not spec.params:
        return known  # the bare name of an arm declared before (the settings carry names)
    if known is not None and known != spec:
        raise ValueError(f"arm {spec.name!r} is declared already as {known.text()!r}, not {spec.text()!r}")
    if known is None and spec.target == spec.name and resolve(spec).kind not in KINDS:
        raise ValueError(f"unknown arm {spec.name!r}; known: {known_arm_names()}")
    _DECLARED[spec.name] = spec
    return spec


def forget(name: str) -> None:
    """Undo `declare` (tests)."""
    _DECLARED.pop(name, None)


def spec_of(name: str) -> ArmSpec:
    """The spec an arm name stands for: a declared spec, or the name itself."""
    return _DECLARED.get(name) or ArmSpec(name, name)


def resolve(arm: ArmSpec | str) -> ArmSpec:
    """The spec of `arm` (a spec, or a name: declared, a kind or an alias) with its target a
    registered kind where it names one: an alias (`deepfm_data50`) becomes its kind with the
    alias's parameters, the spec's own winning.  A target that is no kind and no alias is left
    as it is (making the arm then says it is unknown)."""
    spec = spec_of(arm) if isinstance(arm, str) else arm
    _load_kinds()
    if spec.kind in KINDS or spec.source:
        return spec
    alias = _aliases().get(spec.target)
    if alias is None:
        return spec
    kind, params = alias
    return ArmSpec(spec.name, kind, {**params, **spec.params})


def _aliases() -> dict[str, tuple[str, dict[str, Any]]]:
    """Every registered kind's aliases: alias -> (kind, parameters); a kind's own name wins."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for kind, factory in KINDS.items():
        for alias, params in dict(getattr(_class_of(factory), "aliases", None) or {}).items():
            if alias not in KINDS:
                found.setdefault(alias, (kind, dict(params)))
    return found


def known_arm_names(declared: bool = True) -> list[str]:
    """Every registered kind that is an arm by its bare name (`standalone`) with the names it
    answers to besides (`aliases`: DeepFM's Table 3 and 4 variants), then (`declared`) the
    arms declared in this process."""
    _load_kinds()
    names: list[str] = []
    for kind, factory in KINDS.items():
        cls = _class_of(factory)
        if cls is None or getattr(cls, "standalone", True):
            names.extend([kind, *(getattr(cls, "aliases", None) or {})])
    return list(dict.fromkeys([*names, *(_DECLARED if declared else ())]))


def arm_class(name: str) -> type | None:
    """The class of arm `name` (declared, a registered kind or an alias), read without making
    an arm; None for an unknown name or a factory that is no class."""
    factory = KINDS.get(resolve(name).kind)
    return None if factory is None else _class_of(factory)


def has_capability(name: str, attribute: str) -> bool:
    """Whether the arm `name` is of a class that sets the class attribute `attribute` true
    (`ops.arms.base.ArmBase`: `can_refit`, `uses_gpu`, `slow_to_train`, `mirrors_brain`,
    `diagnostic`, …); read from the class, no arm is made.  False for an unknown name."""
    return bool(getattr(arm_class(name), attribute, False))


def control_arm(wanted: str, arms: Iterable[str]) -> str:
    """The read-out's control: `wanted` where it is among `arms`, else the first of `arms`
    (sorted) whose class is a `control_candidate` (never a diagnostic arm such as the
    mirror), else the first of them."""
    arms = sorted(arms)
    if wanted in arms:
        return wanted
    return next((a for a in arms if arm_class(a) is None or has_capability(a, "control_candidate")), arms[0])


def make_arm(arm: ArmSpec | str, **settings: Any) -> Any:
    """An unfitted Arm for a name (declared, registered or an alias) or a spec's text.
    `settings` (seed, device, max_epochs, …: the asset's) go to the trained built-ins whole and
    to any other arm's constructor where it takes them by name (`ArmBase.from_spec`).  An arm
    whose class `keeps_its_spec` (a trained built-in: its configuration is its spec) is
    returned as it is; any other comes wrapped with its spec (`PluggedArm`), for storage."""
    spec = arm if isinstance(arm, ArmSpec) else (_DECLARED.get(arm) or parse_arm_spec(arm))
    spec = resolve(spec)
    factory = KINDS.get(spec.kind)
    if factory is None:
        raise ValueError(
            f"arm {spec.name!r}: unknown arm kind {spec.kind!r}; known: {sorted(KINDS)} "
            "(or lists:PATH, mlflow:URI, or an installed package's 'simab.arms' entry point)"
        )
    params = dict(spec.params)
    cls = _class_of(factory)
    if cls is not None and issubclass(cls, ArmBase):
        _check_parameters(spec, cls.spec_parameters(), getattr(cls, "parameters_read", None))
    else:
        _check_parameters(spec, constructor_parameters(factory, {"name"}))
    if spec.source:
        source_param = getattr(cls, "source_param", None)
        if not source_param:
            raise ValueError(f"arm {spec.name!r}: kind {spec.kind!r} takes no source ({spec.target!r})")
        params[source_param] = spec.source
    if cls is not None and issubclass(cls, ArmBase):
        made = cls.from_spec(spec.name, params, settings, lambda text: make_arm(text, **settings))
    else:
        made = factory(spec.name, **{**params, **accepted_settings(factory, settings)})
    return made if getattr(made, "keeps_its_spec", False) else PluggedArm(spec, made)


def _check_parameters(
    spec: ArmSpec, accepted: frozenset[str] | None, read: Callable[[], frozenset[str]] | None = None
) -> None:
    """ValueError naming the first parameter of `spec` its kind does not take (`accepted`;
    None: any), and those it reads (`read()`, where the kind says: Pop takes the common
    fields of the trained arms but reads few of them), else those it takes."""
    unknown = [key for key in spec.params if accepted is not None and key not in accepted]
    if unknown:
        takes = ", ".join(sorted(read() if read is not None else accepted or ())) or "no parameter"
        raise ValueError(f"arm {spec.name!r}: kind {spec.kind!r} takes no parameter {unknown[0]!r}; it takes {takes}")


def spec_problem(spec: ArmSpec) -> str | None:
    """Why no arm can be made of `spec` — a parameter its kind does not take, a value it
    refuses — asked of the arm made unfitted, without the run's settings (nothing is read or
    trained: seconds); None when one can."""
    try:
        make_arm(spec)
    except ValidationError as exc:  # a trained built-in's configuration
        error = exc.errors()[0]
        if not error["loc"]:  # a check of the configuration as a whole (trending: window or days)
            return error["msg"].removeprefix("Value error, ")
        field = ".".join(str(part) for part in error["loc"])
        return f"parameter {field}={error.get('input')!r}: {error['msg']}"
    except (ValueError, TypeError) as exc:
        return str(exc).splitlines()[0].removeprefix(f"arm {spec.name!r}: ")
    return None


def _class_of(factory: Factory) -> type | None:
    if isinstance(factory, _Lazy):
        return factory.arm_class()
    return factory if isinstance(factory, type) else None


def _load_kinds() -> None:
    """Register the kinds of ops/arms/kinds/ not registered yet (a file added is found), then
    the installed packages' `simab.arms` entry points (once per process)."""
    global _entry_points_loaded
    built_in = kind_names()
    for name in [k for k, f in KINDS.items() if isinstance(f, _Lazy) and f.origin == BUILT_IN and k not in built_in]:
        del KINDS[name]  # its file is gone
    for name in built_in:
        if name not in KINDS or (isinstance(KINDS[name], _Lazy) and KINDS[name].origin != BUILT_IN):
            register(name, _Lazy(functools.partial(kind_class, name), BUILT_IN), replace=True)
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in KINDS:
            continue  # a built-in name is never taken over by an installed package
        if not ARM_NAME.match(point.name):
            warnings.warn(
                f"entry point {point.name!r} = {point.value!r} of group {ENTRY_POINT_GROUP!r}: "
                "not a valid arm name; skipped",
                stacklevel=2,
            )
            continue
        register(point.name, _Lazy(point.load, f"entry point {point.value}"))


def reload_entry_points() -> None:
    """Look for entry points again (after installing a package in this process)."""
    global _entry_points_loaded
    for kind in [k for k, f in KINDS.items() if isinstance(f, _Lazy) and f.origin != BUILT_IN]:
        del KINDS[kind]
    _entry_points_loaded = False
    _load_kinds()


class _Lazy:
    """A kind's class imported when it is first needed (its first arm, a capability asked),
    so that listing the arm names imports no plug-in and no heavy module."""

    def __init__(self, load: Callable[[], type], origin: str):
        self.load, self.origin = load, origin
        self._class: type | None = None

    def arm_class(self) -> type:
        if self._class is None:
            self._class = self.load()
        return self._class

    def __call__(self, name: str, **params: Any):
        return self.arm_class()(name, **params)

    @property
    def __signature__(self):
        return inspect.signature(self.arm_class())


# ---------------------------------------------------------------------------------------
# An outside arm as a stored asset value
# ---------------------------------------------------------------------------------------


class PluggedArm:
    """An arm from outside simab's built-ins (a plug-in, a lists file, an MLflow model) with
    its spec, so that the IO manager can store it without pickle: `save` writes the spec and
    the arm's own `save(folder)`; `load` makes the arm again from its spec (the same
    registry, so an entry point is looked up, never an arbitrary import) and calls its
    class's `load`.  Everything else is the arm's."""

    def __init__(self, spec: ArmSpec, arm: Any):
        self.spec = spec
        self.arm = arm

    name = property(lambda self: self.arm.name)
    can_refit = property(lambda self: bool(getattr(self.arm, "can_refit", False)))
    scores_are_probabilities = property(lambda self: bool(getattr(self.arm, "scores_are_probabilities", False)))

    def fit(self, data) -> None:
        self.arm.fit(data)

    def score(self, user_ids, item_ids):
        return self.arm.score(user_ids, item_ids)

    def rank(self, user_ids, item_ids, exclude=None, k: int = 20):
        return self.arm.rank(user_ids, item_ids, exclude, k)

    def refit(self, data) -> PluggedArm:
        if not self.can_refit:
            raise ValueError(f"arm {self.name!r} ({self.spec.kind}) cannot be refit on added rows")
        return PluggedArm(self.spec, self.arm.refit(data))

    def describe(self) -> dict[str, Any]:
        return {"arm_spec": self.spec.text(), "arm_kind": self.spec.kind, **self.arm.describe()}

    def __getattr__(self, item: str):
        if item in ("spec", "arm"):
            raise AttributeError(item)
        return getattr(self.arm, item)

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "spec.json").write_text(
            json.dumps({**self.spec.to_json(), "params_of_arm": _jsonable(self.arm.params)}, indent=1)
        )
        state = folder / "state"
        state.mkdir()
        self.arm.save(state)

    @classmethod
    def load(cls, folder: Path) -> PluggedArm:
        folder = Path(folder)
        record = json.loads((folder / "spec.json").read_text())
        spec = ArmSpec.from_json(record)
        blank = make_arm(spec)
        arm_class = type(blank.arm)
        return cls(spec, arm_class.load(spec.name, record.get("params_of_arm") or {}, folder / "state"))


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(params, default=str))


def specs(entries: Iterable[str]) -> list[ArmSpec]:
    """Parse several `$SIMAB_ARMS` entries, refusing one name given twice."""
    out: dict[str, ArmSpec] = {}
    for entry in entries:
        spec = parse_arm_spec(entry)
        if spec.name in out and out[spec.name] != spec:
            raise ValueError(f"arm {spec.name!r} named twice: {out[spec.name].text()!r} and {spec.text()!r}")
        out[spec.name] = spec
    return list(out.values())


# -- the trained kinds (`ops.arms.trained`): a configuration's model names its class here ----


def trained_kind(model: str) -> type[TrainedArm]:
    """The TrainedArm class of kind `model`; ValueError naming the trained kinds otherwise."""
    found = kind_class(model) if model in kind_names() else None
    if found is None or not issubclass(found, TrainedArm):
        raise ValueError(f"unknown arm {model!r}: expected one of {trained_kind_names()}")
    return found


def trained_kind_names() -> list[str]:
    """The kinds configured by an ArmConfig (Random, Pop, the DeepCTR family)."""
    return [k for k in kind_names() if issubclass(kind_class(k), TrainedArm)]


def arm_config(name: str, settings: dict[str, Any] | None = None, **overrides: Any) -> ArmConfig:
    """The configuration of arm `name` (a trained kind, an alias of one such as
    `deepfm_data50`, or a declared spec of one), Appendix B defaults first, then the
    parameters the name stands for, then `settings` — run-wide values (`max_epochs`,
    `device`, …), those its kind's configuration has fields for, as `TrainedArm.from_spec`
    takes them — then `overrides`, every one a field of the kind's configuration."""
    spec = resolve(name)
    return kind_config(spec.kind, name, spec.params, trained_kind(spec.kind).settings_read(settings or {}), overrides)


def kind_config(kind: str, name: str, *given: dict[str, Any]) -> ArmConfig:
    """The configuration of arm `name` of trained kind `kind`: its Appendix B defaults, then
    each of `given` in turn (`model_kwargs` merged, not replaced)."""
    return trained_kind(kind).configure(kind, name, *given)


def trained_arm(config: ArmConfig, **state: Any) -> TrainedArm:
    """The arm of `config`, of the class its `model` names, unfitted unless `state` (the
    class's fields: popularity, encoder, model, …) is given."""
    return trained_kind(config.model)(config=config, **state)


def load_trained(folder: Path | str, device: str | None = None) -> TrainedArm:
    """The arm saved in `folder` (`TrainedArm.save`), of the class its configuration's model
    names; DeepCTR weights go to `device` (default: the arm's configured device).  A folder
    whose model is no trained kind of this checkout fails naming the folder."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    model = (manifest.get("config") or {}).get("model")
    try:
        kind = trained_kind(str(model))
    except ValueError as exc:
        raise ValueError(
            f"{folder}: a saved arm of model {model!r}, which is no arm kind of this simab "
            f"(ops/arms/kinds/ has {trained_kind_names()}); materialise the arm again"
        ) from exc
    return kind.load_folder(folder, device, manifest)


# MLflow models registered before the MLflow module was named `model_registry` carry a copy
# of ops/arms/pyfunc.py that imports `load_arm` from here; they still load.
load_arm = load_trained

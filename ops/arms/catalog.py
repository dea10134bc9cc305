"""The registry of arms: every arm simab can run, by name, built-in or brought.

An arm is named by a spec, one entry of `$SIMAB_ARMS` (comma-separated):

    name                               a registered arm: random, pop, fm, deepfm, afn, …, or an
                                       entry point of group "simab.arms" (mf, multvae, …)
    name=kind;key=value;…              a registered kind with parameters, e.g.
                                       deepfm_half=deepfm;train_fraction=0.5;feature_set=user_id_only
    name=lists:/path/lists.parquet     a lists file (`ops.arms.lists`): Parquet or CSV
    name=mlflow:models:/prod/3         an MLflow model by URI (`ops.arms.mlflow_model`)
    mirror                             the simulation brain's own ranking (`ops.arms.mirror`)
    name=degraded;base=pop;slots=5     an arm's lists with 5 of their 20 slots replaced by random
                                       unseen items (`ops.arms.degraded`); `pop@5` is short for
                                       `pop-at-5=degraded;base=pop;slots=5` (a quality ladder:
                                       pop,pop@5,pop@10,pop@15,pop@20)

`name` is the arm's partition key in Dagster and its MLflow registered-model suffix, so it is
kept to lower-case letters, digits, `_` and `-` (`ARM_NAME`).  Values are read as JSON when
they parse (0.5, true, [64, 32]) and as text otherwise.  The DeepCTR variants of A/B Agent
Tables 3 and 4 are parameters (`train_fraction`, `feature_set`); their old names
(`deepfm_data50`, `deepfm_user_id_only`, …) stay as aliases.

Kinds are registered by name in one table, `KINDS`: the built-ins when this module is
imported, the installed packages' entry points (`[project.entry-points."simab.arms"]`, each
naming an `ops.arms.base.ArmBase` subclass) when first asked for, through the same
`register`.  An arm spec declared with `declare` (the settings do it for `$SIMAB_ARMS`)
becomes a known arm name.  Nothing here imports torch, deepctr, mlflow or a plug-in until an
arm of theirs is made.
"""

from __future__ import annotations

import inspect
import json
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ops.arms.mirror import MirrorArm

ENTRY_POINT_GROUP = "simab.arms"
ARM_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
LISTS, MLFLOW = "lists", "mlflow"
DEGRADED = "degraded"  # ops.arms.degraded.DEGRADED, named here so that listing arms imports nothing
LADDER = re.compile(r"^(?P<base>[a-z0-9][a-z0-9_-]{0,50})@(?P<slots>[0-9]{1,3})$")

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
        for prefix in (LISTS, MLFLOW):
            if self.target.startswith(prefix + ":"):
                return prefix
        return self.target

    @property
    def source(self) -> str:
        """The path of a lists file, the URI of an MLflow model; "" for a registered kind."""
        return self.target.split(":", 1)[1] if self.kind in (LISTS, MLFLOW) else ""

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
    ladder = LADDER.match(text)
    if ladder:  # base@slots: a rung of a quality ladder (ops.arms.degraded)
        base, slots = ladder["base"], int(ladder["slots"])
        return ArmSpec(f"{base}-at-{slots}", DEGRADED, {"base": base, "slots": slots})
    head, _, rest = text.partition("=")
    name = head.strip()
    if not ARM_NAME.match(name):
        raise ValueError(
            f"arm spec {text!r}: name {name!r} must be 1-64 of a-z, 0-9, '_' and '-', starting with a letter or digit "
            "(it is a Dagster partition key and an MLflow model name)"
        )
    if not _:
        return ArmSpec(name, name)
    target, params = rest, {}
    if not rest.startswith((LISTS + ":", MLFLOW + ":")):
        target, *pairs = rest.split(";")
        for pair in pairs:
            key, eq, value = pair.partition("=")
            if not eq or not key.strip():
                raise ValueError(f"arm spec {text!r}: parameter {pair!r} is not key=value")
            params[key.strip()] = _value(value.strip())
        target = target.strip()
    if not target or target.endswith(":"):
        raise ValueError(
            f"arm spec {text!r}: nothing after '=' names what the arm is (a kind, lists:PATH or mlflow:URI)"
        )
    return ArmSpec(name, target, params)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


# ---------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------

KINDS: dict[str, Factory] = {}
_DECLARED: dict[str, ArmSpec] = {}
_entry_points_loaded = False


def register(kind: str, factory: Factory, replace: bool = False) -> None:
    """Register `factory(name, **params) -> Arm` as arm kind `kind`."""
    if not ARM_NAME.match(kind):
        raise ValueError(f"arm kind {kind!r}: must be 1-64 of a-z, 0-9, '_' and '-'")
    if kind in KINDS and KINDS[kind] is not factory and not replace:
        raise ValueError(f"arm kind {kind!r} is registered already")
    KINDS[kind] = factory


def declare(spec: ArmSpec | str) -> ArmSpec:
    """Make `spec` a known arm (by its name) for this process; the settings declare the
    specs of `$SIMAB_ARMS` before the definitions are built."""
    spec = parse_arm_spec(spec) if isinstance(spec, str) else spec
    known = _DECLARED.get(spec.name)
    if known is not None and spec.target == spec.name and not spec.params:
        return known  # the bare name of an arm declared before (the settings carry names)
    if known is not None and known != spec:
        raise ValueError(f"arm {spec.name!r} is declared already as {known.text()!r}, not {spec.text()!r}")
    if known is None and spec.target == spec.name and not _resolvable(spec.name):
        raise ValueError(f"unknown arm {spec.name!r}; known: {known_arm_names()}")
    _DECLARED[spec.name] = spec
    return spec


def forget(name: str) -> None:
    """Undo `declare` (tests)."""
    _DECLARED.pop(name, None)


def spec_of(name: str) -> ArmSpec:
    """The spec an arm name stands for: a declared spec, or the name itself."""
    return _DECLARED.get(name) or ArmSpec(name, name)


def known_arm_names() -> list[str]:
    """Built-ins, their aliases, the installed plug-ins' arms and the declared arms."""
    from ops.arms.recommenders import ALL_ARMS, VARIANT_ARMS

    _load_entry_points()
    names = [*ALL_ARMS, *VARIANT_ARMS, *sorted(set(KINDS) - set(ALL_ARMS)), *_DECLARED]
    return list(dict.fromkeys(names))


def has_capability(name: str, capability: str) -> bool:
    """Whether the arm `name` (declared or a registered kind) is of a class that sets the
    class attribute `capability` true (`mirrors_brain`, `diagnostic`: `ops.arms.mirror`);
    read from the class, no arm is made.  A lists file, an MLflow model and the built-ins
    set none."""
    spec = spec_of(name)
    if spec.kind in (LISTS, MLFLOW):
        return False
    _load_entry_points()
    factory = KINDS.get(spec.target)
    if isinstance(factory, _LazyEntryPoint):
        factory = factory.arm_class()
    return isinstance(factory, type) and bool(getattr(factory, capability, False))


def _resolvable(target: str) -> bool:
    _load_entry_points()
    return target in KINDS or _alias_config(target) is not None


def make_arm(arm: ArmSpec | str, **overrides: Any) -> Any:
    """An unfitted Arm for a name (declared or registered) or a spec's text.  `overrides`
    (seed, device, max_epochs, …: the asset's settings) go to the built-ins whole and to an
    outside arm's constructor where it takes them by name."""
    spec = arm if isinstance(arm, ArmSpec) else (_DECLARED.get(arm) or parse_arm_spec(arm))
    if spec.kind == LISTS:
        from ops.arms.lists import ListsArm

        return PluggedArm(spec, ListsArm(spec.name, path=spec.source, **spec.params))
    if spec.kind == MLFLOW:
        from ops.arms.mlflow_model import MlflowArm

        return PluggedArm(spec, MlflowArm(spec.name, uri=spec.source, **spec.params))
    if spec.target == DEGRADED:
        from ops.arms.degraded import DegradedArm

        params = dict(spec.params)
        base = make_arm(str(params.get("base", "pop")), **overrides)
        return PluggedArm(spec, DegradedArm(spec.name, **params, base_arm=base))
    _load_entry_points()
    factory = KINDS.get(spec.target)
    if factory is None:
        alias = _alias_config(spec.target)
        if alias is None:
            raise ValueError(
                f"arm {spec.name!r}: unknown arm kind {spec.target!r}; known: {sorted(KINDS)} "
                "(or lists:PATH, mlflow:URI, or an installed package's 'simab.arms' entry point)"
            )
        return _builtin(spec.target, spec.name, {**spec.params, **overrides})
    if getattr(factory, "builtin", False):
        return factory(spec.name, **{**spec.params, **overrides})
    accepted = _accepted(factory, overrides)
    return PluggedArm(spec, factory(spec.name, **{**spec.params, **accepted}))


def _accepted(factory: Factory, overrides: dict[str, Any]) -> dict[str, Any]:
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in overrides.items() if k in parameters}


def _alias_config(target: str):
    from ops.arms.recommenders import arm_config

    try:
        return arm_config(target)
    except ValueError:
        return None


def _builtin(model: str, name: str, params: dict[str, Any]):
    from ops.arms.recommenders import TrainedArm, arm_config

    return TrainedArm(config=arm_config(model, **params).model_copy(update={"name": name}))


def _builtin_factory(model: str) -> Factory:
    def factory(name: str, **params: Any):
        return _builtin(model, name, params)

    factory.builtin = True  # type: ignore[attr-defined]
    factory.__doc__ = f"the built-in arm {model!r} (ops.arms.recommenders)"
    return factory


def _load_entry_points() -> None:
    """Register the installed packages' `simab.arms` entry points (once per process)."""
    global _entry_points_loaded
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
        register(point.name, _LazyEntryPoint(point))


def reload_entry_points() -> None:
    """Look for entry points again (after installing a package in this process)."""
    global _entry_points_loaded
    for kind in [k for k, f in KINDS.items() if isinstance(f, _LazyEntryPoint)]:
        del KINDS[kind]
    _entry_points_loaded = False
    _load_entry_points()


class _LazyEntryPoint:
    """An entry point imported when its first arm is made, so that listing the arm names
    imports no plug-in."""

    def __init__(self, point):
        self.point = point
        self._class = None

    def arm_class(self):
        if self._class is None:
            self._class = self.point.load()
        return self._class

    def __call__(self, name: str, **params: Any):
        return self.arm_class()(name, **params)

    @property
    def __signature__(self):
        return inspect.signature(self.arm_class())


for _model in ("random", "pop", "fm", "deepfm", "afn", "wdl", "xdeepfm", "dcn", "nfm", "autoint", "pnn"):
    register(_model, _builtin_factory(_model))
register("mirror", MirrorArm)


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

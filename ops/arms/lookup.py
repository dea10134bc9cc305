"""Arm kinds found by name, as RecBole finds a model (`recbole.utils.get_model`).

The kind `<name>` is the one `ops.arms.base.ArmBase` subclass defined in the module
`ops/arms/kinds/<name>.py`.  Adding a kind is adding that file: no table lists the kinds,
the folder does.  What a kind can do is said by its class attributes (`ArmBase`), its
defaults sit in its own file.  The catalogue (`ops.arms.catalog`) registers every kind found
here, beside the installed packages' entry points, through the same `register`.

The kinds are imported by name, not by an import statement: the package sits above the
modules that find its kinds (`ops.arms.recommenders` looks up the class of a configuration's
model), so a static import would be a circle.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache

from ops.arms.base import ArmBase

KINDS_PACKAGE = "ops.arms.kinds"
_KIND_NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,63}$")


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


@cache
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

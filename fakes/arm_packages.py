"""Packages that bring arms through the `simab.arms` entry point, installed for a test only.

`install_tiny_arm_package(root)` writes a package and its `.dist-info` (METADATA and
entry_points.txt, what pip writes for `[project.entry-points."simab.arms"]`) into `root`,
puts `root` on sys.path and has the catalog look for entry points again: to
`importlib.metadata` it is an installed distribution.  `install_agent4rec_plugin(root)` does
the same for the repository's plug-in under plugins/simab-agent4rec, without pip.
`uninstall(root)` takes it off again.
"""

from __future__ import annotations

import sys
from pathlib import Path

PLUGIN_SOURCE = Path(__file__).resolve().parents[1] / "plugins" / "simab-agent4rec"

# The team's arm of examples/itemmean_arm (one source for the example and the tests).
TINY_ARM = Path(__file__).resolve().parents[1] / "examples" / "itemmean_arm" / "simab_itemmean.py"


def _dist_info(root: Path, dist: str, version: str, entry_points: dict[str, str]) -> None:
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "\n".join(f"{name} = {target}" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[simab.arms]\n{lines}\n")


def _activate(*paths: Path) -> None:
    from ops.arms.registry import reload_entry_points

    for path in paths:
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    reload_entry_points()


def install_tiny_arm_package(root: Path, arm_name: str = "itemmean") -> Path:
    """A package `tiny_simab_arm` whose entry point `arm_name` is `ItemMeanArm`."""
    root = Path(root)
    package = root / "tiny_simab_arm"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(TINY_ARM.read_text(encoding="utf-8"))
    _dist_info(root, "tiny-simab-arm", "0.1.0", {arm_name: "tiny_simab_arm:ItemMeanArm"})
    _activate(root)
    return root


def install_agent4rec_plugin(root: Path) -> Path:
    """The repository's plug-in (MF, MultVAE, LightGCN) as an installed distribution."""
    root = Path(root)
    _dist_info(
        root,
        "simab-agent4rec",
        "0.1.0",
        {
            "mf": "simab_agent4rec.arms:MF",
            "multvae": "simab_agent4rec.arms:MultVAE",
            "lightgcn": "simab_agent4rec.arms:LightGCN",
        },
    )
    _activate(root, PLUGIN_SOURCE)
    return root


def uninstall(root: Path) -> None:
    from ops.arms.registry import reload_entry_points

    for path in (str(root), str(PLUGIN_SOURCE)):
        while path in sys.path:
            sys.path.remove(path)
    for module in [m for m in sys.modules if m.startswith(("tiny_simab_arm", "simab_agent4rec"))]:
        del sys.modules[module]
    reload_entry_points()

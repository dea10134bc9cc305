"""Every arm a class found by name: a kind is one file in ops/arms/kinds/ (or one class a
package names by entry point), found with no other edit; what it can do is a class
attribute, the settings it takes are declared in its file; and no module outside
ops/arms/kinds compares a value with a built-in arm's name."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fakes.planted_data import planted_movielens
from ops.arms.base import ArmBase, FitData
from ops.arms.model_registry import load_arm, save_arm
from ops.arms.ranking import metrics_from_lists, rank_once, ranking_users
from ops.arms.recommenders import TrainedArm, arm_config, arm_params
from ops.arms.registry import (
    KINDS_PACKAGE,
    PluggedArm,
    control_arm,
    has_capability,
    kind_class,
    kind_names,
    known_arm_names,
    make_arm,
    parse_arm_spec,
    reload_entry_points,
    spec_problem,
)
from ops.data.catalogue import build_catalogue
from ops.data.split import chronological_split

ROOT = Path(__file__).resolve().parents[1]
# The project's packages (.importlinter's root packages).
PACKAGES = ("ops", "assets", "pipelines", "resources", "viewer", "data_contracts")
# A value compared with "random" under this name is the randomised A/B design
# (ops.simulation.assignment.assign_agents), the one word the Random arm shares.
HOMONYMS = {"design"}

# A new kind as a team would add it: this file, and no other edit.
NEW_KIND = '''
"""Top rated: every item scored by its mean train rating shrunk towards the global mean
(a Bayesian average), the same for every user."""

from __future__ import annotations

import json
from typing import ClassVar

import numpy as np
import polars as pl

from ops.arms.base import ArmBase, FitData


class TopRated(ArmBase):
    """Items by their shrunk mean train rating."""

    can_refit: ClassVar[bool] = False
    slow_to_train: ClassVar[bool] = True  # a capability read from the class, never from the name

    def __init__(self, name: str, shrinkage: float = 10.0):
        super().__init__(name, shrinkage=float(shrinkage))
        self.item_ids = np.zeros(0, np.int64)
        self.means = np.zeros(0)

    def fit(self, data: FitData) -> None:
        stats = data.train.group_by("item_id").agg(pl.col("rating").sum().alias("s"), pl.len().alias("n"))
        stats = stats.sort("item_id")
        prior, k = float(data.train.get_column("rating").mean()), self.params["shrinkage"]
        self.item_ids = stats.get_column("item_id").to_numpy().astype(np.int64)
        self.means = (stats.get_column("s").to_numpy() + k * prior) / (stats.get_column("n").to_numpy() + k)

    def score(self, user_ids, item_ids) -> np.ndarray:
        item_ids = np.asarray(item_ids, dtype=np.int64)
        at = np.clip(np.searchsorted(self.item_ids, item_ids), 0, max(self.item_ids.size - 1, 0))
        return np.where(self.item_ids[at] == item_ids, self.means[at], 0.0)

    def save(self, folder) -> None:
        np.savez(folder / "means.npz", allow_pickle=False, item_ids=self.item_ids, means=self.means)

    @classmethod
    def load(cls, name, params, folder):
        arm = cls(name, **params)
        with np.load(folder / "means.npz", allow_pickle=False) as saved:
            arm.item_ids, arm.means = saved["item_ids"], saved["means"]
        return arm
'''


# A new trained kind with a setting of its own: the field and its default in this file, and no
# other edit (ArmConfig, the registry and the settings are left as they are).
NEW_TRAINED_KIND = '''
"""Head of the charts: the `top` most counted items of the train window, by their count,
the rest of the catalogue unscored; the same list for every user."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from ops.arms.base import FitData
from ops.arms.trained import ArmConfig, TrainedArm


class ChartsConfig(ArmConfig):
    """The trained arms' common fields and this kind's own."""

    top: int = 5  # how many items the chart keeps


@dataclass
class Charts(TrainedArm):
    """The `top` most counted items (module docstring)."""

    chart: tuple[np.ndarray, np.ndarray] | None = None  # (item ids, counts), sorted by id
    config_class: ClassVar[type[ArmConfig]] = ChartsConfig
    same_order_for_everyone: ClassVar[bool] = True

    def _fit(self, train: pl.DataFrame, data: FitData) -> None:
        counts = train.group_by("item_id").len().sort(["len", "item_id"], descending=[True, False])
        kept = counts.head(self.config.top).sort("item_id")
        self.chart = (kept["item_id"].to_numpy().astype(np.int64), kept["len"].to_numpy().astype(np.float64))

    def score(self, user_ids, item_ids) -> np.ndarray:
        ids, counts = self.chart
        item_ids = np.asarray(item_ids, dtype=np.int64)
        at = np.clip(np.searchsorted(ids, item_ids), 0, max(ids.size - 1, 0))
        return np.where(ids[at] == item_ids, counts[at], 0.0) if ids.size else np.zeros(item_ids.shape)

    def _save_state(self, folder) -> None:
        np.savez(folder / "chart.npz", allow_pickle=False, item_ids=self.chart[0], counts=self.chart[1])

    def _load_state(self, folder, device) -> None:
        with np.load(folder / "chart.npz", allow_pickle=False) as saved:
            self.chart = (saved["item_ids"], saved["counts"])
'''


def _builtin_names() -> set[str]:
    names = set(kind_names())
    for name in kind_names():
        names.update(kind_class(name).aliases)
    return names


def name_comparisons(root: Path, names: set[str]) -> list[str]:
    """`path:line: source` of every comparison, outside ops/arms/kinds, of a value with one of
    `names` (==, !=, in, not in, is, against a string or a literal tuple, list or set of
    them, and `case "name":`), bar the HOMONYMS."""
    found = []
    kinds = root / "ops" / "arms" / "kinds"
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if kinds in path.parents:
                continue
            source = path.read_text()
            for node in ast.walk(ast.parse(source, str(path))):
                if isinstance(node, ast.Compare):
                    operands = [node.left, *node.comparators]
                    named = [o for o in operands if _names_an_arm(o, names)]
                    others = [o for o in operands if o not in named]
                    if named and not any(_identifier(o) in HOMONYMS for o in others):
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.get_source_segment(source, node)}")
                elif isinstance(node, ast.MatchValue) and _names_an_arm(node.value, names):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: case {ast.unparse(node.value)}")
    return found


def _names_an_arm(node: ast.AST, names: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in names
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_an_arm(e, names) for e in node.elts)
    return False


def _identifier(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def test_no_module_outside_the_arms_compares_a_value_with_a_built_in_arm_name():
    names = _builtin_names()
    assert {"random", "pop", "fm", "afn", "deepfm", "mirror", "deepfm_data50"} <= names
    offenders = name_comparisons(ROOT, names)
    assert not offenders, (
        "arm names compared outside ops/arms/kinds (say it with a class attribute, ops.arms.base.ArmBase, "
        "read with ops.arms.registry.has_capability):\n" + "\n".join(offenders)
    )


def test_the_scan_finds_a_comparison_of_an_arm_name(tmp_path):
    """The scan is not blind: a module that branches on "afn" or on a tuple holding "pop" is
    named, the randomised design's "random" is not."""
    package = tmp_path / "ops" / "arms"
    package.mkdir(parents=True)
    (package / "bad.py").write_text(
        'def f(a, design):\n    if a != "afn" and a not in ("pop", "x") and design == "random":\n        return 1\n'
        '    match a:\n        case "mirror":\n            return 2\n'
    )
    (package / "kinds").mkdir()
    (package / "kinds" / "afn.py").write_text('def own(a):\n    return a == "afn"\n')  # its own file may
    found = name_comparisons(tmp_path, _builtin_names())
    assert [line.split(": ", 1)[1] for line in found] == ['a != "afn"', 'a not in ("pop", "x")', "case 'mirror'"]


def _added_kind(tmp_path, monkeypatch, name: str, source: str):
    """A kind added as one new file in the kinds folder.  The folder searched is
    ops/arms/kinds/ plus a temporary one (the package's `__path__`), so that the test never
    writes into the source tree; the lookup is the same as for a file in ops/arms/kinds/."""
    folder = tmp_path / "kinds"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(source)
    package = importlib.import_module(KINDS_PACKAGE)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    importlib.invalidate_caches()
    try:
        yield name
    finally:
        sys.modules.pop(f"{KINDS_PACKAGE}.{name}", None)


@pytest.fixture
def new_kind(tmp_path, monkeypatch):
    yield from _added_kind(tmp_path, monkeypatch, "zz_toprated", NEW_KIND)


@pytest.fixture
def new_trained_kind(tmp_path, monkeypatch):
    yield from _added_kind(tmp_path, monkeypatch, "zz_charts", NEW_TRAINED_KIND)


def test_a_kind_added_as_one_file_is_found_by_name_made_fitted_ranked_and_stored(new_kind, tmp_path):
    users, movies, ratings = planted_movielens(seed=7, n_users=60, n_movies=80, ratings_per_user=25)
    split = chronological_split(ratings)
    catalogue = build_catalogue(movies)
    items = catalogue.get_column("item_id").to_numpy()
    assert new_kind in kind_names() and new_kind in known_arm_names()
    assert has_capability(new_kind, "slow_to_train") and not has_capability(new_kind, "can_refit")
    assert issubclass(kind_class(new_kind), ArmBase) and kind_class(new_kind).__name__ == "TopRated"
    # By its bare name and with parameters (`name=kind;param=value`), through the one catalogue.
    arm = make_arm(parse_arm_spec(f"shrunk={new_kind};shrinkage=50"), seed=3, max_epochs=2)
    assert isinstance(arm, PluggedArm) and arm.params == {"shrinkage": 50.0} and not arm.can_refit
    arm.fit(FitData(split.train, split.valid, users, catalogue, rank_users=ranking_users(split.train, split.test)))
    ranking = rank_once(arm, split.train, split.test, items)
    assert ranking.group_by("user_id").len().get_column("len").min() == 20
    assert ranking.join(split.train, on=["user_id", "item_id"], how="semi").height == 0
    assert metrics_from_lists(arm, ranking, split.test).test_auc is not None
    arm.save(tmp_path / "stored")
    again = PluggedArm.load(tmp_path / "stored")
    assert rank_once(again, split.train, split.test, items).equals(ranking)
    assert make_arm(new_kind).params == {"shrinkage": 10.0}


def test_a_kind_added_as_one_file_brings_its_own_setting_to_its_arms_only(new_trained_kind, tmp_path):
    """A trained kind's own field, declared and defaulted in its file: set by an arm spec,
    refused on another kind, read by the model, kept when the arm is stored."""
    users, movies, ratings = planted_movielens(seed=7, n_users=60, n_movies=80, ratings_per_user=25)
    split = chronological_split(ratings)
    catalogue = build_catalogue(movies)
    items = catalogue.get_column("item_id").to_numpy()
    assert new_trained_kind in known_arm_names() and "top" in kind_class(new_trained_kind).spec_parameters()
    assert arm_config(new_trained_kind).top == 5 and make_arm(new_trained_kind).config.top == 5  # its default
    arm = make_arm(parse_arm_spec(f"top3={new_trained_kind};top=3"), seed=3)
    assert isinstance(arm, TrainedArm) and (arm.name, arm.config.top, arm.config.seed) == ("top3", 3, 3)
    for other in ("pop", "deepfm", "lists:/data/x.csv"):
        with pytest.raises(ValueError, match="takes no parameter 'top'"):
            make_arm(f"x={other};top=3")
    assert "takes no parameter 'top'" in spec_problem(parse_arm_spec("x=random;top=3"))
    assert spec_problem(parse_arm_spec(f"x={new_trained_kind};top=many")).startswith("parameter top='many'")
    arm.fit(FitData(split.train, split.valid, users, catalogue))
    scored = arm.score(np.ones(items.size, dtype=np.int64), items)
    counts = split.train.group_by("item_id").len().sort(["len", "item_id"], descending=[True, False])
    assert set(items[scored > 0]) == set(counts["item_id"].head(3))  # the model read top=3
    ranking = rank_once(arm, split.train, split.test, items)
    assert ranking.filter(pl.col("score") > 0).group_by("user_id").len().get_column("len").max() <= 3
    assert arm_params(arm)["top"] == 3  # what MLflow records of the arm
    again = load_arm(save_arm(arm, tmp_path / "stored"))
    assert type(again).__name__ == "Charts" and again.config == arm.config
    assert np.array_equal(again.score(np.ones(items.size, dtype=np.int64), items), scored)


def test_the_kind_is_gone_with_its_file(new_kind):
    assert new_kind in known_arm_names()
    next(
        Path(p) for p in importlib.import_module(KINDS_PACKAGE).__path__ if (Path(p) / f"{new_kind}.py").is_file()
    ).joinpath(f"{new_kind}.py").unlink()
    assert new_kind not in kind_names() and new_kind not in known_arm_names()
    with pytest.raises(ValueError, match=f"unknown arm kind {new_kind!r}"):
        make_arm(f"x={new_kind}")


def test_a_kind_named_by_an_installed_package_s_entry_point_is_found_made_and_ranked(tmp_path):
    """The same class as an outside package would ship it: one module and its distribution's
    `simab.arms` entry point, registered through the same catalogue as the built-ins."""
    site = tmp_path / "site"
    (site / "zz_toprated_pkg").mkdir(parents=True)
    (site / "zz_toprated_pkg" / "__init__.py").write_text(NEW_KIND)
    info = site / "zz_toprated_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zz-toprated-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[simab.arms]\ntoprated = zz_toprated_pkg:TopRated\npop = zz_toprated_pkg:TopRated\n"
    )
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    try:
        reload_entry_points()
        assert "toprated" in known_arm_names() and has_capability("toprated", "slow_to_train")
        # A package never takes over a built-in's name.
        assert type(make_arm("pop")).__name__ == "Pop"
        users, movies, ratings = planted_movielens(seed=7, n_users=40, n_movies=60, ratings_per_user=20)
        split = chronological_split(ratings)
        catalogue = build_catalogue(movies)
        arm = make_arm("top=toprated;shrinkage=5")
        arm.fit(FitData(split.train, split.valid, users, catalogue))
        ranking = rank_once(arm, split.train, split.test, catalogue.get_column("item_id").to_numpy())
        assert ranking.group_by("user_id").len().get_column("len").min() == 20
        assert arm.describe()["arm_kind"] == "toprated" and arm.params == {"shrinkage": 5.0}
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("zz_toprated_pkg", None)
        importlib.invalidate_caches()
        reload_entry_points()
    assert "toprated" not in known_arm_names()


def test_the_control_falls_back_to_a_candidate_never_to_a_diagnostic_arm():
    assert control_arm("pop", ["fm", "pop", "mirror"]) == "pop"
    assert control_arm("pop", ["mirror", "fm"]) == "fm"  # the mirror sorts first but is no candidate
    assert control_arm("pop", ["mirror"]) == "mirror"  # nothing else simulated
    assert not has_capability("mirror", "control_candidate") and has_capability("random", "control_candidate")


def test_a_kind_checks_its_own_source_before_a_run(tmp_path):
    """The preflight asks the kind (`source_problem`), never compares kind names."""
    missing = tmp_path / "none.parquet"
    assert str(missing) in kind_class("lists").source_problem(str(missing))
    assert "no MLflow model" in kind_class("mlflow").source_problem(str(tmp_path / "model"), lambda: None)
    assert kind_class("pop").source_problem("anything") is None


def test_capabilities_are_class_attributes_of_the_built_ins():
    assert [k for k in kind_names() if kind_class(k).slow_to_train] == ["afn"]
    refit = {k for k in kind_names() if kind_class(k).can_refit}
    assert refit == {"fm", "deepfm", "afn", "wdl", "xdeepfm", "dcn", "nfm", "autoint", "pnn"}
    assert {k for k in kind_names() if kind_class(k).diagnostic} == {"mirror"}
    assert {k for k in kind_names() if kind_class(k).uses_gpu} == refit
    assert not has_capability("pop", "scores_are_probabilities") and has_capability(
        "random", "scores_are_probabilities"
    )
    # A trained built-in's variant answers with its model's class.
    assert has_capability("deepfm_data50", "can_refit") and not has_capability("svd", "can_refit")
    # Sources go to the parameter the class names; the kinds that need one are no arm alone.
    assert (kind_class("lists").source_param, kind_class("mlflow").source_param) == ("path", "uri")
    assert not {"lists", "mlflow", "degraded"} & set(known_arm_names())


def test_the_appendix_b_adjustments_sit_beside_each_model():
    for name in kind_names():
        cls = kind_class(name)
        if issubclass(cls, TrainedArm):
            config = arm_config(name)
            for field, value in cls.appendix_b.items():
                if field == "model_kwargs":
                    assert value.items() <= config.model_kwargs.items(), name
                else:
                    assert getattr(config, field) == value, (name, field)
    with pytest.raises(ValueError, match="unknown arm 'lists'"):
        arm_config("lists")  # a kind, but not one an ArmConfig configures


def test_a_saved_arm_of_a_kind_this_checkout_lacks_fails_naming_its_folder(tmp_path):
    users, movies, ratings = planted_movielens(seed=7, n_users=30, n_movies=40, ratings_per_user=15)
    split = chronological_split(ratings)
    pop = make_arm("pop")
    pop.fit(FitData(split.train, split.valid, users, build_catalogue(movies)))
    folder = save_arm(pop, tmp_path / "pop")
    again = load_arm(folder)
    assert type(again).__name__ == "Pop" and np.array_equal(again.popularity[1], pop.popularity[1])
    manifest = (folder / "arm.json").read_text().replace('"model": "pop"', '"model": "svd"')
    (folder / "arm.json").write_text(manifest)
    with pytest.raises(ValueError, match=f"{folder}: a saved arm of model 'svd'"):
        load_arm(folder)

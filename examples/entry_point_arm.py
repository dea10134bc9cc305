"""Bring your own model, 3: a Python package with a `simab.arms` entry point.

    .venv/bin/pip install --no-deps ./examples/itemmean_arm
    .venv/bin/python examples/entry_point_arm.py

After the install the kind `itemmean` is an arm like `fm`: `SIMAB_ARMS=random,itemmean simab
run`, or with parameters `strict=itemmean;shrinkage=20`.  This script does what an arm step
does, without Dagster: fit the arm on the train window of a small synthetic data set, rank
the catalogue once for every user, and score the lists on the test window.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ops.arms.base import FitData
from ops.arms.ranking import metrics_from_lists, rank_once
from ops.arms.registry import known_arm_names, make_arm
from ops.data.catalogue import build_catalogue
from ops.data.split import chronological_split
from ops.data.synthetic import SyntheticConfig, generate

if "itemmean" not in known_arm_names():
    raise SystemExit("the arm kind 'itemmean' is not installed: pip install --no-deps ./examples/itemmean_arm")
with tempfile.TemporaryDirectory() as posters:
    data = generate(SyntheticConfig(n_users=120, n_movies=160, seed=7), Path(posters))
split, catalogue = chronological_split(data.ratings), build_catalogue(data.movies)
arm = make_arm("strict=itemmean;shrinkage=20")
fit_data = FitData(split.train, split.valid, data.users, catalogue)  # what the arm sees: item_id
arm.fit(fit_data)
ranking = rank_once(arm, split.train, split.test, fit_data.catalogue["item_id"].to_numpy())
print(arm.describe())
print(metrics_from_lists(arm, ranking, split.test))

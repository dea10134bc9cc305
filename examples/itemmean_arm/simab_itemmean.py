"""An arm as a team would package it: each item's mean train rating, shrunk towards the
global mean.  `pyproject.toml` beside it declares it under the `simab.arms` entry point, so
after `pip install examples/itemmean_arm` the arm kind `itemmean` is known to simab like `fm`."""

import json

import numpy as np
import polars as pl

from ops.arms.base import ArmBase


class ItemMeanArm(ArmBase):
    def __init__(self, name, shrinkage=5.0, seed=0):
        super().__init__(name, shrinkage=float(shrinkage), seed=int(seed))
        self.item_ids = np.zeros(0, np.int64)
        self.means = np.zeros(0)
        self.fallback = 0.0

    def fit(self, data):
        stats = data.train.group_by("item_id").agg(pl.col("rating").sum().alias("s"), pl.len().alias("n"))
        stats = stats.sort("item_id")
        self.fallback = float(data.train.get_column("rating").mean())
        k = self.params["shrinkage"]
        self.item_ids = stats.get_column("item_id").to_numpy().astype(np.int64)
        self.means = ((stats["s"].to_numpy() + k * self.fallback) / (stats["n"].to_numpy() + k)).astype(np.float64)

    def score(self, user_ids, item_ids):
        item_ids = np.asarray(item_ids, dtype=np.int64)
        at = np.clip(np.searchsorted(self.item_ids, item_ids), 0, max(self.item_ids.size - 1, 0))
        return np.where(self.item_ids[at] == item_ids, self.means[at], self.fallback)

    # Stored without pickle: arrays in .npz (allow_pickle=False), the rest as JSON.
    def save(self, folder):
        np.savez(folder / "means.npz", allow_pickle=False, item_ids=self.item_ids, means=self.means)
        (folder / "fallback.json").write_text(json.dumps(self.fallback))

    @classmethod
    def load(cls, name, params, folder):
        arm = cls(name, **params)
        with np.load(folder / "means.npz", allow_pickle=False) as saved:
            arm.item_ids, arm.means = saved["item_ids"], saved["means"]
        arm.fallback = json.loads((folder / "fallback.json").read_text())
        return arm

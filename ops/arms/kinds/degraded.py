"""An arm's lists with some of their slots replaced by random unseen items: one rung of a
quality ladder (`ops.arms.degraded.degrade_lists` says how the items are drawn).

`pop@5` (named `pop-at-5`) or `name=degraded;base=pop;slots=5[;seed=0]` is Pop with 5 of the
20 slots of every list replaced.  Fitting fits the base arm on the same data (a trained base
trains again, with the run's settings and seed) and keeps the degraded lists of every user
the lifecycle ranks; the arm then ranks from them, as a lists file does.  It gives no score
per pair (no test AUC) and cannot be refit (nothing learns).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ops.arms.base import ITEM, ArmBase, FitData, ScoresNotAvailable
from ops.arms.degraded import LIST_LENGTH, degrade_lists
from ops.arms.lists_file import rank_stored
from ops.storage.codec import current_names

# The control of A/B Agent Table 2, whose lists a ladder degrades unless told otherwise.
DEFAULT_BASE = "pop"


class DegradedArm(ArmBase):
    """The base arm's lists with `slots` of `list_length` replaced by random unseen items
    (module docstring).  `base_arm`: the unfitted base arm (`ops.arms.registry.make_arm`
    makes it from `base`); not needed to load a fitted one."""

    can_refit = False
    scores_are_probabilities = False
    # `degraded` alone means nothing: a ladder's rung names its base and its slots.
    standalone = False

    def __init__(
        self,
        name: str,
        base: str = DEFAULT_BASE,
        slots: int = 10,
        seed: int = 0,
        list_length: int = LIST_LENGTH,
        base_arm: Any = None,
    ):
        if not isinstance(slots, int) or not 0 <= slots <= list_length:
            raise ValueError(f"arm {name!r}: slots must be a whole number from 0 to {list_length}, got {slots!r}")
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"arm {name!r}: seed must be a whole number >= 0, got {seed!r}")
        super().__init__(name, base=str(base), slots=slots, seed=seed, list_length=int(list_length))
        self.base_arm = base_arm
        self.lists: pl.DataFrame | None = None

    @classmethod
    def shorthand(cls, base: str, k: int) -> tuple[str, dict[str, Any]]:
        """`base@k`: the rung of `base`'s ladder with `k` slots replaced, named `base-at-k`."""
        return f"{base}-at-{k}", {"base": base, "slots": k}

    @classmethod
    def spec_parameters(cls) -> frozenset[str]:
        """The constructor's but `base_arm`, which `from_spec` makes from `base`."""
        return super().spec_parameters() - {"base_arm"}

    @classmethod
    def from_spec(cls, name, params, settings, make) -> DegradedArm:
        """The base arm made too, with the run's settings (a trained base trains again)."""
        params = dict(params)
        return cls(name, **params, base_arm=make(str(params.get("base", DEFAULT_BASE))))

    def fit(self, data: FitData) -> None:
        if self.base_arm is None:
            raise RuntimeError(f"arm {self.name!r}: no base arm to fit (make it with ops.arms.registry.make_arm)")
        self.base_arm.fit(data)
        users = data.rank_users if data.rank_users is not None else data.train.get_column("user_id").unique().to_numpy()
        items = data.catalogue.get_column(ITEM).to_numpy()
        seen = data.train.select("user_id", ITEM)
        base = self.base_arm.rank(np.asarray(users), items, seen, self.params["list_length"])
        self.lists = degrade_lists(base, self.params["slots"], seen, items, self.params["seed"], arm=self.name)

    def _fitted(self) -> pl.DataFrame:
        if self.lists is None:
            raise RuntimeError(f"arm {self.name!r}: not fitted yet")
        return self.lists

    def rank(self, user_ids, item_ids, exclude=None, k: int = LIST_LENGTH) -> pl.DataFrame:
        return rank_stored(self._fitted(), self.name, user_ids, item_ids, exclude, k)

    def score(self, user_ids, item_ids) -> np.ndarray:
        raise ScoresNotAvailable(f"arm {self.name!r}: degraded lists rank, they give no score per pair")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "users": self._fitted().get_column("user_id").n_unique()}

    def save(self, folder: Path) -> None:
        self._fitted().write_parquet(folder / "lists.parquet")
        (folder / "params.json").write_text(json.dumps(self.params, sort_keys=True))

    @classmethod
    def load(cls, name: str, params: dict[str, Any], folder: Path) -> DegradedArm:
        arm = cls(name, **params)
        arm.lists = current_names(pl.read_parquet(folder / "lists.parquet"))  # older arms saved movie_id
        return arm

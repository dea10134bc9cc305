"""The mirror arm: the simulation brain's own ranking, simulated beside the arms to measure
how far the simulator favours lists that look like its own taste.

The embedded brain decides whether a card catches an agent's eye with a click model fitted
on the train and validation windows (`ops.simulation.brains.embedded`).  Ranking the
catalogue by that model's score — each user's 20 best-scored items, train items left out —
gives the lists the agents are likeliest to click, whatever those lists are worth on the
test window.  Simulated like any arm, the mirror shows the simulator's ceiling, and its
offline NDCG@20 says where it stands on real held-out behaviour; the read-out
(`ops.readout.bias`) reports how much CTR the simulation gives it beyond what its offline
standing predicts, and how every arm's simulated-minus-offline residual goes with its
overlap with the mirror's lists.

The arm trains nothing.  It cannot reach the brain itself (this package sits below the
simulation): `recommender_arm` hands it the fitted brain's scores (`FitData.brain_scores`)
when the arm's class says `mirrors_brain`, and the arm keeps the lists it ranked, as a
lists file would be kept (`ops.arms.kinds.lists.ListsArm`).  Its scores of other pairs are not
kept, so its test AUC is "not available".  Named in `$SIMAB_ARMS` as `mirror` (or
`name=mirror;depth=50` for longer stored lists).
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ops.arms.base import ITEM, ArmBase, FitData, ScoresNotAvailable
from ops.arms.kinds.lists import ListsArm
from ops.arms.top_k import rank_by_score


class MirrorArm(ListsArm):
    """The brain's own top-`depth` lists (module docstring)."""

    can_refit = False
    # The capability `recommender_arm` looks for: hand this arm the brain's scores.
    mirrors_brain: ClassVar[bool] = True
    # The read-out keeps an arm with this capability out of the verdict, τ and the arm
    # pairs: it measures the simulator, it is not a candidate.
    diagnostic: ClassVar[bool] = True
    control_candidate: ClassVar[bool] = False
    # Unlike a lists file, it needs no source: `mirror` alone is the arm.
    source_param: ClassVar[str | None] = None
    standalone: ClassVar[bool] = True

    def __init__(self, name: str, depth: int = 20):
        if int(depth) < 1:
            raise ValueError(f"arm {name!r}: depth must be >= 1, got {depth!r}")
        ArmBase.__init__(self, name, depth=int(depth))
        self.lists: pl.DataFrame | None = None
        self.has_scores = False
        self.sha256 = ""

    def fit(self, data: FitData) -> None:
        if data.brain_scores is None:
            raise ValueError(
                f"arm {self.name!r} ranks by the simulation brain's click scores and was given none: "
                "materialise agents and embedded_brain (job simab_prepare) before this arm"
            )
        users = data.rank_users if data.rank_users is not None else data.train.get_column("user_id").unique().to_numpy()
        ranked = rank_by_score(
            self.name,
            data.brain_scores,
            users,
            data.catalogue.get_column(ITEM).to_numpy(),
            data.train.select("user_id", ITEM),
            self.params["depth"],
            self.score_memory_mb,
        )
        self.lists = ranked.select("user_id", "rank", ITEM, "score")
        self.has_scores = True
        self.sha256 = _digest(self.lists)

    def score(self, user_ids, item_ids) -> np.ndarray:
        raise ScoresNotAvailable(
            f"arm {self.name!r} keeps the brain's top-{self.params['depth']} lists, not its score of every pair"
        )

    def describe(self) -> dict[str, Any]:
        lists = self._fitted()
        return {
            **self.params,
            "ranked_by": "the embedded brain's click model",
            "lists_sha256": self.sha256,
            "rows": lists.height,
            "users": lists.get_column("user_id").n_unique(),
        }


def _digest(lists: pl.DataFrame) -> str:
    h = hashlib.sha256()
    for column in ("user_id", "rank", ITEM):
        h.update(np.ascontiguousarray(lists.get_column(column).to_numpy()).tobytes())
    return h.hexdigest()

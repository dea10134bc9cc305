"""A team's own recommendations as an arm: `name=lists:PATH`, a lists file (Parquet or CSV;
its format and its checks: `ops.arms.lists_file`).  A list shorter than 20 is refused unless the
spec says what it becomes: `name=lists:PATH;fill=pop` fills it with the train window's most
popular items the user has not seen, `;fill=none` simulates it as it is (`ops.arms.lists_file`).

The arm ranks by the file: its Recall@k and NDCG@k are the lists' own; its test AUC comes
from the scores, an unlisted test pair ranking below every listed one, and is "not
available" when the file has no scores.  It cannot be refit (Table 5): nothing learns.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ops.arms.base import ITEM, ArmBase, FitData, ScoresNotAvailable
from ops.arms.lists_file import (
    FILLS,
    MIN_ITEMS,
    ListsFileError,
    check_lists_file,
    fill_from_popularity,
    rank_stored,
    read_lists,
)
from ops.storage.codec import current_names


class ListsArm(ArmBase):
    """An arm that recommends what its lists file says (module docstring)."""

    can_refit = False
    scores_are_probabilities = False
    # `name=lists:PATH`: the path; no arm without one.
    source_param = "path"
    standalone = False
    # With a fill: users whose list was shorter than min_items, items fill=pop added.
    short_users = 0
    filled = 0

    def __init__(self, name: str, path: str, min_items: int = MIN_ITEMS, fill: str | None = None):
        if fill is not None and fill not in FILLS:
            raise ValueError(
                f"arm {name!r}: fill={fill!r}: one of {', '.join(FILLS)} (pop: filled with the most popular items; "
                "none: simulated as it is)"
            )
        if not isinstance(min_items, int) or min_items < 1:
            raise ValueError(f"arm {name!r}: min_items must be a whole number >= 1, got {min_items!r}")
        params = {"path": str(path), "min_items": min_items, **({"fill": fill} if fill else {})}
        super().__init__(name, **params)
        self.lists: pl.DataFrame | None = None
        self.has_scores = False
        self.sha256 = ""

    @classmethod
    def source_problem(cls, source: str, tracking_uri=None) -> str | None:
        """The lists file exists, is readable, has the columns and values a lists file takes
        (all the file alone shows: `check_lists_file`)."""
        try:
            check_lists_file(source)
        except ListsFileError as exc:
            return f"{exc.path}: {exc.what}" if exc.row == "file" else str(exc)
        return None

    def fit(self, data: FitData) -> None:
        required = (
            data.rank_users if data.rank_users is not None else data.train.get_column("user_id").unique().to_numpy()
        )
        self.lists, self.has_scores = read_lists(
            self.params["path"],
            data.users.get_column("user_id").to_numpy(),
            data.catalogue.get_column(ITEM).to_numpy(),
            required,
            data.train,
            self.params["min_items"],
            self.params.get("fill"),
        )
        self.sha256 = hashlib.sha256(Path(self.params["path"]).read_bytes()).hexdigest()
        users = pl.Series("user_id", np.union1d(np.asarray(required, dtype=np.int64), self.lists["user_id"].to_numpy()))
        lengths = pl.DataFrame({"user_id": users}).join(self.lists.group_by("user_id").len(), on="user_id", how="left")
        self.short_users = lengths.filter(pl.col("len").fill_null(0) < self.params["min_items"]).height
        if self.params.get("fill") == "pop":
            given = self.lists.height
            self.lists = fill_from_popularity(
                self.lists, users, data.catalogue.get_column(ITEM).to_numpy(), data.train, self.params["min_items"]
            )
            self.filled = self.lists.height - given

    def _fitted(self) -> pl.DataFrame:
        if self.lists is None:
            raise RuntimeError(f"arm {self.name!r}: lists not read yet (fit first)")
        return self.lists

    def rank(self, user_ids, item_ids, exclude=None, k: int = 20) -> pl.DataFrame:
        return rank_stored(self._fitted(), self.name, user_ids, item_ids, exclude, k)

    def score(self, user_ids, item_ids) -> np.ndarray:
        """The file's score of each listed pair; an unlisted pair ranks below all of them."""
        if not self.has_scores:
            raise ScoresNotAvailable(f"arm {self.name!r}: the lists file {self.params['path']} has no score column")
        lists = self._fitted()
        pairs = pl.DataFrame(
            {"user_id": np.asarray(user_ids, dtype=np.int64), ITEM: np.asarray(item_ids, dtype=np.int64)}
        )
        floor = float(lists.get_column("score").min()) - 1.0
        joined = pairs.with_row_index("_i").join(
            lists.select("user_id", ITEM, "score"), on=["user_id", ITEM], how="left"
        )
        return joined.sort("_i").get_column("score").fill_null(floor).to_numpy().astype(np.float64)

    def describe(self) -> dict[str, Any]:
        lists = self._fitted()
        return {
            **self.params,
            "sha256": self.sha256,
            "rows": lists.height,
            "users": lists.get_column("user_id").n_unique(),
            "has_scores": self.has_scores,
            **self._fill_counts(),
        }

    def _fill_counts(self) -> dict[str, int]:
        """How short the lists were and what filled them, where the arm says what a short list becomes."""
        return {"short_users": self.short_users, "filled_items": self.filled} if self.params.get("fill") else {}

    def save(self, folder: Path) -> None:
        self._fitted().write_parquet(folder / "lists.parquet")
        (folder / "lists.json").write_text(
            json.dumps({"has_scores": self.has_scores, "sha256": self.sha256, **self._fill_counts()})
        )

    @classmethod
    def load(cls, name: str, params: dict[str, Any], folder: Path) -> ListsArm:
        arm = cls(name, **params)
        arm.lists = current_names(pl.read_parquet(folder / "lists.parquet"))  # older arms saved movie_id
        meta = json.loads((folder / "lists.json").read_text())
        arm.has_scores, arm.sha256 = bool(meta["has_scores"]), meta["sha256"]
        arm.short_users, arm.filled = int(meta.get("short_users", 0)), int(meta.get("filled_items", 0))
        return arm

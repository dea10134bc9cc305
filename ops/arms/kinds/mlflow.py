"""An MLflow model as an arm: `mlflow:models:/name/version`, `mlflow:models:/name@alias`,
`mlflow:runs:/<run id>/<path>`, or any URI `mlflow.pyfunc.load_model` takes.

The model is a pyfunc in one of two modes (`mode`, "auto" reads the model's signature):

- "score": it takes a frame of (user_id, item_id) rows and returns one score per row
  (higher = better); `item_column` names its item column when that is not `item_id`
  (simab's own registered arms take `item_id`; those registered before the arm API said
  `item_id` take `movie_id`, which "auto" finds in their signature, and a "topk" answer
  with `movie_id` is read too).
  simab ranks the catalogue with it in passes sized to `score_memory_mb`, and its test AUC
  is the scores'.
- "topk": it takes a frame of user_id and the param `k` and returns (user_id, rank,
  item_id[, score]) rows; simab asks for `request` items per user (its train items are
  dropped, so ask for more than 20), checks them as a lists file (`ops.arms.lists_file`), and
  takes the top 20.  Without scores its test AUC is not available.

`fit` downloads the model once (`mlflow.artifacts.download_artifacts`) and resolves what the
URI pointed at: the registered model name and version (an alias or stage resolved to its
number) or the run; `describe` gives them to the run's params, and the stored arm keeps the
model's files, so that later steps score the same version without the registry.  The arm
cannot be refit (Table 5): simab does not know how the model was trained.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ops.arms.base import ITEM, RANKING, ArmBase, FitData, ScoresNotAvailable
from ops.arms.lists_file import check_lists
from ops.arms.mlflow_model import resolve_uri, uri_problem
from ops.arms.top_k import rank_by_score
from ops.storage.codec import current_names

# An older model's `movie_id` is accepted: models registered by simab before its arm API
# named the item `item_id` still serve.
ITEM_COLUMNS = (ITEM, "movie_id")


class MlflowArm(ArmBase):
    """A pyfunc model in the MLflow registry or a run, as an arm (module docstring)."""

    can_refit = False
    scores_are_probabilities = False
    # `name=mlflow:URI`: the model's URI; no arm without one.
    source_param = "uri"
    standalone = False

    @classmethod
    def source_problem(cls, source: str, tracking_uri=None) -> str | None:
        """The model URI resolves in the run's MLflow store (`ops.arms.mlflow_model.uri_problem`)."""
        return uri_problem(source, tracking_uri() if tracking_uri else None)

    def __init__(
        self,
        name: str,
        uri: str,
        mode: str = "auto",
        item_column: str = "auto",
        request: int = 100,
        batch_rows: int = 262_144,
        score_memory_mb: float = 512.0,
    ):
        if mode not in ("auto", "score", "topk"):
            raise ValueError(f"arm {name!r}: mode {mode!r} must be auto, score or topk")
        super().__init__(
            name,
            uri=uri,
            mode=mode,
            item_column=item_column,
            request=int(request),
            batch_rows=int(batch_rows),
            score_memory_mb=float(score_memory_mb),
        )
        self.score_memory_mb = float(score_memory_mb)
        self.resolved: dict[str, Any] = {}
        self._local: Path | None = None
        self._model = None
        self._known: tuple[np.ndarray, np.ndarray] | None = None  # users, items: for checking top-k answers
        self._rank_users: np.ndarray | None = None

    # -- fitting: resolve and download ----------------------------------------------

    def fit(self, data: FitData) -> None:
        import mlflow

        uri = self.params["uri"]
        self.resolved = resolve_uri(uri)
        self._local = Path(tempfile.mkdtemp(prefix=f"simab-mlflow-{self.name}-"))
        mlflow.artifacts.download_artifacts(
            artifact_uri=self.resolved.get("pinned_uri", uri), dst_path=str(self._local)
        )
        self._model = None
        self._resolve_mode()
        self._known = (data.users.get_column("user_id").to_numpy(), data.catalogue.get_column(ITEM).to_numpy())
        self._rank_users = data.rank_users

    def _pyfunc(self):
        if self._model is None:
            import mlflow

            if self._local is None:
                raise RuntimeError(f"arm {self.name!r}: model not downloaded yet (fit first)")
            self._model = mlflow.pyfunc.load_model(str(_model_root(self._local)))
        return self._model

    def _resolve_mode(self) -> None:
        mode, column = self.params["mode"], self.params["item_column"]
        inputs = _input_names(self._pyfunc())
        if column == "auto":
            column = next((c for c in ITEM_COLUMNS if c in inputs), "item_id")
        if mode == "auto":
            mode = (
                "topk"
                if inputs
                and "user_id" in inputs
                and not any(c in inputs for c in ITEM_COLUMNS)
                and column not in inputs
                else "score"
            )
        self.resolved.update(mode=mode, item_column=column)

    # -- the protocol ----------------------------------------------------------------

    def score(self, user_ids, item_ids) -> np.ndarray:
        import pandas as pd

        if self.resolved.get("mode") != "score":
            raise ScoresNotAvailable(
                f"arm {self.name!r}: the MLflow model {self.params['uri']} returns top-k lists, not scores"
            )
        users = np.asarray(user_ids, dtype=np.int64)
        items = np.asarray(item_ids, dtype=np.int64)
        out = np.empty(users.size, dtype=np.float64)
        step = self.params["batch_rows"]
        model = self._pyfunc()
        for start in range(0, users.size, step):
            frame = pd.DataFrame(
                {"user_id": users[start : start + step], self.resolved["item_column"]: items[start : start + step]}
            )
            predicted = np.asarray(_values(model.predict(frame)), dtype=np.float64).ravel()
            if predicted.size != len(frame):
                raise ValueError(
                    f"arm {self.name!r}: the MLflow model {self.params['uri']} returned {predicted.size} scores "
                    f"for {len(frame)} rows"
                )
            out[start : start + step] = predicted
        return out

    def rank(self, user_ids, item_ids, exclude=None, k: int = 20) -> pl.DataFrame:
        if self.resolved.get("mode") == "score":
            return rank_by_score(self.name, self.score_matrix, user_ids, item_ids, exclude, k, self.score_memory_mb)
        import pandas as pd

        users = np.unique(np.asarray(user_ids, dtype=np.int64))
        answer = self._pyfunc().predict(pd.DataFrame({"user_id": users}), params={"k": max(k, self.params["request"])})
        frame = pl.from_pandas(answer if isinstance(answer, pd.DataFrame) else pd.DataFrame(answer))
        frame = current_names(frame)  # an older model's "topk" answer names the item movie_id
        known_users, known_items = self._known if self._known is not None else (users, np.asarray(item_ids))
        lists, _ = check_lists(
            frame,
            f"the answer of MLflow model {self.params['uri']}",
            False,
            known_users,
            np.intersect1d(known_items, np.asarray(item_ids, dtype=np.int64)),
            users,
            exclude,
            k,
        )
        return (
            lists.filter(pl.col("rank") <= k)
            .select(pl.lit(self.name).alias("arm"), "user_id", "rank", ITEM, "score")
            .cast(RANKING)
        )

    def describe(self) -> dict[str, Any]:
        shown = {f"mlflow_{k}": v for k, v in self.resolved.items() if v not in (None, "")}
        return {"uri": self.params["uri"], **shown}

    def save(self, folder: Path) -> None:
        if self._local is None:
            raise RuntimeError(f"arm {self.name!r}: nothing to save (fit first)")
        shutil.copytree(self._local, folder / "model")
        (folder / "mlflow.json").write_text(
            json.dumps(
                {
                    "resolved": self.resolved,
                    "known_users": self._known[0].tolist() if self._known else None,
                    "known_items": self._known[1].tolist() if self._known else None,
                }
            )
        )

    @classmethod
    def load(cls, name: str, params: dict[str, Any], folder: Path) -> MlflowArm:
        arm = cls(name, **params)
        record = json.loads((folder / "mlflow.json").read_text())
        arm.resolved = record["resolved"]
        arm._local = folder / "model"
        if record.get("known_users") is not None:
            arm._known = (
                np.asarray(record["known_users"], dtype=np.int64),
                np.asarray(record["known_items"], dtype=np.int64),
            )
        return arm


def _model_root(local: Path) -> Path:
    """The folder holding MLmodel inside a download (the download may nest it one level)."""
    if (local / "MLmodel").is_file():
        return local
    found = sorted(local.rglob("MLmodel"))
    if not found:
        raise FileNotFoundError(f"{local}: the downloaded MLflow model has no MLmodel file")
    return found[0].parent


def _input_names(model) -> list[str]:
    signature = getattr(model.metadata, "signature", None)
    if signature is None or signature.inputs is None:
        return []
    try:
        return [n for n in signature.inputs.input_names() if n]
    except AttributeError:
        return []


def _values(predicted):
    """A pyfunc's scores as an array: a Series, a one-column frame, a list or an array."""
    import pandas as pd

    if isinstance(predicted, pd.DataFrame):
        if predicted.shape[1] != 1:
            column = "score" if "score" in predicted.columns else None
            if column is None:
                raise ValueError(
                    f"the model returned columns {list(predicted.columns)}; a scoring model returns one score per row"
                )
            return predicted[column].to_numpy()
        return predicted.iloc[:, 0].to_numpy()
    return np.asarray(predicted)

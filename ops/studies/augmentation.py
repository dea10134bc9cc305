"""Data augmentation with simulated interactions (A/B Agent §3.4, §3.5 and Table 5;
docs/definitions.md#lifecycle, step 10).

The paper simulates agents under the DeepFM arm, collects two signals — home-page clicks
and detail-page views — adds each to the original train set, retrains the downstream CTR
models and compares their test AUC with the models trained on the original set.

Signals, as rows of the RATINGS schema, one per (user, movie):

- **view**: every `watch_and_rate` event, keeping the agent's 1–5 rating; the model's label
  follows the rule of docs/definitions.md#labels (rating >= 4 is a positive), so a view the agent disliked is a
  negative example.  An agent that watches a movie twice keeps its last rating.
- **click**: every `click_movie` event.  The paper counts clicks as a signal of their own
  ("2,518 homepage clicks") beside the views, and a click is what a CTR model predicts, so
  by default (`click_label="positive"`) a click is a positive example, written with rating
  `click_rating` (4, the lowest positive rating).  `click_label="watched"` is offered for
  comparison: a clicked movie takes the rating of the agent's later `watch_and_rate` of
  it, and a click the agent backed out of gets `unwatched_click_rating` (a negative).

Simulated pairs already in the train set are dropped (the real rating stands), and the
new rows are stamped after the last train timestamp, in session order, so the augmented
train set stays chronological and never reaches back before real interactions.

`refit_and_evaluate` trains the "original" model and one model per signal in the same call,
with the same arm configuration and seed, so the AUC difference is like for like; all of
them are evaluated on the same test set, ranking the same candidates (the catalogue minus
each user's *original* train items), so Recall@20 and NDCG@20 compare too.  A model per
signal is retrained from scratch (`refit="scratch"`, the papers' Table 5) or fine-tuned from
the original one on the simulated rows (`refit="warm"`, the lifecycle's refit: its cost
follows the simulated events, not the log; `ops.arms.warm_refit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from ops.arms.base import FitData
from ops.arms.deepctr import DeepCTRArm
from ops.arms.ranking import evaluation_users
from ops.arms.recommenders import TrainedArm, evaluate_arm, train_arm
from ops.arms.registry import make_arm
from ops.arms.warm_refit import train_pair_keys, warm_refit
from ops.figures import table_markdown
from ops.readout.augmentation_summary import AUGMENTATION_METRICS, ORIGINAL, empty_metrics, table_5
from ops.schema import RATINGS, conform
from ops.simulation.observation import CLICK_MOVIE, WATCH_AND_RATE

Signal = Literal["click", "view"]
SIGNALS: tuple[Signal, ...] = ("click", "view")


class AugmentationConfig(BaseModel):
    """How simulated events become training rows (A/B Agent §3.4)."""

    # §3.4: "collect two types of signals: homepage clicks and viewing records".
    signals: tuple[Signal, ...] = SIGNALS
    # A click is the CTR model's positive event (§3.4 adds clicks as a signal of their own).
    click_label: Literal["positive", "watched"] = "positive"
    # docs/definitions.md#lifecycle, step 5: label = rating >= 4, so 4 is the lowest rating that is a positive.
    click_rating: int = Field(4, ge=1, le=5)
    # click_label="watched": a click not followed by watch_and_rate is a negative (< 4).
    unwatched_click_rating: int = Field(2, ge=1, le=5)
    # Seconds between consecutive simulated rows, counted from the last train timestamp.
    timestamp_step_s: int = Field(1, ge=1)
    # docs/definitions.md#lifecycle, step 6: Recall@20 and NDCG@20.
    k: int = Field(20, ge=1)
    # How an augmented model is trained: "scratch" as the papers' Table 5 (a second full
    # training on train + the simulated rows); "warm" from the arm trained on the original
    # window, fine-tuned on the simulated rows and as many replayed train rows for
    # `warm_epochs` passes (`ops.arms.warm_refit`): the lifecycle's refit, whose cost follows
    # the simulated events, not the log.  A plug-in's arm is retrained from scratch either way.
    refit: Literal["scratch", "warm"] = "scratch"
    warm_epochs: int = Field(2, ge=1)
    # Recall@20 and NDCG@20 over a seeded sample of this many test users (0: all of them),
    # as the arms' offline metrics (`ops.arms.ranking.evaluation_users`).
    eval_users: int = Field(0, ge=0)
    # A tqdm bar when the output is a terminal; none in a log file or a pipe.
    progress: bool = True


def refit_and_evaluate(
    arm_name: str,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    events: pl.DataFrame,
    signals: Sequence[Signal] | None = None,
    config: AugmentationConfig | None = None,
    original_model: Any = None,
    **arm_overrides: Any,
) -> pl.DataFrame:
    """Train arm `arm_name` (a DeepCTR model, `ops.arms.recommenders.arm_config` name) on the
    original train set and on train + each simulated signal; return one row per training
    set ("original", "+click", "+view") in the AUGMENTATION_METRICS layout.

    `catalogue` is MM-ML-1M (the `catalogue` asset); `events` follow ops.schema.EVENTS (one
    arm's simulation); `arm_overrides` go to
    `arm_config` (max_epochs, seed, device, ...) and are the same for every training set.
    A signal that adds no row is not retrained: its row repeats the original's metrics.
    `original_model`: the arm already trained on `train` (a TrainedArm); when its config is
    exactly the one asked for, it is evaluated instead of trained again (training is seeded,
    so a second run would give the same model at the cost of a training).
    """
    config = config or AugmentationConfig()
    signals = tuple(config.signals if signals is None else signals)
    unknown = [s for s in signals if s not in SIGNALS]
    if unknown:
        raise ValueError(f"augmentation: unknown signal(s) {unknown}; expected some of {list(SIGNALS)}")
    blank = make_arm(arm_name, **arm_overrides)
    if not blank.can_refit:
        raise ValueError(
            f"augmentation: arm {arm_name!r} cannot be refit on added rows (Random, Pop, a lists file "
            "and an MLflow model have nothing to train); Table 5 refits the arms that train, the "
            "DeepCTR family and the plug-ins'"
        )
    builtin = isinstance(blank, TrainedArm)
    arm_cfg = blank.config if builtin else None
    if builtin:
        # A refit that learns little (AUC near 0.5) is a finding of Table 5, not a failure: only
        # NaN and exploding losses stop it; the arm itself was trained under its full guard.
        guard = arm_cfg.divergence.model_copy(update={"min_val_auc": 0.0})
        retrain_cfg = arm_cfg.model_copy(update={"divergence": guard})
    threshold = arm_cfg.positive_threshold if builtin else 4
    train = conform(train, RATINGS, "train")
    test = conform(test, RATINGS, "test")
    item_ids = catalogue.get_column("item_id").to_numpy()
    provenance = _provenance(events)
    # The added rows' label balance is read against the real rows' (before sampled negatives).
    train_positive_share = _positive_share(train, threshold)

    training_sets: list[tuple[str, pl.DataFrame]] = [(ORIGINAL, train.clear())]
    for signal in signals:
        training_sets.append((f"+{signal}", simulated_interactions(events, signal, train, config)))

    rows: list[dict[str, Any]] = []
    original: dict[str, Any] | None = None
    first, keys = None, None  # the model trained on the original window (a warm refit starts there), its pairs
    evaluated = evaluation_users(test, config.eval_users) if config.eval_users else None
    for name, simulated in tqdm(
        training_sets, desc=f"augmentation {arm_name}", disable=None if config.progress else True
    ):
        added = augment(train, simulated).slice(train.height) if simulated.height else simulated
        row = {
            **provenance,
            "arm": arm_name,
            "training_set": name,
            "added_rows": added.height,
            "added_users": added.get_column("user_id").n_unique(),
            "added_items": added.get_column("item_id").n_unique(),
            "added_positive_share": _positive_share(added, threshold),
            "train_positive_share": train_positive_share,
            "overlap_test_pairs": added.join(test, on=["user_id", "item_id"], how="semi").height,
            "train_rows": train.height + added.height,
            "seed": arm_cfg.seed if builtin else int(arm_overrides.get("seed", 0)),
        }
        if original is not None and added.height == 0:
            metrics = {
                k: original[k] for k in ("best_epoch", "test_auc", "test_log_loss", "recall_at_k", "ndcg_at_k", "k")
            }
        else:
            if builtin:
                reuse = (
                    name == ORIGINAL
                    and original_model is not None
                    and getattr(original_model, "config", None) == arm_cfg
                )
                if reuse:
                    trained = original_model
                elif name != ORIGINAL and config.refit == "warm" and isinstance(first, DeepCTRArm):
                    data = FitData(train, valid, users, catalogue)
                    keys = train_pair_keys(train) if keys is None else keys
                    trained = warm_refit(first, added, data, config.warm_epochs, train_keys=keys)
                else:
                    trained = train_arm(retrain_cfg, pl.concat([train, added]), valid, users, catalogue)
                first = trained if name == ORIGINAL else first
            else:
                reuse = name == ORIGINAL and getattr(original_model, "name", None) == arm_name
                trained = (
                    original_model
                    if reuse
                    else blank.refit(FitData(pl.concat([train, added]), valid, users, catalogue))
                )
            # The original train items are excluded for every training set, so every model
            # ranks the same candidates and Recall/NDCG compare like for like.
            offline = evaluate_arm(trained, train, test, item_ids, k=config.k, evaluated=evaluated)
            metrics = {
                "best_epoch": getattr(trained, "best_epoch", None),
                "test_auc": offline.test_auc,
                "test_log_loss": offline.test_log_loss,
                "recall_at_k": offline.recall_at_k,
                "ndcg_at_k": offline.ndcg_at_k,
                "k": offline.k,
            }
        row.update(metrics)
        row["auc_difference"] = 0.0 if original is None else row["test_auc"] - original["test_auc"]
        if original is None:
            original = row
        rows.append(row)
    return pl.DataFrame(rows, schema=AUGMENTATION_METRICS)


def refit_plan(requested: Sequence[str]) -> tuple[list[str], list[str]]:
    """The models of `requested` that refit (the arms that train: the DeepCTR family, the
    plug-ins'), and those that have nothing to refit (Random, Pop, a lists file, an MLflow
    model): Table 5 says "not applicable" for them."""
    models = [m for m in requested if make_arm(m).can_refit]
    return models, [m for m in requested if m not in models]


def refit_models(
    arm: str,
    models: Sequence[str],
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    events: pl.DataFrame,
    *,
    config: AugmentationConfig,
    original_model: Any = None,
    seed: int = 1024,
    seeds: int = 1,
    device: str = "auto",
    use_metadata: bool = True,
    max_epochs: int = 0,
    validation_negatives: float = 0.0,
    log: Callable[[str], None] = print,
) -> pl.DataFrame:
    """Table 5 for the events simulated under `arm`: `refit_and_evaluate` of each of `models`
    with training seeds `seed`, `seed` + 1, … (`seeds` of them), stacked; an empty table when
    no model refits.  `original_model` is `arm` trained on the original split, reused for
    `arm` itself; `max_epochs` and `validation_negatives` at 0 leave the arm's default."""
    overrides: dict[str, Any] = {"device": device, "use_metadata": use_metadata}
    if max_epochs:
        overrides["max_epochs"] = max_epochs
    if validation_negatives:
        overrides["validation_negatives"] = validation_negatives
    parts = []
    for model, offset in [(m, i) for m in models for i in range(seeds)]:
        # The partition's own model is already trained on the original split: reused when
        # its configuration is the one asked for.
        part = refit_and_evaluate(
            model,
            train,
            valid,
            test,
            users,
            catalogue,
            events,
            config=config,
            original_model=original_model if model == arm else None,
            **{**overrides, "seed": seed + offset},
        )
        for row in part.iter_rows(named=True):
            log(
                f"{model} {row['training_set']}: +{row['added_rows']} rows, "
                f"test AUC {row['test_auc']:.4f} ({row['auc_difference']:+.4f})"
            )
        parts.append(part)
    return pl.concat(parts) if parts else empty_metrics()


def metrics_by_seed(table: pl.DataFrame) -> list[tuple[int, dict[str, float]]]:
    """(training seed, {"<arm>_<set>_test_auc", "…_auc_difference", "…_added_rows"}) per row
    of Table 5: one step per seed, so several seeds show as a metric history."""
    out = []
    for row in table.iter_rows(named=True):
        key = f"{row['arm']}_{row['training_set'].lstrip('+')}"
        metrics = {
            f"{key}_test_auc": row["test_auc"],
            f"{key}_auc_difference": row["auc_difference"],
            f"{key}_added_rows": row["added_rows"],
        }
        out.append((int(row["seed"]), metrics))
    return out


def mean_differences(spread: pl.DataFrame) -> dict[str, float]:
    """ "<arm>_<set>_auc_difference_mean" of the seed summary (`seed_summary`)."""
    return {
        f"{row['arm']}_{row['training_set'].lstrip('+')}_auc_difference_mean": row["auc_difference"]
        for row in spread.iter_rows(named=True)
    }


def table_5_markdown(table: pl.DataFrame, not_applicable: Sequence[str]) -> str:
    """Table 5 (test AUC) in Markdown, or why there is none."""
    if not table.height:
        return f"not applicable: {', '.join(not_applicable)} has no model to refit"
    return table_markdown(table_5(table), ".4f")


def simulated_interactions(
    events: pl.DataFrame,
    signal: Signal,
    train: pl.DataFrame,
    config: AugmentationConfig | None = None,
) -> pl.DataFrame:
    """The `signal` ("click" or "view") of the simulation `events` as a RATINGS frame: one
    row per (user, movie) not already in `train`, stamped after train's last timestamp in
    session order (user, then step)."""
    config = config or AugmentationConfig()
    if signal not in SIGNALS:
        raise ValueError(f"augmentation: unknown signal {signal!r}; expected one of {list(SIGNALS)}")
    needed = ["user_id", "item_id", "action", "step"] + (
        ["rating"] if signal == "view" or config.click_label == "watched" else []
    )
    missing = [c for c in needed if c not in events.columns]
    if missing:
        raise ValueError(
            f"simulation events lack column(s) {missing} needed for the {signal!r} signal; they have {events.columns}"
        )
    train = conform(train, RATINGS, "train")

    if signal == "view":
        pairs = _views(events)
    else:
        clicks = events.filter(pl.col("action") == CLICK_MOVIE).select(
            pl.col("user_id").cast(pl.Int64), pl.col("item_id").cast(pl.Int64), pl.col("step").cast(pl.Int64)
        )
        _require_item_ids(clicks, CLICK_MOVIE)
        clicks = clicks.group_by("user_id", "item_id").agg(pl.col("step").min())
        if config.click_label == "positive":
            pairs = clicks.with_columns(rating=pl.lit(config.click_rating, dtype=pl.Int64))
        else:
            pairs = clicks.join(
                _views(events).select("user_id", "item_id", "rating"), on=["user_id", "item_id"], how="left"
            ).with_columns(pl.col("rating").fill_null(config.unwatched_click_rating))

    pairs = pairs.join(train.select("user_id", "item_id"), on=["user_id", "item_id"], how="anti").sort(
        "user_id", "step", "item_id"
    )
    last = int(train.get_column("timestamp").max()) if train.height else 0
    stamps = last + config.timestamp_step_s * np.arange(1, pairs.height + 1, dtype=np.int64)
    return conform(pairs.with_columns(timestamp=pl.Series(stamps, dtype=pl.Int64)), RATINGS, f"simulated {signal}s")


def augment(train: pl.DataFrame, simulated: pl.DataFrame) -> pl.DataFrame:
    """`train` followed by the `simulated` rows whose (user, movie) pair is new to it, one
    row per pair (the first simulated one); both are RATINGS frames."""
    train = conform(train, RATINGS, "train")
    simulated = conform(simulated, RATINGS, "simulated interactions")
    new = simulated.join(train.select("user_id", "item_id"), on=["user_id", "item_id"], how="anti").unique(
        ["user_id", "item_id"], keep="first", maintain_order=True
    )
    return pl.concat([train, new])


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def _views(events: pl.DataFrame) -> pl.DataFrame:
    """One row per watched (user, movie): the last watch_and_rate's rating, its first step."""
    watched = events.filter(pl.col("action") == WATCH_AND_RATE).select(
        pl.col("user_id").cast(pl.Int64),
        pl.col("item_id").cast(pl.Int64),
        pl.col("step").cast(pl.Int64),
        pl.col("rating").cast(pl.Int64),
    )
    _require_item_ids(watched, WATCH_AND_RATE)
    unrated = watched.filter(pl.col("rating").is_null() | ~pl.col("rating").is_between(1, 5))
    if unrated.height:
        raise ValueError(
            f"simulation events: {unrated.height} {WATCH_AND_RATE} row(s) with column 'rating' missing or outside 1..5, "
            f"e.g. user {unrated['user_id'][0]} step {unrated['step'][0]}"
        )
    return (
        watched.sort("user_id", "step")
        .group_by("user_id", "item_id", maintain_order=True)
        .agg(pl.col("step").first(), pl.col("rating").last())
    )


def _require_item_ids(rows: pl.DataFrame, action: str) -> None:
    if rows.get_column("item_id").null_count() or rows.get_column("user_id").null_count():
        raise ValueError(f"simulation events: a {action} row has no 'item_id' or 'user_id'")


def _positive_share(rows: pl.DataFrame, threshold: int) -> float | None:
    if rows.height == 0:
        return None
    return float((rows.get_column("rating") >= threshold).mean())


def _provenance(events: pl.DataFrame) -> dict[str, str | None]:
    def joined(column: str) -> str | None:
        if column not in events.columns or events.height == 0:
            return None
        values = sorted(str(v) for v in events.get_column(column).drop_nulls().unique().to_list())
        return ",".join(values) or None

    return {"simulated_arm": joined("arm"), "brain": joined("brain")}

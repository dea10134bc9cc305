"""The read-out of the augmentation study (`ops.studies.augmentation`, A/B Agent Table 5):
its metrics' layout, the AUC difference over training seeds and Table 5's shape."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from ops.readout.statistics import interval_sign, t_interval

ORIGINAL = "original"

# One row per (downstream model, training set): the Table 5 layout, long form.
AUGMENTATION_METRICS: dict[str, pl.DataType] = {
    "simulated_arm": pl.Utf8,  # the arm whose simulation produced the data (the paper: DeepFM)
    "brain": pl.Utf8,  # the simulation's brain(s), e.g. "llm:gpt-4o-mini:no-vision" (§3.5 ablation)
    "arm": pl.Utf8,  # the downstream model refit
    "training_set": pl.Utf8,  # "original", "+click", "+view"
    "seed": pl.Int64,  # the training seed (the same for a model's original and augmented sets)
    "added_rows": pl.Int64,  # simulated rows added to train (after dropping pairs already there)
    "added_users": pl.Int64,  # distinct users among the added rows
    "added_items": pl.Int64,  # distinct movies among the added rows
    "added_positive_share": pl.Float64,  # share of the added rows labelled positive
    "train_positive_share": pl.Float64,  # share of the real train rows labelled positive, to set it against
    "overlap_test_pairs": pl.Int64,  # added (user, movie) pairs that are also test pairs
    "train_rows": pl.Int64,
    "best_epoch": pl.Int64,
    "test_auc": pl.Float64,
    "test_log_loss": pl.Float64,
    "recall_at_k": pl.Float64,
    "ndcg_at_k": pl.Float64,
    "k": pl.Int64,
    "auc_difference": pl.Float64,  # test_auc minus the same model's "original" test_auc
}


def empty_metrics() -> pl.DataFrame:
    """An AUGMENTATION_METRICS frame with no rows (an arm with no downstream model)."""
    return pl.DataFrame(schema=AUGMENTATION_METRICS)


def seed_summary(metrics: pl.DataFrame, confidence: float = 0.95) -> pl.DataFrame:
    """Per simulated arm, brain, model and augmented training set: the AUC difference
    against the original over training seeds — mean, t-interval and whether it is a gain,
    a loss or within seed noise.  One training per cell (as in the paper) cannot tell a
    0.002–0.004 gain from the seed-to-seed spread of the original model's AUC."""
    keys = ["simulated_arm", "brain", "arm", "training_set"]
    rows = []
    augmented = metrics.filter(pl.col("training_set") != ORIGINAL)
    for key, part in augmented.group_by(keys, maintain_order=True):
        diff = part.get_column("auc_difference").to_numpy()
        mean, low, high = t_interval(diff, confidence)
        verdict = (
            "one seed" if low is None else {1: "gain", -1: "loss", 0: "within seed noise"}[interval_sign(low, high)]
        )
        rows.append(
            dict(zip(keys, key))
            | {"seeds": len(diff), "auc_difference": mean, "ci_low": low, "ci_high": high, "verdict": verdict}
        )
    schema = {k: pl.Utf8 for k in keys} | {
        "seeds": pl.Int64,
        "auc_difference": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "verdict": pl.Utf8,
    }
    return pl.DataFrame(rows, schema=schema)


def table_5(metrics: pl.DataFrame, training_sets: Iterable[str] | None = None) -> pl.DataFrame:
    """Table 5's layout: one row per training set, one test-AUC column per model."""
    if metrics.height == 0:
        return pl.DataFrame({"training_set": []})
    # Mean over training seeds when there are several (seed_summary gives their spread).
    wide = metrics.pivot(on="arm", index="training_set", values="test_auc", aggregate_function="mean")
    order = (
        list(training_sets)
        if training_sets is not None
        else list(dict.fromkeys(metrics.get_column("training_set").to_list()))
    )
    return (
        wide.join(pl.DataFrame({"training_set": order, "_order": range(len(order))}), on="training_set")
        .sort("_order")
        .drop("_order")
    )

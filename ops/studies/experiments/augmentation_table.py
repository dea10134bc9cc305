"""A/B Agent Table 5 with its §3.5 ablation: every downstream DeepCTR model trained on the
original train split and on it plus the home-page clicks or the detail-page views simulated
with and without vision, each over several training seeds.

The models are trained by `ops.studies.augmentation.refit_and_evaluate`; here the original
model of a (model, seed) is trained once and shared by the vision and no-vision refits, so
the rows differ only by the simulated data added."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from ops.arms.base import FitData
from ops.arms.registry import make_arm
from ops.figures import rows_markdown, table_markdown
from ops.readout.augmentation_summary import ORIGINAL, seed_summary, table_5
from ops.readout.readout_figures import augmentation_figure
from ops.studies.augmentation import AugmentationConfig, refit_and_evaluate
from ops.studies.experiments.papers import TABLE5, TABLE5_MODELS

WITH_VISION = "w/ vision"
WITHOUT_VISION = "w/o vision"
# The paper's row order: original, then without vision, then with vision.
ROWS = (
    ORIGINAL,
    f"+click ({WITHOUT_VISION})",
    f"+view ({WITHOUT_VISION})",
    f"+click ({WITH_VISION})",
    f"+view ({WITH_VISION})",
)


def augmentation_experiment(
    models: Sequence[str],
    events: Mapping[str, pl.DataFrame],
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    seeds: Sequence[int],
    config: AugmentationConfig | None = None,
    **arm_overrides: Any,
) -> pl.DataFrame:
    """Long table (AUGMENTATION_METRICS + `vision`), `training_set` named as Table 5's rows
    ("original", "+click (w/ vision)", …).  `events` maps WITH_VISION / WITHOUT_VISION to the
    events of the simulation under that condition."""
    unknown = [v for v in events if v not in (WITH_VISION, WITHOUT_VISION)]
    if unknown:
        raise ValueError(f"Table 5: conditions are {WITH_VISION!r} and {WITHOUT_VISION!r}, got {unknown}")
    not_ctr = [m for m in models if not make_arm(m).can_refit]
    if not_ctr:
        raise ValueError(
            f"Table 5 refits arms that train (the DeepCTR family, the plug-ins'); {not_ctr} have no model to refit"
        )
    parts = []
    for model in models:
        for seed in seeds:
            overrides = {**arm_overrides, "seed": int(seed)}
            original = make_arm(model, **overrides)
            original.fit(FitData(train, valid, users, catalogue))
            for i, (vision, frame) in enumerate(sorted(events.items(), key=lambda kv: kv[0] != WITHOUT_VISION)):
                part = refit_and_evaluate(
                    model,
                    train,
                    valid,
                    test,
                    users,
                    catalogue,
                    frame,
                    config=config,
                    original_model=original,
                    **overrides,
                )
                if i:  # the original row is the same model for both conditions: kept once
                    part = part.filter(pl.col("training_set") != ORIGINAL)
                parts.append(
                    part.with_columns(
                        vision=pl.lit(vision),
                        training_set=pl.when(pl.col("training_set") == ORIGINAL)
                        .then(pl.lit(ORIGINAL))
                        .otherwise(pl.format("{} ({})", pl.col("training_set"), pl.lit(vision))),
                    )
                )
    return pl.concat(parts, how="vertical_relaxed")


def table5_events(
    runs: Mapping[tuple[str, str], pl.DataFrame], simulated_arm: str, conditions: Mapping[str, str]
) -> dict[str, pl.DataFrame]:
    """WITH_VISION / WITHOUT_VISION -> the events simulated under `simulated_arm` in the
    condition (brain) `conditions` names for it, from `runs` ((arm, condition) -> events);
    a ValueError naming the partitions to simulate when one is missing."""
    missing = [c for c in conditions.values() if (simulated_arm, c) not in runs]
    if missing:
        raise ValueError(
            f"Table 5 needs experiment_simulation_events for {simulated_arm} under {missing}: run experiment_simulation "
            f"for partitions {[f'{simulated_arm}|{c}' for c in missing]} (python -m pipelines.experiments table5 does)"
        )
    return {label: runs[(simulated_arm, c)] for label, c in conditions.items()}


def table5(
    models: Sequence[str],
    events: Mapping[str, pl.DataFrame],
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    folder: Path,
    *,
    seed: int = 1024,
    seeds: int = 1,
    device: str = "auto",
    max_epochs: int = 0,
) -> tuple[pl.DataFrame, list[str], Path]:
    """Table 5 (`augmentation_experiment`) over training seeds `seed`, `seed` + 1, … (`seeds`
    of them; `max_epochs` 0: the arm's default): the long table, its Markdown beside the
    paper's (`augmentation_markdown`) and its figure, written under `folder`/plots."""
    overrides = {"device": device, **({"max_epochs": max_epochs} if max_epochs else {})}
    long = augmentation_experiment(
        models,
        events,
        train,
        valid,
        test,
        users,
        catalogue,
        seeds=[seed + i for i in range(seeds)],
        config=AugmentationConfig(progress=False),
        **overrides,
    )
    figure = augmentation_figure(long, folder / "plots" / "table5.png")
    return long, augmentation_markdown(long, TABLE5, TABLE5_MODELS), figure


def augmentation_markdown(
    long: pl.DataFrame, paper: Mapping[str, Sequence[float]], paper_models: Sequence[str]
) -> list[str]:
    """Ours (test AUC, mean over seeds) beside the paper's, the gains with their intervals
    over seeds, and the simulated rows each condition added."""
    ours = table_5(long, ROWS)
    models = [c for c in ours.columns if c != "training_set"]
    lines = [
        f"Test AUC, mean over {long.get_column('seed').n_unique()} training seed(s); the paper's value after the slash "
        "(blank: a model the paper did not refit).",
        "",
    ]
    index = {m: i for i, m in enumerate(paper_models)}
    rows = []
    for row in ours.iter_rows(named=True):
        theirs = paper.get(row["training_set"])
        cells = [row["training_set"]]
        for m in models:
            value = "n/a" if row[m] is None else f"{row[m]:.4f}"
            cells.append(value + (f" / {theirs[index[m]]:.4f}" if theirs is not None and m in index else ""))
        rows.append(cells)
    lines += [*rows_markdown(["training set", *models], rows), ""]
    summary = seed_summary(long)
    if summary.height:
        show = summary.select(
            "arm",
            "training_set",
            "seeds",
            pl.col("auc_difference").round(4),
            pl.col("ci_low").round(4),
            pl.col("ci_high").round(4),
            "verdict",
        )
        lines += [
            "AUC gain over the original, per model and training set (95 % t-interval over seeds; 'within seed noise' "
            "when it holds 0):",
            "",
            table_markdown(show),
            "",
        ]
    lines += added_rows_markdown(long)
    return lines


def added_rows_markdown(long: pl.DataFrame) -> list[str]:
    """What each augmented set adds: rows, the users and movies they touch, and their share
    of positives beside the real train rows' — the first thing to read an AUC change against
    (a set of all-positive clicks shifts the label balance the model learns)."""
    columns = ["added_rows", "added_users", "added_items", "added_positive_share", "train_positive_share"]
    augmented = long.filter(pl.col("training_set") != ORIGINAL)
    if augmented.height == 0:
        return []
    # The same rows for every model and seed (simulated_interactions is deterministic).
    added = (
        augmented.group_by("training_set")
        .agg(pl.col("brain").first(), *(pl.col(c).first() for c in columns), pl.col("overlap_test_pairs").first())
        .with_columns(pl.col("added_positive_share").round(3), pl.col("train_positive_share").round(3))
    )
    order = {name: i for i, name in enumerate(ROWS)}
    added = added.sort(pl.col("training_set").replace_strict(order, default=len(order)), "training_set")
    return [
        "Simulated rows added to train (pairs already in train dropped; the paper: 2,518 clicks, 1,884 views), "
        "the users and movies they touch, and their share of positives (rating >= 4; a click counts as a positive) "
        "beside the real train rows' share:",
        "",
        table_markdown(added),
        "",
    ]


def combine(paths: Sequence[str]) -> pl.DataFrame:
    """The long tables (`table.csv`) of several Table 5 runs — one per training seed, say,
    where a machine cannot run them all in one job — as one; a (model, seed, training set)
    present twice is an error, since its mean over seeds would count it twice."""
    parts = []
    for path in paths:
        if not Path(path).is_file():
            raise FileNotFoundError(f"Table 5: no table at {path} (a run's $SIMAB_HOME/experiments/table5/table.csv)")
        parts.append(pl.read_csv(path, infer_schema_length=None))
    long = pl.concat(parts, how="diagonal_relaxed")
    twice = long.filter(pl.struct("arm", "seed", "training_set").is_duplicated())
    if twice.height:
        row = twice.row(0, named=True)
        raise ValueError(
            f"Table 5: {row['arm']} seed {row['seed']} {row['training_set']!r} is in more than one of {list(paths)}"
        )
    return long


def main(argv: Sequence[str] | None = None) -> int:
    """python -m ops.studies.experiments.augmentation_table RUN1/table.csv RUN2/table.csv …:
    print Table 5 (means and intervals over every seed of the runs) from several runs."""
    paths = list(sys.argv[1:] if argv is None else argv)
    if not paths:
        raise SystemExit(main.__doc__)
    print("\n".join(augmentation_markdown(combine(paths), TABLE5, TABLE5_MODELS)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Each arm against the control: the difference of means, its bootstrap interval and a
p-value, Holm-corrected.

In the paired design (the same agents in every arm) agents are matched by user id: the
interval resamples agents (pairs) and the test is the paired t-test.  Why t and not
Wilcoxon: the read-out's estimand is the *mean* difference, which the t-test tests and the
interval covers, and with hundreds or thousands of agents the mean difference is close to
normal whatever the metric's shape; Wilcoxon's signed-rank test tests a shift of the
pseudo-median instead, and the discrete metrics here (exit page 1–4, satisfaction 1–10,
likes) give many zero differences that it has to drop or split.  `paired_test="wilcoxon"`
is there for small samples.  When agents were assigned to arms at random, arms are
independent samples: Welch's t-test (or Mann–Whitney) and independent bootstraps.

Holm's correction runs by default over the whole family of arm × metric comparisons, the
hypotheses a reader scans in one table; `holm_family="per_metric"` corrects over arms
within each metric instead.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ops.readout.agent_metrics import metric_matrix
from ops.readout.readout_config import ReadoutConfig
from ops.readout.statistics import (
    bootstrap_means,
    holm,
    named_rng,
    paired_p_value,
    percentile_interval,
    unpaired_p_value,
)


def compare_paired(arm: str, control: str, per_agent: pl.DataFrame, config: ReadoutConfig) -> pl.DataFrame:
    """`arm` against `control` on the agents both simulated, pair by pair."""
    metrics = list(config.metrics)
    treat = per_agent.filter(pl.col("arm") == arm).select("user_id", *metrics)
    base = per_agent.filter(pl.col("arm") == control).select("user_id", *metrics)
    joined = treat.join(base, on="user_id", how="inner", suffix="__control").sort("user_id")
    t = metric_matrix(joined, metrics)
    c = metric_matrix(joined, [f"{m}__control" for m in metrics])
    d = t - c  # NaN where either side is undefined: that agent is out of that metric's pairs
    boot = bootstrap_means(
        d, config.n_bootstrap, named_rng(config.seed, "paired", arm, control), config.bootstrap_chunk
    )
    ci = percentile_interval(boot, config.confidence)
    rows = []
    for j, metric in enumerate(metrics):
        ok = ~np.isnan(d[:, j])
        diff = float(d[ok, j].mean()) if ok.any() else np.nan
        p = paired_p_value(t[ok, j], c[ok, j], config.paired_test)
        rows.append((arm, control, metric, int(ok.sum()), diff, ci[0, j], ci[1, j], f"paired {config.paired_test}", p))
    return _comparison_frame(rows)


def compare_unpaired(
    arm: str, control: str, per_agent: pl.DataFrame, boots: dict, config: ReadoutConfig
) -> pl.DataFrame:
    """`arm` against `control` as independent samples; `boots`: each arm's bootstrap means."""
    metrics = list(config.metrics)
    t = metric_matrix(per_agent.filter(pl.col("arm") == arm).sort("user_id"), metrics)
    c = metric_matrix(per_agent.filter(pl.col("arm") == control).sort("user_id"), metrics)
    # Independent samples: the arms' own independent bootstraps, differenced.
    diff_boot = boots[arm] - boots[control]
    ci = percentile_interval(diff_boot, config.confidence)
    rows = []
    for j, metric in enumerate(metrics):
        x, y = t[~np.isnan(t[:, j]), j], c[~np.isnan(c[:, j]), j]
        diff = float(x.mean() - y.mean()) if x.size and y.size else np.nan
        p = unpaired_p_value(x, y, config.unpaired_test)
        rows.append((arm, control, metric, int(x.size + y.size), diff, ci[0, j], ci[1, j], config.unpaired_test, p))
    return _comparison_frame(rows)


def with_holm(comparisons: pl.DataFrame, config: ReadoutConfig) -> pl.DataFrame:
    """The comparisons with `p_holm` over the configured family, and `significant` at `alpha`."""
    p = comparisons.get_column("p_value").to_numpy().astype(float)
    adjusted = np.full(p.shape, np.nan)
    if config.holm_family == "all":
        adjusted = holm(p)
    else:
        metrics = comparisons.get_column("metric").to_numpy()
        for m in np.unique(metrics):
            rows = np.flatnonzero(metrics == m)
            adjusted[rows] = holm(p[rows])
    return comparisons.with_columns(
        pl.Series("p_holm", adjusted).fill_nan(None),
    ).with_columns((pl.col("p_holm") <= config.alpha).fill_null(False).alias("significant"))


COMPARISON_SCHEMA = {
    "arm": pl.Utf8,
    "control": pl.Utf8,
    "metric": pl.Utf8,
    "n": pl.Int64,
    "difference": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "test": pl.Utf8,
    "p_value": pl.Float64,
}


def _comparison_frame(rows: list[tuple]) -> pl.DataFrame:
    cols = list(zip(*rows))
    frame = pl.DataFrame({name: list(col) for name, col in zip(COMPARISON_SCHEMA, cols)}, schema=COMPARISON_SCHEMA)
    return frame.with_columns(pl.col(c).fill_nan(None) for c in ("difference", "ci_low", "ci_high", "p_value"))


def empty_comparisons() -> pl.DataFrame:
    """The comparisons of a read-out with no arm beside the control."""
    return pl.DataFrame(schema=COMPARISON_SCHEMA)

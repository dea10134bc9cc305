"""Each arm summarised over its agents: per metric the mean over agents (agents where the
metric is undefined are left out of it) with a percentile-bootstrap interval over agents, and
beside it the pooled ratio (sum of numerators ÷ sum of denominators) with its own bootstrap
interval, both from the same resamples."""

from __future__ import annotations

import numpy as np
import polars as pl

from ops.readout.agent_metrics import RATIO_PARTS, metric_matrix
from ops.readout.readout_config import ReadoutConfig
from ops.readout.statistics import bootstrap_means, named_rng, percentile_interval


def summarise_arm(arm: str, frame: pl.DataFrame, config: ReadoutConfig) -> tuple[pl.DataFrame, np.ndarray]:
    """One row per metric of the arm (mean and pooled ratio, each with its interval) and the
    bootstrap replicates of the means (the unpaired comparison differences them)."""
    metrics = list(config.metrics)
    ratios = [m for m in metrics if m in RATIO_PARTS]
    values = metric_matrix(frame, metrics)
    num = metric_matrix(frame, [RATIO_PARTS[m][0] for m in ratios])
    den = metric_matrix(frame, [RATIO_PARTS[m][1] for m in ratios])
    rng = named_rng(config.seed, "arm", arm)
    # Metric means and pooled parts share each resample of agents; the ratio of the mean
    # numerator to the mean denominator is the pooled ratio (the n cancels).
    both = np.concatenate([values, num, den], axis=1)
    boot_parts = bootstrap_means(both, config.n_bootstrap, rng, config.bootstrap_chunk)
    k, r = len(metrics), len(ratios)
    boot = boot_parts[:, :k]
    boot_pooled = boot_parts[:, k : k + r] / np.where(boot_parts[:, k + r :] > 0, boot_parts[:, k + r :], np.nan)
    with np.errstate(invalid="ignore"):
        mean = np.array([np.nanmean(values[:, j]) if np.isfinite(values[:, j]).any() else np.nan for j in range(k)])
    ci = percentile_interval(boot, config.confidence)
    pooled = np.full(k, np.nan)
    pooled_ci = np.full((2, k), np.nan)
    for i, m in enumerate(ratios):
        j = metrics.index(m)
        total_den = den[:, i].sum()
        pooled[j] = num[:, i].sum() / total_den if total_den > 0 else np.nan
        pooled_ci[:, j] = percentile_interval(boot_pooled[:, i], config.confidence)
    n_agents = np.isfinite(values).sum(axis=0)
    summary = pl.DataFrame(
        {
            "arm": [arm] * k,
            "metric": metrics,
            "n_agents": n_agents.astype(np.int64),
            "mean": mean,
            "ci_low": ci[0],
            "ci_high": ci[1],
            "pooled": pooled,
            "pooled_ci_low": pooled_ci[0],
            "pooled_ci_high": pooled_ci[1],
        }
    ).with_columns(
        pl.col(c).fill_nan(None) for c in ("mean", "ci_low", "ci_high", "pooled", "pooled_ci_low", "pooled_ci_high")
    )
    return summary, boot

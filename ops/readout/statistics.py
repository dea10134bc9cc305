"""The statistics of the read-outs: bootstrap intervals, tests, Holm's correction, seeded
random streams.  One module so that the A/B read-out (`ops.readout.ab_readout`), the
fidelity check (`ops.readout.fidelity`) and the augmentation summary over training seeds
(`ops.studies.augmentation`) compute an interval or a p-value the same way.

- Percentile bootstrap over units (agents, test users): `bootstrap_means` draws every
  replicate as multiplicity counts, so all the columns of a matrix see the same resampled
  units; `percentile_interval` reads the interval off the replicates; `difference_interval`
  does both for a paired or an unpaired difference of means.
- Tests of a difference of means: `paired_p_value` (paired t or Wilcoxon signed-rank) and
  `unpaired_p_value` (Welch's t or Mann–Whitney U), with the degenerate cases decided.
- `holm`: Holm's step-down correction for a family of tests.
- `t_interval`: Student's t-interval of a mean over a handful of values (training seeds).
- `interval_sign`: whether an interval lies above 0, below it, or holds it.
- `mean_intervals`: each metric's mean over agents with its bootstrap interval, per group.
- `named_rng`: a random stream named by a seed and a path of names, so each arm, pair or
  arm × metric draws its own numbers whatever else was drawn before it.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import polars as pl
from scipy import stats


def bootstrap_means(values: np.ndarray, n_bootstrap: int, rng: np.random.Generator, chunk: int = 250) -> np.ndarray:
    """Bootstrap replicates of the column means of `values` (agents × metrics), ignoring NaN
    per column: each replicate resamples agents with replacement, drawn as multiplicity
    counts so that every metric (and every ratio's parts) sees the same resampled agents.
    Returns (n_bootstrap, metrics)."""
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    n = values.shape[0]
    finite = ~np.isnan(values)
    filled = np.where(finite, values, 0.0)
    weights_of = finite.astype(float)
    out = np.empty((n_bootstrap, values.shape[1]))
    for start in range(0, n_bootstrap, chunk):
        b = min(chunk, n_bootstrap - start)
        counts = multiplicities(n, b, rng)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + b] = (counts @ filled) / (counts @ weights_of)
    return out


def multiplicities(n: int, b: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of n units is drawn in each of b resamples of size n: (b, n) counts."""
    idx = rng.integers(0, n, size=(b, n))
    idx += np.arange(b)[:, None] * n
    return np.bincount(idx.ravel(), minlength=b * n).reshape(b, n).astype(float)


def percentile_interval(replicates: np.ndarray, confidence: float = 0.95) -> np.ndarray:
    """The percentile interval of bootstrap `replicates`, per column: (2,) for a vector of
    replicates, (2, columns) for a matrix; replicates that are not finite are left out and a
    column with none finite gets NaN."""
    replicates = np.asarray(replicates, dtype=float)
    lo_q, hi_q = (1 - confidence) / 2, 1 - (1 - confidence) / 2
    columns = replicates[:, None] if replicates.ndim == 1 else replicates
    out = np.full((2, columns.shape[1]), np.nan)
    for j in range(columns.shape[1]):
        col = columns[:, j]
        col = col[np.isfinite(col)]
        if col.size:
            out[:, j] = np.quantile(col, [lo_q, hi_q])
    return out[:, 0] if replicates.ndim == 1 else out


def difference_interval(
    a: np.ndarray, b: np.ndarray | None, n_bootstrap: int, rng: np.random.Generator, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Difference of means with its percentile-bootstrap interval: (difference, low, high).

    `b=None`: `a` holds paired differences and the pairs are resampled; otherwise mean(a) −
    mean(b) with `a` and `b` resampled independently (in that order from `rng`).  NaN
    values are ignored."""
    if b is None:
        boot = bootstrap_means(a, n_bootstrap, rng)[:, 0]
        mean = float(np.nanmean(a))
    else:
        boot = bootstrap_means(a, n_bootstrap, rng)[:, 0] - bootstrap_means(b, n_bootstrap, rng)[:, 0]
        mean = float(np.nanmean(a) - np.nanmean(b))
    lo, hi = percentile_interval(boot, confidence)
    return mean, float(lo), float(hi)


def paired_p_value(x: np.ndarray, y: np.ndarray, test: str = "t") -> float:
    """Two-sided p-value that paired samples `x` and `y` have the same mean difference of 0:
    `test="t"` the paired t-test, `"wilcoxon"` the signed-rank test (zeros split).  NaN
    for fewer than two pairs; without spread in the differences the tests are undefined,
    so a constant zero difference gives 1 and a constant non-zero one gives 0."""
    d = x - y
    if d.size < 2:
        return np.nan
    if np.all(d == d[0]):
        # No spread: the tests are undefined; a constant zero difference is no evidence,
        # a constant non-zero one is as strong as it gets.
        return 1.0 if d[0] == 0 else 0.0
    if test == "t":
        return float(stats.ttest_rel(x, y).pvalue)
    if np.all(d == 0):
        return 1.0
    return float(stats.wilcoxon(x, y, zero_method="zsplit").pvalue)


def unpaired_p_value(x: np.ndarray, y: np.ndarray, test: str = "welch") -> float:
    """Two-sided p-value that independent samples `x` and `y` come from the same mean
    (`test="welch"`, Welch's t-test) or distribution (`"mann_whitney"`).  NaN when a sample
    has fewer than two values; 1 when all values are equal; 0 for two different constants."""
    if x.size < 2 or y.size < 2:
        return np.nan
    if np.ptp(np.concatenate([x, y])) == 0:
        return 1.0
    if test == "welch":
        if np.ptp(x) == 0 and np.ptp(y) == 0:
            return 0.0  # both constant, different values
        return float(stats.ttest_ind(x, y, equal_var=False).pvalue)
    return float(stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN entries stay NaN and do not count in m)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(~np.isnan(p))
    m = finite.size
    if m == 0:
        return out
    order = finite[np.argsort(p[finite], kind="stable")]
    adjusted = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(adjusted)
    return out


def t_interval(values: np.ndarray, confidence: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """Mean of `values` and its Student's t-interval, (mean, low, high): mean ± t(n − 1)
    quantile × sample standard deviation ÷ √n.  Low and high are None for a single value,
    all three for none."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    mean = float(values.mean()) if n else None
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * values.std(ddof=1) / np.sqrt(n)) if n > 1 else None
    if half is None:
        return mean, None, None
    return mean, mean - half, mean + half


def interval_sign(low: float, high: float) -> int:
    """1 when the interval lies above 0, −1 when below it, 0 when it holds 0."""
    return 1 if low > 0 else -1 if high < 0 else 0


def named_rng(seed: int, *names: str | int) -> np.random.Generator:
    """A random stream for `seed` and a path of names (strings by their CRC-32, integers as
    they are): the same names give the same numbers, whatever other streams drew before."""
    keys = [n if isinstance(n, int) else zlib.crc32(n.encode("utf-8")) for n in names]
    return np.random.default_rng(np.random.SeedSequence([seed, *keys]))


def mean_intervals(
    per_agent: pl.DataFrame,
    group: str,
    metrics: Sequence[str],
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    stream: str = "means",
) -> pl.DataFrame:
    """group, metric, agents, mean, ci_low, ci_high: each metric's mean over agents (those
    where it is defined) with a percentile-bootstrap interval over agents, per group."""
    rows = []
    for g in per_agent.get_column(group).unique(maintain_order=True).to_list():
        frame = per_agent.filter(pl.col(group) == g)
        values = frame.select([pl.col(m).cast(pl.Float64) for m in metrics]).to_numpy()
        boot = bootstrap_means(values, n_bootstrap, named_rng(seed, stream, str(g)))
        ci = percentile_interval(boot, confidence)
        for j, metric in enumerate(metrics):
            col = values[:, j]
            n = int(np.isfinite(col).sum())
            rows.append(
                {
                    group: g,
                    "metric": metric,
                    "agents": n,
                    "mean": float(np.nanmean(col)) if n else None,
                    "ci_low": float(ci[0, j]) if n else None,
                    "ci_high": float(ci[1, j]) if n else None,
                }
            )
    return pl.DataFrame(
        rows,
        schema={
            group: per_agent.schema[group],
            "metric": pl.Utf8,
            "agents": pl.Int64,
            "mean": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
        },
    )

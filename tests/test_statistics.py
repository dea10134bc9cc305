"""ops.readout.statistics against hand-worked numbers: Holm's correction, the percentile
bootstrap, paired against unpaired tests, the t-interval over seeds, the named streams."""

import zlib

import numpy as np
import pytest
from scipy import stats

from ops.readout.statistics import (
    bootstrap_means,
    difference_interval,
    holm,
    interval_sign,
    multiplicities,
    named_rng,
    paired_p_value,
    percentile_interval,
    t_interval,
    unpaired_p_value,
)

# -- Holm ------------------------------------------------------------------------------------


def test_holm_by_hand_with_the_step_down_maximum():
    # Sorted: 0.001 ×5 = 0.005, 0.02 ×4 = 0.08, 0.03 ×3 = 0.09, 0.04 ×2 = 0.08 → raised to
    # 0.09 (an adjusted p never falls below the one before it), 0.5 ×1 = 0.5.
    p = [0.02, 0.001, 0.04, 0.03, 0.5]
    assert np.allclose(holm(p), [0.08, 0.005, 0.09, 0.09, 0.5])
    # At α = 0.05 only the smallest survives, where unadjusted four would.
    assert (holm(p) <= 0.05).sum() == 1 and (np.array(p) <= 0.05).sum() == 4


def test_holm_caps_at_one_and_leaves_nan_out_of_the_family():
    assert np.allclose(holm([0.6, 0.9]), [1.0, 1.0])  # 0.6 × 2 = 1.2 → 1
    # m = 3, not 4: the NaN is no hypothesis.  0.1 ×3 = 0.3, 0.4 ×2 = 0.8, 0.7 ×1 → 0.8.
    out = holm([0.4, np.nan, 0.7, 0.1])
    assert np.isnan(out[1])
    assert np.allclose(out[[0, 2, 3]], [0.8, 0.8, 0.3])
    assert np.isnan(holm([np.nan, np.nan])).all()


# -- bootstrap -------------------------------------------------------------------------------


def test_bootstrap_interval_covers_the_mean_with_the_width_of_the_standard_error():
    # N(10, 2²), n = 400: the standard error is 2 / √400 = 0.1, so a 95 % interval is about
    # 2 × 1.96 × 0.1 ≈ 0.39 wide, a 50 % one 2 × 0.674 × 0.1 ≈ 0.13, and four times the
    # sample halves the width.
    x = np.random.default_rng(11).normal(10.0, 2.0, 400)
    boot = bootstrap_means(x, 2000, np.random.default_rng(1))
    assert boot.shape == (2000, 1)
    low, high = percentile_interval(boot[:, 0], 0.95)
    assert low < 10.0 < high and low < x.mean() < high
    assert 0.33 < high - low < 0.45
    half_low, half_high = percentile_interval(boot[:, 0], 0.5)
    assert low < half_low < half_high < high
    assert 0.1 < half_high - half_low < 0.16
    x4 = np.random.default_rng(12).normal(10.0, 2.0, 1600)
    low4, high4 = percentile_interval(bootstrap_means(x4, 2000, np.random.default_rng(1))[:, 0], 0.95)
    assert low4 < 10.0 < high4
    assert 0.4 < (high4 - low4) / (high - low) < 0.6


def test_bootstrap_columns_share_the_resampled_units_and_ignore_nan():
    x = np.random.default_rng(3).normal(0.0, 1.0, 50)
    with_nan = x.copy()
    with_nan[::5] = np.nan
    boot = bootstrap_means(np.column_stack([x, 2 * x, with_nan]), 300, np.random.default_rng(4), chunk=70)
    # The same agents in every column: the doubled column's mean is exactly twice the first.
    assert np.allclose(boot[:, 1], 2 * boot[:, 0])
    # NaN agents drop out of their column's mean only; the replicates stay finite.
    assert np.isfinite(boot[:, 2]).all() and not np.allclose(boot[:, 2], boot[:, 0])
    # Chunking is how replicates are computed, not what they are: the same resamples, so the same
    # replicates up to rounding. Not bit-identical: `counts @ filled` of another shape lets BLAS sum
    # in another order (one CPU in CI differed in the last bits), and no caller compares chunkings.
    again = bootstrap_means(np.column_stack([x, 2 * x, with_nan]), 300, np.random.default_rng(4), chunk=300)
    np.testing.assert_allclose(boot, again, rtol=1e-12, atol=0)


def test_multiplicities_are_resamples_of_size_n():
    counts = multiplicities(7, 5, np.random.default_rng(0))
    assert counts.shape == (5, 7)
    assert (counts.sum(axis=1) == 7).all() and (counts >= 0).all()


def test_percentile_interval_leaves_out_what_is_not_finite():
    boot = np.column_stack([np.arange(101.0), np.full(101, np.nan)])
    boot[0, 0] = np.inf  # left out: 1..100 remain
    out = percentile_interval(boot, 0.9)
    assert out.shape == (2, 2)
    assert np.allclose(out[:, 0], np.quantile(np.arange(1.0, 101.0), [0.05, 0.95]))
    assert np.isnan(out[:, 1]).all()


# -- paired against unpaired -------------------------------------------------------------------


def paired_world():
    """Twenty units whose level varies a lot (0..19); the treatment adds 0.5 ± 0.1 to each."""
    control = np.arange(20.0)
    treated = control + 0.5 + 0.1 * (-1.0) ** np.arange(20)
    return treated, control


def test_paired_test_sees_what_the_unpaired_test_cannot():
    treated, control = paired_world()
    # Paired: d = 0.5 ± 0.1, s_d = √(20 × 0.01 / 19) = 0.1026, t = 0.5 / (0.1026 / √20) = 21.8.
    s_d = np.sqrt(20 * 0.01 / 19)
    t = 0.5 / (s_d / np.sqrt(20))
    assert t == pytest.approx(21.79, abs=0.01)
    paired = paired_p_value(treated, control, "t")
    assert paired == pytest.approx(2 * stats.t.sf(t, 19), rel=1e-9)
    assert paired < 1e-13
    # Unpaired: the same 0.5 against a spread of sd ≈ 5.9 per arm, t ≈ 0.27.
    welch = unpaired_p_value(treated, control, "welch")
    assert welch > 0.7
    assert unpaired_p_value(treated, control, "mann_whitney") > 0.5
    assert paired_p_value(treated, control, "wilcoxon") < 1e-3  # all 20 differences positive


def test_paired_and_unpaired_bootstrap_intervals_of_the_difference():
    treated, control = paired_world()
    d, low, high = difference_interval(treated - control, None, 2000, np.random.default_rng(0))
    assert d == pytest.approx(0.5) and 0.44 < low < 0.5 < high < 0.56
    d, low, high = difference_interval(treated, control, 2000, np.random.default_rng(0))
    assert d == pytest.approx(0.5) and low < 0 < high and high - low > 5


def test_tests_without_spread_or_without_data():
    x = np.array([1.0, 2.0, 3.0])
    assert paired_p_value(x, x, "t") == 1.0 and paired_p_value(x, x, "wilcoxon") == 1.0
    assert paired_p_value(x + 1, x, "t") == 0.0  # a constant non-zero difference
    assert np.isnan(paired_p_value(x[:1], x[:1], "t"))
    assert unpaired_p_value(np.ones(3), np.ones(4), "welch") == 1.0
    assert unpaired_p_value(np.ones(3), np.zeros(4), "welch") == 0.0
    assert np.isnan(unpaired_p_value(np.ones(1), np.zeros(4), "welch"))


# -- t-interval over seeds, interval signs ------------------------------------------------------


def test_t_interval_of_three_seeds_against_scipy():
    # mean 0.005; s = √((0.003² + 0.001² + 0.004²) / 2) = √13e-6 = 0.0036056;
    # t(0.975, 2) = 4.3027; half-width 4.3027 × 0.0036056 / √3 = 0.0089566.
    values = np.array([0.002, 0.004, 0.009])
    mean, low, high = t_interval(values, 0.95)
    assert mean == pytest.approx(0.005)
    assert high - mean == pytest.approx(0.0089566, abs=1e-7)
    expected = stats.t.interval(0.95, df=2, loc=values.mean(), scale=stats.sem(values))
    assert (low, high) == pytest.approx(expected, rel=1e-12)
    assert interval_sign(low, high) == 0  # three seeds cannot tell this gain from noise
    low90, high90 = t_interval(values, 0.9)[1:]
    assert (low90, high90) == pytest.approx(
        stats.t.interval(0.9, df=2, loc=values.mean(), scale=stats.sem(values)), rel=1e-12
    )
    assert t_interval(np.array([0.003]), 0.95) == (pytest.approx(0.003), None, None)


def test_interval_sign():
    assert interval_sign(0.1, 0.2) == 1
    assert interval_sign(-0.2, -0.1) == -1
    assert interval_sign(-0.1, 0.1) == 0
    assert interval_sign(0.0, 0.1) == 0  # touching 0 is holding it


# -- named streams ------------------------------------------------------------------------------


def test_named_streams_are_reproducible_and_independent_of_order():
    a = named_rng(3, "arm", "deepfm").random(4)
    named_rng(3, "arm", "fm").random(100)  # drawing elsewhere changes nothing here
    assert np.array_equal(a, named_rng(3, "arm", "deepfm").random(4))
    assert not np.array_equal(a, named_rng(3, "arm", "fm").random(4))
    assert not np.array_equal(a, named_rng(4, "arm", "deepfm").random(4))
    # Names are their CRC-32, integers are themselves: the streams earlier runs drew from.
    crc = np.random.default_rng(np.random.SeedSequence([3, zlib.crc32(b"arm"), zlib.crc32(b"deepfm")])).random(4)
    assert np.array_equal(a, crc)
    assert np.array_equal(
        named_rng(0, 7002, 1).random(4), np.random.default_rng(np.random.SeedSequence([0, 7002, 1])).random(4)
    )

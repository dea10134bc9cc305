"""The rating rule "crowd": the conformity trait moves the rating gap.

A real user's rating gap to the crowd (the squared gap between its rating and the movie's
train mean) falls with its conformity tier (Agent4Rec Fig. 4; ML-1M users 1–1999, test
window: ρ −0.39).  The rating model's mean μ already holds the crowd's rating as a feature;
"crowd" moves μ along the line from the crowd's rating towards or past it, by the agent's
conformity c (−1 most independent … +1 most conforming):

    μ' = crowd + (1 − weight · c) · (μ − crowd)

so an independent agent strays up to (1 + weight) times as far from the crowd as the model
predicts and a conformist (1 − weight) times as far; then cuts μ' into stars at points
`spread` of the way from rounding (1.5, 2.5, 3.5, 4.5) to the "matched" cut points (the
validation window's star shares).  Both are deterministic: no draw adds error.

Why small steps pay: μ is the least-squares prediction, so a small weight or spread costs
RMSE to second order while it moves the gap's ρ and the star distribution to first order.
`choose_crowd_rule` picks both in the fit, on the validation window's ratings of the fit's
users (the test window is never read, and the alignment protocols' leakage guard,
`ops.studies.alignment.windows.check_held_out`, already covers every rating the fit read):
among the pairs whose RMSE stays within `rmse_budget` of rounding μ, the one with the
smallest Wasserstein distance to the real stars plus distance between the simulated and the
real ρ(conformity tier, rating gap).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TIER_RANK = {"low": 0, "medium": 1, "high": 2}
WEIGHTS = tuple(np.round(np.arange(0.0, 1.0001, 0.1), 2).tolist())
SPREADS = tuple(np.round(np.arange(0.0, 1.0001, 0.1), 2).tolist())


def rounding_cuts(rating_range: tuple[int, int]) -> np.ndarray:
    lo, hi = rating_range
    return np.arange(lo, hi, dtype=np.float64) + 0.5


def crowd_cuts(matched: Sequence[float] | None, spread: float, rating_range: tuple[int, int]) -> np.ndarray:
    """The cut points `spread` of the way from rounding to the matched ones (rounding when
    the fit stored none)."""
    base = rounding_cuts(rating_range)
    if matched is None or spread == 0:
        return base
    return (1.0 - spread) * base + spread * np.asarray(matched, dtype=np.float64)


def crowd_stars(
    mean: np.ndarray,
    crowd: np.ndarray,
    conformity: np.ndarray,
    weight: float,
    cuts: np.ndarray,
    rating_range: tuple[int, int],
) -> np.ndarray:
    """Stars of the rule "crowd" (module docstring) for arrays of predicted means, crowd
    ratings and conformity values."""
    moved = np.asarray(crowd) + (1.0 - weight * np.asarray(conformity)) * (np.asarray(mean) - np.asarray(crowd))
    return rating_range[0] + np.searchsorted(cuts, moved, side="right")


def gap_rho(users: np.ndarray, tier: np.ndarray, stars: np.ndarray, movie_mean: np.ndarray) -> float | None:
    """Spearman's ρ between the users' conformity tier (0 low … 2 high) and their mean
    squared gap between `stars` and the movies' train mean (the social-traits measure)."""
    from scipy.stats import spearmanr

    gap = (stars - movie_mean) ** 2
    uniq, inv = np.unique(users, return_inverse=True)
    per_user = np.bincount(inv, weights=gap) / np.bincount(inv)
    tier_of = np.zeros(len(uniq))
    tier_of[inv] = tier
    if len(uniq) < 3 or np.ptp(tier_of) == 0 or np.ptp(per_user) == 0:
        return None
    return float(spearmanr(tier_of, per_user).statistic)


def star_wasserstein(stars: np.ndarray, real: np.ndarray, rating_range: tuple[int, int]) -> float:
    """Wasserstein-1 distance between two star distributions on the integers of the range."""
    lo, hi = rating_range
    edges = np.arange(lo, hi + 1)
    cdf = lambda x: np.array([(x <= s).mean() for s in edges[:-1]])  # noqa: E731
    return float(np.abs(cdf(np.asarray(stars)) - cdf(np.asarray(real))).sum())


def choose_crowd_rule(
    mean: np.ndarray,
    crowd: np.ndarray,
    conformity: np.ndarray,
    real: np.ndarray,
    users: np.ndarray,
    tiers: Sequence[str | None],
    movie_mean: np.ndarray,
    matched_cuts: Sequence[float] | None,
    rating_range: tuple[int, int] = (1, 5),
    rmse_budget: float = 0.01,
    weights: Sequence[float] = WEIGHTS,
    spreads: Sequence[float] = SPREADS,
) -> tuple[float, float, list[dict]]:
    """(weight, spread, grid): the rule "crowd"'s weight and spread chosen on held-out
    validation pairs (one row per pair: the rating model's mean, the crowd's rating, the
    agent's conformity −1 … +1, the real rating, the user, its conformity tier, the movie's
    train mean), and every pair tried with its RMSE, Wasserstein distance and ρ beside the
    real ρ.  Pairs whose movie has no train mean or whose user has no tier count for the
    RMSE and the distribution, not for ρ."""
    mean, crowd, conformity = (np.asarray(a, dtype=np.float64) for a in (mean, crowd, conformity))
    real, users, movie_mean = np.asarray(real, dtype=np.float64), np.asarray(users), np.asarray(movie_mean, float)
    if not (len(mean) == len(crowd) == len(conformity) == len(real) == len(users) == len(tiers) == len(movie_mean)):
        raise ValueError("choose_crowd_rule: the per-pair arrays differ in length")
    if len(mean) == 0:
        return 0.0, 0.0, []
    tier = np.array([TIER_RANK.get(t, -1) if t is not None else -1 for t in tiers])
    ranked = (tier >= 0) & np.isfinite(movie_mean)
    real_rho = gap_rho(users[ranked], tier[ranked], real[ranked], movie_mean[ranked])
    base = np.sqrt(np.mean((np.clip(np.round(mean), *rating_range) - real) ** 2))
    grid = []
    for spread in spreads if matched_cuts is not None else (0.0,):
        cuts = crowd_cuts(matched_cuts, spread, rating_range)
        for weight in weights:
            stars = crowd_stars(mean, crowd, conformity, weight, cuts, rating_range)
            rho = gap_rho(users[ranked], tier[ranked], stars[ranked], movie_mean[ranked])
            rmse = float(np.sqrt(np.mean((stars - real) ** 2)))
            w = star_wasserstein(stars, real, rating_range)
            rho_miss = abs(rho - real_rho) if rho is not None and real_rho is not None else 0.0
            grid.append(
                {
                    "weight": float(weight),
                    "spread": float(spread),
                    "rmse": rmse,
                    "wasserstein": w,
                    "rho": rho,
                    "rho_real": real_rho,
                    "within_budget": bool(rmse <= base * (1.0 + rmse_budget) + 1e-12),
                    "score": w + rho_miss,
                }
            )
    allowed = [g for g in grid if g["within_budget"]] or [min(grid, key=lambda g: g["rmse"])]
    best = min(allowed, key=lambda g: (g["score"], g["weight"], g["spread"]))
    return best["weight"], best["spread"], grid

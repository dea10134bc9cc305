"""How far to trust the simulation: do simulated and offline metrics rank the arms alike?

A/B Agent §3.1 judges fidelity by comparing the simulated outcome (CTR, CVR, AR) with
offline metrics on the held-out test set (Recall@20, NDCG@20): the closer the orderings of
the arms, the higher the fidelity.  We report Kendall's τ-b for every (simulated, offline)
pair, with its exact p-value when there are few arms, and whether the best arm agrees.
Because τ over a handful of arms hides how noisy both sides are, `pairwise_agreement` also
compares the arms two by two with bootstrap intervals on the offline and the simulated
difference, and `offline_intervals` puts error bars on each arm's offline metric.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.stats import kendalltau

from ops.arms.metrics import per_user_metrics, relevant_items
from ops.readout.statistics import bootstrap_means, difference_interval, interval_sign, named_rng, percentile_interval

SIMULATED = ("ctr", "cvr", "average_rating")
OFFLINE = ("ndcg_at_k", "recall_at_k", "test_auc")

FIDELITY = {
    "simulated": pl.Utf8,
    "offline": pl.Utf8,
    "arms": pl.Int64,
    "kendall_tau": pl.Float64,
    "p_value": pl.Float64,
    "same_best_arm": pl.Boolean,
}


def fidelity(simulated: pl.DataFrame, offline: pl.DataFrame, per_user: pl.DataFrame | None = None) -> pl.DataFrame:
    """`simulated`: arm, metric, mean (the read-out's per-arm table); `offline`: one row per
    arm with the OfflineMetrics columns; `per_user` (`offline_per_user`): when given, the
    ranking metrics are taken over those users, the ones the arm pairs use
    (`offline_for_fidelity` says why).  Returns one FIDELITY row per metric pair."""
    if per_user is not None:
        offline = offline_for_fidelity(offline, per_user)
    wide = simulated.filter(pl.col("metric").is_in(SIMULATED)).pivot(on="metric", index="arm", values="mean")
    joined = wide.join(offline, on="arm", how="inner").sort("arm")
    rows = []
    for sim in SIMULATED:
        for off in OFFLINE:
            if sim not in joined.columns or off not in joined.columns:
                continue
            pair = joined.select("arm", sim, off).drop_nulls()
            if pair.height < 2:
                rows.append(
                    {
                        "simulated": sim,
                        "offline": off,
                        "arms": pair.height,
                        "kendall_tau": None,
                        "p_value": None,
                        "same_best_arm": None,
                    }
                )
                continue
            result = kendalltau(pair.get_column(sim).to_numpy(), pair.get_column(off).to_numpy())
            best_sim = pair.sort(sim, descending=True).get_column("arm")[0]
            best_off = pair.sort(off, descending=True).get_column("arm")[0]
            tau = float(result.statistic) if result.statistic == result.statistic else None
            p = float(result.pvalue) if result.pvalue == result.pvalue else None
            rows.append(
                {
                    "simulated": sim,
                    "offline": off,
                    "arms": pair.height,
                    "kendall_tau": tau,
                    "p_value": p,
                    "same_best_arm": best_sim == best_off,
                }
            )
    return pl.DataFrame(rows, schema=FIDELITY)


PAIRWISE = {
    "arm_a": pl.Utf8,
    "arm_b": pl.Utf8,
    "offline": pl.Utf8,
    "offline_users": pl.Int64,
    "offline_difference": pl.Float64,
    "offline_ci_low": pl.Float64,
    "offline_ci_high": pl.Float64,
    "simulated": pl.Utf8,
    "simulated_agents": pl.Int64,
    "simulated_difference": pl.Float64,
    "simulated_ci_low": pl.Float64,
    "simulated_ci_high": pl.Float64,
    "verdict": pl.Utf8,
}


def pairwise_agreement(
    simulated_per_agent: pl.DataFrame,
    offline_per_user: pl.DataFrame,
    simulated: str = "ctr",
    offline: str = "ndcg_at_k",
    paired: bool = True,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pl.DataFrame:
    """Arm against arm: does the simulation order each pair as the offline metric does, and
    can either of them tell the two arms apart at all?

    Kendall τ over four arms hides that the offline metric itself is noisy: on ML-1M's
    chronological test window only a few hundred users have test items, so two good arms'
    NDCG@20 often differ by less than its own interval.  For each pair (arm_a the better
    offline), the offline difference gets a paired bootstrap interval over the test users
    (every arm ranks the same users) and the simulated difference one over the agents
    (paired when the same agents saw both arms, else each arm resampled on its own).
    verdict (`PAIR_VERDICTS`): "agree" / "disagree" when both intervals exclude 0; "missed"
    when the offline interval excludes 0 and the simulated one holds it (the offline metric
    separates the arms, the simulation does not); "offline tie" when the offline interval
    holds 0 (no ground truth to agree with); "too few users" when a side has under two.
    `simulated_per_agent`: arm, user_id, <simulated> (ABReadout.per_agent);
    `offline_per_user`: arm, user_id, <offline> (ops.arms.metrics.per_user_metrics per arm).
    """
    arms = sorted(
        set(simulated_per_agent.get_column("arm").to_list()) & set(offline_per_user.get_column("arm").to_list())
    )
    off_mean = {a: offline_per_user.filter(pl.col("arm") == a).get_column(offline).mean() for a in arms}
    arms.sort(key=lambda a: (-(off_mean[a] or 0.0), a))
    rng = named_rng(seed, 7001)

    def side(frame: pl.DataFrame, metric: str, a: str, b: str, pair: bool):
        fa = frame.filter(pl.col("arm") == a).select("user_id", pl.col(metric).alias("a")).drop_nulls()
        fb = frame.filter(pl.col("arm") == b).select("user_id", pl.col(metric).alias("b")).drop_nulls()
        if pair:
            both = fa.join(fb, on="user_id", how="inner")
            if both.height < 2:
                return both.height, None, None, None
            differences = both.get_column("a").to_numpy() - both.get_column("b").to_numpy()
            return (both.height, *difference_interval(differences, None, n_bootstrap, rng, confidence))
        if fa.height < 2 or fb.height < 2:
            return min(fa.height, fb.height), None, None, None
        a_vals, b_vals = fa.get_column("a").to_numpy(), fb.get_column("b").to_numpy()
        return (fa.height + fb.height, *difference_interval(a_vals, b_vals, n_bootstrap, rng, confidence))

    rows = []
    for i, a in enumerate(arms):
        for b in arms[i + 1 :]:
            n_off, d_off, lo_off, hi_off = side(offline_per_user, offline, a, b, True)
            n_sim, d_sim, lo_sim, hi_sim = side(simulated_per_agent, simulated, a, b, paired)
            rows.append(
                {
                    "arm_a": a,
                    "arm_b": b,
                    "offline": offline,
                    "offline_users": n_off,
                    "offline_difference": d_off,
                    "offline_ci_low": lo_off,
                    "offline_ci_high": hi_off,
                    "simulated": simulated,
                    "simulated_agents": n_sim,
                    "simulated_difference": d_sim,
                    "simulated_ci_low": lo_sim,
                    "simulated_ci_high": hi_sim,
                    "verdict": _verdict(lo_off, hi_off, lo_sim, hi_sim),
                }
            )
    return pl.DataFrame(rows, schema=PAIRWISE)


# The verdicts of a pair of arms; the first three are the pairs the offline metric separates.
AGREE, DISAGREE, MISSED, OFFLINE_TIE, TOO_FEW = "agree", "disagree", "missed", "offline tie", "too few users"
PAIR_VERDICTS = (AGREE, DISAGREE, MISSED, OFFLINE_TIE)


def agreement_summary(pairs: pl.DataFrame) -> dict[str, float | int | None]:
    """Counts of each verdict (`PAIR_VERDICTS`) and, over the pairs the offline metric
    separates (`separated` = agree + disagree + missed):
    - `agreement`: the share of the decided ones (agree + disagree) ordered alike;
    - `recovered`: the share the simulation separates in the offline direction (agree ÷
      separated) — a simulator that ties everything scores 0 here, not "0 of 0";
    - `pair_tau`: (agree − disagree) ÷ separated, Kendall's concordance over those pairs
      with a missed pair counted as a tie (0): +1 all agree, 0 all missed, −1 all reversed."""
    verdicts = pairs.get_column("verdict") if pairs.height else pl.Series([], dtype=pl.Utf8)
    counts = {v: int((verdicts == v).sum()) for v in PAIR_VERDICTS}
    decided = counts[AGREE] + counts[DISAGREE]
    separated = decided + counts[MISSED]
    return {
        "pairs": pairs.height,
        **counts,
        "separated": separated,
        "agreement": counts[AGREE] / decided if decided else None,
        "recovered": counts[AGREE] / separated if separated else None,
        "pair_tau": (counts[AGREE] - counts[DISAGREE]) / separated if separated else None,
    }


def _verdict(lo_off, hi_off, lo_sim, hi_sim) -> str:
    if lo_off is None or lo_sim is None:
        return TOO_FEW
    off, sim = interval_sign(lo_off, hi_off), interval_sign(lo_sim, hi_sim)
    if off == 0:
        return OFFLINE_TIE
    if sim == 0:
        return MISSED
    return AGREE if off == sim else DISAGREE


def offline_for_fidelity(
    offline: pl.DataFrame, per_user: pl.DataFrame, metrics: tuple[str, ...] = ("recall_at_k", "ndcg_at_k")
) -> pl.DataFrame:
    """The `offline_metrics` rows with their ranking metrics taken over the users who have a
    list (`offline_per_user`: the train users, whom the agents are built from), the users the
    arm pairs and the tables' intervals use.  `offline_metrics` also ranks users first seen
    in the test window, whom no agent represents: on ML-100K they were 99 of the 153 ranked
    users, and the two populations ordered FM and DeepFM differently (NDCG@20 0.2028 < 0.2030
    over all, 0.1217 > 0.1143 over the 54 with a list), so τ said "another best arm" where
    the pairs, on the agents' users, said "offline tie".  AUC and log loss stay as stored."""
    if per_user.height == 0 or offline.height == 0:
        return offline
    means = per_user.group_by("arm").agg(pl.col(m).mean() for m in metrics if m in per_user.columns)
    kept = offline.drop([m for m in metrics if m in offline.columns and m in means.columns])
    return kept.join(means, on="arm", how="left")


def offline_intervals(
    offline_per_user: pl.DataFrame,
    metrics: tuple[str, ...] = ("recall_at_k", "ndcg_at_k"),
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pl.DataFrame:
    """arm, metric, users, mean, ci_low, ci_high: each arm's offline metric with a bootstrap
    interval over the test users, so that the offline side of the fidelity has error bars too."""
    rows = []
    for i, arm in enumerate(sorted(set(offline_per_user.get_column("arm").to_list()))):
        frame = offline_per_user.filter(pl.col("arm") == arm)
        rng = named_rng(seed, 7002, i)  # one stream per arm
        values = frame.select(metrics).to_numpy().astype(float)
        boot = bootstrap_means(values, n_bootstrap, rng) if frame.height else np.full((1, len(metrics)), np.nan)
        ci = percentile_interval(boot, confidence)
        for j, metric in enumerate(metrics):
            lo, hi = ci[:, j] if frame.height else (None, None)
            rows.append(
                {
                    "arm": arm,
                    "metric": metric,
                    "users": frame.height,
                    "mean": float(np.nanmean(values[:, j])) if frame.height else None,
                    "ci_low": None if lo is None else float(lo),
                    "ci_high": None if hi is None else float(hi),
                }
            )
    return pl.DataFrame(
        rows,
        schema={
            "arm": pl.Utf8,
            "metric": pl.Utf8,
            "users": pl.Int64,
            "mean": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
        },
    )


def offline_per_user(top_lists: Mapping[str, pl.DataFrame], test: pl.DataFrame, k: int = 20) -> pl.DataFrame:
    """arm, user_id, recall_at_k, ndcg_at_k of every arm's top-k lists against the test
    items rated >= 4, over the test users who have a list (the train users, whom the agents
    are built from); `offline_metrics` also ranks users first seen in the test window."""
    relevant = relevant_items(test)
    frames = [
        per_user_metrics(
            top_lists[a], relevant.join(top_lists[a].select("user_id").unique(), on="user_id", how="semi"), k
        ).with_columns(arm=pl.lit(a))
        for a in sorted(top_lists)
    ]
    empty = pl.DataFrame(
        schema={"user_id": pl.Int64, "recall_at_k": pl.Float64, "ndcg_at_k": pl.Float64, "arm": pl.Utf8}
    )
    return pl.concat(frames) if frames else empty


@dataclass(frozen=True)
class Agreement:
    """What the read-out's fidelity section, its verdict and the `fidelity_trust` check
    read, computed once (`arm_agreement`): the arms' offline metrics (`offline`), the
    per-user offline metrics of every arm (`per_user`), the arms that measure the simulator
    rather than compete (`diagnostic`: the mirror), Kendall τ over the candidate arms
    (`fid`, FIDELITY rows) and the candidate arms compared two by two (`pairs`)."""

    offline: pl.DataFrame
    per_user: pl.DataFrame
    diagnostic: list[str]
    fid: pl.DataFrame
    pairs: pl.DataFrame


def arm_agreement(
    readout,
    offline_metrics: Mapping[str, pl.DataFrame],
    top_lists: Mapping[str, pl.DataFrame],
    test: pl.DataFrame,
    is_diagnostic: Callable[[str], bool] = lambda arm: False,
) -> Agreement:
    """Simulated against offline for the arms of `readout` (an `ABReadout`): `offline_metrics`
    arm -> its offline metrics row, `top_lists` arm -> its top-20 lists, `test` the held-out
    ratings.  An arm `is_diagnostic` says measures the simulator (the mirror: the arm
    registry's "diagnostic" capability) is no candidate: it stays out of τ and the arm pairs;
    τ is taken over the same users as the pairs (`offline_for_fidelity` says why)."""
    # Relaxed: arms without a CTR model (random, pop) have all-null AUC columns.
    offline = (
        pl.concat([offline_metrics[a] for a in sorted(offline_metrics)], how="vertical_relaxed")
        if offline_metrics
        else pl.DataFrame({"arm": []})
    )
    per_user = offline_per_user(top_lists, test)
    arms = set(top_lists) | set(readout.per_agent.get_column("arm").to_list())
    diagnostic = sorted(a for a in arms if is_diagnostic(a))
    candidate = ~pl.col("arm").is_in(diagnostic)
    fid = (
        fidelity(readout.arms.filter(candidate), offline, per_user.filter(candidate))
        if offline_metrics
        else pl.DataFrame()
    )
    pairs = pairwise_agreement(
        readout.per_agent.filter(candidate),
        per_user.filter(candidate),
        paired=readout.design == "paired",
        seed=readout.config.seed,
    )
    return Agreement(offline, per_user, diagnostic, fid, pairs)

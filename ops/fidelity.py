"""How far to trust the simulation: do simulated and offline metrics rank the arms alike?

A/B Agent §3.1 judges fidelity by comparing the simulated outcome (CTR, CVR, AR) with
offline metrics on the held-out test set (Recall@20, NDCG@20): the closer the orderings of
the arms, the higher the fidelity.  We report Kendall's τ-b for every (simulated, offline)
pair, with its exact p-value when there are few arms, and whether the best arm agrees.
"""

from __future__ import annotations

import polars as pl

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


def fidelity(simulated: pl.DataFrame, offline: pl.DataFrame) -> pl.DataFrame:
    """`simulated`: arm, metric, mean (the read-out's per-arm table); `offline`: one row per
    arm with the OfflineMetrics columns.  Returns one FIDELITY row per metric pair."""
    from scipy.stats import kendalltau

    wide = simulated.filter(pl.col("metric").is_in(SIMULATED)).pivot(on="metric", index="arm", values="mean")
    joined = wide.join(offline, on="arm", how="inner").sort("arm")
    rows = []
    for sim in SIMULATED:
        for off in OFFLINE:
            if sim not in joined.columns or off not in joined.columns:
                continue
            pair = joined.select("arm", sim, off).drop_nulls()
            if pair.height < 2:
                rows.append({"simulated": sim, "offline": off, "arms": pair.height, "kendall_tau": None, "p_value": None, "same_best_arm": None})
                continue
            result = kendalltau(pair.get_column(sim).to_numpy(), pair.get_column(off).to_numpy())
            best_sim = pair.sort(sim, descending=True).get_column("arm")[0]
            best_off = pair.sort(off, descending=True).get_column("arm")[0]
            tau = float(result.statistic) if result.statistic == result.statistic else None
            p = float(result.pvalue) if result.pvalue == result.pvalue else None
            rows.append({"simulated": sim, "offline": off, "arms": pair.height, "kendall_tau": tau, "p_value": p, "same_best_arm": best_sim == best_off})
    return pl.DataFrame(rows, schema=FIDELITY)

"""The fidelity warning as a non-blocking asset check on `ab_readout`: Kendall τ between
simulated CTR and offline NDCG@20, and the arm pairs' verdicts (`ops.readout.fidelity`,
`ops.studies.alignment.trust`)."""

import functools

import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, AssetIn, Config, MetadataValue, asset_check
from pydantic import Field

from ops.arms.ranking import evaluation_users
from ops.arms.registry import has_capability
from ops.figures import table_markdown
from ops.readout.fidelity import arm_agreement
from ops.settings import config_default
from ops.studies.alignment.trust import fidelity_warning

# An arm that measures the simulator (the mirror, ops.arms.mirror) is no candidate.
_is_diagnostic = functools.partial(has_capability, attribute="diagnostic")


class FidelityCheckConfig(Config):
    tau_floor: float = Field(
        default=config_default("fidelity_tau_floor"),
        description="Kendall τ(CTR, NDCG@20), or the arm pairs' τ with a missed pair counted as a tie, below this warns ($SIMAB_FIDELITY_TAU_FLOOR)",
    )
    eval_users: int = Field(
        default=config_default("eval_users"),
        ge=0,
        description="the offline metrics over a seeded sample of this many test users, as the arms measured them; 0 = all ($SIMAB_EVAL_USERS)",
    )


@asset_check(
    asset="ab_readout",
    blocking=False,
    additional_ins={
        "offline_metrics": AssetIn("offline_metrics"),
        "top20_lists": AssetIn("top20_lists"),
        "test_ratings": AssetIn("test_ratings"),
    },
    description="warns (does not block) when Kendall τ between simulated CTR and offline NDCG@20 is below the floor, the pairs' τ (missed pairs counted as ties) is below it, or any pair of arms disagrees",
)
def fidelity_trust(
    config: FidelityCheckConfig, ab_readout, offline_metrics: dict, top20_lists: dict, test_ratings: pl.DataFrame
) -> AssetCheckResult:
    evaluated = pl.Series(evaluation_users(test_ratings, config.eval_users)).implode()
    test = test_ratings.filter(pl.col("user_id").is_in(evaluated))
    agreement = arm_agreement(ab_readout, offline_metrics, top20_lists, test, _is_diagnostic)
    fid, pairs = agreement.fid, agreement.pairs
    warning = fidelity_warning(fid, pairs, config.tau_floor)
    table = (
        pairs.select("arm_a", "arm_b", "offline_difference", "simulated_difference", "verdict")
        if pairs.height
        else pl.DataFrame({"pairs": []})
    )
    return AssetCheckResult(
        passed=warning.passed,
        severity=AssetCheckSeverity.WARN,
        description=warning.description,
        metadata={
            "kendall_tau": warning.tau if warning.tau is not None else float("nan"),
            "tau_floor": config.tau_floor,
            "disagreements": len(warning.disagreements),
            "misses": len(warning.misses),
            "pair_tau": warning.pair_tau if warning.pair_tau is not None else float("nan"),
            "pairs": MetadataValue.md(table_markdown(table, ".4f")),
        },
    )


ALIGNMENT_CHECKS = [fidelity_trust]

"""The partitions of the asset graph: one per recommender arm, and arm × user shard for the
simulation when it is sharded.

Arms are every name the arm registry knows (`ops.arms.registry`): the kinds of
`ops/arms/kinds/` (A/B Agent's Random, Pop and DeepCTR family, the mirror) and the aliases of
DeepFM's data-scale and feature-set variants (Tables 3 and 4), the installed plug-ins' arms, and the
arms declared from `$SIMAB_ARMS` specs (`declare_arms`: a lists file, an MLflow model, a kind
with parameters).  Which of them a full run uses is run configuration (`pipelines.run_config`).

User shards ($SIMAB_SHARDS, 1 by default): with N > 1 the agents of an arm are dealt to N
shards (`ops.simulation.assignment.user_shard`) and `simulation_shard` is partitioned by
`arm_shard_partitions(N)`, a `MultiPartitionsDefinition` arm × shard whose keys read
`fm|0` … `fm|N-1`.  A two-dimensional definition rather than hand-made `fm|0` keys: the
Dagster UI shows the arm × shard grid, a backfill selects "every shard of fm" or "shard 3
of every arm" by dimension, and `MultiToSingleDimensionPartitionMapping` gives the per-arm
assets downstream all the shards of their arm without a line of key parsing.  The per-arm
assets keep their arm keys, so with one shard nothing changes.
"""

from __future__ import annotations

from dagster import MultiPartitionsDefinition, StaticPartitionsDefinition

# Re-exported: the assets, the examples and the tests take the arm names from here.
from ops.preflight.arm_names import ARMS, DEFAULT_ARMS, DIAGNOSTIC_ARMS, declare_arms, lifecycle_arms  # noqa: F401
from ops.simulation.kinds import brain_kind, brain_names

# The concurrency pool of the heavy per-arm steps (training, ranking, simulation): the instance
# simab writes caps how many run at once across all runs (`pipelines.instance`, $SIMAB_ARM_POOL_LIMIT),
# so a backfill of every arm from the UI does not start them all at once.
ARM_POOL = "simab_arms"

# The arm names (`ops.preflight.arm_names`: the registry's and the declared ones), this very
# list: an arm declared later (`declare_arms`) is a partition too.
arm_partitions = StaticPartitionsDefinition(ARMS)


ARM_DIMENSION, SHARD_DIMENSION = "arm", "shard"


def arm_shard_partitions(shards: int) -> MultiPartitionsDefinition:
    """Arm × user shard, keys `<arm>|<shard>` (Dagster orders dimensions by name: arm first)."""
    if shards < 1:
        raise ValueError(f"user shards must be >= 1, got {shards}")
    return MultiPartitionsDefinition(
        {ARM_DIMENSION: arm_partitions, SHARD_DIMENSION: StaticPartitionsDefinition([str(k) for k in range(shards)])}
    )


def arm_shard_key(arm: str, shard: int) -> str:
    """The partition key of one shard of an arm, as `arm_shard_partitions` spells it."""
    return f"{arm}|{shard}"


# The experiments' own simulations: arm x condition, so the vision and no-vision
# runs of A/B Agent Table 5 and the embedded and LLM runs of the brain comparison coexist
# beside the lifecycle's `simulation_events` (one partition per arm, never overwritten here).
# A condition is a brain of the registry (its no-vision twins are brains of their own).
CONDITIONS: tuple[str, ...] = tuple(brain_names())
condition_partitions = StaticPartitionsDefinition(list(CONDITIONS))
experiment_partitions = MultiPartitionsDefinition({"arm": arm_partitions, "condition": condition_partitions})


def condition_name(brain: str, vision: bool) -> str:
    """The condition partition of a brain with or without vision."""
    return brain_kind(brain, vision=vision).name

"""The partitions of the asset graph: one per recommender arm, and arm × user shard for the
simulation when it is sharded.

Arms are every name the arm registry knows (`ops.arms.registry`): the kinds of
`ops/arms/kinds/` (A/B Agent's Random, Pop and DeepCTR family, the mirror) and the aliases of
DeepFM's data-scale and feature-set variants (Tables 3 and 4), the installed plug-ins' arms, and the
arms the settings declare from `$SIMAB_ARMS` specs (`declare_arms`: a lists file, an MLflow model,
a kind with parameters).  The asset modules are declared with `arm_partitions`, the registry's
arms; the code location is built with `arm_partitions_of(settings.arms)` in their place
(`with_arm_partitions`, `pipelines.jobs.build_assets`), a value of its settings: nothing is
extended in place, and the order in which settings and modules are read does not matter.
Which of the arms a full run uses is run configuration (`pipelines.run_config`).

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

from collections.abc import Sequence

from dagster import AssetsDefinition, MultiPartitionsDefinition, PartitionsDefinition, StaticPartitionsDefinition

from ops.arms.registry import known_arm_names

# Re-exported: the assets, the examples and the tests take the arm names from here.
from ops.preflight.arm_names import DEFAULT_ARMS, DIAGNOSTIC_ARMS, declare_arms, lifecycle_arms  # noqa: F401
from ops.simulation.kinds import brain_kind, brain_names

# The concurrency pool of the heavy per-arm steps (training, ranking, simulation): the instance
# simab writes caps how many run at once across all runs (`pipelines.instance`, $SIMAB_ARM_POOL_LIMIT),
# so a backfill of every arm from the UI does not start them all at once.
ARM_POOL = "simab_arms"

# The arms the registry knows when the asset modules load: what the decorators are given, and
# what a test materialising an asset by itself gets.  The code location's own: `arm_partitions_of`.
arm_partitions = StaticPartitionsDefinition(known_arm_names(declared=False))


def arm_partitions_of(arms: Sequence[str]) -> StaticPartitionsDefinition:
    """The arm partitions of a code location whose settings name `arms` (their specs declared
    first, `declare_arms`): the registry's own arms, then `arms`."""
    return StaticPartitionsDefinition(list(dict.fromkeys([*known_arm_names(declared=False), *arms])))


def with_arm_partitions(assets: list, partitions: StaticPartitionsDefinition) -> list:
    """`assets` with `partitions` wherever they were declared with `arm_partitions`, alone or as
    the arm dimension of a multi-partitioned asset (arm × shard, arm × condition, arm × round)."""

    def swapped(definition: PartitionsDefinition | None) -> PartitionsDefinition | None:
        if definition is arm_partitions:
            return partitions
        if isinstance(definition, MultiPartitionsDefinition):
            dims = {d.name: d.partitions_def for d in definition.partitions_defs}
            if dims.get(ARM_DIMENSION) is arm_partitions:
                return MultiPartitionsDefinition({**dims, ARM_DIMENSION: partitions})
        return definition

    def mapped(asset):
        new = swapped(asset.partitions_def) if isinstance(asset, AssetsDefinition) else None
        if new is None or new is asset.partitions_def:
            return asset
        return asset.map_asset_specs(lambda spec: spec.replace_attributes(partitions_def=new))

    return [mapped(asset) for asset in assets]


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

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

from ops.arms.registry import declare, has_capability, known_arm_names, specs
from ops.simulation.kinds import brain_kind, brain_names
from ops.studies.experiments.papers import TABLE2

# The concurrency pool of the heavy per-arm steps (training, ranking, simulation): the instance
# simab writes caps how many run at once across all runs (`pipelines.instance`, $SIMAB_ARM_POOL_LIMIT),
# so a backfill of every arm from the UI does not start them all at once.
ARM_POOL = "simab_arms"

# Every arm name known when the code location loads: the built-ins and their aliases, the
# installed plug-ins' arms (`simab.arms` entry points) and the arms declared so far.  A list,
# extended in place by `declare_arms`: the partitions definition below holds this very list.
ARMS: list[str] = known_arm_names()
# A/B Agent Table 2's arms without those slow to train (AFN, whose CPU training is 14x
# DeepFM's, ../shared/docs/dependencies.md): what the papers' experiments use unless told otherwise.
DEFAULT_ARMS: tuple[str, ...] = tuple(a for a in TABLE2 if not has_capability(a, "slow_to_train"))
# The arms that measure the simulator itself (the mirror: the brain's own ranking), standalone.
DIAGNOSTIC_ARMS: tuple[str, ...] = tuple(
    a for a in known_arm_names() if has_capability(a, "diagnostic") and has_capability(a, "standalone")
)


def lifecycle_arms(offline_brain: bool) -> list[str]:
    """What a lifecycle run uses unless told otherwise: `DEFAULT_ARMS`, and with a brain that
    decides offline (the embedded brain) the mirror beside them, so that every verdict says
    whether the simulator favours its own taste (docs/trust.md).  With a brain that pays per
    decision the mirror would cost a whole arm's bill for the embedded brain's taste: it stays
    opt-in there."""
    return list(DEFAULT_ARMS) + (list(DIAGNOSTIC_ARMS) if offline_brain else [])


arm_partitions = StaticPartitionsDefinition(ARMS)


def declare_arms(entries: list[str]) -> list[str]:
    """Declare the arm specs of `$SIMAB_ARMS` (`ops.arms.registry`: `mine=lists:PATH`,
    `prod=mlflow:models:/prod/3`, `half=deepfm;train_fraction=0.5`, or a known name) and
    return their names, the partition keys.  A new name joins `ARMS`, and so the arm
    partitions, in place: call it before the definitions are built (the settings do), in
    every process that loads them (each reads the same environment)."""
    names = []
    for spec in specs(entries):
        declare(spec)
        if spec.name not in ARMS:
            ARMS.append(spec.name)
        names.append(spec.name)
    return names


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
    return brain_kind(brain).seeing(vision).name

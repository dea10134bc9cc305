"""The arm names a lifecycle can take, without Dagster: every name the arm registry knows,
the arms declared from `$SIMAB_ARMS` specs, and the arms a lifecycle runs unless told.

Nothing here is a list that grows: the settings declare their specs with the registry
(`declare_arms`, in every process that reads them) and carry the names, and the code
location's arm partitions are built from those names (`assets.partitions.arm_partitions_of`),
so that the settings can be resolved and checked (`pipelines.preflight.checked_settings`)
before the seconds of importing Dagster.
"""

from __future__ import annotations

from ops.arms.registry import declare, has_capability, known_arm_names, specs
from ops.studies.experiments.papers import TABLE2

# A/B Agent Table 2's arms without those slow to train (AFN, whose CPU training is 14x
# DeepFM's, ../shared/docs/dependencies.md): what the papers' experiments use unless told otherwise.
DEFAULT_ARMS: tuple[str, ...] = tuple(a for a in TABLE2 if not has_capability(a, "slow_to_train"))
# The arms that measure the simulator itself (the mirror: the brain's own ranking), standalone.
DIAGNOSTIC_ARMS: tuple[str, ...] = tuple(
    a for a in known_arm_names(declared=False) if has_capability(a, "diagnostic") and has_capability(a, "standalone")
)


def lifecycle_arms(offline_brain: bool) -> list[str]:
    """What a lifecycle run uses unless told otherwise: `DEFAULT_ARMS`, and with a brain that
    decides offline (the embedded brain) the mirror beside them, so that every verdict says
    whether the simulator favours its own taste (docs/trust.md).  With a brain that pays per
    decision the mirror would cost a whole arm's bill for the embedded brain's taste: it stays
    opt-in there."""
    return list(DEFAULT_ARMS) + (list(DIAGNOSTIC_ARMS) if offline_brain else [])


def declare_arms(entries: list[str]) -> list[str]:
    """Declare the arm specs of `$SIMAB_ARMS` (`ops.arms.registry`: `mine=lists:PATH`,
    `prod=mlflow:models:/prod/3`, `half=deepfm;train_fraction=0.5`, or a known name) with the
    registry, which keeps what each name stands for, and return their names: the settings'
    arms, and so arm partitions of the definitions built from them."""
    return [declare(spec).name for spec in specs(entries)]

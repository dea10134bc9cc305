"""The arm names a lifecycle can take, without Dagster: every name the arm registry knows,
the arms declared from `$SIMAB_ARMS` specs, and the arms a lifecycle runs unless told.

`assets.partitions` makes its arm partitions of the very list `ARMS` (extended in place by
`declare_arms`); the list lives here so that the settings can be resolved and checked
(`pipelines.preflight.checked_settings`) before the seconds of importing Dagster.
"""

from __future__ import annotations

from ops.arms.registry import declare, has_capability, known_arm_names, specs
from ops.studies.experiments.papers import TABLE2

# Every arm name known when the code location loads: the built-ins and their aliases, the
# installed plug-ins' arms (`simab.arms` entry points) and the arms declared so far.  A list,
# extended in place by `declare_arms`: the arm partitions definition holds this very list.
ARMS: list[str] = known_arm_names()
# A/B Agent Table 2's arms without those slow to train (AFN, whose CPU training is 14x
# DeepFM's, ../shared/docs/dependencies.md): what the papers' experiments use unless told otherwise.
DEFAULT_ARMS: tuple[str, ...] = tuple(a for a in TABLE2 if not has_capability(a, "slow_to_train"))
# The arms that measure the simulator itself (the mirror: the brain's own ranking), standalone.
DIAGNOSTIC_ARMS: tuple[str, ...] = tuple(
    a for a in ARMS if has_capability(a, "diagnostic") and has_capability(a, "standalone")
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

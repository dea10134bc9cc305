"""The partitions of the asset graph: one per recommender arm.

Arms are A/B Agent's (Table 2: random, pop, fm, afn, deepfm; Table 5: the DeepCTR family)
plus the data-scale and feature-set variants of DeepFM (Tables 3 and 4).  Which of them a
full run uses is run configuration (`pipelines.run_config`, `$SIMAB_ARMS`).
"""

from __future__ import annotations

from dagster import MultiPartitionsDefinition, StaticPartitionsDefinition

from ops.arms.recommenders import ALL_ARMS, TABLE2_ARMS, VARIANT_ARMS

ARMS: tuple[str, ...] = (*ALL_ARMS, *VARIANT_ARMS)
# A/B Agent Table 2's arms without AFN, whose CPU training is 14x DeepFM's
# (../shared/docs/dependencies.md): what a run uses unless told otherwise.
DEFAULT_ARMS: tuple[str, ...] = tuple(a for a in TABLE2_ARMS if a != "afn")

arm_partitions = StaticPartitionsDefinition(list(ARMS))

# The experiments' own simulations (issue 13): arm x condition, so the vision and no-vision
# runs of A/B Agent Table 5 and the embedded and LLM runs of the brain comparison coexist
# beside the lifecycle's `simulation_events` (one partition per arm, never overwritten here).
CONDITIONS: tuple[str, ...] = ("embedded", "embedded-no-vision", "llm", "llm-no-vision")
condition_partitions = StaticPartitionsDefinition(list(CONDITIONS))
experiment_partitions = MultiPartitionsDefinition({"arm": arm_partitions, "condition": condition_partitions})


def condition_name(brain: str, vision: bool) -> str:
    """The condition partition of a brain with or without vision."""
    return brain + ("" if vision else "-no-vision")

"""The lifecycle's plan: its steps in order, the tags that mark a Dagster run as one of them,
and the digest of the steps and their run config that `--resume` compares."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from assets.partitions import arm_shard_key

STEP_TAG = "simab/step"  # e.g. "simab_arm[fm]"
PLAN_TAG = "simab/plan"  # digest of the steps and their run config


@dataclass(frozen=True)
class Step:
    job: str
    partition: str | None = None

    @property
    def label(self) -> str:
        return self.job + (f"[{self.partition}]" if self.partition else "")


def lifecycle_plan(settings) -> list[Step]:
    """The steps in order: prepare, each arm, the read-out.  With user shards an arm is
    trained, simulated shard by shard (`simab_simulate[<arm>|<shard>]`), then combined.  Which
    of them may run at once: `lanes`."""
    arms = []
    for arm in settings.arms:
        if settings.shards > 1:
            arms += [
                Step("simab_arm", arm),
                *(Step("simab_simulate", arm_shard_key(arm, k)) for k in range(settings.shards)),
                Step("simab_combine", arm),
            ]
        else:
            arms.append(Step("simab_arm", arm))
    return [Step("simab_prepare"), *arms, Step("simab_readout")]


def lanes(plan: list[Step]) -> list[list[list[Step]]]:
    """The plan as lanes run one after another, each lane a list of chains that are
    independent of each other (an executor with workers runs them side by side), each chain
    steps run in order: prepare; one chain per arm (its training, then its shards and their
    combination); the read-out, which reads every arm."""
    result: list[list[list[Step]]] = []
    arms: dict[str, list[Step]] = {}
    for step in plan:
        arm = (step.partition or "").split("|")[0]
        if step.job in ("simab_arm", "simab_simulate", "simab_combine") and arm:
            if not arms:
                result.append([])
            if arm not in arms:
                arms[arm] = []
                result[-1].append(arms[arm])
            arms[arm].append(step)
        else:
            arms = {}
            result.append([[step]])
    return result


def plan_digest(plan: list[Step], configs: dict) -> str:
    """A digest of the steps and of each job's run config (`PLAN_TAG`)."""
    text = json.dumps({"steps": [s.label for s in plan], "run_config": configs}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

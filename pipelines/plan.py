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
    trained, simulated shard by shard (`simab_simulate[<arm>|<shard>]`), then combined; the
    runner executes in its own process, so here the shards run one after another (an
    executor with workers runs them at once when launched as separate runs: README,
    "Beyond one machine")."""
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


def plan_digest(plan: list[Step], configs: dict) -> str:
    """A digest of the steps and of each job's run config (`PLAN_TAG`)."""
    text = json.dumps({"steps": [s.label for s in plan], "run_config": configs}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

"""The read-out's settings: the interval, the bootstrap, the tests, Holm's family and the
metrics read (`ops.readout.ab_readout`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from ops.readout.agent_metrics import METRICS


class ReadoutConfig(BaseModel):
    confidence: float = 0.95  # docs/definitions.md#metrics: 95 % intervals
    n_bootstrap: int = 2000
    seed: int = 0
    like_threshold: int = 4  # Agent4Rec §3.3: a rating above 3 is a like
    paired_test: Literal["t", "wilcoxon"] = "t"
    unpaired_test: Literal["welch", "mann_whitney"] = "welch"
    holm_family: Literal["all", "per_metric"] = "all"
    alpha: float = 0.05  # for the "significant" flag after Holm
    metrics: tuple[str, ...] = METRICS
    bootstrap_chunk: int = 250  # replicates per matrix product: bounds memory at 6,040 agents

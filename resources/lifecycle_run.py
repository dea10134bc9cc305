"""The lifecycle's own MLflow run: one top-level run per lifecycle, so that MLflow's compare
view puts two lifecycles side by side (docs/tracking.md).

It is opened before the first step with the lifecycle's parameters; the parent run of every
Dagster run of the lifecycle nests under it (`MlflowTracking.parent_run_id`, through the
`simab/lifecycle` run tag), and each asset's run under that.  When the read-out is done it
gets the verdict as metrics — per arm CTR, CVR and AR (and offline NDCG@20) with their 95 %
interval bounds, the primary metric's difference against the control, Kendall τ, the
arm-against-arm pairs, taste F1, the brain's rating RMSE — and the LLM bill in dollars; it
ends FINISHED, or FAILED when a step failed (a resumed lifecycle reopens the same run).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ops.preflight.bill import brain_of
from ops.readout.verdict import Verdict
from resources.mlflow_tracking import MlflowTracking

# The settings a lifecycle is told apart by, as run parameters: name -> Settings field.
PARAMS = {
    "arms": "arms",
    "source": "source",
    "brain": "brain",
    "agents": "agents",
    "sessions": "sessions",
    "model": "llm_model",
    "control": "control",
    "primary_metric": "primary_metric",
    "persona": "persona",
    "shards": "shards",
}


def lifecycle_params(settings, resolved: dict[str, Any] | None = None) -> dict[str, str]:
    """The lifecycle's parameters: each setting's value, else `resolved[name]` (the value the
    asset's own default gives, read from the validated run config), else "default".  The
    model only where the LLM decides."""
    resolved = resolved or {}
    out = {}
    for name, field in PARAMS.items():
        if name == "model" and brain_of(settings).decides_offline:
            out[name] = "none (no LLM)"
            continue
        value = getattr(settings, field, None)
        if value is None:
            value = resolved.get(name, "default")
        out[name] = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    return out


def verdict_metrics(verdict: Verdict, bill_usd: float | None = None) -> dict[str, float]:
    """The verdict (`ops.readout.verdict.Verdict`) as flat MLflow metrics."""
    out: dict[str, float] = {}

    def put(key: str, value: Any) -> None:
        if isinstance(value, bool):
            value = float(value)
        if isinstance(value, int | float) and value == value:  # NaN: not measured, left out
            out[_metric_name(key)] = float(value)

    for arm, figures in verdict.arms.items():
        for metric, cell in figures.to_dict().items():
            for suffix, value in zip(("", "_ci_low", "_ci_high"), cell or ()):
                put(f"{arm}_{metric}{suffix}", value)
    winner = verdict.winner
    for key in ("difference", "ci_low", "ci_high", "p_holm", "significant"):
        put(f"primary_{key}", getattr(winner, key))
    for key, value in verdict.fidelity.to_dict().items():
        put(key if key.startswith("kendall") or key.startswith("same_best") else f"pairs_{key}", value)
    trust = verdict.trust
    for ratio, f1 in (trust.taste_f1 or {}).items():
        put(f"taste_f1_{ratio}", f1)
    put("rmse_brain", trust.rmse)
    put("rmse_best_arm", trust.rmse_best_arm)
    for key, value in (trust.list_quality_spread or {}).items():
        put(f"list_quality_spread_{key}", value)
    gaps = verdict.gap_sizes or {}
    for key in ("factor", "ci_low", "ci_high"):
        put("gap_factor" if key == "factor" else f"gap_factor_{key}", gaps.get(key))
    put("warnings", len(verdict.warnings))
    if bill_usd is not None:
        put("bill_usd", bill_usd)
    return out


def verdict_tags(verdict: Verdict) -> dict[str, str]:
    """The verdict's words as tags: the control, the primary metric, the winner (or none)."""
    winner = verdict.winner
    return {
        "simab.control": str(verdict.control),
        "simab.primary_metric": str(winner.metric),
        "simab.winner": str(winner.arm if winner.beats_control else "none"),
    }


class LifecycleRun:
    """A handle on the lifecycle's MLflow run while the lifecycle goes."""

    def __init__(self, tracking: MlflowTracking, run_id: str) -> None:
        self.tracking, self.run_id = tracking, run_id

    def finish(self, verdict: Verdict, bill_usd: float | None = None) -> None:
        from mlflow.entities import Metric, RunTag  # lazy: mlflow (seconds to import)

        client = self.tracking.client()
        metrics = [Metric(k, v, 0, 0) for k, v in verdict_metrics(verdict, bill_usd).items()]
        tags = [RunTag(k, v) for k, v in verdict_tags(verdict).items()]
        client.log_batch(self.run_id, metrics=metrics, tags=tags)


@contextmanager
def lifecycle_run(tracking: MlflowTracking, lifecycle: str, params: dict[str, str]) -> Iterator[LifecycleRun]:
    """The lifecycle's run, RUNNING inside the block; FINISHED after it, FAILED when it raised
    (a failed step stops the runner with SystemExit)."""
    client = tracking.client()
    run_id = tracking.lifecycle_run_id(lifecycle, params)
    client.update_run(run_id, status="RUNNING")
    status = "FAILED"
    try:
        yield LifecycleRun(tracking, run_id)
        status = "FINISHED"
    finally:
        client.set_terminated(run_id, status=status)


def _metric_name(key: str) -> str:
    """MLflow takes letters, digits, `_ - . / ` and spaces; a ratio's colon becomes `_`."""
    return re.sub(r"[^A-Za-z0-9_.\-/]+", "_", key)

"""The run's LLM bill as it happens: `RunBudget`, the ledger every LLM call of a run is
charged to, and `CostLimitExceeded`, raised before a call or a step that would pass the cap.
The estimates made before a step are in `ops.simulation.cost`."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from ops.storage.atomic import atomic_write_bytes


def bill_path(root: Path, lifecycle: str | None, run_id: str = "") -> Path:
    """Where a run's bill lives under the data folder `root`: one per lifecycle (all its steps,
    every arm and the read-out), else one per Dagster run."""
    return Path(root) / "bills" / (f"lifecycle-{lifecycle}.json" if lifecycle else f"run-{run_id}.json")


def estimate_refusal(budget: RunBudget, label: str, guess, log: Callable[[str], None] = lambda _: None) -> str | None:
    """Record a step's estimate (`ops.simulation.cost.CostEstimate`) in the run's bill under
    `label` and say so through `log`; why the step must not start — its estimate is above what
    the run has left of the cap — or None."""
    budget.record_estimate(label, guess.cost_usd)
    cap = budget.cap_usd
    if not cap:
        log(f"LLM bill before {label}: {guess.describe()}; no cost limit")
        return None
    left = max(0.0, cap - budget.bill()["spent"])
    log(f"LLM bill before {label}: {guess.describe()}; the run has ${left:,.2f} of ${cap:,.2f} left")
    if guess.cost_usd <= left:
        return None
    return (
        f"{label} is estimated at ${guess.cost_usd:,.4f} ({guess.calls:,} calls), above "
        f"max_cost_usd=${cap:,.4f} less what this run has spent (${left:,.4f} left): raise the "
        "limit ($SIMAB_MAX_COST_USD), ask for fewer agents ($SIMAB_AGENTS, $SIMAB_ALIGNMENT_AGENTS) or choose a "
        "cheaper model"
    )


class CostLimitExceeded(RuntimeError):
    """The estimated bill, or the next call, is above the limit the run was given."""


class RunBudget:
    """The LLM spend of one run against its cap, shared by every step and process of the run
    through a small JSON file (`path`, under a file lock).  A call reserves its ceiling (its
    prompt's tokens and `max_tokens` of answer, priced) before it is sent and settles to
    what it really cost after; a call whose ceiling would take the run past the cap is
    refused (CostLimitExceeded) before it is sent.  So `max_cost_usd` holds for the run as a
    whole — simulations, persona matching, the alignment protocols, rounds and experiments
    alike — whatever each asset estimated.  The file also keeps each asset's estimate and
    spend: the run's bill (`bill()`)."""

    def __init__(self, path: str | Path, cap_usd: float) -> None:
        self.path, self.cap_usd = Path(path), float(cap_usd)

    def reserve(self, amount: float, label: str) -> None:
        with self._state() as state:
            committed = state["spent"] + state["reserved"]
            if self.cap_usd and committed + amount > self.cap_usd:
                raise CostLimitExceeded(
                    f"{label}: the next LLM call (up to ${amount:,.4f}) would take the run past max_cost_usd=${self.cap_usd:,.2f} "
                    f"(spent ${state['spent']:,.4f}, in flight ${state['reserved']:,.4f}): stopped before sending it; raise the "
                    "limit ($SIMAB_MAX_COST_USD) or ask for fewer agents"
                )
            state["reserved"] += amount

    def settle(self, reserved: float, actual: float, label: str) -> None:
        with self._state() as state:
            state["reserved"] = max(0.0, state["reserved"] - reserved)
            state["spent"] += actual
            state["spend"][label] = state["spend"].get(label, 0.0) + actual

    def record_estimate(self, label: str, usd: float) -> None:
        with self._state() as state:
            state["estimates"][label] = usd

    def bill(self) -> dict:
        """{"cap", "spent", "estimates": {asset: usd}, "spend": {asset: usd}} so far."""
        with self._state() as state:
            return {"cap": self.cap_usd, **{k: state[k] for k in ("spent", "estimates", "spend")}}

    @contextlib.contextmanager
    def _state(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock"):
            try:
                state = json.loads(self.path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                state = {}
            except (OSError, ValueError) as exc:
                raise ValueError(
                    f"{self.path}: the run's LLM bill cannot be read ({exc}); move it aside to start the bill afresh"
                ) from None
            state = {"spent": 0.0, "reserved": 0.0, "estimates": {}, "spend": {}, **state}
            before = json.dumps(state, sort_keys=True)
            yield state
            if json.dumps(state, sort_keys=True) != before:
                atomic_write_bytes(self.path, json.dumps(state, sort_keys=True, indent=1).encode())

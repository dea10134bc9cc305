"""The fatigue system (A/B Agent §2.4.4, Appendix A Table 8; docs/definitions.md#fatigue).

Each session starts with a budget set by the agent's activity tier.  Every action costs
its base value scaled by the agent's interest I in the current page, linearly between two
modifiers (A/B Agent Eq. 1):

    cost = base(action) × (φmax − (I − Imin)(φmax − φmin) / (Imax − Imin))

so with the defaults (φmin = 0.5, φmax = 1.5, I ∈ 1..5) interest 1 costs ×1.5, interest 3
costs ×1.0 and interest 5 costs ×0.5.  The session ends when the fatigue spent reaches the
budget (the simulation loop forces the exit) or when the agent exits.
"""

from __future__ import annotations

from numbers import Integral
from typing import Literal

from pydantic import BaseModel, model_validator

from ops.simulation.observation import ACTIONS, BACK, CLICK_MOVIE, EXIT, NEXT_PAGE, PREVIOUS_PAGE, WATCH_AND_RATE

ActivityTier = Literal["low", "medium", "high"]
ACTIVITY_TIERS: tuple[str, ...] = ("low", "medium", "high")

# A/B Agent Appendix A, Table 8, column "GPT-4o-mini" (the design's default).
GPT_4O_MINI_BASE_COSTS: dict[str, float] = {
    CLICK_MOVIE: 2.0,
    WATCH_AND_RATE: 10.0,
    PREVIOUS_PAGE: 2.0,
    NEXT_PAGE: 2.0,
    BACK: 5.0,
    EXIT: 0.0,
}
# A/B Agent Appendix A, Table 8, column "GPT-4o".
GPT_4O_BASE_COSTS: dict[str, float] = {
    CLICK_MOVIE: 15.0,
    WATCH_AND_RATE: 40.0,
    PREVIOUS_PAGE: 2.0,
    NEXT_PAGE: 2.0,
    BACK: 2.0,
    EXIT: 0.0,
}
BASE_COST_PRESETS: dict[str, dict[str, float]] = {
    "gpt-4o-mini": GPT_4O_MINI_BASE_COSTS,
    "gpt-4o": GPT_4O_BASE_COSTS,
}


class FatigueConfig(BaseModel):
    """Every constant of the fatigue system; defaults from A/B Agent Table 8 and docs/definitions.md."""

    # Table 8, GPT-4o-mini column; `FatigueConfig.preset("gpt-4o")` gives the other column.
    base_costs: dict[str, float] = dict(GPT_4O_MINI_BASE_COSTS)
    # Eq. 1 modifiers: interest Imin costs ×phi_max, interest Imax costs ×phi_min (docs/definitions.md).
    phi_min: float = 0.5
    phi_max: float = 1.5
    # The interest scale the brain states each step (A/B Agent §2.4.2: 1–5).
    interest_min: int = 1
    interest_max: int = 5
    # Session budget per activity tier (docs/definitions.md#fatigue: 20 / 30 / 45; the paper's
    # Table 6 shows budgets of 30 for a medium agent).
    budgets: dict[str, float] = {"low": 20.0, "medium": 30.0, "high": 45.0}

    @model_validator(mode="after")
    def _check(self) -> FatigueConfig:
        missing = [a for a in ACTIONS if a not in self.base_costs]
        unknown = [a for a in self.base_costs if a not in ACTIONS]
        if missing or unknown:
            raise ValueError(
                f"fatigue base_costs must name exactly the actions {ACTIONS}; missing {missing}, unknown {unknown}"
            )
        negative = {a: c for a, c in self.base_costs.items() if c < 0}
        if negative:
            raise ValueError(f"fatigue base_costs must be >= 0, got {negative}")
        if not 0 <= self.phi_min <= self.phi_max:
            raise ValueError(
                f"fatigue modifiers need 0 <= phi_min <= phi_max, got phi_min={self.phi_min}, phi_max={self.phi_max}"
            )
        if self.interest_min >= self.interest_max:
            raise ValueError(f"interest_min ({self.interest_min}) must be below interest_max ({self.interest_max})")
        missing_tiers = [t for t in ACTIVITY_TIERS if t not in self.budgets]
        if missing_tiers:
            raise ValueError(f"fatigue budgets lack the activity tier(s) {missing_tiers}; got {sorted(self.budgets)}")
        bad = {t: b for t, b in self.budgets.items() if not b > 0}
        if bad:
            raise ValueError(f"fatigue budgets must be > 0, got {bad}")
        return self

    @classmethod
    def preset(cls, name: str, **overrides) -> FatigueConfig:
        """The configuration with the base costs of one column of Table 8."""
        if name not in BASE_COST_PRESETS:
            raise ValueError(f"unknown fatigue preset {name!r}; choose one of {sorted(BASE_COST_PRESETS)}")
        return cls(base_costs=dict(BASE_COST_PRESETS[name]), **overrides)


def fatigue_cost(action: str, interest: int, config: FatigueConfig) -> float:
    """The fatigue an action costs at the stated interest (A/B Agent Eq. 1)."""
    base = config.base_costs.get(action)
    if base is None:
        raise ValueError(f"fatigue: unknown action {action!r}; the actions are {ACTIONS}")
    return base * interest_modifier(interest, config)


def interest_modifier(interest: int, config: FatigueConfig) -> float:
    """φmax at the lowest interest, φmin at the highest, linear in between."""
    if (
        isinstance(interest, bool)
        or not isinstance(interest, Integral)
        or not config.interest_min <= interest <= config.interest_max
    ):
        raise ValueError(
            f"fatigue: interest must be an integer in {config.interest_min}..{config.interest_max}, got {interest!r}"
        )
    span = config.interest_max - config.interest_min
    return config.phi_max - (interest - config.interest_min) * (config.phi_max - config.phi_min) / span


def fatigue_budget(activity_tier: str, config: FatigueConfig) -> float:
    """The session budget of an agent of this activity tier (docs/definitions.md#fatigue)."""
    try:
        return config.budgets[activity_tier]
    except KeyError:
        raise ValueError(
            f"fatigue: unknown activity tier {activity_tier!r}; the tiers are {sorted(config.budgets)}"
        ) from None

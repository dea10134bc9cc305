"""The users a run reads, known before any of them is built: the agents asset builds the
profiles and memories of these users only, whatever the size of the log.

- **simulated**: the run's agent sample (`SIMAB_AGENTS`, seeded; 0 = every user), drawn
  from the population by `ops.simulation.assignment.sample_agents` exactly as the simulation
  draws it (`ops.simulation.partition.agents_of`), and ranked by every arm (`arm_rankings`);
- **fitted**: validation-window users the embedded brain is fitted on, as many as its
  fitting takes (`EmbeddedBrainConfig.fit_max_users`);
- **calibrated**: validation-window users who can fill the list-response yardstick's lists
  (`ops.studies.alignment.calibration`), as many as the calibration asks, and the random
  bucket's calibration half where the run has one with clicks
  (`ops.data.random_exposure.calibration_users`: only their ids choose whom to build);
- **judged**: the agents the trust protocols ask (`protocol_users`, the same sample: taste
  and rating on the test window, list quality on its liked items).

The embedded brain's fitting and its calibration draw their own samples among the agents
that were built (whom the two roles above put there); the simulation and the protocols
draw theirs from the population, so their samples are those of a run that built everyone.
With `n_agents` 0 every user is simulated, and every agent is built.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.simulation.assignment import sample_agents
from ops.simulation.brains.embedded.config import EmbeddedBrainConfig
from ops.studies.alignment.mixed_lists import choose_ladder
from ops.studies.alignment.protocols import ProtocolSettings, list_quality_ladder, protocol_users

ROLES = ("simulated", "fitted", "calibrated", "judged")


class ReadUsersConfig(BaseModel):
    """The samples' sizes and seeds, as the steps that draw them are configured."""

    n_agents: int = Field(0, ge=0)  # the simulation's agents (0: every user)
    seed: int = 0  # the simulation's seed
    brain_seed: int = 0  # the embedded brain's seed (its fitting and calibration)
    calibration_agents: int = Field(300, ge=0)
    protocols: bool = True  # the trust protocols that ask the brain are run
    protocol_agents: int | None = Field(None, ge=0)  # None: as many as half_width needs
    half_width: float = Field(0.1, gt=0, le=0.5)
    protocol_seed: int = 0


def read_users(
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    population: np.ndarray,
    config: ReadUsersConfig,
    exposure_users: Collection[int] = (),
) -> pl.DataFrame:
    """user_id and one boolean column per role (`ROLES`) of every user the run reads, sorted;
    `population`: every user who can be an agent (`ops.agents.profile.population_ids`);
    `exposure_users`: the random bucket's calibration half (calibrated, where in the population)."""
    population = np.unique(np.asarray(population, dtype=np.int64))
    roles: dict[str, list[int]] = {role: [] for role in ROLES}
    roles["simulated"] = sample_agents(population, config.n_agents, config.seed)
    if config.n_agents:
        brain = EmbeddedBrainConfig()
        in_valid = _users_in(valid, population)
        roles["fitted"] = sample_agents(in_valid, min(brain.fit_max_users, len(in_valid)), config.brain_seed)
        liked = valid.filter(pl.col("rating") >= brain.like_threshold)
        ladder = choose_ladder(liked, population)
        if ladder is not None and config.calibration_agents:
            settings = ProtocolSettings(n_agents=config.calibration_agents, seed=config.brain_seed)
            roles["calibrated"] = protocol_users(liked, population, settings, ladder.need)
        exposure = np.intersect1d(np.fromiter(exposure_users, dtype=np.int64), population).tolist()
        roles["calibrated"] = sorted(set(roles["calibrated"]) | set(exposure))
        if config.protocols:
            settings = ProtocolSettings(
                n_agents=config.protocol_agents, half_width=config.half_width, seed=config.protocol_seed
            )
            judged = set(protocol_users(test, population, settings))
            liked_test, quality = list_quality_ladder(test, brain.like_threshold, population)
            judged |= set(protocol_users(liked_test, population, settings, quality.need))
            roles["judged"] = sorted(judged)
    users = np.unique(np.concatenate([np.asarray(v, dtype=np.int64) for v in roles.values()]))
    return pl.DataFrame(
        {"user_id": users, **{role: np.isin(users, np.asarray(ids, dtype=np.int64)) for role, ids in roles.items()}}
    )


def _users_in(frame: pl.DataFrame, population: np.ndarray) -> list[int]:
    """The users of `frame` who are in the population, sorted."""
    return np.intersect1d(frame.get_column("user_id").unique().to_numpy(), population).tolist()

"""Who is simulated where: the agents of a run (a seeded sample, the same in every arm),
their share of an arm under the experiment's design — "paired" (the default: every agent in
every arm, each its own control) or "random" (the agents dealt among the arms) — and the
user shard that simulates each (`SIMAB_SHARDS`), with the shards' events put back together.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import numpy as np
import polars as pl

from ops.schema import EVENTS, conform

Design = Literal["paired", "random"]


def sample_agents(user_ids: Iterable[int], n_agents: int, seed: int) -> list[int]:
    """The agents of a run: the same sample in every arm for a given seed; 0 = all of them."""
    if n_agents < 0:
        # Not "all": with the LLM brain a typo would simulate (and pay for) every user.
        raise ValueError(f"n_agents={n_agents}: a number of agents ≥ 0 (0: every user)")
    ids = sorted(int(u) for u in user_ids)
    if n_agents == 0 or n_agents >= len(ids):
        return ids
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4242]))
    return sorted(int(u) for u in rng.choice(ids, size=n_agents, replace=False))


def assign_agents(
    user_ids: Iterable[int], arms: Sequence[str], design: Design = "paired", seed: int = 0
) -> dict[str, list[int]]:
    """Which agents each arm simulates.  "paired": all agents in every arm (each agent is
    its own control).  "random": the agents shuffled (seeded) and dealt round-robin, so arm
    sizes differ by at most one."""
    users = sorted(set(int(u) for u in user_ids))
    if len(set(arms)) != len(arms) or not arms:
        raise ValueError(f"assign_agents: arms must be distinct and non-empty, got {list(arms)}")
    if design == "paired":
        return {arm: list(users) for arm in arms}
    if design == "random":
        rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(b"assign_agents")]))
        order = rng.permutation(len(users))
        return {arm: sorted(users[i] for i in order[k :: len(arms)]) for k, arm in enumerate(arms)}
    raise ValueError(f"assign_agents: design must be 'paired' or 'random', got {design!r}")


def agents_of_arm(
    candidates: Iterable[int],
    arm: str,
    n_agents: int = 0,
    design: Design = "paired",
    arms: Sequence[str] = (),
    seed: int = 0,
) -> list[int]:
    """The agents one arm simulates: `n_agents` sampled from `candidates` (the same sample in
    every arm for a seed; 0 = all), then, with design "random", this arm's share of them
    when dealt among `arms` (the arm itself added if missing)."""
    chosen = sample_agents(candidates, n_agents, seed)
    if design == "random":
        arms = list(arms) if arm in arms else [*arms, arm]
        chosen = assign_agents(chosen, arms, "random", seed)[arm]
    return chosen


def user_shard(user_id: int, shards: int) -> int:
    """The user shard of an agent: a stable hash of its user id (CRC-32 of the decimal id),
    not of the seed or the arm, so an agent stays in one shard — one checkpoint folder, one
    worker's response cache — across arms, seeds and re-runs.  Agents are independent
    (their generators depend only on seed, user, arm, session), so which shard simulates an
    agent changes nothing in its events."""
    if shards < 1:
        raise ValueError(f"user shards must be >= 1, got {shards}")
    return zlib.crc32(str(int(user_id)).encode("ascii")) % shards


def agents_of_shard(agents: Iterable[int], shard: int, shards: int) -> list[int]:
    """The agents of `agents` (an arm's, from `agents_of_arm`) that shard `shard` of `shards` simulates."""
    if not 0 <= shard < shards:
        raise ValueError(f"user shard must be in 0..{shards - 1}, got {shard}")
    return [int(u) for u in agents if user_shard(u, shards) == shard]


def combine_shards(by_shard: Mapping[int, pl.DataFrame], shards: int) -> pl.DataFrame:
    """One arm's events from its user shards, in the order one unsharded run writes them
    (session, then user id, then step).  Refuses shards that do not fit together: an agent
    simulated by the wrong shard or by two (shards made with another shard count)."""
    seen: dict[int, int] = {}
    for shard, frame in sorted(by_shard.items()):
        conform(frame, EVENTS, f"simulation shard {shard}")
        for user_id in frame.get_column("user_id").unique().to_list():
            if user_shard(user_id, shards) != shard:
                raise ValueError(
                    f"simulation shard {shard} of {shards} holds user {user_id}, who belongs to shard {user_shard(user_id, shards)}: re-simulate it"
                )
            if user_id in seen:
                raise ValueError(f"user {user_id} is in simulation shards {seen[user_id]} and {shard}")
            seen[user_id] = shard
    frames = [by_shard[k] for k in sorted(by_shard)]
    if not frames:
        return pl.DataFrame(schema=EVENTS)
    return pl.concat(frames).sort(["session", "user_id", "step"], maintain_order=True)

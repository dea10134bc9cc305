"""Simulation over rounds (Agent4Rec §2.1.2 memory writing).

One round of an arm, `simulate_round`:
1. the arm is trained on the train split plus every click and view simulated in earlier
   rounds (`ops.studies.augmentation.simulated_interactions`, the A/B Agent §3.4 signals);
2. it ranks, for each agent, the round's movie pool (the whole catalogue, or one of
   `rounds` equal parts, as Agent4Rec §4.1 splits it) minus what the agent already rated or
   was shown a detail page of, into a list of `pages` × 5 movies;
3. the agents browse it with their long-term memory grown by the watches of earlier
   rounds (`ops.agents.memory.grow_memories`): what they watched, the rating and the reason
   they gave, their feeling, retrieved by text and by poster like the train history;
4. this round's watches are written to memory (`written_memories`) and its clicks and views
   join the training rows of the next round.

A round is a pure function of its inputs and the seed: the arm's training is seeded, the
agents' generators come from `round_seed(seed, round)` (so two rounds do not replay the
same draws), and the state carried from one round to the next is two tables — the written
memories and the simulated training rows — which the assets store per (arm, round) and
never change afterwards.  `simulate_rounds` runs rounds 0 … R−1 in one process.

The filter-bubble experiment on these rounds is `ops.studies.filter_bubble`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.agents.memory import grow_memories
from ops.agents.session import AgentSession
from ops.arms.recommenders import arm_config, top_k, train_arm
from ops.readout.agent_metrics import per_agent_metrics
from ops.readout.statistics import named_rng
from ops.schema import RATINGS, WRITTEN_MEMORIES, conform
from ops.simulation.assignment import sample_agents
from ops.simulation.catalogue import Catalogue
from ops.simulation.kinds import BrainFactory, BrainKind, BrainSources
from ops.simulation.observation import WATCH_AND_RATE
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate
from ops.simulation.sandbox import SandboxConfig
from ops.studies.augmentation import AugmentationConfig, Signal, augment, simulated_interactions


class RoundsConfig(BaseModel):
    # Agent4Rec §4.1: "four complete simulation rounds".
    rounds: int = Field(4, ge=1)
    # Agent4Rec §4.1: "recommended movies span up to 5 pages" (5 movies a page, A/B Agent §3.1).
    pages: int = Field(5, ge=1)
    items_per_page: int = Field(5, ge=1)
    # Agent4Rec §4.1: "we divide the MovieLens' movie pool into four equal parts", one per
    # round, so no round recommends from movies an earlier round used up.  False: every
    # round ranks the whole catalogue (the plain longitudinal A/B test).
    split_pool: bool = False
    # The A/B Agent §3.4 signals that become training rows of the next round.
    signals: tuple[Signal, ...] = ("click", "view")
    seed: int = 0
    n_bootstrap: int = Field(1000, ge=10)
    confidence: float = Field(0.95, gt=0, lt=1)

    @property
    def list_length(self) -> int:
        return self.pages * self.items_per_page


@dataclass(frozen=True)
class RoundResult:
    """What round `round` of an arm produced; `written` and `added` are cumulative."""

    round: int
    lists: pl.DataFrame  # TOP_K: what the arm recommended this round
    events: pl.DataFrame  # EVENTS of this round
    written: pl.DataFrame  # WRITTEN_MEMORIES of rounds 0..round
    added: pl.DataFrame  # RATINGS: simulated training rows of rounds 0..round
    train_rows: int  # rows the arm of this round was trained on
    pool_size: int  # movies the arm could recommend this round


def simulate_round(
    arm_config,
    round_index: int,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame,
    catalogue_frame: pl.DataFrame,
    agents,
    brain_model,
    written_before: pl.DataFrame,
    added_before: pl.DataFrame,
    config: RoundsConfig | None = None,
    user_ids: Sequence[int] | None = None,
    pool: np.ndarray | None = None,
    on_epoch=None,
    concurrency: int = 1,
) -> RoundResult:
    """Round `round_index` of the arm `arm_config` (an `ops.arms.trained.ArmConfig`):
    train, rank the pool, simulate, write memories (module docstring).

    `agents` is `ops.agents.build.Agents` (train-window memories), `brain_model` anything
    with `.brain()` that makes a fresh brain (the fitted embedded brain, a brain kind's
    `ops.simulation.kinds.BrainFactory`);
    `written_before` / `added_before` the state after the previous round (empty tables for
    round 0); `pool` the movie ids this round may recommend (None: the whole catalogue);
    `concurrency` agents in flight (`simulate`; the LLM brain's coroutines).
    """
    config = config or RoundsConfig()
    written_before = conform(written_before, WRITTEN_MEMORIES, "written memories")
    added_before = conform(added_before, RATINGS, "simulated training rows")
    if written_before.height and written_before.get_column("round").max() >= round_index:
        raise ValueError(
            f"round {round_index}: the memories carried in already hold round {written_before.get_column('round').max()}"
        )
    round_train = augment(train, added_before)
    trained = train_arm(arm_config, round_train, valid, users, catalogue_frame, on_epoch=on_epoch)
    chosen = sorted(agents.profiles) if user_ids is None else sorted(int(u) for u in user_ids)
    candidates = catalogue_frame.get_column("item_id").to_numpy() if pool is None else np.asarray(pool, dtype=np.int64)
    # Nothing the agent rated (train or an earlier round) or opened is recommended again.
    lists = top_k(
        trained,
        np.asarray(chosen, dtype=np.int64),
        candidates,
        exclude=round_train.select("user_id", "item_id"),
        k=config.list_length,
    )
    listed = set(lists.get_column("user_id").unique().to_list())
    chosen = [u for u in chosen if u in listed]

    memories = grow_memories(agents.memories, written_before)
    sessions = [AgentSession(u, agents.profiles[u], memories[u], 0.0, 0.0) for u in chosen]
    sim_config = SimulationConfig(
        sandbox=SandboxConfig(list_length=config.list_length, items_per_page=config.items_per_page), progress=False
    )
    brain = brain_model.brain()
    try:
        events = simulate(
            brain,
            sessions,
            lists,
            Catalogue.from_frame(catalogue_frame),
            sim_config,
            arms=[arm_config.name],
            seed=round_seed(config.seed, round_index),
            run_id=f"round-{round_index}",
            users=chosen,
            concurrency=concurrency,
        )
    finally:
        close = getattr(brain, "close", None)
        if close is not None:
            close()

    # After everything the agents remember: at the simulation clock that is the validation window.
    clock = _clock_after(train, valid, written_before, added_before)
    written = pl.concat([written_before, written_memories(events, round_index, clock)])
    aug = AugmentationConfig(signals=config.signals, progress=False)
    # Views first: a movie clicked and then watched keeps the agent's own rating.
    signals = sorted(config.signals, key=("view", "click").index)
    new_rows = pl.concat([simulated_interactions(events, s, round_train, aug) for s in signals])
    # The clock of the written memories, so training rows and memories of a round agree in time.
    new_rows = new_rows.with_columns(
        pl.col("timestamp") - new_rows.get_column("timestamp").min() + clock if new_rows.height else pl.col("timestamp")
    )
    added = pl.concat([added_before, new_rows.unique(["user_id", "item_id"], keep="first", maintain_order=True)])
    return RoundResult(round_index, lists, events, written, added, round_train.height, len(np.unique(candidates)))


def simulate_rounds(
    arm_config,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame,
    catalogue_frame: pl.DataFrame,
    agents,
    brain_model,
    config: RoundsConfig | None = None,
    user_ids: Sequence[int] | None = None,
) -> list[RoundResult]:
    """Rounds 0 … R−1 of one arm, each from the state the one before left."""
    config = config or RoundsConfig()
    pools = (
        movie_pools(catalogue_frame.get_column("item_id").to_numpy(), config.rounds, config.seed)
        if config.split_pool
        else [None] * config.rounds
    )
    written, added = empty_written_memories(), pl.DataFrame(schema=RATINGS)
    results = []
    for r in range(config.rounds):
        result = simulate_round(
            arm_config,
            r,
            train,
            valid,
            users,
            catalogue_frame,
            agents,
            brain_model,
            written,
            added,
            config,
            user_ids,
            pools[r],
        )
        written, added = result.written, result.added
        results.append(result)
    return results


@dataclass(frozen=True)
class PlayedRound:
    """One (arm, round) partition: the three tables it stores and the figures it logs."""

    events: pl.DataFrame  # EVENTS of the round, with its `round`
    written: pl.DataFrame  # WRITTEN_MEMORIES up to this round
    added: pl.DataFrame  # RATINGS: simulated training rows up to this round
    summary: dict[str, float | int | None]

    @property
    def outputs(self) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """round_events, memory_after_round, round_training_rows, in that order."""
        return self.events, self.written, self.added


def play_round(
    arm: str,
    round_index: int,
    config: RoundsConfig,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame,
    catalogue_frame: pl.DataFrame,
    agents,
    kind: BrainKind,
    sources: BrainSources,
    written_before: pl.DataFrame,
    added_before: pl.DataFrame,
    *,
    n_agents: int = 0,
    max_epochs: int = 0,
) -> PlayedRound:
    """Round `round_index` of arm `arm` for a sample of `n_agents` agents (0: all), the brain
    `kind` made from `sources`: the round's pool, `simulate_round`, and its summary figures."""
    pool = (
        movie_pools(catalogue_frame.get_column("item_id").to_numpy(), config.rounds, config.seed)[round_index]
        if config.split_pool
        else None
    )
    chosen = sample_agents(agents.profiles, n_agents, config.seed)
    overrides = {"max_epochs": max_epochs} if max_epochs else {}
    result = simulate_round(
        arm_config(arm, settings=overrides),
        round_index,
        train,
        valid,
        users,
        catalogue_frame,
        agents,
        BrainFactory(kind, sources),
        written_before,
        added_before,
        config,
        chosen,
        pool,
        concurrency=kind.concurrency(sources),
    )
    events = result.events.with_columns(round=pl.lit(round_index, dtype=pl.Int64))
    per_agent = per_agent_metrics(result.events)
    summary = {
        "agents": per_agent.height,
        "events": events.height,
        "train_rows": result.train_rows,
        "memories_written": result.written.filter(pl.col("round") == round_index).height,
        "memories_total": result.written.height,
        "training_rows_added": result.added.height - added_before.height,
        **{m: per_agent.get_column(m).mean() for m in ("ctr", "cvr", "average_rating", "satisfaction")},
    }
    return PlayedRound(events, result.written, result.added, summary)


def movie_pools(item_ids: np.ndarray, parts: int, seed: int = 0) -> list[np.ndarray]:
    """The catalogue shuffled (seeded) and cut into `parts` equal parts (Agent4Rec §4.1);
    the remainder of the division is left out so the parts are equal."""
    ids = np.unique(np.asarray(item_ids, dtype=np.int64))
    size = len(ids) // parts
    if size == 0:
        raise ValueError(f"movie_pools: {len(ids)} movies cannot be split in {parts} parts")
    order = named_rng(seed, "movie_pools").permutation(ids)
    return [np.sort(order[i * size : (i + 1) * size]) for i in range(parts)]


def round_seed(seed: int, round_index: int) -> int:
    """The agents' seed in a round: a different stream per round for the same run seed."""
    return int(np.random.SeedSequence([seed, 12, round_index]).generate_state(1)[0])


def written_memories(events: pl.DataFrame, round_index: int, start: int) -> pl.DataFrame:
    """This round's watch_and_rate events as WRITTEN_MEMORIES: the movie, its rating and the
    reason the agent gave as its feeling, stamped from `start` on in (user, session, step)
    order, so each agent's memories stay oldest first."""
    watched = events.filter(pl.col("action") == WATCH_AND_RATE).sort("user_id", "session", "step")
    return conform(
        watched.select(
            "user_id",
            "item_id",
            "rating",
            timestamp=pl.lit(start, dtype=pl.Int64) + pl.int_range(pl.len(), dtype=pl.Int64),
            feeling=pl.col("reason").fill_null(""),
            round=pl.lit(round_index, dtype=pl.Int64),
        ),
        WRITTEN_MEMORIES,
        "written memories",
    )


def empty_written_memories() -> pl.DataFrame:
    return pl.DataFrame(schema=WRITTEN_MEMORIES)


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def _clock_after(*frames: pl.DataFrame) -> int:
    stamps = [f.get_column("timestamp").max() for f in frames if f.height]
    return int(max(stamps)) + 1 if stamps else 0

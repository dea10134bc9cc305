"""Simulation runner: fatigue-forced exits, event rows, determinism, concurrency, atomic partitions."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import polars as pl
import pytest

from ops.agents.session import AgentSession
from ops.schema import EVENTS
from ops.simulation.assignment import agents_of_arm, assign_agents
from ops.simulation.brains.random_policy import UniformRandomBrain
from ops.simulation.catalogue import Catalogue, MovieInfo
from ops.simulation.fatigue import FatigueConfig
from ops.simulation.observation import Decision
from ops.simulation.request import SimulationConfig, SimulationRequest
from ops.simulation.runner import simulate
from ops.simulation.sandbox import IllegalActionError
from ops.storage.atomic import atomic_write_parquet

N_USERS = 40


def world(n_users=N_USERS, arm="A"):
    cat = Catalogue(MovieInfo(m, f"M{m}", 6.0, ("Drama",)) for m in range(1, 101))
    rng = np.random.default_rng(7)
    rows = []
    for u in range(1, n_users + 1):
        for r, m in enumerate(rng.choice(100, 20, replace=False) + 1, start=1):
            rows.append((arm, u, r, int(m), 1.0 / r))
    top_k = pl.DataFrame(
        rows,
        schema={"arm": pl.Utf8, "user_id": pl.Int64, "rank": pl.Int64, "item_id": pl.Int64, "score": pl.Float64},
        orient="row",
    )
    tiers = ("low", "medium", "high")
    agents = [AgentSession(u, {"activity_tier": tiers[u % 3]}, None, 0.0, 0.0) for u in range(1, n_users + 1)]
    return cat, top_k, agents


CFG = SimulationConfig(progress=False)


class Scripted:
    """Browses forward page by page at a fixed interest, clicking and watching the first card."""

    name = "scripted"

    def __init__(self, interest=3):
        self.interest = interest

    def prepare(self, sessions, shown):
        self.shown = shown

    def decide(self, session, obs, rng):
        if obs.page_type == "detail":
            return Decision("watch_and_rate", self.interest, "liked it", rating=4)
        watched = {e.item_id for e in session.short_term if e.action == "watch_and_rate"}
        first = obs.items[0].item_id
        if first not in watched:
            return Decision("click_movie", self.interest, "first card", item_id=first, caught_eye=(first,))
        if "next_page" in obs.legal_actions:
            return Decision("next_page", self.interest, "more")
        return Decision("exit", self.interest, "done")

    def exit_interview(self, session, rng):
        return 7, "fine"


def test_budget_forces_an_exit_with_a_reason_and_costs_follow_eq_1():
    cat, top_k, agents = world(3)
    ev = simulate(Scripted(interest=3), agents, top_k, cat, CFG, arms=["A"], seed=1, run_id="r1")
    # user 1 is "medium" (budget 30): click 2 + watch 10 + next 2 + click 2 + watch 10 = 26,
    # next 2 -> 28, click 2 -> 30 reaches the budget on the detail page: forced exit.
    u1 = ev.filter(pl.col("user_id") == 1)
    assert u1.get_column("action").to_list() == [
        "click_movie",
        "watch_and_rate",
        "next_page",
        "click_movie",
        "watch_and_rate",
        "next_page",
        "click_movie",
        "exit",
        "exit_interview",
    ]
    assert u1.get_column("fatigue_after").to_list()[:7] == [2, 12, 14, 16, 26, 28, 30]
    forced = u1.filter(pl.col("action") == "exit").row(0, named=True)
    assert forced["forced"] and "fatigue budget spent: 30 of 30" in forced["reason"] and forced["interest"] is None
    assert forced["page_type"] == "detail" and forced["page_number"] == 3
    interview = u1.row(-1, named=True)
    assert (interview["satisfaction"], interview["reason"], interview["step"]) == (7, "fine", 9)
    assert u1.get_column("step").to_list() == list(range(1, 10))
    # positions and shown pages are recorded
    click = u1.row(0, named=True)
    assert click["position"] == 1 and click["shown"][0] == click["item_id"] and len(click["shown"]) == 5
    assert ev.schema == pl.Schema(EVENTS)
    # a "high" agent (user 3, budget 45) at interest 5 pays half: it gets further
    ev5 = simulate(Scripted(interest=5), agents, top_k, cat, CFG, arms=["A"], seed=1, run_id="r1")
    assert ev5.filter(pl.col("user_id") == 1).height > u1.height


def test_same_seed_same_bytes_and_order_independence(tmp_path):
    cat, top_k, agents = world()
    a = simulate(UniformRandomBrain(), agents, top_k, cat, CFG, arms=["A"], seed=3, run_id="r")
    b = simulate(UniformRandomBrain(), list(reversed(agents)), top_k, cat, CFG, arms=["A"], seed=3, run_id="r")
    pa, pb = tmp_path / "a.parquet", tmp_path / "b.parquet"
    atomic_write_parquet(a, pa)
    atomic_write_parquet(b, pb)
    assert pa.read_bytes() == pb.read_bytes()
    # an agent's session does not depend on which other agents run
    sub = simulate(UniformRandomBrain(), agents, top_k, cat, CFG, arms=["A"], seed=3, run_id="r", users=[5, 9])
    assert sub.equals(a.filter(pl.col("user_id").is_in([5, 9])))
    c = simulate(UniformRandomBrain(), agents, top_k, cat, CFG, arms=["A"], seed=4, run_id="r")
    assert not c.equals(a)
    assert pl.read_parquet(pa).equals(a)


def test_concurrent_agents_give_the_serial_events():
    cat, top_k, agents = world()
    serial = simulate(UniformRandomBrain(), agents, top_k, cat, CFG, arms=["A"], seed=3, run_id="r")
    for concurrency in (2, 7):
        assert simulate(
            UniformRandomBrain(), agents, top_k, cat, CFG, arms=["A"], seed=3, run_id="r", concurrency=concurrency
        ).equals(serial)
    with pytest.raises(ValueError, match="concurrency"):
        simulate(UniformRandomBrain(), agents, top_k, cat, CFG, arms=["A"], concurrency=0)


def test_illegal_brain_action_raises_with_context():
    class Bad(Scripted):
        def decide(self, session, obs, rng):
            return Decision("previous_page", 3, "oops")

    cat, top_k, agents = world(2)
    with pytest.raises(IllegalActionError, match="home page 1 is the first") as info:
        simulate(Bad(), agents, top_k, cat, CFG, arms=["A"], seed=1)
    assert any("user 1 on arm 'A'" in n for n in info.value.__notes__)


def test_missing_lists_tiers_and_bad_interview_are_errors():
    cat, top_k, agents = world(3)
    with pytest.raises(ValueError, match="no list for user"):
        simulate(Scripted(), agents, top_k.filter(pl.col("user_id") != 2), cat, CFG, arms=["A"], users=[1, 2, 3])
    with pytest.raises(ValueError, match="no rows for arm 'B'"):
        simulate(Scripted(), agents, top_k, cat, CFG, arms=["B"])
    no_tier = [AgentSession(a.user_id, {}, None, 0.0, 0.0) for a in agents]
    with pytest.raises(ValueError, match="no activity tier"):
        simulate(Scripted(), no_tier, top_k, cat, CFG, arms=["A"])
    ev = simulate(Scripted(), no_tier, top_k, cat, CFG, arms=["A"], activity_tiers={1: "low", 2: "low", 3: "high"})
    assert ev.get_column("fatigue_budget").unique().sort().to_list() == [20.0, 45.0]

    class Unhappy(Scripted):
        def exit_interview(self, session, rng):
            return 11, "off the scale"

    with pytest.raises(ValueError, match="satisfaction must be an integer in 1..10"):
        simulate(Unhappy(), agents, top_k, cat, CFG, arms=["A"])


def test_step_limit_is_a_forced_exit():
    free = FatigueConfig(
        base_costs={"click_movie": 0, "watch_and_rate": 0, "previous_page": 0, "next_page": 0, "back": 0, "exit": 0}
    )

    class Pacer(Scripted):
        def decide(self, session, obs, rng):
            return Decision("next_page" if "next_page" in obs.legal_actions else "previous_page", 3, "pacing")

    cat, top_k, agents = world(1)
    ev = simulate(Pacer(), agents, top_k, cat, SimulationConfig(fatigue=free, max_steps=9, progress=False), arms=["A"])
    assert ev.height == 11 and "step limit" in ev.row(9, named=True)["reason"]


def test_agents_of_an_arm_are_a_seeded_sample_then_its_share_of_a_random_design():
    paired = agents_of_arm(range(1, 101), "A", n_agents=30, seed=2)
    assert len(paired) == 30 and paired == agents_of_arm(range(100, 0, -1), "B", n_agents=30, seed=2)
    shares = [agents_of_arm(range(1, 101), arm, 30, "random", ["A", "B"], seed=2) for arm in ("A", "B")]
    assert sorted(shares[0] + shares[1]) == paired and not set(shares[0]) & set(shares[1])


def test_paired_and_random_assignment():
    paired = assign_agents(range(1, 11), ["A", "B", "C"])
    assert all(v == list(range(1, 11)) for v in paired.values())
    rand = assign_agents(range(1, 11), ["A", "B", "C"], design="random", seed=5)
    assert sorted(sum(rand.values(), [])) == list(range(1, 11))
    assert sorted(len(v) for v in rand.values()) == [3, 3, 4]
    assert rand == assign_agents(reversed(range(1, 11)), ["A", "B", "C"], design="random", seed=5)
    assert rand != assign_agents(range(1, 11), ["A", "B", "C"], design="random", seed=6)
    with pytest.raises(ValueError, match="design"):
        assign_agents([1], ["A"], design="cluster")


CRASH_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from tests.test_simulation import world, CFG
    from ops.simulation.brains.random_policy import UniformRandomBrain
    import ops.simulation.runner as sim
    import ops.storage.atomic as atomic
    mode, path = sys.argv[1], sys.argv[2]

    class Dying(UniformRandomBrain):
        sessions = 0
        def exit_interview(self, session, rng):
            Dying.sessions += 1
            if mode == "mid-simulation" and Dying.sessions == 17:
                os.kill(os.getpid(), signal.SIGKILL)
            return super().exit_interview(session, rng)

    if mode == "mid-write":
        real_replace = os.replace
        def die_before_rename(src, dst):
            assert os.path.getsize(src) > 0  # the temp file is written, the target not yet replaced
            os.kill(os.getpid(), signal.SIGKILL)
        atomic.os.replace = die_before_rename
    cat, top_k, agents = world()
    ev = sim.simulate(Dying(), agents, top_k, cat, CFG, arms=["A"], seed=11, run_id="run")
    atomic.atomic_write_parquet(ev, path, clean_stale=True)
    """
)


@pytest.mark.parametrize("mode", ["mid-simulation", "mid-write"])
def test_killed_run_then_rerun_leaves_one_complete_partition(tmp_path, mode):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT.format(root=root))
    path = tmp_path / "events" / "A.parquet"
    path.parent.mkdir()
    # an older complete partition (another seed) is already there
    cat, top_k, agents = world()
    old = simulate(UniformRandomBrain(), agents, top_k, cat, CFG, arms=["A"], seed=99, run_id="old")
    atomic_write_parquet(old, path)
    old_bytes = path.read_bytes()

    proc = subprocess.run([sys.executable, str(script), mode, str(path)], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert path.read_bytes() == old_bytes  # never a half-written or half-replaced partition
    leftovers = [p.name for p in path.parent.iterdir() if p.name != path.name]
    if mode == "mid-simulation":
        assert leftovers == []  # nothing is written before the whole arm is simulated
    else:
        assert len(leftovers) == 1 and leftovers[0].startswith(".A.parquet.tmp-")

    fresh = simulate(UniformRandomBrain(), agents, top_k, cat, CFG, arms=["A"], seed=11, run_id="run")
    atomic_write_parquet(fresh, path, clean_stale=True)
    assert sorted(p.name for p in path.parent.iterdir()) == ["A.parquet"]  # stale temp file gone
    events = pl.read_parquet(path)
    assert events.equals(fresh)
    assert events.filter(pl.col("action") == "exit_interview").height == N_USERS  # each agent once
    assert events.select("user_id", "step").is_duplicated().sum() == 0


def test_agent_generator_depends_on_seed_user_and_arm_unless_common_random_numbers():
    from ops.simulation.session import agent_rng

    draw = lambda *a: agent_rng(*a).random(3).tolist()  # noqa: E731
    assert draw(1, 5, "A") == draw(1, 5, "A")
    assert (
        draw(1, 5, "A") != draw(1, 5, "B") and draw(1, 5, "A") != draw(1, 6, "A") and draw(1, 5, "A") != draw(2, 5, "A")
    )
    assert draw(1, 5, "A", True) == draw(1, 5, "B", True)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_crashed_run_resumes_from_the_checkpoint_asking_only_the_unfinished_agents(tmp_path, concurrency):
    cat, top_k, agents = world()
    reference = simulate(UniformRandomBrain(), agents, top_k, cat, CFG, arms=["A"], seed=3, run_id="r")

    class Counting(UniformRandomBrain):
        """Counts the interviews (one per agent simulated); crashes after `crash_after`."""

        def __init__(self, crash_after=None):
            super().__init__()
            self.asked, self.crash_after = [], crash_after

        def exit_interview(self, session, rng):
            if self.crash_after is not None and len(self.asked) >= self.crash_after:
                raise RuntimeError("the process dies here")
            self.asked.append(session.user_id)
            return super().exit_interview(session, rng)

    folder = tmp_path / "checkpoints" / "A"
    crashing = Counting(crash_after=15)
    with pytest.raises(RuntimeError, match="the process dies here"):
        simulate(
            crashing,
            agents,
            top_k,
            cat,
            CFG,
            arms=["A"],
            seed=3,
            run_id="first",
            concurrency=concurrency,
            checkpoint_dir=folder,
        )
    finished = set(crashing.asked)
    assert len(finished) >= 15
    resumed_brain = Counting()
    resumed = simulate(
        resumed_brain,
        agents,
        top_k,
        cat,
        CFG,
        arms=["A"],
        seed=3,
        run_id="r",
        concurrency=concurrency,
        checkpoint_dir=folder,
    )
    assert not set(resumed_brain.asked) & finished and len(resumed_brain.asked) + len(finished) == N_USERS
    assert resumed.equals(reference)  # byte for byte: nothing lost, nothing twice, run_id re-stamped
    again = Counting()
    assert simulate(again, agents, top_k, cat, CFG, arms=["A"], seed=3, run_id="r", checkpoint_dir=folder).equals(
        reference
    )
    assert again.asked == []  # complete: an unchanged re-run simulates nothing
    # Another arm configuration (a step limit) is another key: nothing reused, the old file superseded.
    (old,) = folder.glob("*.jsonl")
    other = Counting()
    simulate(
        other,
        agents,
        top_k,
        cat,
        SimulationConfig(progress=False, max_steps=3),
        arms=["A"],
        seed=3,
        checkpoint_dir=folder,
    )
    assert len(other.asked) == N_USERS and not old.exists()


def test_session_zero_keeps_the_single_session_generator_and_later_sessions_are_independent():
    import zlib

    from ops.simulation.session import agent_rng

    # Session 0 is the generator every single-session run has used: SeedSequence([seed, user, crc32(arm)]).
    before = np.random.default_rng(np.random.SeedSequence([1, 5, zlib.crc32(b"A")])).random(4).tolist()
    assert agent_rng(1, 5, "A").random(4).tolist() == before == agent_rng(1, 5, "A", session=0).random(4).tolist()
    assert agent_rng(1, 5, "A", session=1).random(4).tolist() != before
    assert agent_rng(1, 5, "A", session=1).random(4).tolist() != agent_rng(1, 5, "A", session=2).random(4).tolist()
    # Common random numbers: the same draws in every arm for a session, new ones for the next.
    assert (
        agent_rng(1, 5, "A", True, session=2).random(2).tolist()
        == agent_rng(1, 5, "B", True, session=2).random(2).tolist()
    )
    assert (
        agent_rng(1, 5, "A", True, session=2).random(2).tolist()
        != agent_rng(1, 5, "A", True, session=1).random(2).tolist()
    )


def test_sessions_are_numbered_in_the_events_and_session_zero_is_the_old_run():
    cat, top_k, agents = world(12)
    default = simulate(UniformRandomBrain(), agents, top_k, cat, CFG, arms=["A"], seed=3, run_id="r")
    twice = simulate(UniformRandomBrain(), agents, top_k, cat, CFG, seed=3, run_id="r", sessions_per_agent=2)
    zero, one = (twice.filter(pl.col("session") == s) for s in (0, 1))
    assert default.schema == pl.Schema(EVENTS) and zero.equals(default)
    assert default.get_column("session").unique().to_list() == [0] and twice.height == zero.height + one.height
    assert twice.equals(
        simulate(UniformRandomBrain(), agents, top_k, cat, CFG, seed=3, run_id="r", sessions_per_agent=2)
    )
    # An independent repetition: the same agents, other decisions.
    assert sorted(one.get_column("user_id").unique().to_list()) == sorted(
        default.get_column("user_id").unique().to_list()
    )
    assert one.get_column("action").to_list() != default.get_column("action").to_list()
    with pytest.raises(ValueError, match="session must be >= 0"):
        SimulationRequest.of("A", {}, [], cat, UniformRandomBrain(), CFG, session=-1)

"""One run per simulation partition at a time: a second run of the same
partition waits for the first and then finds its agents done, or fails naming the holder;
the checkpoint holds each agent once."""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ops.simulation.brains.random_policy import UniformRandomBrain
from ops.simulation.runner import simulate
from ops.storage.checkpoint import PartitionBusy, partition_lock
from tests.test_simulation import CFG, N_USERS, world


class Held(UniformRandomBrain):
    """Stops inside its first agent's interview until released: the run holds the lock there.
    Both runs use this class: the brain's class is part of the checkpoint key."""

    def __init__(self, released=False):
        super().__init__()
        self.started, self.release, self.asked = threading.Event(), threading.Event(), []
        if released:
            self.release.set()

    def exit_interview(self, session, rng):
        self.started.set()
        assert self.release.wait(30), "the test never released the first run"
        self.asked.append(session.user_id)
        return super().exit_interview(session, rng)


def _run(results, name, arm, top_k, agents, cat, brain, config, **kwargs):
    try:
        results[name] = simulate(brain, agents, top_k, cat, config, arms=[arm], **kwargs)
    except Exception as exc:  # noqa: BLE001  the test inspects it
        results[name] = exc


def test_a_second_run_of_a_partition_waits_then_simulates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMAB_PARTITION_LOCK_TIMEOUT_S", "60")
    cat, top_k, agents = world()
    folder = tmp_path / "checkpoints" / "A"
    first, second, results = Held(), Held(released=True), {}
    common = dict(seed=3, checkpoint_dir=folder)
    t1 = threading.Thread(target=_run, args=(results, "first", "A", top_k, agents, cat, first, CFG), kwargs=common)
    t1.start()
    assert first.started.wait(30)
    t2 = threading.Thread(target=_run, args=(results, "second", "A", top_k, agents, cat, second, CFG), kwargs=common)
    t2.start()
    time.sleep(0.6)
    # The second run waits at the lock: it has opened no checkpoint and asked nothing.
    assert t2.is_alive() and second.asked == [] and "second" not in results
    first.release.set()
    t1.join(30)
    t2.join(30)
    assert not isinstance(results["first"], Exception), results["first"]
    assert not isinstance(results["second"], Exception), results["second"]
    assert len(first.asked) == N_USERS and second.asked == []  # nobody simulated (or paid for) twice
    assert results["second"].equals(results["first"])
    (checkpoint,) = folder.glob("*.jsonl")
    users = [json.loads(line)["user_id"] for line in checkpoint.read_text().splitlines()]
    assert sorted(users) == list(range(1, N_USERS + 1))  # each agent once
    assert not (folder / ".partition.holder.json").exists()


def test_a_second_run_past_the_timeout_fails_naming_the_partition_and_the_holder(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMAB_PARTITION_LOCK_TIMEOUT_S", "0.3")
    cat, top_k, agents = world(n_users=6)
    folder = tmp_path / "checkpoints" / "A"
    first, results = Held(), {}
    t1 = threading.Thread(
        target=_run,
        args=(results, "first", "A", top_k, agents, cat, first, CFG),
        kwargs=dict(seed=3, run_id="nightly-run-1", checkpoint_dir=folder),
    )
    t1.start()
    try:
        assert first.started.wait(30)
        second = Held(released=True)
        began = time.monotonic()
        with pytest.raises(PartitionBusy) as caught:
            simulate(second, agents, top_k, cat, CFG, arms=["A"], seed=3, run_id="manual-2", checkpoint_dir=folder)
        assert 0.25 <= time.monotonic() - began < 10
        message = str(caught.value)
        assert "simulation of arm 'A'" in message and "run nightly-run-1" in message
        assert f"pid {os.getpid()}" in message and "SIMAB_PARTITION_LOCK_TIMEOUT_S" in message
        assert second.asked == []
    finally:
        first.release.set()
        t1.join(30)
    assert len(first.asked) == 6


def test_the_lock_is_re_entrant_in_a_thread_and_a_killed_holder_frees_it(tmp_path):
    folder = tmp_path / "part"
    with partition_lock(folder, "p", timeout_s=0), partition_lock(folder, "p", timeout_s=0):
        pass  # the asset holds it across sessions, the runner takes it again: no self-deadlock
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from ops.storage.checkpoint import partition_lock
                with partition_lock({str(folder)!r}, "simulation_events[pop]", holder="run-in-another-process", timeout_s=0):
                    print("held", flush=True)
                    time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(
            PartitionBusy, match=rf"simulation_events\[pop\].*run run-in-another-process, pid {holder.pid}"
        ):
            with partition_lock(folder, "simulation_events[pop]", timeout_s=0.2):
                pass
    finally:
        holder.kill()
        holder.wait(10)
    # An OS lock: the killed holder left no stale lock behind.
    with partition_lock(folder, "simulation_events[pop]", timeout_s=5):
        pass

"""The sensitivity ladder (`ops.studies.alignment.sensitivity`): the control's lists degraded
step by step, shown to the run's agents; an agent who sees list quality notices a few slots,
one who does not notices none."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ops.readout.verdict import Verdict, sensitivity_verdict, verdict_lines
from ops.studies.alignment.sensitivity import Sensitivity, ladder_lists, sensitivity_study
from ops.studies.alignment.trust import sensitivity_headline, trust_section
from tests.test_alignment import N_MOVIES, CoinFlipBrain, OracleBrain, world  # noqa: F401  (world: a fixture)


@pytest.fixture(scope="module")
def control(world):  # noqa: F811
    """Every user's list: its liked held-out movies first, then its other held-out ones, 20 in all."""
    rows = []
    for user, movies in (
        world.test.sort("rating", "item_id", descending=[True, False])
        .group_by("user_id", maintain_order=True)
        .agg("item_id")
        .iter_rows()
    ):
        rows += [("ctl", user, rank, m, 20.0 - rank) for rank, m in enumerate(movies[:20], start=1)]
    return pl.DataFrame(rows, schema=["arm", "user_id", "rank", "item_id", "score"], orient="row")


def _run(world, control, brain, sessions_per_agent):  # noqa: F811
    return sensitivity_study(
        brain,
        world.sessions,
        sessions_per_agent,
        "ctl",
        control,
        world.train.select("user_id", "item_id"),
        world.catalogue,
        np.arange(1, N_MOVIES + 1),
        n_bootstrap=300,
    )


def test_the_ladder_nests_its_rungs_and_never_draws_a_seen_item(world, control):  # noqa: F811
    lists = ladder_lists(control, world.train.select("user_id", "item_id"), np.arange(1, N_MOVIES + 1), seed=1)
    assert lists.get_column("ratio").unique(maintain_order=True).to_list() == [
        "0/20",
        "5/20",
        "10/20",
        "15/20",
        "20/20",
    ]
    base = control.select("user_id", pl.col("rank").alias("position"), pl.col("item_id").alias("base"))
    changed = {
        r: lists.filter(pl.col("ratio") == r)
        .join(base, on=["user_id", "position"])
        .filter(pl.col("item_id") != pl.col("base"))
        for r in ("5/20", "10/20")
    }
    assert changed["5/20"].height == 5 * control.get_column("user_id").n_unique()
    assert changed["5/20"].join(changed["10/20"], on=["user_id", "position", "item_id"], how="anti").is_empty()
    assert changed["10/20"].join(world.train, on=["user_id", "item_id"], how="semi").is_empty()
    with pytest.raises(ValueError, match="slots must lie in 0..20"):
        ladder_lists(control, world.train, np.arange(1, N_MOVIES + 1), slots=(0, 25))


def test_an_agent_who_sees_list_quality_notices_five_slots_and_a_coin_notices_none(world, control, tmp_path):  # noqa: F811
    liked = {(u, m) for u, m in world.test.filter(pl.col("rating") >= 4).select("user_id", "item_id").iter_rows()}
    # The run's agents: 90 of them, a third with two sessions (as with visits by activity).
    run = {u: 2 if u % 3 == 0 else 1 for u in world.users[:90]}
    oracle = _run(world, control, OracleBrain(liked), run)
    assert (oracle.agents, oracle.sessions, oracle.control, oracle.brain) == (90, 2, "ctl", "oracle")
    assert oracle.readout.per_session.filter(pl.col("arm") == "0/20").height == sum(run.values())
    steps = oracle.steps.sort("slots")
    ctr = steps.get_column("ctr").to_list()
    assert all(a > b for a, b in zip(ctr, ctr[1:]))  # every rung worse than the one before
    assert oracle.smallest_detected() == 5 and steps.filter(pl.col("slots") > 0).get_column("detected").all()
    assert oracle.adjacent.height == 4 and oracle.adjacent.get_column("separated").all()
    assert (oracle.adjacent.get_column("minimum_detectable_difference") > 0).all()
    said = sensitivity_verdict(oracle.headline())
    assert said.startswith(
        "sensitivity: at 90 agents the smallest degradation of ctl's lists the simulation detects is 5 of 20 slots"
    )
    # Between the rungs: the CTR lost per slot and the first step's MDE give the finer figure.
    assert oracle.slope == pytest.approx(np.polyfit(steps["slots"].to_numpy(), steps["ctr"].to_numpy(), 1)[0])
    first_mde = oracle.adjacent.get_column("minimum_detectable_difference")[0]
    assert oracle.detectable_slots == pytest.approx(first_mde / -oracle.slope) and oracle.detectable_slots < 5
    assert said.endswith(
        f"; about {oracle.detectable_slots:.1f} slots at the MDE of one step ({first_mde:.4f}; "
        f"CTR {oracle.slope:+.4f} per slot)"
    )
    assert said in verdict_lines(Verdict(sensitivity=sensitivity_headline(oracle)))
    from ops.figures import save_figure
    from ops.studies.alignment.protocol_figures import sensitivity_figure

    assert save_figure(sensitivity_figure(oracle), tmp_path / "ladder.png").stat().st_size > 1000
    # Stored and read back whole.
    oracle.save(tmp_path / "s")
    again = Sensitivity.load(tmp_path / "s")
    assert again.steps.equals(oracle.steps) and again.smallest_detected() == 5

    coin = _run(world, control, CoinFlipBrain(), {u: 1 for u in world.users[:90]})
    assert coin.smallest_detected() is None and not coin.adjacent.get_column("separated").any()
    assert sensitivity_verdict(coin.headline()) == (
        "sensitivity: at 90 agents the simulation detects no degradation of ctl's lists, up to 20 of 20 slots "
        "replaced by random unseen items"
    )
    section = "\n".join(trust_section(sensitivity=coin))
    assert "it detects none of these degradations" in section and "| 20 of 20 " in section
    skipped = sensitivity_headline({"not_measured": "the llm:x brain pays for every decision"})
    assert sensitivity_verdict(skipped) == "sensitivity: not measured (the llm:x brain pays for every decision)"
    assert "Not measured: the llm:x brain" in "\n".join(trust_section(sensitivity_skipped="the llm:x brain pays"))


def test_the_ladder_is_skipped_for_a_brain_that_pays_per_decision_unless_asked():
    from ops.simulation.brains.embedded.brain import EmbeddedBrain
    from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
    from ops.simulation.brains.random_policy import UniformRandomBrain
    from ops.studies.alignment.sensitivity import skip_reason

    llm = LLMBrain(LLMBrainConfig(model="m", base_url="http://127.0.0.1:9/v1"))
    try:
        said = skip_reason(llm, 300)
        assert said.startswith("the llm:m brain pays for every decision") and "300 agents five times over" in said
        assert skip_reason(llm, 300, metered_brain=True) is None
    finally:
        llm.close()
    assert EmbeddedBrain.decides_offline and skip_reason(UniformRandomBrain(), 300) is None

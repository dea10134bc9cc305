"""The mirror arm (the brain's own ranking) and the read-out of the simulator's bias."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from fakes.agents import HashTextEmbedder, make_catalogue, make_users_and_ratings, split_by_time
from ops.agents.build import AgentsConfig, build_agents
from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder
from ops.arms.base import FitData, ScoresNotAvailable
from ops.arms.registry import PluggedArm, has_capability, make_arm
from ops.data.catalogue import build_catalogue
from ops.readout.bias import simulator_bias, spearman_one_sided
from ops.simulation.brains.embedded import fit_embedded_brain
from ops.studies.mirror import brain_scores


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    movies, meta = make_catalogue(root / "posters")
    users, ratings, _ = make_users_and_ratings(movies)
    train, valid = split_by_time(ratings)
    catalogue = build_catalogue(movies, meta)
    agents = build_agents(
        train,
        users,
        catalogue,
        AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
        HashTextEmbedder(),
        PaletteLayoutPosterEmbedder(),
        root / "cache",
    )
    model = fit_embedded_brain(agents, train, valid, users)
    return dict(train=train, valid=valid, users=users, catalogue=catalogue, agents=agents, model=model)


def test_the_mirror_lists_each_users_unseen_items_by_the_brains_click_log_odds_and_round_trips(world, tmp_path):
    agents, model, train = world["agents"], world["model"], world["train"]
    known = np.array(sorted(agents.profiles))
    stranger = int(world["users"].get_column("user_id").max()) + 1  # first seen in the test window: no agent
    items = world["catalogue"].get_column("item_id").to_numpy()
    arm = make_arm("mirror")
    assert has_capability("mirror", "mirrors_brain") and has_capability("mirror", "diagnostic")
    assert not has_capability("pop", "diagnostic") and not has_capability("fm", "mirrors_brain")
    data = FitData(train, world["valid"], world["users"], world["catalogue"], rank_users=np.r_[known, stranger])
    with pytest.raises(ValueError, match="embedded_brain"):
        arm.fit(data)  # without the brain's scores it refuses, naming what to materialise
    arm.fit(FitData(**{**data.__dict__, "brain_scores": brain_scores(model, agents)}))
    train = train  # the arm API's words: item_id in, item_id out
    ranked = arm.rank(np.r_[known, stranger], items, train.select("user_id", "item_id"), k=20)
    seen = {u: set(ms) for u, ms in train.group_by("user_id").agg("item_id").iter_rows()}
    brain = model.brain()
    for user in known[:5].tolist():
        unseen = [int(m) for m in items if m not in seen[user]]
        logits = brain.click_logits(agents.sessions([user])[0], unseen)
        expected = [unseen[i] for i in np.lexsort((unseen, -logits))[:20]]
        assert ranked.filter(pl.col("user_id") == user).sort("rank").get_column("item_id").to_list() == expected
    # The stranger gets the brain's mean view of the agents: a full list, none of it their train items.
    assert ranked.filter(pl.col("user_id") == stranger).height == 20
    assert not ranked.join(train.select("user_id", "item_id"), on=["user_id", "item_id"], how="semi").height
    with pytest.raises(ScoresNotAvailable):
        arm.score(known[:1], items[:1])
    arm.save(tmp_path / "mirror")
    again = PluggedArm.load(tmp_path / "mirror")
    assert again.rank(np.r_[known, stranger], items, train.select("user_id", "item_id"), k=20).equals(ranked)
    assert again.describe()["ranked_by"] == "the embedded brain's click model" and again.can_refit is False


def _frames(ctr: dict[str, float], ndcg: dict[str, float], overlap: dict[str, int], n: int = 60):
    """Per-agent CTR, per-user NDCG@20 and top-20 lists whose overlap with the mirror's is
    `overlap[arm]` items of 20, with a little seeded noise around the means."""
    rng = np.random.default_rng(0)
    per_agent = pl.concat(
        pl.DataFrame({"arm": a, "user_id": np.arange(n), "ctr": c + rng.normal(0, 0.01, n)}) for a, c in ctr.items()
    )
    per_user = pl.concat(
        pl.DataFrame({"arm": a, "user_id": np.arange(n), "ndcg_at_k": v + rng.normal(0, 0.005, n)})
        for a, v in ndcg.items()
    )
    mirror_items = np.arange(20)
    lists = {}
    for a in ctr:
        shared = overlap.get(a, 20)
        movies = np.r_[mirror_items[:shared], 1000 + np.arange(20 - shared)]
        lists[a] = pl.DataFrame(
            {
                "arm": a,
                "user_id": np.repeat(np.arange(n), 20),
                "rank": np.tile(np.arange(1, 21), n),
                "item_id": np.tile(movies, n),
            }
        )
    return per_agent, per_user, lists


def test_the_bias_read_out_measures_the_mirrors_excess_and_warns_when_its_interval_is_clear_of_0():
    # Five candidates about the line CTR = 0.2 + 2 NDCG, the ones sharing more items with
    # the mirror further above it (bumps, not in NDCG's order); the mirror sits 0.4 above the
    # line, at the NDCG@20 of b, whose CTR the monotone curve passes through: 0.42 above it.
    ndcg = {"a": 0.05, "b": 0.10, "c": 0.15, "d": 0.20, "e": 0.25, "mirror": 0.10}
    overlap = {"a": 8, "b": 0, "c": 6, "d": 2, "e": 4}
    bump = {"a": 0.02, "b": -0.02, "c": 0.01, "d": -0.01, "e": 0.0}
    ctr = {a: 0.2 + 2 * v + bump.get(a, 0.4) for a, v in ndcg.items()}
    per_agent, per_user, lists = _frames(ctr, ndcg, overlap)
    bias = simulator_bias(per_agent, per_user, lists, ["mirror"], n_bootstrap=300)
    assert bias.mirror == "mirror" and bias.candidates == 5
    assert bias.excess == pytest.approx(0.42, abs=0.01) and 0.37 < bias.excess_ci_low < bias.excess_ci_high < 0.47
    table = {r["arm"]: r for r in bias.arms.iter_rows(named=True)}
    assert table["a"]["overlap_with_mirror"] == pytest.approx(0.4) and table["mirror"]["overlap_with_mirror"] == 1.0
    assert table["mirror"]["simulated_rank"] == 1 and table["mirror"]["offline_rank"] == 5
    assert bias.rho >= 0.9 and bias.p_value <= 0.05
    assert bias.warning.startswith("the simulation favours the brain's own ranking (mirror): its CTR beyond what")
    assert f"{bias.excess:+.3f} [{bias.excess_ci_low:+.3f}, {bias.excess_ci_high:+.3f}], clear of 0" in bias.warning
    assert "simulator bias: the mirror (mirror) is 1st of 6 arms on CTR and 5th on NDCG@20" in bias.verdict_line()
    assert f"ρ(residual, overlap with it) = {bias.rho:+.2f} over 5 arms" in bias.verdict_line()
    assert "## Simulator bias" in bias.to_markdown() and "| mirror" in bias.to_markdown()

    # The mirror on the curve: no warning, whatever ρ says (here near +1, near its smallest p over 5 arms).
    level = {**ctr, "mirror": ctr["b"]}  # b's CTR at b's NDCG@20: where the curve passes
    quiet = simulator_bias(*_frames(level, ndcg, overlap), ["mirror"], n_bootstrap=300)
    assert quiet.excess_ci_low < 0 < quiet.excess_ci_high and quiet.rho >= 0.9
    assert quiet.warning is None and "Information only" in quiet.to_markdown()
    # Four candidates, where ρ can never reach a usual level: the excess alone warns.
    four = ("a", "b", "c", "d", "mirror")
    few = simulator_bias(
        *_frames({a: ctr[a] for a in four}, {a: ndcg[a] for a in four}, overlap), ["mirror"], n_bootstrap=300
    )
    assert few.min_p_value == pytest.approx(1 / 24) and few.excess_ci_low > 0 and few.warning is not None
    # Below its prediction and clear of 0: warned the other way.
    low = simulator_bias(*_frames({**ctr, "mirror": 0.1}, ndcg, overlap), ["mirror"], n_bootstrap=300)
    assert low.excess_ci_high < 0 and low.warning.startswith("the simulation disfavours the brain's own ranking")


def test_a_mirror_better_than_every_arm_offline_is_read_on_the_saturated_curve_not_a_line_through_random():
    # CTR saturates among good lists (Steam's DeepFM, FM, Pop and trending at 0.70-0.75), far
    # above random and a poor arm.  A mirror a little better offline than the best arm, with a
    # little more CTR, as the slope among the good arms says, is where the curve says: a
    # straight line through random would have predicted it 0.1 more and called it disfavoured.
    ndcg = {"random": 0.003, "poor": 0.02, "knn": 0.047, "deepfm": 0.061, "fm": 0.062, "pop": 0.086, "mirror": 0.099}
    ctr = {"random": 0.02, "poor": 0.17, "knn": 0.35, "deepfm": 0.70, "fm": 0.74, "pop": 0.75}
    good = ["deepfm", "fm", "pop"]  # the better half by NDCG@20: where the curve's slope goes on
    slope = np.polyfit([ndcg[a] for a in good], [ctr[a] for a in good], 1)[0]
    ctr["mirror"] = ctr["pop"] + slope * (ndcg["mirror"] - ndcg["pop"])
    bias = simulator_bias(*_frames(ctr, ndcg, {}), ["mirror"], n_bootstrap=300)
    straight = np.polyfit([ndcg[a] for a in ndcg if a != "mirror"], [ctr[a] for a in ctr if a != "mirror"], 1)
    assert ctr["mirror"] - np.polyval(straight, ndcg["mirror"]) < -0.1
    assert bias.excess_ci_low < 0 < bias.excess_ci_high and bias.warning is None
    # The same mirror far above the saturated arms is still seen.
    favoured = simulator_bias(*_frames({**ctr, "mirror": 0.95}, ndcg, {}), ["mirror"], n_bootstrap=300)
    assert favoured.excess_ci_low > 0.1 and favoured.warning is not None


def test_without_a_mirror_the_bias_is_not_measured_and_says_how_to_measure_it():
    ndcg = {"a": 0.05, "b": 0.10, "c": 0.15}
    per_agent, per_user, lists = _frames({a: 0.3 + v for a, v in ndcg.items()}, ndcg, {})
    bias = simulator_bias(per_agent, per_user, {}, [], n_bootstrap=50)
    assert bias.mirror is None and bias.excess is None and bias.warning is None
    assert "add the arm mirror to SIMAB_ARMS" in bias.verdict_line()
    assert bias.arms.get_column("residual").abs().max() < 0.01  # on the line


def test_spearman_one_sided_p_is_exact_over_the_orderings():
    rho, p = spearman_one_sided(np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0, 40.0, 30.0]))
    assert rho == pytest.approx(0.8) and p == pytest.approx(4 / 24)  # the identity and the 3 adjacent swaps


def test_the_item_knn_family_scores_a_movie_by_its_mean_co_watch_cosine_to_the_agents_memories(world):
    from ops.simulation.brains.embedded import EmbeddedBrainConfig, agent_states, pair_features
    from ops.simulation.brains.embedded.collab import item_neighbourhood_vectors
    from ops.simulation.brains.embedded.config import FEATURES

    train, agents = world["train"], world["agents"]
    config = EmbeddedBrainConfig(collab_family="itemknn")
    model = fit_embedded_brain(agents, train, world["valid"], world["users"], config)
    ctx = model.context
    users = sorted(set(train.get_column("user_id").to_list()))
    assert ctx.collab.shape == (len(ctx.facts.item_ids), len(users))  # one column per train user: no factors
    # Cosine of two movies' binary user columns, by hand.
    watched = {m: set(g.get_column("user_id")) for (m,), g in train.group_by("item_id")}
    a, b = sorted(watched)[:2]
    rows = ctx.vectors.rows_of([a, b])
    cosine = len(watched[a] & watched[b]) / np.sqrt(len(watched[a]) * len(watched[b]))
    assert float(ctx.collab[rows[0]] @ ctx.collab[rows[1]]) == pytest.approx(cosine, rel=1e-5)
    # The feature: the candidate's mean cosine to the agent's remembered movies, through the
    # agent-by-agent path a catalogue of users wider than the factor path takes.
    wide = dataclasses.replace(ctx, collab=np.repeat(ctx.collab, 10, axis=1) / np.sqrt(10))
    uid = users[0]
    state = agent_states({uid: agents.memories[uid]}, agents.profiles, wide, config)[uid]
    candidates = np.arange(len(ctx.facts.item_ids))[:7]
    X, _, _ = pair_features([state], [candidates], wide, config)
    expected = (ctx.collab[candidates] @ ctx.collab[state.rows].mean(axis=0)).astype(float)
    assert wide.collab.shape[1] > 256 and X[:, FEATURES.index("collab")] == pytest.approx(expected, rel=1e-4)
    assert item_neighbourhood_vectors(train, ctx.facts.item_ids, 0).shape == (len(ctx.facts.item_ids), 0)
    assert model.params.click_variant in ("none", "collab", "collab+recent")


def test_ranked_at_the_simulation_clock_the_mirror_skips_what_an_agent_took_in_validation(world, tmp_path):
    # bench.fidelity --mirror-clock simulation: the brain where the agents decide, memories
    # through the validation window; at the fit clock (the default) it knows only train.
    train, valid = world["train"], world["valid"]
    agents = build_agents(
        train,
        world["users"],
        world["catalogue"],
        AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
        HashTextEmbedder(),
        PaletteLayoutPosterEmbedder(),
        tmp_path / "cache",
        valid=valid,
    )
    model = fit_embedded_brain(agents, train, valid, world["users"])
    items = world["catalogue"].get_column("item_id").to_numpy()
    took = {u: set(ms) for u, ms in valid.group_by("user_id").agg("item_id").iter_rows()}
    users = np.array(sorted(u for u in took if u in agents.profiles)[:8])
    at_fit = brain_scores(model, agents, depth=len(items))(users, items)
    at_sim = brain_scores(model, agents, depth=len(items), clock="simulation")(users, items)
    for row, user in enumerate(users.tolist()):
        later = np.isin(items, list(took[user]))
        assert (at_sim[row, later] <= -30.0).all()  # skipped: taken by the simulation clock
        assert (at_sim[row, ~later] > -30.0).any()
    # At the fit clock the same items were not taken yet: the brain scores them.
    assert all((at_fit[row, np.isin(items, list(took[u]))] > -30.0).any() for row, u in enumerate(users.tolist()))

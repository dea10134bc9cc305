"""Simulation over rounds: memories that grow from round to round, retrained
arms, reproducibility, earlier rounds left untouched, and the filter-bubble figures."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fakes.agents import HashTextEmbedder, make_catalogue, make_users_and_ratings, split_by_time
from ops.agents.build import AgentsConfig, build_agents
from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder
from ops.agents.memory import grow_memories
from ops.agents.session import AgentSession
from ops.arms.recommenders import arm_config
from ops.data.catalogue import build_catalogue
from ops.schema import RATINGS, TOP_K
from ops.simulation.brains.embedded import fit_embedded_brain
from ops.studies.filter_bubble import filter_bubble_metrics
from ops.studies.rounds import (
    RoundResult,
    RoundsConfig,
    empty_written_memories,
    movie_pools,
    simulate_round,
    simulate_rounds,
)

SMALL = RoundsConfig(rounds=2, pages=2, n_bootstrap=50)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("rounds")
    movies, meta = make_catalogue(root / "posters", n_per_genre=20)
    users, ratings, favourite = make_users_and_ratings(movies, n_users=24, per_user=18)
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
    brain = fit_embedded_brain(agents, train, valid, users)
    return dict(
        train=train, valid=valid, users=users, catalogue=catalogue, agents=agents, brain=brain, favourite=favourite
    )


def _round(world, arm, r, written, added, config=SMALL, pool=None):
    return simulate_round(
        arm,
        r,
        world["train"],
        world["valid"],
        world["users"],
        world["catalogue"],
        world["agents"],
        world["brain"],
        written,
        added,
        config,
        pool=pool,
    )


@pytest.fixture(scope="module")
def pop_rounds(world):
    pop = arm_config("pop")
    first = _round(world, pop, 0, empty_written_memories(), pl.DataFrame(schema=RATINGS))
    snapshot = first.written.clone()
    second = _round(world, pop, 1, first.written, first.added)
    return first, second, snapshot


def test_a_watch_in_round_1_is_retrieved_by_text_and_by_poster_in_round_2_with_its_feeling(world, pop_rounds):
    from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
    from ops.simulation.catalogue import Catalogue

    first, _, _ = pop_rounds
    assert first.written.height > 0 and (first.written.get_column("round") == 0).all()
    watch = first.written.row(0, named=True)
    assert watch["feeling"].startswith(f"rated {watch['rating']}")  # the reason the agent gave
    agents = world["agents"]
    before = agents.memories[watch["user_id"]]
    assert watch["item_id"] not in set(before.item_ids.tolist())  # new to the agent's memory

    memory = grow_memories(agents.memories, first.written)[watch["user_id"]]
    row = int(agents.vectors.rows_of([watch["item_id"]])[0])
    by_text = memory.retrieve_by_text(agents.vectors.text[row], 1)
    by_poster = memory.retrieve_by_image(agents.vectors.poster[row], 1)
    for recollection in (by_text[0], by_poster[0]):
        assert recollection.item_id == watch["item_id"] and recollection.rating == watch["rating"]
        assert recollection.feeling == watch["feeling"]
    # The LLM brain's prompt for a page showing that movie recalls it, feeling included.
    session = AgentSession(watch["user_id"], agents.profiles[watch["user_id"]], memory, 0.0, 30.0)
    brain = LLMBrain(
        LLMBrainConfig(model="m", api_key_required=False, cache="off", vision=False),
        Catalogue.from_frame(world["catalogue"]),
    )
    try:
        lines = brain.recall(session, [watch["item_id"]], "detail")
    finally:
        brain.close()
    title = Catalogue.from_frame(world["catalogue"])[watch["item_id"]].title
    assert any(title in line and watch["feeling"] in line for line in lines)


def test_round_2_trains_on_round_1s_clicks_and_views_and_recommends_nothing_already_rated(world, pop_rounds):
    first, second, _ = pop_rounds
    train = world["train"]
    assert first.train_rows == train.height
    assert second.train_rows == train.height + first.added.height > train.height
    # Views keep the agent's rating; every simulated pair is new to train.
    views = first.events.filter(pl.col("action") == "watch_and_rate").select("user_id", "item_id", "rating")
    assert views.join(first.added, on=["user_id", "item_id", "rating"], how="anti").height == 0
    assert first.added.join(train, on=["user_id", "item_id"], how="semi").height == 0
    rated = pl.concat([train.select("user_id", "item_id"), first.added.select("user_id", "item_id")])
    assert second.lists.join(rated, on=["user_id", "item_id"], how="semi").height == 0
    assert second.written.filter(pl.col("round") == 0).equals(first.written)  # carried over as it was
    assert second.written.get_column("timestamp").min() > train.get_column("timestamp").max()


def test_memories_of_an_earlier_round_are_never_changed(world, pop_rounds):
    first, second, snapshot = pop_rounds
    assert first.written.equals(snapshot)
    agents = world["agents"]
    written = second.written
    user = written.get_column("user_id")[0]
    lengths = {u: len(m) for u, m in agents.memories.items()}
    rows = agents.memories[user].rows.copy()
    grown = grow_memories(agents.memories, written)
    assert len(grown[user]) == lengths[user] + written.filter(pl.col("user_id") == user).height
    assert {u: len(m) for u, m in agents.memories.items()} == lengths and np.array_equal(
        agents.memories[user].rows, rows
    )
    with pytest.raises(ValueError, match="already hold round 1"):
        _round(world, arm_config("pop"), 1, second.written, second.added)


@pytest.mark.slow
def test_rounds_are_reproducible_from_the_seed(world):
    fm = arm_config("fm", max_epochs=1, device="cpu", divergence={"enabled": False})
    config = RoundsConfig(rounds=2, pages=2, split_pool=True, n_bootstrap=50)

    def run(seed, arm=fm):
        cfg = config.model_copy(update={"seed": seed})
        return simulate_rounds(
            arm,
            world["train"],
            world["valid"],
            world["users"],
            world["catalogue"],
            world["agents"],
            world["brain"],
            cfg,
        )

    # FM's training is seeded too; another seed is checked on Pop, whose training is cheap.
    a, b = run(0), run(0)
    c = run(1, arm_config("pop"))
    a_pop = run(0, arm_config("pop"))
    for x, y in zip(a, b):
        assert (
            x.lists.equals(y.lists)
            and x.events.equals(y.events)
            and x.written.equals(y.written)
            and x.added.equals(y.added)
        )
    assert not all(x.events.equals(z.events) for x, z in zip(a_pop, c))
    pools = movie_pools(world["catalogue"].get_column("item_id").to_numpy(), 2, 0)
    for result, pool in zip(a, pools):
        assert result.pool_size == len(pool) == 30 and set(result.lists.get_column("item_id").to_list()) <= set(
            pool.tolist()
        )
    assert not set(pools[0].tolist()) & set(pools[1].tolist())


def test_filter_bubble_figures_on_a_hand_made_round(world):
    catalogue = world["catalogue"]
    genre = dict(catalogue.select("item_id", pl.col("genres").list.first()).iter_rows())
    scifi = [m for m, g in sorted(genre.items()) if g == "Sci-Fi"]
    romance = [m for m, g in sorted(genre.items()) if g == "Romance"]
    # Agent 1 is shown 3 Sci-Fi + 1 Romance and watches 2 Sci-Fi; agent 2 is shown 4 Sci-Fi, watches nothing.
    lists = pl.DataFrame(
        [("fm", 1, r + 1, m, 1.0) for r, m in enumerate([*scifi[:3], romance[0]])]
        + [("fm", 2, r + 1, m, 1.0) for r, m in enumerate(scifi[:4])],
        schema=TOP_K,
        orient="row",
    )
    events = _events(
        [
            (1, "click_movie", scifi[0], None, None),
            (1, "watch_and_rate", scifi[0], 5, None),
            (1, "watch_and_rate", scifi[1], 4, None),
            (1, "exit_interview", None, None, 8),
            (2, "exit", None, None, None),
            (2, "exit_interview", None, None, 4),
        ]
    )
    result = RoundResult(0, lists, events, empty_written_memories(), pl.DataFrame(schema=RATINGS), 0, 10)
    m = {r["metric"]: r for r in filter_bubble_metrics([result], catalogue, n_bootstrap=200).iter_rows(named=True)}
    assert m["recommended_top1_genre_share"]["mean"] == pytest.approx((0.75 + 1.0) / 2)
    assert m["recommended_genres"]["mean"] == pytest.approx(1.5)
    assert (
        m["watched_top1_genre_share"]["mean"] == 1.0
        and m["watched_genres"]["mean"] == 1.0
        and m["watched_genres"]["agents"] == 1
    )
    assert m["catalogue_coverage"]["mean"] == pytest.approx(5 / 10)  # distinct movies shown / the round's pool
    # Jackknife: leaving out either agent loses one movie only it was shown, so no spread.
    assert (m["catalogue_coverage"]["ci_low"], m["catalogue_coverage"]["ci_high"]) == (0.5, 0.5)
    assert m["satisfaction"]["mean"] == 6.0 and m["satisfaction"]["ci_low"] < 6.0 < m["satisfaction"]["ci_high"]


def _constant(value):
    def stub():
        return value

    return stub


def _events(rows):
    from ops.schema import EVENTS

    records = []
    for step, (user, action, movie, rating, satisfaction) in enumerate(rows, start=1):
        records.append(
            {name: None for name in EVENTS}
            | {
                "run_id": "r",
                "arm": "fm",
                "user_id": user,
                "session": 0,
                "step": step,
                "page_type": "detail" if action == "watch_and_rate" else "home",
                "page_number": 1,
                "action": action,
                "item_id": movie,
                "shown": [movie] if action == "watch_and_rate" else [1, 2, 3],
                "caught_eye": [],
                "rating": rating,
                "satisfaction": satisfaction,
                "forced": False,
                "reason": "",
                "brain": "embedded",
                "fallback": False,
            }
        )
    return pl.DataFrame(records, schema=EVENTS)


@pytest.mark.slow
def test_round_partitions_through_dagster_read_the_round_before_and_leave_it_as_it_was(world, tmp_path, monkeypatch):
    from dagster import DagsterInstance, MultiPartitionKey, asset, materialize, mem_io_manager

    from assets.rounds import build_round_assets
    from resources.llm import LLMResource
    from resources.mlflow_tracking import MlflowTracking
    from resources.storage import SimabIOManager

    home = tmp_path / "simab_home"
    monkeypatch.setenv("SIMAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    values = {
        "train_ratings": world["train"],
        "valid_ratings": world["valid"],
        "users": world["users"],
        "catalogue": world["catalogue"],
        "agents": world["agents"],
        "embedded_brain": world["brain"],
    }
    stubs = [asset(name=name, io_manager_key="mem")(_constant(value)) for name, value in values.items()]
    agent_round, filter_bubble = build_round_assets(3)
    instance = DagsterInstance.ephemeral()
    resources = {
        "io_manager": SimabIOManager(),
        "mem": mem_io_manager,
        "mlflow_tracking": MlflowTracking(),
        "llm": LLMResource(),
    }
    run_config = {"ops": {"agent_round": {"config": {"pages": 2}}}}

    def run(r: int):
        return materialize(
            [*stubs, agent_round],
            partition_key=MultiPartitionKey({"arm": "pop", "round": str(r)}),
            instance=instance,
            resources=resources,
            run_config=run_config,
            raise_on_error=False,
        )

    early = run(1)
    assert not early.success  # round 1 before round 0: refused, naming the partition it needs
    failure = [e for e in early.all_events if e.is_step_failure][0]
    assert "materialise partition pop|0 first" in str(failure.event_specific_data.error)
    assert run(0).success
    folder = home / "assets" / "memory_after_round"
    stored = (folder / "pop" / "0.parquet").read_bytes()
    assert run(1).success
    assert (folder / "pop" / "0.parquet").read_bytes() == stored  # round 0's memory untouched
    zero, one = (pl.read_parquet(folder / "pop" / f"{r}.parquet") for r in (0, 1))
    assert one.filter(pl.col("round") == 0).equals(zero) and one.filter(pl.col("round") == 1).height > 0
    events = pl.read_parquet(home / "assets" / "round_events" / "pop" / "1.parquet")
    assert (events.get_column("round") == 1).all() and events.get_column("arm").unique().to_list() == ["pop"]

    # The filter-bubble experiment as one asset: figures per round with intervals, in MLflow.
    config = {"ops": {"filter_bubble": {"config": {"arm": "pop", "rounds": 2, "pages": 2, "n_bootstrap": 50}}}}
    assert materialize([*stubs, filter_bubble], instance=instance, resources=resources, run_config=config).success
    metrics = pl.read_parquet(home / "assets" / "filter_bubble.parquet")
    assert metrics.height == 2 * 6 and (metrics.get_column("ci_low") <= metrics.get_column("mean") + 1e-12).all()
    tracking = MlflowTracking()
    (run,) = tracking.client().search_runs([tracking.experiment_id()], "tags.dagster_asset = 'filter_bubble'")
    history = tracking.client().get_metric_history(run.info.run_id, "recommended_top1_genre_share")
    assert sorted(m.step for m in history) == [0, 1]
    assert "plots" in [a.path for a in tracking.client().list_artifacts(run.info.run_id)]


def test_rounds_with_the_llm_brain_recall_the_last_rounds_feelings_and_replay_from_the_cache(
    world, tmp_path, monkeypatch
):
    from types import SimpleNamespace

    from fakes.openai_server import FakeOpenAI, scripted_agent
    from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
    from ops.simulation.catalogue import Catalogue

    catalogue = Catalogue.from_frame(world["catalogue"])
    fake = FakeOpenAI(scripted_agent)
    pop, users = arm_config("pop"), [1, 2, 3]
    with fake.serve() as url:
        config = LLMBrainConfig(
            base_url=url, model="m", api_key_required=False, vision=False, cache_path=str(tmp_path / "cache.sqlite")
        )
        brains = SimpleNamespace(brain=lambda: LLMBrain(config, catalogue))

        def round_(r, written, added):
            return simulate_round(
                pop,
                r,
                world["train"],
                world["valid"],
                world["users"],
                world["catalogue"],
                world["agents"],
                brains,
                written,
                added,
                SMALL,
                users,
            )

        first = round_(0, empty_written_memories(), pl.DataFrame(schema=RATINGS))
        watched = first.written.row(0, named=True)
        assert watched["feeling"] == "it fits my taste"  # the scripted model's own reason for the watch
        second = round_(1, first.written, first.added)
        calls = fake.calls
        # The round-1 agent sees its round-0 watch, with its feeling, when a page shows it again.
        memory = grow_memories(world["agents"].memories, first.written)[watched["user_id"]]
        session = AgentSession(watched["user_id"], world["agents"].profiles[watched["user_id"]], memory, 0.0, 30.0)
        brain = brains.brain()
        lines = brain.recall(session, [watched["item_id"]], "detail")
        brain.close()
        assert (
            lines[0].startswith(f"- {catalogue[watched['item_id']].title}")
            and f'you felt: "{watched["feeling"]}"' in lines[0]
        )
        again = round_(1, first.written, first.added)  # a re-run: every answer from the cache
    assert fake.calls == calls
    assert again.events.drop("latency_s").equals(second.events.drop("latency_s"))

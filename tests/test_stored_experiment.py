"""A small experiment stored the way the asset graph stores it (through the code location's
IO manager, under a $SIMAB_HOME of its own): the viewer reads it back through the code
location, and `llm_cost_estimate` prices an LLM simulation of it in Dagster — and stops the
simulation when the estimate is above max_cost_usd, before any call."""

from __future__ import annotations

import polars as pl
import pytest
from dagster import AssetKey, DagsterInstance, build_output_context

pytestmark = pytest.mark.slow  # Dagster runs with MLflow tracking: ~20 s


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    from fakes.agents import HashTextEmbedder, make_catalogue, make_users_and_ratings, split_by_time
    from ops.agents.build import AgentsConfig, build_agents
    from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder
    from ops.data.catalogue import build_catalogue
    from ops.simulation.brains.embedded import fit_embedded_brain
    from ops.simulation.catalogue import Catalogue
    from ops.simulation.request import SimulationConfig
    from ops.simulation.runner import simulate
    from resources.storage import SimabIOManager

    root = tmp_path_factory.mktemp("stored")
    mp = pytest.MonkeyPatch()
    mp.setenv("SIMAB_HOME", str(root))
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    movies, meta = make_catalogue(root / "posters", n_per_genre=8)
    users, ratings, _ = make_users_and_ratings(movies, n_users=24, per_user=12)
    train, valid = split_by_time(ratings)
    catalogue = build_catalogue(movies, meta)
    agents = build_agents(
        train,
        users,
        catalogue,
        AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
        HashTextEmbedder(),
        PaletteLayoutPosterEmbedder(),
    )
    brain = fit_embedded_brain(agents, train, valid, users)
    rated = set(train.select("user_id", "item_id").iter_rows())
    ids = sorted(movies.get_column("item_id").to_list())
    top = pl.DataFrame(
        [
            {"arm": "pop", "user_id": u, "rank": r + 1, "item_id": m, "score": 1.0 / (r + 1)}
            for u in sorted(agents.profiles)
            for r, m in enumerate([m for m in ids if (u, m) not in rated][:20])
        ]
    )
    events = simulate(
        brain.brain(),
        agents.sessions(),
        top,
        Catalogue.from_frame(catalogue),
        SimulationConfig(progress=False),
        arms=["pop"],
    )
    io = SimabIOManager()
    for key, partition, value in (
        ("catalogue", None, catalogue),
        ("agents", None, agents),
        ("embedded_brain", None, brain),
        ("top20_lists", "pop", top),
        ("simulation_events", "pop", events),
    ):
        io.handle_output(build_output_context(asset_key=AssetKey(key), partition_key=partition), value)
    yield dict(root=root, events=events, agents=agents)
    mp.undo()


def test_the_viewer_reads_the_stored_run_through_the_code_location(home):
    from pipelines.definitions import build_definitions
    from viewer.store import ExperimentStore

    store = ExperimentStore.from_definitions(build_definitions(environ={"SIMAB_HOME": str(home["root"])}))
    assert store.arms == ["pop"] and store.readout is None and store.report_dir is None
    user = sorted(home["agents"].profiles)[0]
    assert store.profile(user)["occupation_label"] == home["agents"].profiles[user].occupation_label
    steps = store.trajectory("pop", user)
    assert [s.action for s in steps] == home["events"].filter(pl.col("user_id") == user).sort("step").get_column(
        "action"
    ).to_list()
    assert all(store.poster_path(c.item_id, "small").is_file() for s in steps for c in s.cards)


def test_a_damaged_arm_is_named_on_the_page_instead_of_stopping_the_viewer(home):
    from starlette.testclient import TestClient

    from pipelines.definitions import build_definitions
    from resources.storage import SimabIOManager
    from viewer.app import create_app
    from viewer.store import ExperimentStore

    context = build_output_context(asset_key=AssetKey("simulation_events"), partition_key="random")
    SimabIOManager().handle_output(context, home["events"])
    damaged = home["root"] / "assets" / "simulation_events" / "random.parquet"
    try:
        damaged.write_bytes(damaged.read_bytes()[:-300])  # cut short, as a full disk or a killed copy leaves it
        store = ExperimentStore.from_definitions(build_definitions(environ={"SIMAB_HOME": str(home["root"])}))
        assert store.arms == ["pop"]
        (problem,) = store.problems
        assert problem.startswith(f"asset simulation_events, partition random: stored value at {damaged} is damaged")
        assert problem.endswith("materialise it again")
        page = TestClient(create_app(store), base_url="http://127.0.0.1").get("/")
        assert page.status_code == 200 and f"partition random: stored value at {damaged} is damaged" in page.text
    finally:
        damaged.unlink()
        damaged.with_name("random.parquet.sha256").unlink()


def _run(home, environ: dict, selection: list[str], simulation: dict):
    """Materialise `selection` for arm pop as the lifecycle runner does, its console on a string."""
    import io
    import uuid

    from pipelines.console import LifecycleConsole
    from pipelines.definitions import build_definitions

    defs = build_definitions(environ={"SIMAB_HOME": str(home["root"]), **environ})
    job = defs.get_implicit_global_asset_job_def()
    config = {
        "ops": {"llm_cost_estimate": {"config": {"sample_agents": 8}}, "simulation_events": {"config": simulation}}
    }
    config["ops"] = {k: v for k, v in config["ops"].items() if k in selection}
    instance, run_id, screen = DagsterInstance.ephemeral(), str(uuid.uuid4()), io.StringIO()
    with LifecycleConsole(screen).stage("arm pop", len(selection)) as stage:
        stage.watch(instance, run_id)
        result = job.execute_in_process(
            instance=instance,
            partition_key="pop",
            run_config=config,
            raise_on_error=False,
            asset_selection=[AssetKey(a) for a in selection],
            run_id=run_id,
        )
        stage.succeeded = result.success
    return result, screen.getvalue()


def test_the_bill_is_shown_before_the_simulation_and_stops_it_above_the_limit(home, monkeypatch):
    from ops.settings import DEFAULT_MAX_COST_USD

    # An endpoint where nothing listens: a call would be a transport failure, not silence.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    result, screen = _run(home, {}, ["llm_cost_estimate"], {})
    assert result.success
    metadata = result.asset_materializations_for_node("llm_cost_estimate")[0].metadata
    agents = len(home["agents"].profiles)
    assert (
        metadata["agents"].value == agents and metadata["calls"].value >= agents * 2
    )  # a page and the interview at least
    assert metadata["cost (USD)"].value > 0 and metadata["ceiling (USD)"].value >= metadata["cost (USD)"].value
    # A priced endpoint has a limit unless one says none: the default.
    assert "expected" in metadata["estimate"].value and metadata["max_cost_usd"].value == DEFAULT_MAX_COST_USD
    # The lifecycle runner prints the bill under the arm's line.
    assert f"LLM bill before the simulation: {metadata['calls'].value:,} calls" in screen and "limit $5.00" in screen

    limited, screen = _run(
        home, {"SIMAB_MAX_COST_USD": "0.000001"}, ["llm_cost_estimate", "simulation_events"], {"brain": "llm"}
    )
    assert not limited.success and screen.startswith("✗ arm pop") and "failed: llm_cost_estimate" in screen
    failure = next(e for e in limited.all_events if e.is_step_failure)
    assert failure.step_key == "llm_cost_estimate"
    from pipelines.console import failure_text

    message = failure_text(failure)  # what the lifecycle runner prints under the arm's line
    assert message.startswith("the LLM simulation is estimated at $") and "above max_cost_usd=$0.00" in message
    # The simulation never started: no step of it, and the stored events are untouched.
    assert not [e for e in limited.all_events if e.step_key == "simulation_events" and e.is_step_start]

"""Causal discovery over the simulated data (Agent4Rec §4.2): the per-item frame from the
events, DirectLiNGAM on a planted linear system, and the study as its job on the session's
prepared synthetic world, where the generator plants quality → rating (vote_average is the
planted quality, the rating rises with it) and popularity → exposure (vote_count follows the
planted popularity, which drives who rated what, so the arms rank popular movies first)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ops.schema import EVENTS, conform
from ops.studies.causal import VARIABLES, catalogue_facts, discover, figure9_table, item_frame, profile_facts


def _events(rows) -> pl.DataFrame:
    base = {"run_id": "r", "arm": "pop", "brain": "embedded", "fallback": False}
    full = [{**dict.fromkeys(EVENTS), **base, **r} for r in rows]
    return conform(pl.DataFrame(full, schema=EVENTS), EVENTS, "events")


def test_the_item_frame_counts_exposures_per_session_views_and_mean_ratings_from_the_events():
    rows = [
        # user 1, session 0: page 1 shows 10, 11; shown again after a detail page (one exposure).
        {"user_id": 1, "session": 0, "step": 1, "page_type": "home", "action": "click_movie", "item_id": 10, "shown": [10, 11]},
        {"user_id": 1, "session": 0, "step": 2, "page_type": "detail", "action": "watch_and_rate", "item_id": 10, "shown": [10], "rating": 4},
        {"user_id": 1, "session": 0, "step": 3, "page_type": "home", "action": "exit", "shown": [10, 11]},
        # user 2: sees 11 and 12, watches 11 and rates it 2.
        {"user_id": 2, "session": 0, "step": 1, "page_type": "home", "action": "click_movie", "item_id": 11, "shown": [11, 12]},
        {"user_id": 2, "session": 0, "step": 2, "page_type": "detail", "action": "watch_and_rate", "item_id": 11, "shown": [11], "rating": 2},
        {"user_id": 2, "session": 0, "step": 3, "page_type": "detail", "action": "watch_and_rate", "item_id": 10, "shown": [10], "rating": 5},
    ]  # fmt: skip
    catalogue = pl.DataFrame({"item_id": [10, 11, 12], "vote_average": [7.5, 6.0, 5.0], "vote_count": [999, 9, None]})
    frame = item_frame(_events(rows), catalogue_facts(catalogue))
    by = {r["item_id"]: r for r in frame.iter_rows(named=True)}
    assert sorted(by) == [10, 11]  # 12 was never watched: no rating, not in the frame
    assert by[10]["exposure_rate"] == pytest.approx(0.5) and by[11]["exposure_rate"] == pytest.approx(1.0)
    assert by[10]["views"] == 2 and by[10]["rating"] == pytest.approx(4.5) and by[11]["rating"] == 2
    assert by[10]["popularity"] == pytest.approx(np.log1p(999)) and by[10]["quality"] == 7.5
    # Two rounds of the same sessions: twice the sessions, the same shares.
    both = pl.concat([_events(rows).with_columns(round=pl.lit(r)) for r in (0, 1)])
    assert (
        item_frame(both, catalogue_facts(catalogue)).get_column("exposure_rate").to_list()
        == frame.get_column("exposure_rate").to_list()
    )
    assert item_frame(both, catalogue_facts(catalogue), min_views=3).get_column("item_id").to_list() == [10]
    with pytest.raises(ValueError, match="min_views"):
        item_frame(_events(rows), catalogue_facts(catalogue), min_views=0)
    # Agent4Rec's item profile: the mean of the historical ratings and log(1 + their number).
    history = pl.DataFrame({"user_id": [1, 2, 3, 1], "item_id": [10, 10, 10, 11], "rating": [5, 4, 3, 1]})
    profile = {r["item_id"]: r for r in profile_facts(history).iter_rows(named=True)}
    assert profile[10]["quality"] == 4.0 and profile[10]["popularity"] == pytest.approx(np.log(4))
    assert item_frame(_events(rows), profile_facts(history)).get_column("quality").to_list() == [4.0, 1.0]


def test_direct_lingam_recovers_a_planted_linear_system_with_its_signs():
    rng = np.random.default_rng(0)
    n = 800
    # Non-Gaussian (uniform) noise, as LiNGAM needs: quality → rating, popularity → exposure → views.
    quality = rng.uniform(-1, 1, n)
    popularity = rng.uniform(-1, 1, n)
    exposure = 0.9 * popularity + 0.4 * rng.uniform(-1, 1, n)
    views = 0.8 * exposure + 0.4 * rng.uniform(-1, 1, n)
    rating = 0.9 * quality + 0.2 * popularity + 0.3 * rng.uniform(-1, 1, n)
    frame = pl.DataFrame(
        {"item_id": np.arange(n), "quality": quality, "popularity": popularity, "exposure_rate": exposure, "views": views, "rating": rating}
    )  # fmt: skip
    graph = discover(frame, n_bootstrap=20, seed=0)
    assert graph.weight("quality", "rating") > 0.5 and graph.weight("rating", "quality") == 0
    assert graph.weight("popularity", "exposure_rate") > 0.5 and graph.weight("exposure_rate", "popularity") == 0
    assert graph.weight("exposure_rate", "views") > 0.5 and graph.weight("views", "exposure_rate") == 0
    assert graph.weight("popularity", "rating") > 0
    probability = graph.edges.filter((pl.col("cause") == "quality") & (pl.col("effect") == "rating"))["probability"]
    assert probability.item() >= 0.9
    table = figure9_table(graph)
    assert set(table.get_column("edge")) >= {"quality → rating", "popularity → exposure rate", "exposure rate → views"}
    # Too few items, or a variable that never moves: said, not fitted.
    with pytest.raises(ValueError, match="too few"):
        discover(frame.head(5))
    with pytest.raises(ValueError, match=r"\['views'\] take one value"):
        discover(frame.with_columns(views=pl.lit(1.0)))


@pytest.fixture(scope="module")
def causal_run(prepared_copy):
    """The causal study's job on the prepared synthetic world (150 users, 200 movies): two
    rounds of Pop for 80 agents, 3 pages — the filter-bubble study's path, small."""
    home, instance, prepared = prepared_copy
    assert prepared.success
    from pipelines.definitions import build_definitions

    defs = build_definitions(environ={"SIMAB_HOME": str(home)})
    config = {"arm": "pop", "rounds": 2, "pages": 3, "n_agents": 80, "n_bootstrap": 30}
    result = defs.resolve_job_def("experiment_causal").execute_in_process(
        instance=instance, run_config={"ops": {"agent4rec_causal_graph": {"config": config}}}
    )
    return home, result


def test_the_study_finds_the_planted_edges_on_the_synthetic_world_and_logs_its_graph(causal_run):
    home, result = causal_run
    assert result.success
    folder = home / "experiments" / "causal"
    edges = pl.read_csv(folder / "table.csv")
    weight = {(r["cause"], r["effect"]): r["weight"] for r in edges.iter_rows(named=True)}
    assert set(edges.get_column("cause")) == set(VARIABLES)
    # The generator's planted edges: quality raises the rating, popularity drives exposure.
    assert weight[("quality", "rating")] > 0
    assert weight[("popularity", "exposure_rate")] > 0
    # Nothing simulated is let cause the profile's figures (prior knowledge: they come first in time).
    assert all(weight[(c, e)] == 0 for c in VARIABLES[2:] for e in ("quality", "popularity"))
    items = pl.read_csv(folder / "items.csv")
    assert items.height > 20 and (items.get_column("views") >= 1).all()
    text = (folder / "table.md").read_text()
    assert "Figure 9" in text and "quality → rating" in text and "Protocol differences" in text
    assert (folder / "plots" / "causal_graph.png").stat().st_size > 5000
    from resources.mlflow_tracking import MlflowTracking

    tracking = MlflowTracking()
    (run,) = tracking.client().search_runs([tracking.experiment_id()], "tags.experiment = 'causal'")
    artefacts = {a.path for a in tracking.client().list_artifacts(run.info.run_id, "experiments/causal/plots")}
    assert "experiments/causal/plots/causal_graph.png" in artefacts

"""The one simulation path (`ops.simulation.runner.simulate`) gives, for the embedded brain
and the same seeds, the very events the twin serial / threaded session loops and the
per-study loops it replaced gave: two arms, two sessions per agent, with and without
posters, one agent at a time and two on threads.

`EXPECTED` is the digest of those events as the code before the one path wrote them
(`simulate_visits` arm by arm, the same world and seeds); a change to the runner, the
sandbox or the embedded brain that moves any decision changes it.  Regenerate it only for a
change that means to alter what agents do, and say so in the commit."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import polars as pl

from fakes.agents import HashTextEmbedder, make_catalogue, make_users_and_ratings, split_by_time
from ops.agents.build import AgentsConfig, build_agents
from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder
from ops.data.catalogue import build_catalogue
from ops.simulation.brains.embedded import fit_embedded_brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate

# The events before the item column was renamed (67c77e24…), with `movie_id` named `item_id`.
EXPECTED = "28f010a19fe141b5a13f9d96a049dc87b1a6d8d6fe26c6cbb7cff9f014e0f43c"


def embedded_events(root) -> pl.DataFrame:
    """Every condition's events, in one frame sorted by condition, arm, user, session, step."""
    movies, meta = make_catalogue(root / "posters")
    users, ratings, _ = make_users_and_ratings(movies)
    train, valid = split_by_time(ratings)
    frame = build_catalogue(movies, meta)
    agents = build_agents(
        train,
        users,
        frame,
        AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
        HashTextEmbedder(),
        PaletteLayoutPosterEmbedder(),
        root / "cache",
    )
    model = fit_embedded_brain(agents, train, valid, users)
    catalogue = Catalogue.from_frame(frame)
    ids = movies.get_column("item_id").to_numpy()
    rng = np.random.default_rng(11)
    rows = [
        (arm, int(u), r, int(m), 1.0 / r)
        for arm in ("A", "B")
        for u in sorted(agents.profiles)
        for r, m in enumerate(rng.choice(ids, 20, replace=False), start=1)
    ]
    schema = {"arm": pl.Utf8, "user_id": pl.Int64, "rank": pl.Int64, "item_id": pl.Int64, "score": pl.Float64}
    top_k = pl.DataFrame(rows, schema=schema, orient="row")
    frames = []
    for concurrency in (1, 2):
        for vision in (True, False):
            brain = model.brain(None if vision else model.config.model_copy(update={"use_posters": False}))
            for arm in ("A", "B"):
                events = simulate(
                    brain,
                    agents.sessions(),
                    top_k,
                    catalogue,
                    SimulationConfig(progress=False),
                    arms=[arm],
                    sessions_per_agent=2,
                    seed=5,
                    run_id="r",
                    concurrency=concurrency,
                )
                frames.append(events.with_columns(conc=pl.lit(concurrency), vision=pl.lit(vision)))
    return pl.concat(frames).sort("conc", "vision", "arm", "user_id", "session", "step")


def digest(events: pl.DataFrame) -> str:
    """sha256 of the rows as JSON: the values, independent of how a file would store them."""
    return hashlib.sha256(json.dumps([events.columns, events.rows()]).encode()).hexdigest()


def test_the_one_path_gives_the_events_of_the_loops_it_replaced(tmp_path):
    events = embedded_events(tmp_path)
    assert events.height > 1000 and set(events.get_column("session")) == {0, 1}
    assert set(events.get_column("brain")) == {"embedded", "embedded:no-vision"}
    # Threads and one agent at a time decide alike.
    by = [c for c in events.columns if c != "conc"]
    assert events.filter(pl.col("conc") == 1).select(by).equals(events.filter(pl.col("conc") == 2).select(by))
    assert digest(events) == EXPECTED

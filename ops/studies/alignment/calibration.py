"""Calibrating the embedded brain's response to list quality (issue 16, item 4).

The simulated CTR of an arm moved far less than its offline metrics (issue 16: +2.5 %
relative CTR for +15 % relative NDCG@20).  The yardstick is the list-quality protocol
(`ops.studies.alignment.list_quality`) measured on the VALIDATION window — lists mixing
the agent's validation-window liked items with movies it rated in neither the train nor
the validation window, at 1:9, 1:4 and 1:1:

- real users' response: the share of each list's items they rated in the validation
  window — an elasticity of 1.0 in the share of relevant items (5x the ratings from a
  list half relevant as from one a tenth relevant);
- the brain's response: the elasticity of its sandbox CVR (watch-and-rate ÷ impressions,
  the sandbox's "rated") on the same lists.

What is calibrated: the click decision's log-odds become s × (click model) + b
(`EmbeddedBrainParams.click_scale`, `click_shift`).  A larger s separates what the model
ranks high from what it ranks low more sharply; b is solved for each s so that the mean
first-look click probability on the 1:4 lists stays what the fitted model gives (the
response pivots around the middle of the yardstick instead of inflating or deflating
every CTR).  The s whose elasticity comes closest to the real one is kept — the smallest
within `tolerance` of the best, because beyond the click model's own discrimination a
sharper s buys nothing and only makes decisions more deterministic.

It reads the train and validation windows and the fitted brain, nothing else: the test
window never reaches it (`tests/test_alignment_brains.py` checks that).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from ops.readout.statistics import named_rng
from ops.simulation.brains.embedded import EmbeddedBrainModel, ListResponse
from ops.simulation.catalogue import Catalogue
from ops.simulation.runner import SimulationConfig
from ops.studies.alignment.list_quality import QUALITY_RATIOS, list_quality, simulate_lists
from ops.studies.alignment.lists import mixed_lists, ratio_name


class TooFewAgents(ValueError):
    """The validation window holds too few agents to measure their response to list quality."""


class CalibrationConfig(BaseModel):
    # Validation-window agents the yardstick is measured on (sampled, seeded).
    n_agents: int = Field(600, ge=2)
    ratios: tuple[int, ...] = QUALITY_RATIOS
    list_length: int = 20
    # Log-odds scales tried (1 = the fitted click model as it is).
    scales: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
    # The metric matched: watch-and-rate per impression is what MovieLens records as a rating.
    metric: str = "cvr"
    # The ratio whose mean first-look click probability every scale keeps.
    anchor_ratio: int = 4
    tolerance: float = Field(0.03, ge=0)
    seed: int = 0
    n_bootstrap: int = 200  # the yardstick's intervals are not what is chosen on; the points are
    progress: bool = True


def calibrate_list_response(
    model: EmbeddedBrainModel,
    sessions: Sequence,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    catalogue: Catalogue,
    config: CalibrationConfig | None = None,
    simulation: SimulationConfig | None = None,
) -> EmbeddedBrainModel:
    """`model` with its click decision calibrated to real users' response to list quality
    on the validation window (module docstring); the record is `params.list_response`.
    `sessions`: the agents' session templates (Agents.sessions())."""
    config = config or CalibrationConfig()
    simulation = simulation or SimulationConfig(progress=False)
    base = model.params.model_copy(update={"click_scale": 1.0, "click_shift": 0.0, "list_response": None})
    lists = validation_lists(model, sessions, train, valid, config)
    users = sorted(set(lists.get_column("user_id").to_list()))
    if len(users) < 2:
        raise TooFewAgents(
            f"list-response calibration: {len(users)} agents have liked validation items and a memory; need >= 2"
        )
    by_user = {s.user_id: s for s in sessions}
    chosen = [by_user[u] for u in users]
    z = _anchor_logits(model, base, chosen, lists, ratio_name(config.anchor_ratio))
    target = float(_sigmoid(z).mean())
    from tqdm.auto import tqdm

    grid = []
    for scale in tqdm(
        config.scales, desc=f"list-response calibration ({len(users)} agents)", disable=not config.progress
    ):
        shift = 0.0 if scale == 1.0 else _solve_shift(z, scale, target)
        brain = EmbeddedBrainModel(
            base.model_copy(update={"click_scale": scale, "click_shift": shift}), model.context, model.config
        ).brain()
        events = simulate_lists(brain, chosen, lists, catalogue, simulation, seed=config.seed)
        result = list_quality(events, lists, window=valid, n_bootstrap=config.n_bootstrap, seed=config.seed)
        el = {(r["metric"], r["side"]): r["elasticity"] for r in result.elasticity.iter_rows(named=True)}
        means = {
            f"{r['arm']} {r['metric']}": r["mean"]
            for r in result.readout.arms.filter(pl.col("metric").is_in(["ctr", "cvr"])).iter_rows(named=True)
        }
        grid.append(
            {
                "scale": scale,
                "shift": shift,
                "elasticity_ctr": el.get(("ctr", "simulated")),
                "elasticity_cvr": el.get(("cvr", "simulated")),
                "real": el.get(("rated_share", "real")),
                **means,
            }
        )
    real = grid[0]["real"]
    key = f"elasticity_{config.metric}"
    gaps = [abs((g[key] if g[key] is not None and np.isfinite(g[key]) else -np.inf) - real) for g in grid]
    best = min(gaps)
    pick = next(g for g, gap in zip(grid, gaps) if gap <= best + config.tolerance)
    record = ListResponse(
        metric=config.metric,
        real_elasticity=real,
        elasticity_before=grid[0][key],
        elasticity_after=pick[key],
        click_scale=pick["scale"],
        click_shift=pick["shift"],
        agents=len(users),
        seed=config.seed,
        grid=grid,
    )
    params = base.model_copy(
        update={"click_scale": pick["scale"], "click_shift": pick["shift"], "list_response": record}
    )
    return EmbeddedBrainModel(params, model.context, model.config, {**model.timings_s})


def validation_lists(
    model: EmbeddedBrainModel, sessions: Sequence, train: pl.DataFrame, valid: pl.DataFrame, config: CalibrationConfig
) -> pl.DataFrame:
    """The yardstick's lists on the validation window: liked validation items mixed with
    movies rated in neither train nor validation, for a seeded sample of the agents."""
    with_memory = {s.user_id for s in sessions if len(getattr(s.memory, "movie_ids", ())) > 0}
    liked = valid.filter(pl.col("rating") >= model.config.like_threshold).filter(
        pl.col("user_id").is_in(sorted(with_memory))
    )
    need = max(config.list_length // (m + 1) for m in config.ratios)  # full lists at every ratio (lists.py)
    candidates = sorted(liked.group_by("user_id").len().filter(pl.col("len") >= need).get_column("user_id").to_list())
    if len(candidates) > config.n_agents:
        candidates = sorted(
            named_rng(config.seed, "calibration agents").choice(candidates, config.n_agents, replace=False).tolist()
        )
    known = pl.concat([train.select("user_id", "movie_id"), valid.select("user_id", "movie_id")])
    return mixed_lists(
        liked,
        known,
        model.context.facts.movie_ids,
        config.ratios,
        config.list_length,
        config.seed,
        candidates,
        stream="calibration",
        full_lists_only=True,
    )


def _anchor_logits(model: EmbeddedBrainModel, params, sessions, lists: pl.DataFrame, anchor: str) -> np.ndarray:
    brain = EmbeddedBrainModel(params, model.context, model.config).brain()
    anchor_lists = lists.filter(pl.col("ratio") == anchor).group_by("user_id").agg("movie_id")
    shown = dict(anchor_lists.iter_rows())
    brain.prepare([s for s in sessions if s.user_id in shown], shown)
    return np.concatenate([brain.click_logits(s, shown[s.user_id]) for s in sessions if s.user_id in shown])


def _solve_shift(z: np.ndarray, scale: float, target: float) -> float:
    from scipy.optimize import brentq

    return float(brentq(lambda b: _sigmoid(scale * z + b).mean() - target, -100.0, 100.0))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))

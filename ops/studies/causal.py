"""Causal discovery over the simulated data (Agent4Rec §4.2, Figure 9).

Per item, five variables:
- `quality` and `popularity` — the item profile's (Agent4Rec §2.1: "quality is deduced from
  historical ratings, popularity is based on the number of reviews"): by default the mean
  rating and log(1 + number of ratings) of the train window (`profile_facts`), or the
  catalogue's vote_average and log(1 + vote_count) (`catalogue_facts`: TMDB's figures on
  real data, noisy readings of the planted quality and popularity on the synthetic source);
  the log because counts are long-tailed and DirectLiNGAM fits a linear model;
- `exposure_rate` — the share of the agents' sessions, over every round, whose home pages
  showed the item (the `shown` ids of home-page events: what the agent saw, not the whole
  ranked list);
- `views` — how many times agents watched it (watch_and_rate events, every round);
- `rating` — the mean of the ratings the agents gave it.

An item enters the frame when it was watched at least `min_views` times (an item never
watched has no simulated rating) and its profile has both figures.  The rounds are
the filter-bubble study's (`ops.studies.filter_bubble.play_rounds`: the same arm, rounds,
pages, pool split and seed, so the same events).

DirectLiNGAM (Shimizu et al. 2011, the `lingam` package) learns a weighted DAG over the five,
standardised (each to mean 0, standard deviation 1) so that the weights compare across
variables; its adaptive-lasso pruning sets absent edges to 0.  A bootstrap over items says
how often each edge is found (`probability`).  A DAG over per-item totals cannot hold the
paper's loop (popularity → exposure → views → popularity) as a cycle: here the profile's
popularity is that of the train window, fixed through the rounds, so the loop's last step
(views raising popularity) happens only through the arm's retraining, inside `exposure_rate`.

`lingam` is imported inside the functions that fit (it pulls in statsmodels and more).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ops.figures import pyplot, table_markdown
from ops.simulation.observation import WATCH_AND_RATE
from ops.studies.filter_bubble import play_rounds

VARIABLES = ("quality", "popularity", "exposure_rate", "views", "rating")
LABELS = {
    "quality": "quality",
    "popularity": "popularity",
    "exposure_rate": "exposure rate",
    "views": "views",
    "rating": "rating",
}
# Agent4Rec Figure 9 as its text gives it (§4.2 "Results"): the edges and how they compare,
# no weights.  (cause, effect, what the paper says.)
FIGURE9 = (
    ("quality", "rating", "a cause of ratings; contributes most"),
    ("popularity", "rating", "a cause of ratings; slight"),
    ("popularity", "exposure_rate", "popular movies get more exposure"),
    ("exposure_rate", "views", "more exposure, more views"),
)
FIGURE9_NOTE = (
    "Agent4Rec's text names Figure 9's edges (quality and popularity cause ratings, quality the most; popularity → "
    "exposure → views, and the views feeding popularity in the next round's training) but gives no weights."
)


ITEM_FACTS = ("profile", "catalogue")


def profile_facts(ratings: pl.DataFrame) -> pl.DataFrame:
    """Agent4Rec's item profile from historical `ratings` (RATINGS): item_id, quality (the
    mean rating R_i) and popularity (log(1 + the number of ratings))."""
    return ratings.group_by("item_id").agg(
        quality=pl.col("rating").cast(pl.Float64).mean(), popularity=pl.len().cast(pl.Float64).log1p()
    )


def catalogue_facts(catalogue: pl.DataFrame) -> pl.DataFrame:
    """The catalogue's figures: item_id, quality (vote_average), popularity (log(1 + vote_count))."""
    return catalogue.select(
        "item_id",
        quality=pl.col("vote_average").cast(pl.Float64),
        popularity=pl.col("vote_count").cast(pl.Float64).log1p(),
    )


def item_frame(events: pl.DataFrame, facts: pl.DataFrame, min_views: int = 1) -> pl.DataFrame:
    """One row per item watched at least `min_views` times: item_id and VARIABLES (module
    docstring).  `events` are EVENTS of one or more rounds (a `round` column separates their
    sessions; without one, a single round); `facts` the items' quality and popularity
    (`profile_facts`, `catalogue_facts`)."""
    if min_views < 1:
        raise ValueError(f"item_frame: min_views must be >= 1 (an item never watched has no rating), got {min_views}")
    missing = [
        c
        for c in ("user_id", "session", "page_type", "action", "item_id", "shown", "rating")
        if c not in events.columns
    ]
    if missing:
        raise ValueError(f"item_frame: the events lack column(s) {missing}")
    events = events if "round" in events.columns else events.with_columns(round=pl.lit(0, dtype=pl.Int64))
    session = ["round", "arm", "user_id", "session"] if "arm" in events.columns else ["round", "user_id", "session"]
    sessions = events.select(session).unique().height
    if sessions == 0:
        raise ValueError("item_frame: no sessions in the events")
    exposed = (
        events.filter(pl.col("page_type") == "home")
        .select(*session, item_id=pl.col("shown"))
        .explode("item_id")
        .drop_nulls("item_id")
        .unique()
        .group_by("item_id")
        .agg(exposure_rate=pl.len() / sessions)
    )
    watched = (
        events.filter(pl.col("action") == WATCH_AND_RATE)
        .group_by("item_id")
        .agg(views=pl.len().cast(pl.Float64), rating=pl.col("rating").cast(pl.Float64).mean())
        .filter(pl.col("views") >= min_views)
    )
    return (
        watched.join(facts.select("item_id", "quality", "popularity"), on="item_id", how="inner")
        .join(exposed, on="item_id", how="left")
        .with_columns(pl.col("exposure_rate").fill_null(0.0))
        .drop_nulls()
        .select("item_id", *VARIABLES)
        .sort("item_id")
    )


@dataclass(frozen=True)
class CausalGraph:
    """DirectLiNGAM's graph: `edges` (cause, effect, weight, probability; every ordered pair,
    weight 0 where pruned), the causal order, and how many items it was learned from."""

    edges: pl.DataFrame
    order: tuple[str, ...]
    items: int
    n_bootstrap: int
    prior_knowledge: bool = False

    def found(self) -> pl.DataFrame:
        """The edges DirectLiNGAM kept (weight ≠ 0), strongest first."""
        return self.edges.filter(pl.col("weight") != 0).sort(pl.col("weight").abs(), descending=True)

    def weight(self, cause: str, effect: str) -> float:
        row = self.edges.filter((pl.col("cause") == cause) & (pl.col("effect") == effect))
        return float(row.get_column("weight").item()) if row.height else 0.0


def discover(
    frame: pl.DataFrame,
    n_bootstrap: int = 100,
    seed: int = 0,
    prior_knowledge: bool = False,
    variables: Sequence[str] = VARIABLES,
) -> CausalGraph:
    """DirectLiNGAM over `variables` of `frame` (standardised), its edges with the share of
    `n_bootstrap` resamples of the items that found each (0: no bootstrap, probability null).
    `prior_knowledge`: tell it that nothing simulated causes quality and popularity (they are
    known before the first round: time orders them first; Agent4Rec does not say it used any)."""
    import lingam  # lazy: statsmodels, networkx and more, for this study only

    variables = list(variables)
    if frame.height < len(variables) + 2:
        raise ValueError(
            f"causal discovery: {frame.height} items is too few for {len(variables)} variables — simulate more agents "
            "or rounds (each item needs at least one watch)"
        )
    x = frame.select(variables).to_numpy().astype(float)
    std = x.std(axis=0)
    flat = [v for v, s in zip(variables, std) if not s > 0]
    if flat:
        raise ValueError(f"causal discovery: {flat} take one value over all {frame.height} items; nothing to learn")
    x = (x - x.mean(axis=0)) / std
    pk = _prior_knowledge(variables) if prior_knowledge else None
    model = lingam.DirectLiNGAM(random_state=seed, prior_knowledge=pk)
    model.fit(x)
    b = np.asarray(model.adjacency_matrix_)  # b[i, j]: the effect of variable j on variable i
    probs = None
    if n_bootstrap:
        boot = lingam.DirectLiNGAM(random_state=seed, prior_knowledge=pk).bootstrap(x, n_sampling=n_bootstrap)
        probs = np.asarray(boot.get_probabilities())
    rows = [
        (
            variables[j],
            variables[i],
            float(b[i, j]),
            None if probs is None else float(probs[i, j]),
        )
        for j in range(len(variables))
        for i in range(len(variables))
        if i != j
    ]
    edges = pl.DataFrame(
        rows,
        schema={"cause": pl.Utf8, "effect": pl.Utf8, "weight": pl.Float64, "probability": pl.Float64},
        orient="row",
    )
    order = tuple(variables[k] for k in model.causal_order_)
    return CausalGraph(edges, order, frame.height, n_bootstrap, prior_knowledge)


def figure9_table(graph: CausalGraph) -> pl.DataFrame:
    """Ours beside Figure 9: every edge we found or the paper names, with our weight and how
    often the bootstrap found it, and what the paper says of it."""
    paper = {(c, e): said for c, e, said in FIGURE9}
    found = graph.found()
    pairs = list(dict.fromkeys([*zip(found.get_column("cause"), found.get_column("effect")), *paper]))
    rows = []
    for cause, effect in pairs:
        row = graph.edges.filter((pl.col("cause") == cause) & (pl.col("effect") == effect)).row(0, named=True)
        reverse = graph.weight(effect, cause)
        rows.append(
            {
                "edge": f"{LABELS[cause]} → {LABELS[effect]}",
                "weight": row["weight"],
                "bootstrap share": row["probability"],
                "reverse found": reverse != 0,
                "Figure 9": paper.get((cause, effect), ""),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "edge": pl.Utf8,
            "weight": pl.Float64,
            "bootstrap share": pl.Float64,
            "reverse found": pl.Boolean,
            "Figure 9": pl.Utf8,
        },
    )


def causal_markdown(graph: CausalGraph, frame: pl.DataFrame) -> list[str]:
    """The table beside Figure 9, the causal order, and what each variable is."""
    table = figure9_table(graph).with_columns(pl.col("weight").round(3), pl.col("bootstrap share").round(2))
    return [
        f"DirectLiNGAM over {graph.items} items (each watched at least once), the five variables standardised; "
        f"weight 0: pruned (no edge); bootstrap share: of {graph.n_bootstrap} resamples of the items, how many "
        "found the edge. "
        + (
            "Prior knowledge: nothing simulated causes quality or popularity (known before the first round)."
            if graph.prior_knowledge
            else "No prior knowledge: every direction is DirectLiNGAM's."
        ),
        "",
        table_markdown(table),
        "",
        "Causal order: " + " → ".join(LABELS[v] for v in graph.order) + ".",
        "",
        FIGURE9_NOTE,
        "",
        "The items (mean [min, max]): "
        + "; ".join(
            f"{LABELS[v]} {frame.get_column(v).mean():.3g} [{frame.get_column(v).min():.3g}, {frame.get_column(v).max():.3g}]"
            for v in VARIABLES
        )
        + ".",
        "",
    ]


def causal_figure(graph: CausalGraph, title: str = ""):
    """The learned graph as Figure 9 draws it: the five variables, an arrow per edge kept,
    its width the weight's size, blue positive and red negative, the weight written on it."""
    plt = pyplot()
    from matplotlib.patches import FancyArrowPatch  # lazy: matplotlib, after the backend is set

    names = [v for v in VARIABLES if v in set(graph.edges.get_column("cause"))]
    # Catalogue on the left, the simulation in the middle, the rating on the right.
    # (no three in a line, so no arrow runs through a box.)
    spots = {
        "quality": (0.0, 1.0),
        "popularity": (0.0, 0.0),
        "exposure_rate": (1.0, -0.55),
        "views": (2.0, 0.0),
        "rating": (2.0, 1.0),
    }
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    for v in names:
        x, y = spots[v]
        ax.text(
            x,
            y,
            LABELS[v],
            ha="center",
            va="center",
            fontsize=10,
            bbox={"boxstyle": "round,pad=0.5", "facecolor": "#eef2f7", "edgecolor": "#4c5b6b"},
            zorder=3,
        )
    found = graph.found()
    top = max([abs(w) for w in found.get_column("weight").to_list()] or [1.0])
    for row in found.iter_rows(named=True):
        (x0, y0), (x1, y1) = spots[row["cause"]], spots[row["effect"]]
        both = graph.weight(row["effect"], row["cause"]) != 0
        arrow = FancyArrowPatch(
            (x0, y0),
            (x1, y1),
            arrowstyle="-|>",
            mutation_scale=16,
            linewidth=0.8 + 4.0 * abs(row["weight"]) / top,
            color="#2b6cb0" if row["weight"] > 0 else "#c53030",
            connectionstyle=f"arc3,rad={0.25 if both else 0.08}",
            shrinkA=28,
            shrinkB=28,
            zorder=2,
        )
        ax.add_patch(arrow)
        share = row["probability"]
        label = f"{row['weight']:+.2f}" + (f" ({share:.0%})" if share is not None else "")
        # A third of the way from the cause, beside the line: crossing arrows keep their labels apart.
        length = max(np.hypot(x1 - x0, y1 - y0), 1e-9)
        ax.text(
            x0 + 0.36 * (x1 - x0) - 0.07 * (y1 - y0) / length,
            y0 + 0.36 * (y1 - y0) + 0.07 * (x1 - x0) / length,
            label,
            fontsize=8,
            ha="center",
            color=arrow.get_edgecolor(),
        )
    ax.set_xlim(-0.6, 2.6)
    ax.set_ylim(-0.85, 1.35)
    ax.axis("off")
    ax.set_title(
        title
        or f"Learned causal graph (DirectLiNGAM, {graph.items} items; weight, bootstrap share) — Agent4Rec Fig. 9",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def _prior_knowledge(variables: Sequence[str]) -> np.ndarray:
    """lingam's prior-knowledge matrix: pk[i, j] = 0 says variable j does not cause i; -1 unknown.
    Quality and popularity are caused by nothing the simulation measured."""
    n = len(variables)
    pk = -np.ones((n, n), dtype=int)
    for i, effect in enumerate(variables):
        for j, cause in enumerate(variables):
            if i == j:
                pk[i, j] = -1
            elif effect in ("quality", "popularity") and cause not in ("quality", "popularity"):
                pk[i, j] = 0
    return pk


@dataclass(frozen=True)
class CausalStudy:
    """The study's outcome: the graph, the per-item frame it was learned from, the agents
    simulated and the wall time."""

    graph: CausalGraph
    items: pl.DataFrame
    agents: int
    seconds: float

    def markdown(self, arm: str, rounds: int, pages: int, split_pool: bool, item_facts: str, seed: int) -> list[str]:
        facts = (
            "item profile (train window's mean rating and number of ratings)"
            if item_facts == "profile"
            else "catalogue (vote_average, vote_count)"
        )
        return [
            f"{self.agents} agents, {rounds} rounds of {arm} (pool split: {split_pool}, {pages} pages), the embedded "
            f"brain; seed {seed}; quality and popularity from the {facts}; {self.seconds:.0f} s.",
            "",
            *causal_markdown(self.graph, self.items),
        ]


def causal_study(
    arm: str,
    rounds_config,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    users: pl.DataFrame,
    catalogue: pl.DataFrame,
    agents,
    brain_model,
    *,
    n_agents: int = 0,
    max_epochs: int = 0,
    item_facts: str = "profile",
    min_views: int = 1,
    n_bootstrap: int = 100,
    prior_knowledge: bool = True,
) -> CausalStudy:
    """Agent4Rec §4.2: the filter-bubble study's rounds (`play_rounds`, `rounds_config` an
    `ops.studies.rounds.RoundsConfig`), their events per item, and DirectLiNGAM's graph."""
    if item_facts not in ITEM_FACTS:
        raise ValueError(f"item_facts must be one of {ITEM_FACTS}, got {item_facts!r}")
    started = time.perf_counter()
    results, chosen = play_rounds(
        arm,
        rounds_config,
        train,
        valid,
        users,
        catalogue,
        agents,
        brain_model,
        n_agents=n_agents,
        max_epochs=max_epochs,
    )
    events = pl.concat(
        [r.events.with_columns(round=pl.lit(r.round, dtype=pl.Int64)) for r in results], how="vertical_relaxed"
    )
    facts = profile_facts(train) if item_facts == "profile" else catalogue_facts(catalogue)
    frame = item_frame(events, facts, min_views)
    graph = discover(frame, n_bootstrap, rounds_config.seed, prior_knowledge)
    return CausalStudy(graph, frame, len(chosen), time.perf_counter() - started)

"""Social traits (Agent4Rec §3.2 / Fig. 4, A/B Agent §3.3.2 / Fig. 6).

Each agent carries three traits cut into tiers from its train window (Agent4Rec §2.1.1,
`ops.agents.profile.social_traits`).  A trait is believable when the behaviour it should
drive moves with the tier in the simulation as it does in the real data:

| trait | behaviour | real (held-out window) | simulated (sandbox sessions) |
| --- | --- | --- | --- |
| activity | interactions | ratings in the window | clicks + watch-and-rates on an arm (all its sessions) |
| conformity | rating gap to the crowd | mean squared gap between the user's rating and the movie's train mean | the same over the ratings on an arm |
| diversity | genres | distinct genres of the movies rated | distinct genres of the movies watched on an arm |
| activity | interactions_per_session | ratings per session (a session ends at an hour without one) | clicks + watch-and-rates per sandbox session |
| activity | sessions | sessions in the window | sessions per arm (`ops.simulation.visits`) |
| diversity | genres_per_session | distinct genres per session | distinct genres watched per sandbox session |

Spearman's ρ between the tier (low < medium < high) and the behaviour, real beside
simulated, each with a percentile-bootstrap interval over users / agents and its p-value;
"agree" when both intervals exclude 0 on the same side.  Conformity's gap should FALL with
the tier (a conforming user rates close to the crowd): the sign that matters is the real
one, not a sign fixed in advance.

Choices: the real side is the test window (the window the brain never read), over the
users who rated anything in it — a user absent from a window says nothing about how many
movies an active session holds; the simulated side averages an agent over the arms.  The
window counts mix how often a user comes with how much it does per visit, hence the
per-session rows: on ML-1M the activity tier goes with how often, and against how much.
A/B Agent's Fig. 6 counts clicks only; the issue's "interactions" adds the watches, and
the click count per tier is reported beside it.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy.stats import rankdata, spearmanr

from ops.readout.statistics import interval_sign, named_rng, percentile_interval
from ops.simulation.observation import CLICK_MOVIE, WATCH_AND_RATE

TIERS = ("low", "medium", "high")
TRAIT_BEHAVIOUR = {"activity": "interactions", "conformity": "rating_gap", "diversity": "genres"}
# Counted per session as well (a session: ratings without an hour-long gap on the real side,
# one sandbox session on the simulated side): how much a visit holds, and how many visits.
PER_SESSION = (("activity", "interactions_per_session"), ("activity", "sessions"), ("diversity", "genres_per_session"))
SOCIAL = {
    "trait": pl.Utf8,
    "behaviour": pl.Utf8,
    "side": pl.Utf8,
    "agents": pl.Int64,
    "rho": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p_value": pl.Float64,
    "mean_low": pl.Float64,
    "mean_medium": pl.Float64,
    "mean_high": pl.Float64,
}


def tiers_frame(profiles) -> pl.DataFrame:
    """user_id and the three trait tiers of every user of the population (`Agents.traits`, a
    frame), or of every agent profile (a mapping)."""
    if isinstance(profiles, pl.DataFrame):
        return profiles.select(
            pl.col("user_id").cast(pl.Int64),
            pl.col("activity_tier").alias("activity"),
            pl.col("conformity_tier").alias("conformity"),
            pl.col("diversity_tier").alias("diversity"),
        ).sort("user_id")
    return pl.DataFrame(
        [(int(u), p.activity_tier, p.conformity_tier, p.diversity_tier) for u, p in sorted(profiles.items())],
        schema={"user_id": pl.Int64, "activity": pl.Utf8, "conformity": pl.Utf8, "diversity": pl.Utf8},
        orient="row",
    )


def real_behaviour(held_out: pl.DataFrame, movie_mean: pl.DataFrame, movies: pl.DataFrame) -> pl.DataFrame:
    """user_id, interactions, clicks (null: not observed), rating_gap, genres of every user
    active in the held-out window.  `movie_mean`: item_id, mean (the train window's mean
    rating); `movies`: item_id, genres."""
    rated = held_out.join(movie_mean, on="item_id", how="left").join(
        movies.select("item_id", "genres"), on="item_id", how="left"
    )
    return (
        rated.group_by("user_id")
        .agg(
            pl.len().cast(pl.Float64).alias("interactions"),
            pl.lit(None, dtype=pl.Float64).alias("clicks"),
            ((pl.col("rating") - pl.col("mean")) ** 2).mean().alias("rating_gap"),
            pl.col("genres").explode().drop_nulls().n_unique().cast(pl.Float64).alias("genres"),
        )
        .sort("user_id")
    )


def real_session_behaviour(held_out: pl.DataFrame, movies: pl.DataFrame, gap_s: int = 3600) -> pl.DataFrame:
    """user_id, interactions, sessions, genres of every user active in the held-out window,
    per SESSION as the sandbox measures them: a user's ratings split wherever `gap_s`
    seconds pass without one; interactions = mean ratings per session, genres = mean
    distinct genres per session, sessions = how many.  `real_behaviour` counts the whole
    window instead, which mixes how often a user comes with how much it does per visit.
    `held_out` needs a timestamp (seconds); `movies`: item_id, genres."""
    if "timestamp" not in held_out.columns:
        raise ValueError("real_session_behaviour: the held-out window has no timestamp column")
    rated = held_out.sort("user_id", "timestamp").with_columns(
        (pl.col("timestamp").diff().over("user_id").fill_null(gap_s + 1) > gap_s)
        .cum_sum()
        .over("user_id")
        .alias("_session")
    )
    per_session = (
        rated.join(movies.select("item_id", "genres"), on="item_id", how="left")
        .group_by("user_id", "_session")
        .agg(
            pl.len().cast(pl.Float64).alias("interactions"),
            pl.col("genres").explode().drop_nulls().n_unique().cast(pl.Float64).alias("genres"),
        )
    )
    return (
        per_session.group_by("user_id")
        .agg(pl.col("interactions").mean(), pl.len().cast(pl.Float64).alias("sessions"), pl.col("genres").mean())
        .sort("user_id")
    )


def simulated_behaviour(events: pl.DataFrame, movie_mean: pl.DataFrame, movies: pl.DataFrame) -> pl.DataFrame:
    """user_id, interactions, clicks, rating_gap, genres per agent over everything it did on
    an arm (every session of it: the simulated window), averaged over the arms, of the
    simulation `events` (ops.schema.EVENTS).  With one session per arm that is per session."""
    per_arm = _counted(events, ["arm", "user_id"], movie_mean, movies)
    return (
        per_arm.group_by("user_id")
        .agg(pl.col("interactions", "clicks", "rating_gap", "genres").cast(pl.Float64).mean())
        .sort("user_id")
    )


def simulated_session_behaviour(events: pl.DataFrame, movies: pl.DataFrame) -> pl.DataFrame:
    """user_id, interactions, sessions, genres per agent, as `real_session_behaviour` counts
    them: interactions (clicks and watch-and-rates) and distinct genres watched are means per
    session, sessions the mean number of sessions per arm (`ops.simulation.visits`)."""
    session = pl.col("session").fill_null(0) if "session" in events.columns else pl.lit(0)
    events = events.with_columns(session.cast(pl.Int64).alias("session"))
    per_session = _counted(events, ["arm", "user_id", "session"], None, movies)
    per_arm = per_session.group_by("arm", "user_id").agg(
        pl.col("interactions", "genres").cast(pl.Float64).mean(), pl.len().cast(pl.Float64).alias("sessions")
    )
    return per_arm.group_by("user_id").agg(pl.col("interactions", "sessions", "genres").mean()).sort("user_id")


def _counted(
    events: pl.DataFrame, keys: list[str], movie_mean: pl.DataFrame | None, movies: pl.DataFrame
) -> pl.DataFrame:
    """Per `keys` group of `events`: interactions (clicks + watch-and-rates), clicks, distinct
    genres watched (0 where none) and, with `movie_mean`, the mean squared rating gap."""
    acts = events.filter(pl.col("action").is_in([CLICK_MOVIE, WATCH_AND_RATE]))
    watched = events.filter(pl.col("action") == WATCH_AND_RATE).join(
        movies.select("item_id", "genres"), on="item_id", how="left"
    )
    gap = []
    if movie_mean is not None:
        watched = watched.join(movie_mean, on="item_id", how="left")
        gap = [((pl.col("rating") - pl.col("mean")) ** 2).mean().alias("rating_gap")]
    return (
        events.select(keys)
        .unique()
        .join(
            acts.group_by(keys).agg(
                pl.len().alias("interactions"), (pl.col("action") == CLICK_MOVIE).sum().alias("clicks")
            ),
            on=keys,
            how="left",
        )
        .join(
            watched.group_by(keys).agg(*gap, pl.col("genres").explode().drop_nulls().n_unique().alias("genres")),
            on=keys,
            how="left",
        )
        .with_columns(pl.col("interactions", "clicks", "genres").fill_null(0))
    )


def social_traits_alignment(
    tiers: pl.DataFrame,
    real: pl.DataFrame,
    simulated: pl.DataFrame,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    real_sessions: pl.DataFrame | None = None,
    simulated_sessions: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """SOCIAL rows: per trait, its behaviour, real and simulated (and the click count per
    activity tier, simulated only), Spearman's ρ of tier against behaviour with interval,
    p-value and the behaviour's mean per tier.  With `real_sessions` and
    `simulated_sessions` (`real_session_behaviour`, `simulated_session_behaviour`) also the
    per-session rows: interactions and genres per session, and sessions (`PER_SESSION`)."""
    pairs = [(t, b) for t, b in TRAIT_BEHAVIOUR.items()] + [("activity", "clicks")]
    rows = [
        trait_row(tiers, frame, trait, behaviour, side, n_bootstrap, confidence, seed)
        for trait, behaviour in pairs
        for side, frame in (("real", real), ("simulated", simulated))
    ]
    if real_sessions is not None and simulated_sessions is not None:
        rows += [
            trait_row(tiers, per_session_columns(frame), trait, behaviour, side, n_bootstrap, confidence, seed)
            for trait, behaviour in PER_SESSION
            for side, frame in (("real", real_sessions), ("simulated", simulated_sessions))
        ]
    return pl.DataFrame(rows, schema=SOCIAL)


def per_session_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """A per-session behaviour frame with its columns named as the SOCIAL rows name them."""
    return frame.rename({"interactions": "interactions_per_session", "genres": "genres_per_session"}, strict=False)


def trait_row(
    tiers: pl.DataFrame,
    frame: pl.DataFrame,
    trait: str,
    behaviour: str,
    side: str,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """One SOCIAL row: Spearman's ρ of `trait`'s tier against `frame`'s `behaviour` column
    over the users in both, with interval, p-value and the behaviour's mean per tier."""
    joined = (
        tiers.select("user_id", trait).join(frame.select("user_id", behaviour), on="user_id", how="inner").drop_nulls()
    )
    return {
        "trait": trait,
        "behaviour": behaviour,
        "side": side,
        **_spearman(joined, trait, behaviour, n_bootstrap, confidence, seed),
    }


def verdicts(table: pl.DataFrame) -> pl.DataFrame:
    """trait, behaviour, rho real, rho simulated, verdict: "agree" when both intervals
    exclude 0 on the same side, "disagree" on opposite sides, else "real tie" / "simulated tie"."""
    wide = table.filter(pl.col("agents") > 0).pivot(
        on="side", index=["trait", "behaviour"], values=["rho", "ci_low", "ci_high"]
    )
    out = []
    for r in wide.iter_rows(named=True):
        real = _sign(r.get("ci_low_real"), r.get("ci_high_real"))
        sim = _sign(r.get("ci_low_simulated"), r.get("ci_high_simulated"))
        verdict = (
            "no real data"
            if r.get("rho_real") is None
            else "real tie"
            if real == 0
            else "simulated tie"
            if sim == 0
            else "agree"
            if real == sim
            else "disagree"
        )
        out.append(
            {
                "trait": r["trait"],
                "behaviour": r["behaviour"],
                "rho_real": r.get("rho_real"),
                "rho_simulated": r.get("rho_simulated"),
                "verdict": verdict,
            }
        )
    return pl.DataFrame(
        out,
        schema={
            "trait": pl.Utf8,
            "behaviour": pl.Utf8,
            "rho_real": pl.Float64,
            "rho_simulated": pl.Float64,
            "verdict": pl.Utf8,
        },
    )


def _spearman(joined: pl.DataFrame, trait: str, behaviour: str, n_bootstrap: int, confidence: float, seed: int) -> dict:
    empty = {"agents": joined.height, "rho": None, "ci_low": None, "ci_high": None, "p_value": None}
    means = {f"mean_{t}": joined.filter(pl.col(trait) == t).get_column(behaviour).mean() for t in TIERS}
    x = joined.get_column(trait).replace_strict({t: i for i, t in enumerate(TIERS)}, return_dtype=pl.Float64).to_numpy()
    y = joined.get_column(behaviour).to_numpy().astype(float)
    if joined.height < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {**empty, **means}
    result = spearmanr(x, y)
    # Bootstrap over users: Pearson's r of the (mid-)ranks within each resample, which is
    # Spearman's ρ; all resamples at once, a chunk at a time.
    rng = named_rng(seed, "spearman", trait, behaviour)
    rhos = []
    for start in range(0, n_bootstrap, 200):
        idx = rng.integers(0, x.size, (min(200, n_bootstrap - start), x.size))
        rx, ry = rankdata(x[idx], axis=1), rankdata(y[idx], axis=1)
        rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            rhos.append((rx * ry).sum(axis=1) / np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1)))
    lo, hi = percentile_interval(np.concatenate(rhos), confidence)
    return {
        "agents": joined.height,
        "rho": float(result.statistic),
        "ci_low": float(lo),
        "ci_high": float(hi),
        "p_value": float(result.pvalue),
        **means,
    }


def _sign(lo, hi) -> int:
    if lo is None or hi is None or not np.isfinite(lo) or not np.isfinite(hi):
        return 0
    return interval_sign(lo, hi)


def conformity_on_pairs(
    tiers: pl.DataFrame,
    rated: pl.DataFrame,
    movie_mean: pl.DataFrame,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pl.DataFrame:
    """The conformity trait on the rating-prediction pairs (`rating.brain_ratings`: user_id,
    item_id, rating, simulated): each agent's mean squared gap between its rating and the
    movie's train mean, real (`rating`) beside simulated (`simulated`), as SOCIAL rows.  The
    same movies on both sides, so a rating rule is judged on how it rates, not on which
    movies its sessions happened to watch."""
    joined = rated.drop_nulls("simulated").join(movie_mean, on="item_id", how="inner")
    rows = []
    for side, column in (("real", "rating"), ("simulated", "simulated")):
        gap = joined.group_by("user_id").agg(((pl.col(column) - pl.col("mean")) ** 2).mean().alias("rating_gap"))
        both = tiers.select("user_id", "conformity").join(gap, on="user_id", how="inner").drop_nulls()
        rows.append(
            {
                "trait": "conformity",
                "behaviour": "rating_gap",
                "side": side,
                **_spearman(both, "conformity", "rating_gap", n_bootstrap, confidence, seed),
            }
        )
    return pl.DataFrame(rows, schema=SOCIAL)

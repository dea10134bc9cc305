"""Rating prediction and the rating distribution (SimUSER §4.2 / Table 2, Agent4Rec §3.1 /
Fig. 3).

Rating prediction: every agent rates movies its user rated in the held-out (test) window,
through the sandbox's detail page with `watch_and_rate` as the only legal action (the agent
is asked to rate; the LLM brain gets the same prompt and schema as in the sandbox), one
movie per fresh session so that no rating anchors the next.  RMSE and MAE against the real
ratings, beside two baselines on exactly the same pairs:
- the user's mean train rating (the user-mean baseline);
- each offline arm, its score mapped to a rating by isotonic regression fitted on the
  validation window (the arms are CTR models that score P(liked), not ratings; a monotone
  map is the fairest rating each can give, and it never reads the test window); the best
  of them is "the best offline arm".
Intervals: percentile bootstrap over agents (the pairs of an agent resampled together).

Rating distribution: the brain's ratings against the real held-out ratings of the same
pairs: per-star shares and the Wasserstein (earth mover's) distance between the two
distributions of stars.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import wasserstein_distance

from ops.agents.session import AgentSession
from ops.arms.base import ScoresNotAvailable
from ops.readout.statistics import bootstrap_means, named_rng, percentile_interval
from ops.simulation.brains.protocol import Brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.fatigue import FatigueConfig
from ops.simulation.observation import WATCH_AND_RATE
from ops.simulation.sandbox import Sandbox
from ops.simulation.session import agent_rng
from ops.storage.codec import load_fields, save_fields
from ops.studies.alignment.questioning import brain_workers, check_fallbacks, fresh_session, map_in_order

STARS = (1, 2, 3, 4, 5)
PREDICTION = {
    "predictor": pl.Utf8,
    "kind": pl.Utf8,
    "pairs": pl.Int64,
    "agents": pl.Int64,
    "rmse": pl.Float64,
    "rmse_ci_low": pl.Float64,
    "rmse_ci_high": pl.Float64,
    "mae": pl.Float64,
    "mae_ci_low": pl.Float64,
    "mae_ci_high": pl.Float64,
}


@dataclass
class RatingAlignment:
    """pairs: user_id, item_id, rating (real), simulated (the brain's), and one column per
    baseline; prediction: PREDICTION rows (the brain, the user mean, every arm; "best arm"
    marks the best); distribution: star, real_share, simulated_share; wasserstein: the
    distance between the two star distributions; unanswered: pairs the brain did not rate
    (an LLM answer invalid after its re-ask)."""

    pairs: pl.DataFrame
    prediction: pl.DataFrame
    distribution: pl.DataFrame
    wasserstein: float | None
    unanswered: int
    brain: str = ""  # the brain's name (events' `brain` column), set by whoever ran it

    def save(self, folder: Path) -> None:
        """Into `folder` without pickle (`ops.storage.codec.save_fields`)."""
        save_fields(folder, "RatingAlignment", 1, self)

    @classmethod
    def load(cls, folder: Path) -> RatingAlignment:
        return load_fields(cls, folder, "RatingAlignment", 1)

    def metrics(self) -> dict[str, float | int | None]:
        """RMSE and MAE per predictor, the Wasserstein distance, the unanswered pairs."""
        rows = list(self.prediction.iter_rows(named=True))
        return {
            **{f"rmse_{r['predictor']}": r["rmse"] for r in rows},
            **{f"mae_{r['predictor']}": r["mae"] for r in rows},
            "wasserstein": self.wasserstein,
            "unanswered": self.unanswered,
        }

    def tables(self) -> dict[str, pl.DataFrame]:
        return {"rating_prediction": self.prediction, "rating_distribution": self.distribution}


def rating_pairs(held_out: pl.DataFrame, users: Sequence[int], max_per_agent: int = 0, seed: int = 0) -> pl.DataFrame:
    """user_id, item_id, rating of the held-out window for `users`, at most `max_per_agent`
    per agent (0 = all), drawn from the agent's own stream."""
    frame = (
        held_out.filter(pl.col("user_id").is_in(list(users)))
        .select("user_id", "item_id", "rating")
        .sort("user_id", "item_id")
    )
    if max_per_agent <= 0:
        return frame
    keep = []
    for user, group in frame.group_by("user_id", maintain_order=True):
        if group.height > max_per_agent:
            pick = named_rng(seed, "rating pairs", int(user[0])).choice(group.height, max_per_agent, replace=False)
            group = group[np.sort(pick)]
        keep.append(group)
    return pl.concat(keep) if keep else frame


def brain_ratings(
    brain: Brain,
    sessions: Sequence[AgentSession],
    pairs: pl.DataFrame,
    catalogue: Catalogue,
    seed: int = 0,
    fatigue: FatigueConfig | None = None,
    progress: bool = False,
) -> pl.DataFrame:
    """`pairs` with a `simulated` column: the rating the brain gives each movie on its detail
    page when asked to rate (null when it gave none)."""
    by_user = {s.user_id: s for s in sessions}
    missing = sorted(set(pairs.get_column("user_id").to_list()) - set(by_user))
    if missing:
        raise ValueError(f"rating prediction: no agent for user(s) {missing[:10]}")
    movies = pairs.group_by("user_id").agg("item_id")
    brain.prepare([by_user[u] for u in movies.get_column("user_id").to_list()], dict(movies.iter_rows()))
    questions = list(pairs.select("user_id", "item_id").iter_rows())
    outcomes: list[str | None] = []  # every decision's fallback reason (None: answered)

    def rate(question) -> int | None:
        user, movie = question
        sandbox = Sandbox([movie], catalogue)
        sandbox.click_movie(movie)
        observation = replace(sandbox.observe(), legal_actions=(WATCH_AND_RATE,))
        decision = brain.decide(
            fresh_session(by_user[user], fatigue), observation, agent_rng(seed, user, f"rate {movie}")
        )
        outcomes.append(decision.fallback_reason)
        return decision.rating if decision.action == WATCH_AND_RATE else None

    # As many pairs at once as the endpoint serves (each pair has its own random stream).
    out = map_in_order(rate, questions, brain_workers(brain), "rating prediction", progress)
    check_fallbacks("rating prediction", outcomes)
    return pairs.with_columns(pl.Series("simulated", out, dtype=pl.Int64))


def offline_rating_predictors(
    arms: Mapping[str, object], valid: pl.DataFrame, max_pairs: int = 200_000, seed: int = 0
) -> dict[str, object]:
    """Per arm that scores pairs (`ops.arms.base.Arm`; one that only ranks is left out),
    a function (users, movies) -> rating: its score mapped by isotonic regression fitted on
    (a sample of at most `max_pairs` of) the validation window's ratings."""
    from sklearn.isotonic import IsotonicRegression  # lazy: scikit-learn (a second to import), for this fit only

    if valid.height > max_pairs:
        valid = valid[np.sort(named_rng(seed, "isotonic sample").choice(valid.height, max_pairs, replace=False))]
    users, movies = valid.get_column("user_id").to_numpy(), valid.get_column("item_id").to_numpy()
    ratings = valid.get_column("rating").to_numpy().astype(float)

    predictors = {}
    for name, arm in sorted(arms.items()):
        try:
            scores = arm.score(users, movies)
        except ScoresNotAvailable:
            continue  # an arm that only ranks (a lists file without scores) predicts no rating
        iso = IsotonicRegression(y_min=1.0, y_max=5.0, out_of_bounds="clip").fit(_finite(scores), ratings)
        predictors[name] = (lambda a, f: lambda u, m: f.predict(_finite(a.score(np.asarray(u), np.asarray(m)))))(
            arm, iso
        )
    return predictors


def _finite(scores) -> np.ndarray:
    """Scores the isotonic fit accepts: an arm may score what it cannot place at -inf (the
    plug-in's factor models do, for items unseen in training) so that it ranks last; here
    that is the lowest score there is, and so the lowest rating."""
    return np.nan_to_num(np.asarray(scores, dtype=float), nan=-1e300, neginf=-1e300, posinf=1e300)


def rating_alignment(
    rated: pl.DataFrame,
    train: pl.DataFrame,
    arm_predictors: Mapping[str, object] | None = None,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> RatingAlignment:
    """Score the brain's ratings (`brain_ratings`' frame) against the real ones, beside the
    user-mean baseline (from `train`) and every arm of `arm_predictors`, on the same pairs."""
    unanswered = int(rated.get_column("simulated").null_count())
    pairs = rated.drop_nulls("simulated")
    global_mean = float(train.get_column("rating").mean()) if train.height else 3.5
    user_mean = train.group_by("user_id").agg(pl.col("rating").mean().alias("user_mean"))
    pairs = pairs.join(user_mean, on="user_id", how="left").with_columns(pl.col("user_mean").fill_null(global_mean))
    kinds = {"simulated": "brain", "user_mean": "user-mean baseline"}
    for name, predict in sorted((arm_predictors or {}).items()):
        column = f"arm_{name}"
        pairs = pairs.with_columns(
            pl.Series(
                column,
                predict(pairs.get_column("user_id").to_numpy(), pairs.get_column("item_id").to_numpy()),
                dtype=pl.Float64,
            )
        )
        kinds[column] = "offline arm"
    prediction = _errors(pairs, kinds, n_bootstrap, confidence, seed)
    arms = prediction.filter(pl.col("kind") == "offline arm")
    if arms.height:
        best = arms.sort("rmse").get_column("predictor")[0]
        prediction = prediction.with_columns(
            pl.when(pl.col("predictor") == best)
            .then(pl.lit("best offline arm"))
            .otherwise(pl.col("kind"))
            .alias("kind")
        )
    distribution, distance = rating_distribution(
        pairs.get_column("simulated").to_numpy(), pairs.get_column("rating").to_numpy()
    )
    return RatingAlignment(pairs, prediction, distribution, distance, unanswered)


def rating_distribution(simulated: np.ndarray, real: np.ndarray) -> tuple[pl.DataFrame, float | None]:
    """(star, real_share, simulated_share) and the Wasserstein distance between the two."""
    simulated, real = np.asarray(simulated, dtype=float), np.asarray(real, dtype=float)
    shares = {
        "star": list(STARS),
        "real_share": [float((real == s).mean()) if real.size else None for s in STARS],
        "simulated_share": [float((simulated == s).mean()) if simulated.size else None for s in STARS],
    }
    distance = float(wasserstein_distance(simulated, real)) if simulated.size and real.size else None
    return pl.DataFrame(
        shares, schema={"star": pl.Int64, "real_share": pl.Float64, "simulated_share": pl.Float64}
    ), distance


def _errors(
    pairs: pl.DataFrame, kinds: Mapping[str, str], n_bootstrap: int, confidence: float, seed: int
) -> pl.DataFrame:
    """RMSE and MAE of every predictor column, with intervals from one bootstrap over agents
    (all predictors see the same resampled agents, so their intervals compare like for like)."""
    columns = list(kinds)
    real = pl.col("rating").cast(pl.Float64)
    per_agent = (
        pairs.group_by("user_id")
        .agg(
            pl.len().alias("n"),
            *[((pl.col(c) - real) ** 2).sum().alias(f"se_{c}") for c in columns],
            *[(pl.col(c) - real).abs().sum().alias(f"ae_{c}") for c in columns],
        )
        .sort("user_id")
    )
    matrix = (
        per_agent.select("n", *[f"se_{c}" for c in columns], *[f"ae_{c}" for c in columns]).to_numpy().astype(float)
    )
    rows = []
    if per_agent.height:
        boot = bootstrap_means(matrix, n_bootstrap, named_rng(seed, "rating errors"))
        for j, column in enumerate(columns):
            mse = boot[:, 1 + j] / boot[:, 0]
            mae = boot[:, 1 + len(columns) + j] / boot[:, 0]
            rmse_lo, rmse_hi = percentile_interval(np.sqrt(mse), confidence)
            mae_lo, mae_hi = percentile_interval(mae, confidence)
            n = matrix[:, 0].sum()
            rows.append(
                {
                    "predictor": column.removeprefix("arm_")
                    if column.startswith("arm_")
                    else ("brain" if column == "simulated" else column),
                    "kind": kinds[column],
                    "pairs": int(n),
                    "agents": per_agent.height,
                    "rmse": float(np.sqrt(matrix[:, 1 + j].sum() / n)),
                    "rmse_ci_low": float(rmse_lo),
                    "rmse_ci_high": float(rmse_hi),
                    "mae": float(matrix[:, 1 + len(columns) + j].sum() / n),
                    "mae_ci_low": float(mae_lo),
                    "mae_ci_high": float(mae_hi),
                }
            )
    return pl.DataFrame(rows, schema=PREDICTION)

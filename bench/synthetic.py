"""Benchmark of the synthetic source: generation time, MovieLens-like marginals, and how
well the planted structure can be recovered, against Pop measured in the same run.

Chronological 7:2:1 split (ops.data.split), NDCG@20 by full ranking (ops.arms.metrics), relevant =
test items rated >= 4.  Rankers:
- Random and Pop (ops.arms.recommenders arms, no training);
- `planted`: the hidden tastes themselves (genre weights x movie genres, preferred era,
  favourite directors) plus vote_average, a ceiling for what a model can learn;
- `likes_lr`: a logistic regression on the train labels (rating >= 4) with item, user and
  user x genre one-hot features (scikit-learn), a stand-in for an FM that learns tastes;
- with --deepfm, the DeepFM arm of ops.arms.recommenders (Appendix B settings, CPU, minutes).

    .venv/bin/python -m bench.synthetic                 # default config, posters to bench/out
    .venv/bin/python -m bench.synthetic --deepfm
    .venv/bin/python -m bench.synthetic --n-users 500 --n-movies 800

Prints each ranker's NDCG@20 and its ratio to Pop's; results also go to bench/out/synthetic.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time

import numpy as np
import polars as pl

from bench import ROOT
from ops.arms.metrics import ndcg_at_k, relevant_items
from ops.data.split import chronological_split
from ops.data.synthetic import SyntheticConfig, generate
from ops.schema import GENRES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-users", type=int, default=None)
    parser.add_argument("--n-movies", type=int, default=None)
    parser.add_argument("--deepfm", action="store_true", help="also train the DeepFM arm (minutes on CPU)")
    args = parser.parse_args()
    overrides = {k: v for k, v in (("n_users", args.n_users), ("n_movies", args.n_movies)) if v is not None}
    config = SyntheticConfig(seed=args.seed, **overrides)
    out = ROOT / "bench" / "out"
    poster_dir = out / "synthetic-posters"
    shutil.rmtree(poster_dir, ignore_errors=True)  # time a cold run, posters included

    start = time.perf_counter()
    data = generate(config, poster_dir)
    seconds = time.perf_counter() - start
    ratings = data.ratings
    shares = ratings["rating"].value_counts(normalize=True).sort("rating")["proportion"].to_list()
    per_movie = ratings.group_by("movie_id").len()["len"].sort(descending=True).to_numpy()
    per_user = ratings.group_by("user_id").len()["len"]
    summary = {
        "generate_seconds": round(seconds, 2),
        "users": data.users.height,
        "movies": data.movies.height,
        "ratings": ratings.height,
        "rating_shares_1_to_5": [round(s, 3) for s in shares],
        "ratings_per_user_min_median_mean_max": [
            int(per_user.min()),
            float(per_user.median()),
            round(float(per_user.mean()), 1),
            int(per_user.max()),
        ],
        "top_10pct_movies_share": round(float(per_movie[: data.movies.height // 10].sum() / per_movie.sum()), 3),
        "movies_rated": int(len(per_movie)),
    }
    print(json.dumps(summary, indent=1))

    split = chronological_split(ratings)
    relevant = relevant_items(split.test)
    users = relevant["user_id"].unique().sort().to_numpy()
    movie_ids = data.movies["movie_id"].to_numpy()
    seen = split.train.select("user_id", "movie_id")
    rankers = {
        "random": _scores_random(users, movie_ids, args.seed),
        "pop": _scores_pop(split.train, users, movie_ids),
        "planted": _scores_planted(data, users),
        "likes_lr": _scores_likes_lr(data, split.train, users),
    }
    results = {name: ndcg_at_k(_top20(scores, users, movie_ids, seen), relevant) for name, scores in rankers.items()}
    if args.deepfm:
        results["deepfm"] = _deepfm_ndcg(data, split)
    pop = results["pop"]
    print(f"\nNDCG@20 over {len(users)} test users (ratio to Pop measured in this run)")
    for name, value in results.items():
        print(f"  {name:10s} {value:.4f}   x{value / pop:.2f}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "synthetic.json").write_text(json.dumps({"summary": summary, "ndcg_at_20": results}, indent=1))


def _top20(scores: np.ndarray, users: np.ndarray, movie_ids: np.ndarray, seen: pl.DataFrame) -> pl.DataFrame:
    """Top-20 per user over the catalogue minus the user's train items (docs/definitions.md)."""
    scores = scores.copy()
    row = {u: i for i, u in enumerate(users)}
    col = {m: j for j, m in enumerate(movie_ids)}
    mask = seen.filter(pl.col("user_id").is_in(users.tolist()))
    scores[[row[u] for u in mask["user_id"]], [col[m] for m in mask["movie_id"]]] = -np.inf
    top = np.argsort(-scores, axis=1, kind="stable")[:, :20]
    return pl.DataFrame(
        {
            "user_id": np.repeat(users, 20),
            "movie_id": movie_ids[top].ravel(),
            "rank": np.tile(np.arange(1, 21), len(users)),
        }
    )


def _scores_random(users: np.ndarray, movie_ids: np.ndarray, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((len(users), len(movie_ids)))


def _scores_pop(train: pl.DataFrame, users: np.ndarray, movie_ids: np.ndarray) -> np.ndarray:
    counts = dict(train.group_by("movie_id").len().iter_rows())
    pop = np.array([counts.get(m, 0) for m in movie_ids], dtype=float)
    return np.tile(pop, (len(users), 1))


def _scores_planted(data, users: np.ndarray) -> np.ndarray:
    tastes = data.hidden_tastes.filter(pl.col("user_id").is_in(users.tolist())).sort("user_id")
    weights = np.array(tastes["genre_weights"].to_list())
    weights = weights / weights.max(axis=1, keepdims=True)
    multi_hot = np.array([[g in gs for g in GENRES] for gs in data.movies["genres"]], dtype=float)
    genre = weights @ multi_hot.T / multi_hot.sum(axis=1)
    years = data.movies["year"].to_numpy()
    era = np.exp(-0.5 * ((years[None, :] - tastes["preferred_era"].to_numpy()[:, None] - 5) / 10) ** 2)
    directors = data.metadata["directors"].list.first().to_list()
    favourite = [set(f) for f in tastes["favourite_directors"]]
    director = np.array([[d in f for d in directors] for f in favourite], dtype=float)
    vote = data.metadata["vote_average"].to_numpy()
    return 2.0 * genre + 0.5 * era + 0.8 * director + (vote - vote.mean()) / vote.std()


def _scores_likes_lr(data, train: pl.DataFrame, users: np.ndarray) -> np.ndarray:
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    n_users, n_movies, n_genres = data.users.height, data.movies.height, len(GENRES)
    multi_hot = np.array([[g in gs for g in GENRES] for gs in data.movies["genres"]], dtype=float)
    multi_hot /= multi_hot.sum(axis=1, keepdims=True)

    def design(u: np.ndarray, m: np.ndarray):
        rows = np.arange(len(u))
        item = sparse.csr_matrix((np.ones(len(u)), (rows, m)), shape=(len(u), n_movies))
        user = sparse.csr_matrix((np.ones(len(u)), (rows, u)), shape=(len(u), n_users))
        r, g = np.nonzero(multi_hot[m])
        cross = sparse.csr_matrix((multi_hot[m][r, g], (r, u[r] * n_genres + g)), shape=(len(u), n_users * n_genres))
        return sparse.hstack([item, user, cross, sparse.csr_matrix(multi_hot[m])]).tocsr()

    u = train["user_id"].to_numpy() - 1  # synthetic ids run 1..n
    m = train["movie_id"].to_numpy() - 1
    model = LogisticRegression(C=1.0, max_iter=300).fit(design(u, m), (train["rating"] >= 4).to_numpy())
    all_movies = np.arange(n_movies)
    return np.stack([model.decision_function(design(np.full(n_movies, user - 1), all_movies)) for user in users])


def _deepfm_ndcg(data, split) -> float:
    import torch

    from ops.arms.recommenders import arm_config, evaluate_arm, train_arm
    from ops.data.mm_ml_1m import build_mm_ml_1m

    torch.set_num_threads(2)
    arm = train_arm(arm_config("deepfm"), split.train, split.valid, data.users, build_mm_ml_1m(data.movies))
    return evaluate_arm(arm, split.train, split.test, data.movies["movie_id"].to_numpy(), k=20).ndcg_at_k


if __name__ == "__main__":
    main()

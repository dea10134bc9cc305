"""The data sources, each against a baseline measured in the same run.

`synthetic` — the synthetic source: generation time, MovieLens-like marginals, and how well
the planted structure can be recovered, against Pop.  Chronological 7:2:1 split
(ops.data.split), NDCG@20 by full ranking (ops.arms.metrics), relevant = test items rated
>= 4.  Rankers:
- Random and Pop (ops.arms.recommenders arms, no training);
- `planted`: the hidden tastes themselves (genre weights x movie genres, preferred era,
  favourite directors) plus vote_average, a ceiling for what a model can learn;
- `likes_lr`: a logistic regression on the train labels (rating >= 4) with item, user and
  user x genre one-hot features (scikit-learn), a stand-in for an FM that learns tastes;
- with --deepfm, the DeepFM arm of ops.arms.recommenders (Appendix B settings, CPU, minutes).
Prints each ranker's NDCG@20 and its ratio to Pop's; results also go to bench/out/synthetic.json.

`movielens` — how fast `ops.data.movielens.load_local` reads ML-1M against the usual way of
reading it: pandas `read_csv(sep="::", engine="python")` of the ratings file alone (what most
MovieLens loaders do; it parses but validates nothing).  Data: the reference copy in
../shared/data/ml-1m (339,444 ratings) and a 1M-rating folder built from it in a temporary
directory (users 1-1999 repeated as 2000-3998 and 4000-5998, 1,018,332 ratings, about the
size of the full ML-1M ratings.dat).  Nothing is written to the repository.

`crawl` — TMDB crawl throughput against a fake TMDB with a fixed latency: achieved ÷
configured rate.  A local threaded HTTP server (http.server) answers in TMDB's JSON shapes
after a fixed delay.  The crawl runs with a configured rate limit well under what the server
could take at that latency and concurrency; the figure of merit is the request rate the
crawl achieved (server-side arrival times) divided by the configured limit — goal ≥ 0.9, and
never above 1.0 + tolerance (the limiter must not overshoot).  The same crawl with the limit
lifted is the baseline (what latency × concurrency allow), so the ratio is read against a
ceiling measured on this machine.

    .venv/bin/python -m bench.sources synthetic                 # default config, posters to bench/out
    .venv/bin/python -m bench.sources synthetic --deepfm
    .venv/bin/python -m bench.sources synthetic --n-users 500 --n-movies 800
    .venv/bin/python -m bench.sources movielens
    .venv/bin/python -m bench.sources crawl [--movies 150] [--rps 40] [--concurrency 8] [--latency-ms 50]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import numpy as np
import polars as pl

from bench import OUT
from fakes.shared_data import SHARED_DATA
from fakes.tmdb_server import TEST_API_KEY, FakeMovie, FakeTmdb, StdlibHandler
from ops.arms.metrics import ndcg_at_k, relevant_items
from ops.data.movielens import load_local
from ops.data.split import chronological_split
from ops.data.synthetic import SyntheticConfig, generate
from ops.data.tmdb import TmdbConfig, TmdbCredentials, crawl_tmdb
from ops.schema import GENRES

REPEATS = 3  # movielens: best of three, the machine is shared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="source", required=True)
    p = sub.add_parser("synthetic", help="the generator: marginals, and the planted tastes against Pop")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-users", type=int, default=None)
    p.add_argument("--n-movies", type=int, default=None)
    p.add_argument("--deepfm", action="store_true", help="also train the DeepFM arm (minutes on CPU)")
    sub.add_parser("movielens", help="load_local against pandas' read_csv of the ratings")
    p = sub.add_parser("crawl", help="the TMDB crawl's achieved rate against its limit, on a fake TMDB")
    p.add_argument("--movies", type=int, default=150)
    p.add_argument("--rps", type=float, default=40.0, help="configured rate limit, requests per second")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--latency-ms", type=float, default=50.0)
    p.add_argument("--search", action="store_true", help="no links table: search every title first")
    args = parser.parse_args()
    {"synthetic": synthetic, "movielens": movielens, "crawl": crawl}[args.source](args)


def synthetic(args) -> None:
    overrides = {k: v for k, v in (("n_users", args.n_users), ("n_movies", args.n_movies)) if v is not None}
    config = SyntheticConfig(seed=args.seed, **overrides)
    out = OUT
    poster_dir = out / "synthetic-posters"
    shutil.rmtree(poster_dir, ignore_errors=True)  # time a cold run, posters included

    start = time.perf_counter()
    data = generate(config, poster_dir)
    seconds = time.perf_counter() - start
    ratings = data.ratings
    shares = ratings["rating"].value_counts(normalize=True).sort("rating")["proportion"].to_list()
    per_movie = ratings.group_by("item_id").len()["len"].sort(descending=True).to_numpy()
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
    item_ids = data.movies["item_id"].to_numpy()
    seen = split.train.select("user_id", "item_id")
    rankers = {
        "random": _scores_random(users, item_ids, args.seed),
        "pop": _scores_pop(split.train, users, item_ids),
        "planted": _scores_planted(data, users),
        "likes_lr": _scores_likes_lr(data, split.train, users),
    }
    results = {name: ndcg_at_k(_top20(scores, users, item_ids, seen), relevant) for name, scores in rankers.items()}
    if args.deepfm:
        results["deepfm"] = _deepfm_ndcg(data, split)
    pop = results["pop"]
    print(f"\nNDCG@20 over {len(users)} test users (ratio to Pop measured in this run)")
    for name, value in results.items():
        print(f"  {name:10s} {value:.4f}   x{value / pop:.2f}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "synthetic.json").write_text(json.dumps({"summary": summary, "ndcg_at_20": results}, indent=1))


def _top20(scores: np.ndarray, users: np.ndarray, item_ids: np.ndarray, seen: pl.DataFrame) -> pl.DataFrame:
    """Top-20 per user over the catalogue minus the user's train items (docs/definitions.md)."""
    scores = scores.copy()
    row = {u: i for i, u in enumerate(users)}
    col = {m: j for j, m in enumerate(item_ids)}
    mask = seen.filter(pl.col("user_id").is_in(users.tolist()))
    scores[[row[u] for u in mask["user_id"]], [col[m] for m in mask["item_id"]]] = -np.inf
    top = np.argsort(-scores, axis=1, kind="stable")[:, :20]
    return pl.DataFrame(
        {
            "user_id": np.repeat(users, 20),
            "item_id": item_ids[top].ravel(),
            "rank": np.tile(np.arange(1, 21), len(users)),
        }
    )


def _scores_random(users: np.ndarray, item_ids: np.ndarray, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((len(users), len(item_ids)))


def _scores_pop(train: pl.DataFrame, users: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
    counts = dict(train.group_by("item_id").len().iter_rows())
    pop = np.array([counts.get(m, 0) for m in item_ids], dtype=float)
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
    m = train["item_id"].to_numpy() - 1
    model = LogisticRegression(C=1.0, max_iter=300).fit(design(u, m), (train["rating"] >= 4).to_numpy())
    all_movies = np.arange(n_movies)
    return np.stack([model.decision_function(design(np.full(n_movies, user - 1), all_movies)) for user in users])


def _deepfm_ndcg(data, split) -> float:
    import torch

    from ops.arms.recommenders import arm_config, evaluate_arm, train_arm
    from ops.data.catalogue import build_catalogue

    torch.set_num_threads(2)
    arm = train_arm(arm_config("deepfm"), split.train, split.valid, data.users, build_catalogue(data.movies))
    return evaluate_arm(arm, split.train, split.test, data.movies["item_id"].to_numpy(), k=20).ndcg_at_k


def movielens(args) -> None:
    source = SHARED_DATA / "ml-1m"
    if not source.is_dir():
        raise SystemExit(f"bench.sources: no MovieLens-1M data in {source} (set SIMAB_SHARED_DATA)")
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp)
        for name in ("users.dat", "movies.dat"):
            shutil.copy(source / name, big / name)
        ratings = (source / "ratings_users_1-1999.dat").read_bytes()
        with (big / "ratings.dat").open("wb") as fh:
            for offset in (0, 2000, 4000):
                for line in ratings.splitlines(keepends=True):
                    user, rest = line.split(b"::", 1)
                    fh.write(b"%d::%s" % (int(user) + offset, rest))
        for label, folder, ratings_file in (
            ("ml-1m reference copy", source, source / "ratings_users_1-1999.dat"),
            ("ml-1m, 1M ratings", big, big / "ratings.dat"),
        ):
            ours, n = best(lambda: load_local(folder).ratings.height)
            base, m = best(lambda: pandas_ratings(ratings_file))
            assert n == m, (n, m)
            print(
                f"{label}: {n:,} ratings; load_local {ours:.3f} s (users+movies+ratings, validated); "
                f"pandas python-engine ratings only {base:.3f} s; ratio {base / ours:.1f}x"
            )


def pandas_ratings(path: Path) -> int:
    import pandas as pd

    return len(pd.read_csv(path, sep="::", engine="python", header=None, encoding="latin-1"))


def best(call):
    times, result = [], None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return min(times), result


def crawl(args) -> None:
    logging.basicConfig(level=logging.WARNING)

    print(
        f"fake TMDB latency {args.latency_ms:.0f} ms, concurrency {args.concurrency}, {args.movies} movies, "
        f"{'title search + ' if args.search else ''}details + 2 posters per movie"
    )
    print(
        f"{'run':<12} {'limit rps':>10} {'requests':>9} {'achieved rps':>13} {'end-to-end rps':>15} {'achieved/limit':>15}"
    )
    baseline = crawl_once(args, limit=1e6, label="no limit")
    limited = crawl_once(args, limit=args.rps, label="limited")
    print(f"\nceiling at this latency/concurrency (baseline, same run): {baseline['achieved']:.1f} rps")
    print(f"achieved / configured limit: {limited['achieved'] / args.rps:.3f}  (goal >= 0.9, and <= 1.05)")
    if baseline["achieved"] < args.rps:
        print(
            "note: the limit is above the measured ceiling; raise --concurrency or lower --rps for a meaningful ratio"
        )


def crawl_once(args, limit: float, label: str) -> dict:
    fake = FakeTmdb(
        [FakeMovie(10_000 + i, f"Bench Picture {i:04d}", f"{1960 + i % 40}-01-01") for i in range(args.movies)],
        latency_s=args.latency_ms / 1000,
    )
    handler = type("Handler", (StdlibHandler,), {"fake": fake})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    movies = pl.DataFrame(
        {
            "item_id": list(range(args.movies)),
            "title": [f"Bench Picture {i:04d} ({1960 + i % 40})" for i in range(args.movies)],
            "year": [1960 + i % 40 for i in range(args.movies)],
            "genres": [["Drama"]] * args.movies,
        }
    )
    links = (
        None
        if args.search
        else pl.DataFrame({"movieId": list(range(args.movies)), "tmdbId": [10_000 + i for i in range(args.movies)]})
    )
    config = TmdbConfig(
        api_base_url=f"{base}/3",
        image_base_url=f"{base}/t/p",
        rate_limit_rps=limit,
        concurrency=args.concurrency,
        progress=False,
    )
    try:
        with tempfile.TemporaryDirectory() as out:
            started = time.monotonic()
            result = crawl_tmdb(movies, out, config, links=links, credentials=TmdbCredentials(api_key=TEST_API_KEY))
            elapsed = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    if result.metadata.height != args.movies:
        raise SystemExit(f"crawl lost movies: {result.metadata.height} of {args.movies}; failures:\n{result.failures}")
    arrivals = sorted(s.at for s in fake.log)
    achieved = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
    shown = "-" if limit >= 1e5 else f"{limit:.0f}"
    ratio = "-" if limit >= 1e5 else f"{achieved / limit:.3f}"
    print(f"{label:<12} {shown:>10} {len(arrivals):>9} {achieved:>13.1f} {len(arrivals) / elapsed:>15.1f} {ratio:>15}")
    return {"achieved": achieved, "elapsed": elapsed, "requests": len(arrivals)}


if __name__ == "__main__":
    main()

"""TMDB crawl throughput against a fake TMDB with fixed latency: achieved ÷ configured rate.

A local threaded HTTP server (http.server) answers in TMDB's JSON shapes after a fixed
delay.  The crawl runs with a configured rate limit well under what the server could take
at that latency and concurrency; the figure of merit is the request rate the crawl
achieved (server-side arrival times) divided by the configured limit — goal ≥ 0.9, and
never above 1.0 + tolerance (the limiter must not overshoot).  The same crawl with the
limit lifted is measured in the same run as the baseline (what latency × concurrency
allow), so the ratio is read against a ceiling measured on this machine.

    .venv/bin/python -m bench.crawl_throughput [--movies 150] [--rps 40] [--concurrency 8] [--latency-ms 50]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer

import polars as pl

from fakes.tmdb_server import TEST_API_KEY, FakeMovie, FakeTmdb, StdlibHandler
from ops.data.tmdb import TmdbConfig, TmdbCredentials, crawl_tmdb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--movies", type=int, default=150)
    parser.add_argument("--rps", type=float, default=40.0, help="configured rate limit, requests per second")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--search", action="store_true", help="no links table: search every title first")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    print(
        f"fake TMDB latency {args.latency_ms:.0f} ms, concurrency {args.concurrency}, {args.movies} movies, "
        f"{'title search + ' if args.search else ''}details + 2 posters per movie"
    )
    print(
        f"{'run':<12} {'limit rps':>10} {'requests':>9} {'achieved rps':>13} {'end-to-end rps':>15} {'achieved/limit':>15}"
    )
    baseline = run(args, limit=1e6, label="no limit")
    limited = run(args, limit=args.rps, label="limited")
    print(f"\nceiling at this latency/concurrency (baseline, same run): {baseline['achieved']:.1f} rps")
    print(f"achieved / configured limit: {limited['achieved'] / args.rps:.3f}  (goal >= 0.9, and <= 1.05)")
    if baseline["achieved"] < args.rps:
        print(
            "note: the limit is above the measured ceiling; raise --concurrency or lower --rps for a meaningful ratio"
        )


def run(args, limit: float, label: str) -> dict:
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
            "movie_id": list(range(args.movies)),
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

"""Taste discrimination, per item, under two hold-outs: simab's (the later, test window) and
the papers' (ratings drawn at random from the user's history and kept out of its profile).

Why: the goal "taste F1 at 1:9 >= 0.55 by the papers' protocol" is set
from SimUSER (0.497) and Agent4Rec (0.323), whose positives are "items the user has
interacted with but [that were] not utilized for profile initialization" (Agent4Rec §3.1):
drawn from anywhere in the user's history.  simab's alignment protocol takes them from the
test window, which comes after everything the agent remembers; the tastes it asks about
have had time to drift.  This bench runs the same embedded brain, the same per-item
answer (`ops.studies.alignment.taste`) and the same users under both, so the difference is
the hold-out alone:

- "test window" (simab's): agents remember the train window, the brain is fitted on train +
  validation, thresholds are fitted on validation-window lists (`fit_taste_thresholds`),
  positives are test-window ratings;
- "random history" (the papers'): from each user's train window `--held-out` ratings are
  drawn at random as positives and `--held-out` more for the thresholds
  (`thresholds_on_lists`); agents are rebuilt and the brain refitted without either set.

Both: the users active in the test window, negatives the movies the user never rated in
any window, 20-item lists at 1:1, 1:3, 1:9, 1:4, mean F1 over agents with a bootstrap
interval.  The brains are not list-calibrated (`bench/alignment.py` calibrates; the
per-item score does not read the list response).

    SIMAB_SHARED_DATA=/path/to/shared/data .venv/bin/python bench/taste_holdout.py
    .venv/bin/python bench/taste_holdout.py --data synthetic
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import agents as bench_agents  # noqa: E402  (bench/agents.py: the benches' common data and agents)
from ops.agents.embeddings import MiniLMTextEmbedder  # noqa: E402
from ops.environment import offline_defaults  # noqa: E402
from ops.simulation.brains.embedded import fit_embedded_brain  # noqa: E402
from ops.studies.alignment import papers  # noqa: E402
from ops.studies.alignment.lists import mixed_lists  # noqa: E402
from ops.studies.alignment.taste import (  # noqa: E402
    TASTE_RATIOS,
    embedded_scorer,
    fit_taste_thresholds,
    papers_holdout_taste,
    taste_per_item,
    threshold_answerer,
    thresholds_on_lists,
)

OUT = ROOT / "bench" / "out"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=("ml1m", "synthetic"), default="ml1m")
    ap.add_argument(
        "--held-out", type=int, default=10, help="random-history positives per user (and as many for the thresholds)"
    )
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    offline_defaults()
    import torch

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    cache = OUT / f"agents-cache-{args.data}"
    users, movies, ratings, split, frame, agents = bench_agents.prepare(args.data, MiniLMTextEmbedder(), cache)
    movie_ids = frame.get_column("movie_id").to_numpy()
    known = pl.concat([f.select("user_id", "movie_id") for f in (split.train, split.valid, split.test)])
    judged = sorted(set(split.test.get_column("user_id").to_list()) & set(agents.profiles))
    print(f"data {args.data}: {len(judged)} users active in the test window judged under both hold-outs")

    results = {}
    # simab's: the test window.
    model = fit_embedded_brain(agents, split.train, split.valid, users)
    score = embedded_scorer(model.brain())
    sessions = agents.sessions()
    cuts = fit_taste_thresholds(
        score, sessions, split.valid, {"train": split.train}, split.test, movie_ids, TASTE_RATIOS, 20, args.seed
    )
    lists = mixed_lists(split.test, known, movie_ids, TASTE_RATIOS, 20, args.seed, judged, "taste")
    results["test window"] = taste_per_item(
        threshold_answerer(score, cuts), sessions, lists, args.seed, n_bootstrap=args.n_bootstrap
    )
    print(f"test window: thresholds {cuts}; {time.perf_counter() - started:.0f} s")

    # The papers': random ratings of the history, kept out of the agents and the brain
    # (the product's taste_alignment runs the same function).
    def answerer_for(agents_h, kept, threshold_lists):
        score_h = embedded_scorer(fit_embedded_brain(agents_h, kept, split.valid, users).brain())
        cuts_h = thresholds_on_lists(score_h, agents_h.sessions(), threshold_lists)
        return threshold_answerer(score_h, cuts_h), cuts_h

    results["random history"], cuts_h = papers_holdout_taste(
        answerer_for,
        lambda kept: bench_agents.agents_on(kept, users, frame, MiniLMTextEmbedder(), cache),
        split.train,
        judged,
        known,
        movie_ids,
        held_out=args.held_out,
        seed=args.seed,
        n_bootstrap=args.n_bootstrap,
    )
    print(
        f"random history: {args.held_out} positives per user and as many for the thresholds drawn from the "
        f"train window; thresholds {cuts_h}; {time.perf_counter() - started:.0f} s"
    )

    print("\n== Taste discrimination per item (F1, mean over agents [95 % interval]) by hold-out ==")
    table = pl.concat(
        [r.table().insert_column(0, pl.lit(name).alias("hold-out")) for name, r in results.items()],
        how="diagonal_relaxed",
    )
    print(table.select("hold-out", "ratio", "agents", "f1", "precision", "recall").to_pandas().to_markdown(index=False))
    print("\nreported (their hold-out is the random history):")
    for name, table1 in (("SimUSER", papers.SIMUSER_TABLE1), ("Agent4Rec", papers.AGENT4REC_TABLE1)):
        print(f"  {name}: " + ", ".join(f"{m} F1 {row[3]:.3f}" for m, row in table1.items()))
    print(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()

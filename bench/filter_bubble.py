"""Agent4Rec's filter bubble experiment (§4.1, Figure 8) outside Dagster.

On the synthetic default or the real ML-1M copy (users 1-1999, local metadata and posters, as
`make demo-ml1m` reads them): an MF-style arm (FM), four rounds, up to 5 pages a session,
the movie pool split in four equal parts, the embedded brain; per round the paper's two
figures for what was recommended and for what was watched, catalogue coverage and
satisfaction, with 95 % bootstrap intervals over agents (`ops.studies.filter_bubble`).

    .venv/bin/python -m bench.filter_bubble --data synthetic
    .venv/bin/python -m bench.filter_bubble --data ml1m

The same experiment is the `filter_bubble` asset (job `simab_filter_bubble`).  Prints the
table and the wall time; writes bench/out/filter_bubble-<data>.{json,png}.
"""

from __future__ import annotations

import argparse
import json
import time

from bench import OUT, prepare
from ops.agents.embeddings import MiniLMTextEmbedder
from ops.arms.recommenders import arm_config
from ops.environment import offline_defaults
from ops.figures import save_figure, table_markdown
from ops.simulation.assignment import sample_agents
from ops.simulation.brains.embedded import fit_embedded_brain
from ops.simulation.catalogue import Catalogue
from ops.studies.alignment.calibration import CalibrationConfig, calibrate_list_response
from ops.studies.filter_bubble import filter_bubble_figure, filter_bubble_metrics
from ops.studies.rounds import RoundsConfig, simulate_rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=("ml1m", "synthetic"), default="synthetic")
    ap.add_argument("--arm", default="fm")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--pages", type=int, default=5)
    ap.add_argument("--agents", type=int, default=0, help="0 = all")
    ap.add_argument("--max-epochs", type=int, default=20)
    ap.add_argument("--no-split", action="store_true", help="every round ranks the whole catalogue")
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    offline_defaults()
    import torch

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    users, movies, ratings, split, frame, agents = prepare(
        args.data, MiniLMTextEmbedder(), OUT / f"agents-cache-{args.data}"
    )
    model = fit_embedded_brain(agents, split.train, split.valid, users)
    # As the `embedded_brain` asset does: the click decision calibrated to list quality.
    model = calibrate_list_response(
        model,
        agents.sessions(),
        split.train,
        split.valid,
        Catalogue.from_frame(frame),
        CalibrationConfig(seed=args.seed),
    )
    prepared = time.perf_counter() - started
    print(
        f"data {args.data}: {users.height} users, {movies.height} movies, {ratings.height} ratings; {len(agents.profiles)} agents; "
        f"prepared in {prepared:.0f} s",
        flush=True,
    )

    config = RoundsConfig(
        rounds=args.rounds, pages=args.pages, split_pool=not args.no_split, seed=args.seed, n_bootstrap=args.n_bootstrap
    )
    chosen = sample_agents(agents.profiles, args.agents, args.seed)
    t = time.perf_counter()
    results = simulate_rounds(
        arm_config(args.arm, settings={"max_epochs": args.max_epochs}),
        split.train,
        split.valid,
        users,
        frame,
        agents,
        model,
        config,
        chosen,
    )
    simulated = time.perf_counter() - t
    metrics = filter_bubble_metrics(results, frame, args.n_bootstrap, config.confidence, args.seed)
    wall = time.perf_counter() - started
    for r in results:
        print(
            f"round {r.round}: pool {r.pool_size} movies, trained on {r.train_rows} rows, {r.events.height} events, "
            f"{r.written.filter(r.written['round'] == r.round).height} watches written",
            flush=True,
        )
    wide = metrics.with_columns(
        value=metrics["mean"].round(3).cast(str)
        + " ["
        + metrics["ci_low"].round(3).cast(str)
        + ", "
        + metrics["ci_high"].round(3).cast(str)
        + "]"
    )
    print(table_markdown(wide.pivot(on="round", index="metric", values="value")))
    print(f"wall time {wall:.0f} s (prepare {prepared:.0f} s, {args.rounds} rounds {simulated:.0f} s)")
    OUT.mkdir(parents=True, exist_ok=True)
    save_figure(
        filter_bubble_figure(metrics, f"Filter bubble, {args.arm} on {args.data}, {len(chosen)} agents"),
        OUT / f"filter_bubble-{args.data}.png",
    )
    (OUT / f"filter_bubble-{args.data}.json").write_text(
        json.dumps({"args": vars(args), "wall_s": wall, "metrics": metrics.to_dicts()}, indent=1)
    )


if __name__ == "__main__":
    main()

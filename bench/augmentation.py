"""Data augmentation (A/B Agent §3.4, Table 5) against a model's seed-to-seed noise.

Does adding the agents' simulated clicks / views to the train set raise a model's test AUC
by more than the model's own seed-to-seed noise?

The paper reports gains of 0.002–0.004 AUC from one training per cell.  A single seed
cannot tell a gain that small from noise, so this trains the original and each augmented
model under several seeds and prints, per signal, the AUC difference per seed, its mean
with a 95 % t-interval, and the ratio augmented ÷ original AUC (the baseline measured in
the same run, with the same seed).

Data: the synthetic generator (no licensed data needed); the simulation is the embedded
brain's under the `--simulated-arm` arm (DeepFM, as in the paper), every agent once.

    .venv/bin/python -m bench.augmentation                        # 1,000 users, 3 seeds
    .venv/bin/python -m bench.augmentation --users 600 --seeds 5  # quicker per seed, more seeds

Results go to bench/out/augmentation.json.

The figures it gave: docs/findings/augmentation.md.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import polars as pl

from bench import ROOT
from ops.agents.build import AgentsConfig, build_agents
from ops.agents.embeddings import EmbeddingConfig, MiniLMTextEmbedder, PaletteLayoutPosterEmbedder
from ops.arms.recommenders import arm_config, top_k, train_arm
from ops.data.mm_ml_1m import build_mm_ml_1m
from ops.data.split import chronological_split
from ops.data.synthetic import SyntheticConfig, generate
from ops.simulation.brains.embedded import fit_embedded_brain
from ops.simulation.catalogue import Catalogue
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate_arm
from ops.studies.augmentation import AugmentationConfig, refit_and_evaluate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--movies", type=int, default=1200)
    ap.add_argument("--data-seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=3, help="training seeds per model and training set")
    ap.add_argument("--simulated-arm", default="deepfm")
    ap.add_argument("--model", default="deepfm", help="the downstream model refit")
    ap.add_argument("--max-epochs", type=int, default=20)
    ap.add_argument(
        "--click-label",
        choices=("positive", "watched"),
        default="positive",
        help="how a simulated click is labelled (ops.studies.augmentation)",
    )
    ap.add_argument("--signals", default="click,view")
    ap.add_argument(
        "--vision", action=argparse.BooleanOptionalAction, default=True, help="--no-vision: Table 5's ablation"
    )
    args = ap.parse_args()

    import torch
    from scipy import stats

    torch.manual_seed(0)
    out = ROOT / "bench" / "out"
    start = time.perf_counter()
    data = generate(
        SyntheticConfig(seed=args.data_seed, n_users=args.users, n_movies=args.movies), out / "augmentation-posters"
    )
    split = chronological_split(data.ratings)
    movie_ids = data.movies.get_column("movie_id").to_numpy()
    catalogue_frame = build_mm_ml_1m(data.movies, data.metadata)
    arm = train_arm(
        arm_config(args.simulated_arm, max_epochs=args.max_epochs),
        split.train,
        split.valid,
        data.users,
        catalogue_frame,
    )
    users = np.array(sorted(split.train.get_column("user_id").unique().to_list()))
    lists = top_k(arm, users, movie_ids, split.train.select("user_id", "movie_id"))
    bundle = build_agents(
        split.train,
        data.users,
        catalogue_frame,
        AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
        MiniLMTextEmbedder(),
        PaletteLayoutPosterEmbedder(),
        out / "augmentation-cache",
    )
    model = fit_embedded_brain(bundle, split.train, split.valid, data.users)
    brain = model.brain(None if args.vision else model.config.model_copy(update={"use_posters": False}))
    events = simulate_arm(
        args.simulated_arm,
        lists,
        bundle.sessions(),
        Catalogue.from_frame(catalogue_frame),
        brain,
        SimulationConfig(progress=False),
        seed=0,
    )
    print(
        f"data, {args.simulated_arm} arm, agents and simulation ({events.height} events, brain {brain.name}): {time.perf_counter() - start:.0f} s"
    )

    tables = []
    for seed in range(args.seeds):
        t = time.perf_counter()
        table = refit_and_evaluate(
            args.model,
            split.train,
            split.valid,
            split.test,
            data.users,
            catalogue_frame,
            events,
            signals=tuple(args.signals.split(",")),
            config=AugmentationConfig(progress=False, click_label=args.click_label),
            seed=1024 + seed,
            max_epochs=args.max_epochs,
        )
        tables.append(table.with_columns(seed=pl.lit(1024 + seed)))
        aucs = ", ".join(f"{r['training_set']} {r['test_auc']:.4f}" for r in table.iter_rows(named=True))
        print(f"seed {1024 + seed}: {aucs}  ({time.perf_counter() - t:.0f} s)")
    results = pl.concat(tables)

    summary = {}
    original = results.filter(pl.col("training_set") == "original").select(
        "seed", pl.col("test_auc").alias("original_auc")
    )
    for name in [
        s for s in results.get_column("training_set").unique(maintain_order=True).to_list() if s != "original"
    ]:
        rows = results.filter(pl.col("training_set") == name).join(original, on="seed")
        diff = (rows["test_auc"] - rows["original_auc"]).to_numpy()
        ratio = (rows["test_auc"] / rows["original_auc"]).to_numpy()
        mean = float(diff.mean())
        half = (
            float(stats.t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / np.sqrt(len(diff)))
            if len(diff) > 1
            else float("nan")
        )
        seed_sd = float(original["original_auc"].std()) if original.height > 1 else float("nan")
        summary[name] = {
            "added_rows": int(rows["added_rows"][0]),
            "auc_differences": diff.tolist(),
            "mean": mean,
            "ci95": [mean - half, mean + half],
            "ratio_mean": float(ratio.mean()),
            "original_auc_seed_sd": seed_sd,
        }
        verdict = (
            "a gain" if mean - half > 0 else "a loss" if mean + half < 0 else "not distinguishable from seed noise"
        )
        print(
            f"{args.model} {name} (+{summary[name]['added_rows']} rows): AUC difference {mean:+.4f} [{mean - half:+.4f}, {mean + half:+.4f}] over "
            f"{len(diff)} seeds, augmented / original AUC {ratio.mean():.4f}; original AUC seed sd {seed_sd:.4f} -> {verdict}"
        )
    (out / "augmentation.json").write_text(
        json.dumps({"args": vars(args), "brain": brain.name, "summary": summary}, indent=2)
    )


if __name__ == "__main__":
    main()

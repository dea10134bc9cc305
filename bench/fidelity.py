"""How a brain variant reads a stored run's arms: fidelity, the mirror's excess and the gap sizes.

On a finished lifecycle's home ($SIMAB_HOME of `simab run`: its splits, its catalogue, every
arm's stored top-20 lists), each variant of the embedded brain is fitted and calibrated as the
`embedded_brain` asset does, the mirror ranked by it (at the fit clock), every arm and the
mirror simulated on the same agents (all the users with a list, or a seeded sample), and the
read-out's figures computed as the report computes them: Kendall τ(CTR, NDCG@20) and the arm
pairs (agree / disagree / missed / offline tie) over the test users with a list, the mirror's
excess, the gap sizes against the control.  The first variant is the baseline: every other
one is printed beside it, in the same run.

Variants (`VARIANTS`): `fit-clock` — the agents and the brain in the train window, as before
the simulation clock; `clock` — the default: the agents at the end of the validation window,
popularity weighted by the fitted half-life, trend and age, what the agent took not taken
again (docs/definitions.md#simulation-clock); `clock-plain` — the same clock with plain
counts (no decay, no trend); `clock-pathsim` — the clock with SimUSER's item graph as the
collaborative score.

    .venv/bin/python -m bench.fidelity --home data/ml1m                 # fit-clock against clock
    .venv/bin/python -m bench.fidelity --home data/steam --variants fit-clock,clock,clock-plain

The figures it gave: docs/findings/simulation_clock.md.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import kendalltau

from bench import OUT
from ops.agents.build import AgentsConfig, build_agents
from ops.agents.embeddings import MiniLMTextEmbedder, PaletteLayoutPosterEmbedder
from ops.arms.top_k import rank_by_score
from ops.data.random_exposure import calibration_rows
from ops.environment import offline_defaults
from ops.readout.agent_metrics import per_agent_metrics
from ops.readout.bias import simulator_bias
from ops.readout.fidelity import agreement_summary, offline_per_user, pairwise_agreement
from ops.readout.gaps import gap_sizes
from ops.simulation.brains.embedded import EmbeddedBrainConfig
from ops.simulation.catalogue import Catalogue
from ops.simulation.runner import SimulationConfig, simulate
from ops.studies.alignment.calibration import fit_calibrated_brain
from ops.studies.mirror import brain_scores

# name -> (EmbeddedBrainConfig fields, agents at the simulation clock)
VARIANTS: dict[str, tuple[dict, bool]] = {
    "fit-clock": ({}, False),
    "clock": ({}, True),
    "clock-plain": ({"popularity_decay": False}, True),
    "clock-pathsim": ({"collab_family": "pathsim", "collab_factors": 50, "click_collaborative": "collab+recent"}, True),
    # The exposure taken out of the click model (EmbeddedBrainConfig.exposure_correction):
    # positives weighted by inverse propensity against uniform negatives.
    "clock-exposure": ({"exposure_correction": 1.0, "popular_negative_share": 0.0}, True),
    "clock-exposure-half": ({"exposure_correction": 0.5, "popular_negative_share": 0.0}, True),
    "clock-uniform": ({"popular_negative_share": 0.0}, True),
    "clock-exposure-all": (
        {"exposure_correction": 1.0, "popular_negative_share": 0.0, "exposure_correction_models": "all"},
        True,
    ),
    # The click decision calibrated on the random bucket's calibration half instead of the
    # list response (`ops.studies.alignment.exposure_calibration`): the world's own sample.
    "clock-bucket": ({}, True),
    "clock-exposure-half-bucket": ({"exposure_correction": 0.5, "popular_negative_share": 0.0}, True),
    # ... with the collaborative scores the click model otherwise leaves out (click_collaborative).
    "clock-bucket-collab": ({"click_collaborative": "collab+recent"}, True),
    "clock-bucket-auto": ({"click_collaborative": "auto"}, True),
    "clock-collab": ({"click_collaborative": "collab+recent"}, True),
    "clock-exposure-half-collab": (
        {"exposure_correction": 0.5, "popular_negative_share": 0.0, "click_collaborative": "collab+recent"},
        True,
    ),
    "clock-knn-collab": ({"collab_family": "itemknn", "click_collaborative": "collab+recent"}, True),
    "clock-exposure-half-knn-collab": (
        {
            "exposure_correction": 0.5,
            "popular_negative_share": 0.0,
            "collab_family": "itemknn",
            "click_collaborative": "collab+recent",
        },
        True,
    ),
    "clock-exposure-quarter-knn-collab": (
        {
            "exposure_correction": 0.25,
            "popular_negative_share": 0.0,
            "collab_family": "itemknn",
            "click_collaborative": "collab+recent",
        },
        True,
    ),
    "clock-uniform-knn-collab": (
        {"popular_negative_share": 0.0, "collab_family": "itemknn", "click_collaborative": "collab+recent"},
        True,
    ),
    "clock-bucket-knn-collab": ({"collab_family": "itemknn", "click_collaborative": "collab+recent"}, True),
}
# The variants whose click decision the random-exposure sample calibrates: their names say so.
BUCKET_CALIBRATED = {name for name in VARIANTS if "bucket" in name.split("-")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True, help="a finished run's $SIMAB_HOME")
    ap.add_argument(
        "--variants", default="fit-clock,clock", help=f"comma-separated, the first the baseline: {list(VARIANTS)}"
    )
    ap.add_argument(
        "--agents", type=int, default=0, help="agents simulated per arm, a seeded sample; 0 = all with a list"
    )
    ap.add_argument("--control", default="pop")
    ap.add_argument("--calibration-agents", type=int, default=300, help="as the embedded_brain asset's default")
    ap.add_argument(
        "--levels",
        default="",
        help="click levels the calibration tries, comma-separated (e.g. 0.25): its default grid when empty",
    )
    ap.add_argument("--mirror-clock", choices=("fit", "simulation"), default="fit", help="where the mirror ranks")
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    offline_defaults()
    frames, stored = stored_run(args.home)
    test = frames["test_ratings"]
    results = []
    for name in [v.strip() for v in args.variants.split(",") if v.strip()]:
        started = time.perf_counter()
        run = simulate_variant(
            args.home,
            frames,
            stored,
            name,
            args.agents,
            args.seed,
            args.calibration_agents,
            args.levels,
            args.mirror_clock,
        )
        model, lists, per_agent, offline, ids = run.model, run.lists, run.per_agent, run.offline, run.ids
        candidates = sorted(stored)
        cand_agent = per_agent.filter(pl.col("arm").is_in(candidates))
        cand_offline = offline.filter(pl.col("arm").is_in(candidates))
        pairs = pairwise_agreement(cand_agent, cand_offline, paired=True, n_bootstrap=args.n_bootstrap, seed=args.seed)
        ctr = dict(cand_agent.group_by("arm").agg(pl.col("ctr").mean()).iter_rows())
        ndcg = dict(cand_offline.group_by("arm").agg(pl.col("ndcg_at_k").mean()).iter_rows())
        bias = simulator_bias(per_agent, offline, lists, ["mirror"], n_bootstrap=args.n_bootstrap, seed=args.seed)
        window = test.select("user_id", "item_id")
        gaps = gap_sizes(
            per_agent, lists, window, args.control, candidates, n_bootstrap=args.n_bootstrap, seed=args.seed
        )
        results.append(
            {
                "variant": name,
                "agents": int(ids.size),
                "tau": float(kendalltau([ctr[a] for a in candidates], [ndcg[a] for a in candidates]).statistic),
                "pairs": agreement_summary(pairs),
                "not_agreeing": pairs.filter(pl.col("verdict").is_in(["disagree", "missed"]))
                .select("arm_a", "arm_b", "verdict")
                .rows(),
                "ctr": ctr,
                "ndcg": ndcg,
                "mirror": [bias.excess, bias.excess_ci_low, bias.excess_ci_high],
                "mirror_warns": bias.warning is not None,
                "gap_factor": [gaps.factor, gaps.ci_low, gaps.ci_high],
                "half_life_days": model.params.half_life_days,
                "click_level": model.params.list_response.level if model.params.list_response else None,
                "click_auc_holdout": model.params.click_auc_holdout,
                "seconds": time.perf_counter() - started,
            }
        )
        print(_line(results[-1], results[0]), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"fidelity-{args.home.name}.json"
    out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results}, indent=1))
    print(f"-> {out}")
    return 0


@dataclass(frozen=True)
class VariantRun:
    """One brain variant's simulation of a stored run's arms (`simulate_variant`)."""

    model: object  # the fitted, calibrated EmbeddedBrainModel
    lists: dict[str, pl.DataFrame]  # arm -> its top-20 lists over the simulated agents, the mirror included
    per_agent: pl.DataFrame  # the read-out's per-agent metrics, every arm
    offline: pl.DataFrame  # arm, user_id, ndcg_at_k, ... over the test users with a list
    ids: np.ndarray  # the simulated agents


def simulate_variant(
    home: Path,
    frames: dict[str, pl.DataFrame],
    stored: dict[str, pl.DataFrame],
    name: str,
    n_agents: int = 0,
    seed: int = 0,
    calibration_agents: int = 300,
    levels: str = "",
    mirror_clock: str = "fit",
    mirror_seed: int | None = None,
) -> VariantRun:
    """Variant `name` of the brain fitted and calibrated as the `embedded_brain` asset does
    (`fit_calibrated_brain`), the mirror ranked by it, and every stored arm and the mirror
    simulated on the same agents (all with a list in every arm, or a seeded sample of
    `n_agents`).  `mirror_seed`: the mirror ranked by the same variant fitted and calibrated
    at that seed instead (another draw of the fit's users and negatives), the agents still
    deciding with the first: what of the mirror's excess is the fit's own noise."""
    fields, clocked = VARIANTS[name]
    train, valid, test = frames["train_ratings"], frames["valid_ratings"], frames["test_ratings"]
    agents = build_agents(
        train,
        frames["users"],
        frames["catalogue"],
        AgentsConfig(),
        MiniLMTextEmbedder(),
        PaletteLayoutPosterEmbedder(),
        home / "cache" / "embeddings",
        valid=valid if clocked else None,
    )

    def fitted(at: int):
        return fit_calibrated_brain(
            agents,
            train,
            valid,
            frames["users"],
            frames["catalogue"],
            seed=at,
            calibration_agents=calibration_agents,
            brain_config=EmbeddedBrainConfig(fit_seed=at, **fields),
            levels=tuple(float(x) for x in levels.split(",") if x.strip()) or None,
            exposure_rows=calibration_rows(_truth(home)) if name in BUCKET_CALIBRATED else None,
        )

    model = fitted(seed)
    ranker = model if mirror_seed is None else fitted(mirror_seed)
    catalogue = Catalogue.from_frame(frames["catalogue"])
    items = frames["catalogue"].get_column("item_id").to_numpy()
    listed = set.intersection(*(set(v.get_column("user_id").to_list()) for v in stored.values()))
    pool = np.array(sorted(listed & set(agents.profiles)))
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(pool, n_agents, replace=False)) if 0 < n_agents < pool.size else pool
    lists = {a: v.filter(pl.col("user_id").is_in(ids.tolist())) for a, v in stored.items()}
    mirror = rank_by_score(
        "mirror",
        brain_scores(ranker, agents, clock=mirror_clock),
        ids,
        items,
        train.select("user_id", "item_id"),
        20,
        512.0,
    )
    lists["mirror"] = mirror.with_columns(pl.lit("mirror").alias("arm"))
    shown = pl.concat([v.select("arm", "user_id", "rank", "item_id", "score") for v in lists.values()])
    sessions = agents.sessions(ids)
    events = pl.concat(
        [
            simulate(model.brain(), sessions, shown, catalogue, SimulationConfig(progress=False), arms=[arm], seed=seed)
            for arm in lists
        ]
    )
    return VariantRun(model, lists, per_agent_metrics(events), offline_per_user(lists, test), ids)


def stored_run(home: Path) -> tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame]]:
    """A finished run's windows, users and catalogue, and every arm's stored top-20 lists but the mirror's."""
    assets = home / "assets"
    frames = {
        n: pl.read_parquet(assets / f"{n}.parquet")
        for n in ("train_ratings", "valid_ratings", "test_ratings", "users", "catalogue")
    }
    stored = {p.stem: pl.read_parquet(p) for p in sorted((assets / "top20_lists").glob("*.parquet"))}
    stored.pop("mirror", None)
    return frames, stored


def _line(row: dict, base: dict) -> str:
    p = row["pairs"]
    m = row["mirror"]
    g = row["gap_factor"]
    said = (
        f"{row['variant']:14s} τ {row['tau']:.2f} (baseline {base['tau']:.2f}); pairs agree / disagree / missed / "
        f"offline tie {p['agree']} / {p['disagree']} / {p['missed']} / {p['offline tie']}; mirror excess "
        + (
            "n/a"
            if m[0] is None
            else f"{m[0]:+.3f} [{m[1]:+.3f}, {m[2]:+.3f}]" + (" WARNS" if row["mirror_warns"] else "")
        )
        + "; gaps × "
        + ("n/a" if g[0] is None else f"{g[0]:.2f} [{g[1]:.2f}, {g[2]:.2f}]")
        + f"; half-life {row['half_life_days']} d; {row['seconds']:.0f} s"
    )
    if row["not_agreeing"]:
        said += "\n    " + ", ".join(f"{a} vs {b}: {v}" for a, b, v in row["not_agreeing"])
    ctr = ", ".join(f"{a} {row['ctr'][a]:.3f}/{row['ndcg'][a]:.3f}" for a in sorted(row["ctr"]))
    return said + f"\n    CTR/NDCG@20: {ctr}"


def _truth(home: Path) -> pl.DataFrame | None:
    """The home's judge (`ground_truth` asset), None where the run has none."""
    path = home / "assets" / "ground_truth.parquet"
    return pl.read_parquet(path) if path.exists() else None


if __name__ == "__main__":
    raise SystemExit(main())

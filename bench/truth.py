"""Judged by the truth: the simulation against NDCG@20 on planted worlds at three exposure strengths.

Each is read against what the planted users would do when shown the lists.

For each strength of the synthetic source's logging policy (`SIMAB_SYNTHETIC_EXPOSURE_BIAS`:
0 = a log free of exposure, 1 = the default world, 2.5 strong), a lifecycle runs on its own
home with the arms random, pop, trending, fm, deepfm and the mirror, then with two outside
models' lists beside them (implicit's ALS and item-kNN, `tools.outside_lists`, from the same
train window) — eight arms.  Each brain variant (`bench.fidelity.VARIANTS`; the first is the
baseline) is then fitted, calibrated and simulated on the stored arms as the lifecycle does
(`bench.fidelity.simulate_variant`), and judged (`ops.readout.truth`): Kendall τ over the
seven candidate arms of simulated CTR against the click truth and of the like ratio against
the like truth, beside τ of offline NDCG@20 against the same truths; the pairs of arms the
truth separates that each orders alike; the mirror's CTR beyond what its click truth
predicts.  Every figure is printed beside the same world's offline figure, measured in the
same run (differences of τ, ratios of pairs).

    .venv/bin/python -m bench.truth                                   # strengths 0,1,2.5; clock, knn-collab, bucket
    .venv/bin/python -m bench.truth --strengths 2.5 --variants clock  # one world, one brain
    .venv/bin/python -m bench.truth --strengths 2.5 --variants clock --root data/truth-bpr \
        --outside als,knn,bpr --leave-out bpr    # a third outside model, judged with and without it
    .venv/bin/python -m bench.truth --strengths 2.5 --variants clock --judge-only --mirror-seed 1   # the fit's noise

The homes stay under --root (a killed run resumes; a finished one is reused).  The figures it
gave: docs/findings/truth.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

from bench import OUT, ROOT, run_lifecycle
from bench.fidelity import VARIANTS, simulate_variant, stored_run
from ops.data.random_exposure import calibration_users
from ops.environment import offline_defaults
from ops.readout.truth import KINDS, judge_against_truth

ARMS = "random,pop,trending,fm,deepfm,mirror"
# Outside models brought in as lists files: name -> (tools.outside_lists --model, the arm spec's tail);
# the worlds carry DEFAULT_OUTSIDE unless --outside names others.
OUTSIDE = {"als": ("als", ""), "knn": ("itemknn", ";fill=pop"), "bpr": ("bpr", "")}
DEFAULT_OUTSIDE = ("als", "knn")


def build_world(root: Path, strength: float, max_epochs: int = 0, outside: tuple[str, ...] = DEFAULT_OUTSIDE) -> Path:
    """The home of the planted world at `strength`, its lifecycle run with the six arms and
    the `outside` models' lists (the trust protocols off: this bench reads the arms' lists,
    the windows and the truth)."""
    home = root / f"exposure-{strength:g}"
    env = {
        "SIMAB_SOURCE": "synthetic",
        "SIMAB_SYNTHETIC_EXPOSURE_BIAS": f"{strength:g}",
        "SIMAB_TRUST_PROTOCOLS": "off",
    }
    if max_epochs:
        env["SIMAB_MAX_EPOCHS"] = str(max_epochs)
    models = {name: OUTSIDE[name] for name in outside}
    folder = home / "outside"
    files = {name: folder / f"{name}.parquet" for name in models}
    if not all(f.exists() for f in files.values()):
        # The outside models read the run's own train window: the home's first run stores it.
        if run_lifecycle(home, env, ARMS) != 0:
            raise SystemExit(f"the lifecycle on {home} failed (its log under {home}/logs)")
        folder.mkdir(parents=True, exist_ok=True)
        for name, (model, _) in models.items():
            command = [sys.executable, "-m", "tools.outside_lists", "--home", str(home), "--model", model]
            subprocess.run([*command, "--out", str(files[name])], cwd=ROOT, check=True)
    arms = ",".join([ARMS, *(f"{n}=lists:{files[n]}{tail}" for n, (_, tail) in models.items())])
    if run_lifecycle(home, env, arms) != 0:
        raise SystemExit(f"the lifecycle on {home} failed (its log under {home}/logs)")
    return home


def world_files(home: Path) -> tuple[dict, dict, pl.DataFrame]:
    """What judging a world reads from its home: the run's frames, the arms' stored lists
    (`bench.fidelity.stored_run`) and the planted truth."""
    frames, lists = stored_run(home)
    return frames, lists, pl.read_parquet(home / "assets" / "ground_truth.parquet")


def judge_world(
    home: Path,
    variant: str,
    seed: int,
    n_bootstrap: int,
    agents: int = 0,
    leave_out: tuple[str, ...] = (),
    mirror_seed: int | None = None,
    stored: tuple[dict, dict, pl.DataFrame] | None = None,
) -> dict:
    """One brain variant on one world: its simulation judged against the world's truth; the
    stored arms of `leave_out` neither simulated nor judged; `mirror_seed`, the mirror ranked
    by the brain fitted at that seed (`bench.fidelity.simulate_variant`).  `stored`: the home's
    `world_files`, read once for every judgement of the world (read here when None)."""
    started = time.perf_counter()
    frames, lists, truth = stored if stored is not None else world_files(home)
    kept = {arm: arm_lists for arm, arm_lists in lists.items() if arm not in leave_out}
    run = simulate_variant(home, frames, kept, variant, n_agents=agents, seed=seed, mirror_seed=mirror_seed)
    # The calibration half left out for every variant, so that all are judged on the same users.
    held = calibration_users(truth)
    judged = judge_against_truth(
        truth, run.lists, run.per_agent, run.offline, ["mirror"], n_bootstrap=n_bootstrap, held_out=held
    )
    row = {
        "variant": variant
        + "".join(f" without {arm}" for arm in leave_out)
        + ("" if mirror_seed is None else f", mirror of seed {mirror_seed}"),
        "agents": int(run.ids.size),
        "seconds": round(time.perf_counter() - started, 1),
    }
    for kind, (metric, _) in KINDS.items():
        pairs = judged.pairs.get(kind, {})
        bias = judged.mirror.get(kind)
        row[kind] = {
            "tau_simulated": judged.tau(metric, kind),
            "tau_offline": judged.tau("ndcg_at_k", kind),
            "tau_by_metric": {m: judged.tau(m, kind) for m in ("ctr", "cvr", "like_ratio", "average_rating")},
            "pairs": pairs,
            "mirror_excess": None if bias is None else [bias.excess, bias.excess_ci_low, bias.excess_ci_high],
        }
    row["arms"] = judged.arms.to_dicts()
    # The like ratio counts likes per impression, so a like needs a click first; the like
    # truth counts likes of every item in the list.  The same simulation read against a
    # truth of the like ratio's own kind — P(click) × P(like) per item, the generator's two
    # draws being independent given the pair — says how much of the like ratio's mirror
    # excess is that difference of kinds (a diagnostic of this bench, not a verdict line).
    both = truth.with_columns(liked=pl.col("clicked") * pl.col("liked"))
    kinds = judge_against_truth(
        both, run.lists, run.per_agent, run.offline, ["mirror"], n_bootstrap=n_bootstrap, held_out=held
    )
    bias = kinds.mirror.get("like")
    row["like_ratio_vs_click_and_like"] = {
        "tau_simulated": kinds.tau("like_ratio", "like"),
        "tau_offline": kinds.tau("ndcg_at_k", "like"),
        "mirror_excess": None if bias is None else [bias.excess, bias.excess_ci_low, bias.excess_ci_high],
    }
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strengths", default="0,1,2.5", help="exposure strengths of the planted worlds")
    ap.add_argument(
        "--variants",
        default="clock,clock-knn-collab,clock-bucket",
        help=f"brain variants, the first the baseline: {list(VARIANTS)}",
    )
    ap.add_argument("--root", type=Path, default=ROOT / "data" / "truth", help="the worlds' homes")
    ap.add_argument("--max-epochs", type=int, default=0, help="the CTR arms' epoch cap; 0 = the lifecycle's")
    ap.add_argument("--agents", type=int, default=0, help="agents per arm, a seeded sample; 0 = all with a list")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--build-only", action="store_true", help="build the worlds' homes, judge nothing")
    ap.add_argument(
        "--judge-only", action="store_true", help="judge the homes already built under --root, run no lifecycle"
    )
    ap.add_argument(
        "--outside",
        default=",".join(DEFAULT_OUTSIDE),
        help=f"the outside models' lists each world carries, of {sorted(OUTSIDE)} (a root of its own for others)",
    )
    ap.add_argument(
        "--leave-out",
        default="",
        help="arms judged a second time without these (comma-separated, e.g. bpr): both in the same run",
    )
    ap.add_argument(
        "--mirror-seed",
        type=int,
        default=None,
        help="also judge each world with the mirror ranked by the brain fitted at this seed (the agents' unchanged)",
    )
    ap.add_argument("--out", type=Path, default=OUT / "truth.json", help="where the figures go (JSON)")
    args = ap.parse_args()
    offline_defaults()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}; known: {list(VARIANTS)}")
    outside = tuple(name.strip() for name in args.outside.split(",") if name.strip())
    leave_out = tuple(name.strip() for name in args.leave_out.split(",") if name.strip())
    if sorted(set(outside) - set(OUTSIDE)):
        raise SystemExit(f"--outside: unknown model(s) {sorted(set(outside) - set(OUTSIDE))}; known: {sorted(OUTSIDE)}")
    results = []
    for strength in [float(s) for s in args.strengths.split(",") if s.strip()]:
        home = (
            args.root / f"exposure-{strength:g}"
            if args.judge_only
            else build_world(args.root, strength, args.max_epochs, outside)
        )
        stored = None if args.build_only else world_files(home)
        for variant in [] if args.build_only else variants:
            runs = [((), None)] + ([(leave_out, None)] if leave_out else [])
            runs += [((), args.mirror_seed)] if args.mirror_seed is not None else []
            for left, mirror_seed in runs:
                judged = judge_world(home, variant, args.seed, args.n_bootstrap, args.agents, left, mirror_seed, stored)
                row = {"exposure_bias": strength, **judged}
                results.append(row)
                print(_line(row), flush=True)
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results}, indent=1))
    print(f"-> {out}")
    return 0


def _line(row: dict) -> str:
    """One world and variant: per truth kind, τ of the simulation beside τ of NDCG@20 (their
    difference), the pairs each orders alike of those the truth separates (their ratio), and
    the mirror's excess against the truth."""
    parts = [f"exposure {row['exposure_bias']:g} · {row['variant']} · {row['agents']} agents · {row['seconds']:.0f} s"]
    for kind, (metric, _) in KINDS.items():
        k = row[kind]
        sim, off = k["tau_simulated"], k["tau_offline"]
        p = k["pairs"]
        n, a, b = p.get("separated", 0), p.get("simulated_alike", 0), p.get("offline_alike", 0)
        m = k["mirror_excess"]
        parts.append(
            f"  {kind:5s}: τ(sim {metric}) {_f(sim)} vs τ(NDCG@20) {_f(off)} (Δ {_d(sim, off)}); "
            f"pairs alike {a} vs {b} of {n} (ratio {a / b if b else float('nan'):.2f}); mirror excess "
            + ("n/a" if not m or m[0] is None else f"{m[0]:+.3f} [{m[1]:+.3f}, {m[2]:+.3f}]")
            + "; τ by metric "
            + ", ".join(f"{x} {_f(v)}" for x, v in k["tau_by_metric"].items())
        )
    both = row.get("like_ratio_vs_click_and_like")
    if both:
        m = both["mirror_excess"]
        parts.append(
            f"  like ratio against P(click) × P(like): τ(sim) {_f(both['tau_simulated'])} vs τ(NDCG@20) "
            f"{_f(both['tau_offline'])}; mirror excess "
            + ("n/a" if not m or m[0] is None else f"{m[0]:+.3f} [{m[1]:+.3f}, {m[2]:+.3f}]")
        )
    return "\n".join(parts)


def _f(v) -> str:
    return "n/a" if v is None else f"{v:+.2f}"


def _d(a, b) -> str:
    return "n/a" if a is None or b is None else f"{a - b:+.2f}"


if __name__ == "__main__":
    raise SystemExit(main())

"""Why the simulation can order the arms against offline: the click decision's saturation
and its popularity curve, measured on the VALIDATION window of a finished run.

Reads a lifecycle home (`SIMAB_HOME`: assets/ with the agents, the embedded brain, the
windows and each arm's top20_lists) and, for every arm, prints over the users with
validation items:

- the real hit rate of the arm's lists in the validation window (the share of listed items
  the user interacted with there), by rank band 1-5 / 6-10 / 11-20 — the first page is
  where most simulated clicks happen;
- the click model's own prediction of it, unsaturated: the mean of exp(log-odds) of the
  brain's click model at scale 1 (proportional to a hit rate wherever P(click) is small);
- and on the simulated agents: the first-look click probability of the stored (calibrated)
  click decision on the arm's cards, by the same bands, and the arm's simulated CTR with
  the detail page's interest as fitted and held constant (`detail_interest_cuts`): when
  the click decision is saturated, CTR differences between good arms come from the
  interest, which sets what each action costs in fatigue.

The test window is read only by `--pairs`, to score the arms offline after every brain
decision is made: with it the script simulates every arm on the agents and prints each
arm's CTR with its 95 % interval, Kendall τ(CTR, NDCG@20) and the arm pairs' verdicts as
the read-out computes them.  `--refit` fits and calibrates the brain from the home's train
and validation windows with this checkout's code, as the `embedded_brain` asset does (the
default configuration, seed 0), and writes it to `--out`: a run made before a change of
the brain can so be compared with the brain after it, on the same arms' lists and agents.

    SIMAB_HOME=data/steam .venv/bin/python bench/click_saturation.py --arms random,pop,fm,deepfm,mf,als
    .venv/bin/python bench/click_saturation.py --home /tmp/steam --arms random,pop,fm --brain /tmp/other_brain.d
    .venv/bin/python bench/click_saturation.py --home /tmp/ml1m --arms random,pop,fm,deepfm,als --pairs
    .venv/bin/python bench/click_saturation.py --home /tmp/ml1m --arms random,pop,fm,deepfm,als --refit --out /tmp/b.d --pairs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scipy.stats import kendalltau  # noqa: E402

from ops.agents.build import Agents  # noqa: E402
from ops.readout.ab_readout import ReadoutConfig, ab_readout, per_agent_metrics  # noqa: E402
from ops.readout.fidelity import PAIR_VERDICTS, agreement_summary, offline_per_user, pairwise_agreement  # noqa: E402
from ops.settings import current  # noqa: E402
from ops.simulation.brains.embedded import EmbeddedBrainConfig, EmbeddedBrainModel, fit_embedded_brain  # noqa: E402
from ops.simulation.catalogue import Catalogue  # noqa: E402
from ops.simulation.runner import SimulationConfig, sample_agents, simulate_arm  # noqa: E402
from ops.studies.alignment.calibration import CalibrationConfig, calibrate_if_possible  # noqa: E402

BANDS = ((0, 5), (5, 10), (10, 20))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=current().home, help="the run's home (default: $SIMAB_HOME)")
    parser.add_argument("--arms", default="random,pop,fm")
    parser.add_argument("--brain", type=Path, default=None, help="an embedded brain folder (default: the run's)")
    parser.add_argument("--agents", type=int, default=300, help="simulated agents (sampled as the lifecycle does)")
    parser.add_argument("--refit", action="store_true", help="fit and calibrate the brain with this checkout's code")
    parser.add_argument("--out", type=Path, default=None, help="where --refit writes the brain")
    parser.add_argument(
        "--pairs", action="store_true", help="CTR intervals, τ and pair verdicts (reads the test window)"
    )
    args = parser.parse_args()
    assets = args.home / "assets"
    arms = args.arms.split(",")
    agents = Agents.load(next(assets.glob("agents.*.d")))
    valid = pl.read_parquet(assets / "valid_ratings.parquet")
    catalogue = Catalogue.from_frame(pl.read_parquet(next(assets.glob("mm_*.parquet"))))
    if args.refit:
        train = pl.read_parquet(assets / "train_ratings.parquet")
        model = fit_embedded_brain(
            agents, train, valid, pl.read_parquet(assets / "users.parquet"), EmbeddedBrainConfig()
        )
        model = calibrate_if_possible(
            model, agents.sessions(), train, valid, catalogue, CalibrationConfig(n_agents=300, progress=False)
        )
        if args.out:
            model.save(args.out)
    else:
        model = EmbeddedBrainModel.load(args.brain or next(assets.glob("embedded_brain.*.d")))
    lists = {a: pl.read_parquet(assets / "top20_lists" / f"{a}.parquet") for a in arms}
    p = model.params
    response = p.list_response
    print(
        f"click decision: scale {p.click_scale:g}, shift {p.click_shift:+.2f}, level "
        f"{getattr(response, 'level', 1.0) if response else 'uncalibrated'}; features {', '.join(p.click.features)}"
    )

    # Real hits against the click model's unsaturated prediction, validation users.
    users = sorted(set(valid.get_column("user_id").to_list()) & {u for u, m in agents.memories.items() if len(m)})
    raw = EmbeddedBrainModel(p.model_copy(update={"click_scale": 1.0, "click_shift": 0.0}), model.context, model.config)
    real, predicted = _bands(raw.brain(), agents.sessions(users), lists, valid)
    print(f"\nValidation window, {len(users)} users: real hit rate | click model exp(log-odds), scale 1")
    ref = "pop" if "pop" in arms else arms[0]
    for a in arms:
        r, z = real[a], predicted[a]
        cells = " | ".join(f"{lo + 1}-{hi} {r[:, lo:hi].mean():.4f} / {z[:, lo:hi].mean():.3f}" for lo, hi in BANDS)
        print(
            f"{a:>8}: {cells} | all {r.mean():.4f} / {z.mean():.3f} "
            f"(÷{ref}: real {r.mean() / real[ref].mean():.3f}, model {z.mean() / predicted[ref].mean():.3f})"
        )

    # The simulated agents: first-look click probabilities and CTR with the interest as fitted / held.
    candidates = sorted(set(lists[arms[0]].get_column("user_id").to_list()) & set(agents.profiles))
    chosen = sample_agents(candidates, args.agents, 0)
    sessions = agents.sessions(chosen)
    brain = model.brain()
    shown = {a: _shown(lists[a], chosen) for a in arms}
    brain.prepare(sessions, {u: sorted({m for a in arms for m in shown[a].get(u, [])}) for u in chosen})
    held = EmbeddedBrainModel(p, model.context, model.config.model_copy(update={"detail_interest_cuts": (-1.0,) * 4}))
    print(
        f"\nSimulated agents ({len(chosen)}): first-look click probability by band | CTR as fitted / interest held at 5"
    )
    for a in arms:
        probs = np.array(
            [
                brain.click_probability(s, shown[a][s.user_id][:20])
                for s in sessions
                if len(shown[a].get(s.user_id, [])) >= 20
            ]
        )
        ctr = [_ctr(a, lists[a], sessions, catalogue, b, chosen) for b in (model.brain(), held.brain())]
        cells = " ".join(f"{probs[:, lo:hi].mean():.3f}" for lo, hi in BANDS)
        print(f"{a:>8}: {cells} (≥ 0.95: {(probs >= 0.95).mean():.2f}) | CTR {ctr[0]:.3f} / {ctr[1]:.3f}")
    if args.pairs:
        _pairs(arms, lists, sessions, catalogue, model, chosen, pl.read_parquet(assets / "test_ratings.parquet"))


def _pairs(arms, lists, sessions, catalogue, model, users, test) -> None:
    """The read-out's CTR table, τ and arm pairs for the arms simulated with `model`."""
    config = SimulationConfig(progress=False)
    events = pl.concat(
        [simulate_arm(a, lists[a], sessions, catalogue, model.brain(), config, seed=0, users=users) for a in arms]
    )
    readout = ab_readout(events, control="pop" if "pop" in arms else arms[0], config=ReadoutConfig(n_bootstrap=2000))
    per_user = offline_per_user(lists, test)
    ndcg = dict(per_user.group_by("arm").agg(pl.col("ndcg_at_k").mean()).iter_rows())
    ctr = readout.arms.filter(pl.col("metric") == "ctr").sort("arm")
    print("\nArms (test window offline; CTR over the simulated agents, 95 % intervals):")
    for r in ctr.iter_rows(named=True):
        print(
            f"{r['arm']:>8}: NDCG@20 {ndcg[r['arm']]:.4f} | CTR {r['mean']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
        )
    tau = kendalltau(ctr.get_column("mean").to_list(), [ndcg[a] for a in ctr.get_column("arm")]).statistic
    pairs = pairwise_agreement(readout.per_agent, per_user, paired=readout.design == "paired", seed=0)
    summary = agreement_summary(pairs)
    print(f"τ(CTR, NDCG@20) = {tau:.2f}; pairs: " + ", ".join(f"{k} {summary[k]}" for k in PAIR_VERDICTS))
    for r in pairs.iter_rows(named=True):
        print(
            f"  {r['arm_a']} − {r['arm_b']}: NDCG@20 {r['offline_difference']:+.4f} [{r['offline_ci_low']:+.4f}, "
            f"{r['offline_ci_high']:+.4f}], CTR {r['simulated_difference']:+.4f} [{r['simulated_ci_low']:+.4f}, "
            f"{r['simulated_ci_high']:+.4f}]: {r['verdict']}"
        )


def _shown(frame: pl.DataFrame, users) -> dict[int, list[int]]:
    rows = frame.filter(pl.col("user_id").is_in(list(users))).sort("user_id", "rank")
    return dict(rows.group_by("user_id", maintain_order=True).agg("movie_id").iter_rows())


def _bands(brain, sessions, lists, valid):
    seen = {(u, m) for u, m in valid.select("user_id", "movie_id").iter_rows()}
    users = [s.user_id for s in sessions]
    shown = {a: _shown(frame, users) for a, frame in lists.items()}
    brain.prepare(sessions, {u: sorted({m for a in shown for m in shown[a].get(u, [])}) for u in users})
    real, predicted = {}, {}
    for a in lists:
        full = [(s, shown[a][s.user_id][:20]) for s in sessions if len(shown[a].get(s.user_id, [])) >= 20]
        real[a] = np.array([[(s.user_id, int(m)) in seen for m in ids] for s, ids in full], dtype=float)
        predicted[a] = np.exp(np.array([brain.click_logits(s, ids) for s, ids in full]))
    return real, predicted


def _ctr(arm, frame, sessions, catalogue, brain, users) -> float:
    events = simulate_arm(arm, frame, sessions, catalogue, brain, SimulationConfig(progress=False), seed=0, users=users)
    return float(per_agent_metrics(events).get_column("ctr").mean())


if __name__ == "__main__":
    main()

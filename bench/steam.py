"""The whole lifecycle on a second real domain: Steam, beside the papers.

Runs `python -m pipelines.lifecycle` with `SIMAB_SOURCE=steam` on the reference copy
(`$SIMAB_SHARED_DATA/steam-australian`, never shipped; docs/data_model.md says how its
caveats are handled) and prints A/B Agent's Table 2 for it — Recall@20, NDCG@20, test AUC
and the simulated CTR with its 95 % interval per arm —, the fidelity verdict (Kendall τ,
arm-against-arm pairs) and the taste protocol's F1 at 1:1 and 1:9 beside SimUSER's and
Agent4Rec's Steam rows.

Protocol differences, named: implicit feedback — a review that recommends the game is a
like (rating 5), one that does not a dislike (rating 1), so "liked" is "recommended" and the
arms' label is the recommendation; the papers' Steam subsets differ from this one (here:
Australian users' reviews, users with >= 5 reviews of games with metadata, 80 % of users);
their taste protocol asks an LLM which of 20 items the user interacted with, here the
embedded brain's eye on the sandbox's pages answers (per item protocol, test window).

    .venv/bin/python -m bench.steam --agents 300            # about 10-15 min on 2 cores
    .venv/bin/python -m bench.steam --agents 300 --print-only   # the tables of a finished run
    # an outside model's lists (tools.outside_lists) and the Agent4Rec plug-in's arms beside them
    .venv/bin/python -m tools.outside_lists --data steam --out /tmp/als-steam.parquet
    .venv/bin/python -m bench.steam --plugin --arms random,pop,fm,deepfm,mf,lightgcn,als=lists:/tmp/als-steam.parquet

Besides Table 2 it prints the verdict's first lines (the list-response calibration is in the
trust line: the yardstick's lists and the elasticity before and after) and the list-quality
protocol's table on the test window (CTR, CVR and AR by ratio, poorest lists first).  The
run resumes a home whose last run it started with the same arms and settings, and runs afresh
otherwise (reusing every step that is unchanged: `bench.run_lifecycle`).

`--offline`: the arms without the simulation — can a learned arm beat Pop on this data?  The
copy, or a seeded share of its users (`--user-share`, to see the arms on a smaller implicit
set), split chronologically 7:2:1 as the lifecycle splits it; each arm fitted on train (early
stopping on validation as in the lifecycle) and ranked over the catalogue minus each user's
train items; NDCG@20 and Recall@20 over the train users with a liked test item, each with a
95 % bootstrap interval over users (`ops.readout.fidelity.offline_intervals`), beside Pop's,
and per CTR arm its epochs and validation AUCs.  Arms: any built-in or plug-in name (`mf`,
`lightgcn`, `multvae` install the Agent4Rec plug-in for the run, as the tests do), `ease`
(Steck 2019, a closed-form item-item model, L2 `--ease-l2`: the strong sparse-data baseline,
here only as a yardstick), or `NAME=lists:FILE` (an outside lists file, e.g.
`tools.outside_lists`'s).  A CTR arm's keyword overrides follow a colon: `fm:validation_negatives=0`.

    .venv/bin/python -m bench.steam --offline --arms pop,fm,mf,lightgcn,ease,als=lists:/tmp/als-steam.parquet
    .venv/bin/python -m bench.steam --offline --user-share 0.25 --arms pop,fm,fm:validation_negatives=0
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from bench import ROOT, run_lifecycle
from fakes.arm_packages import PLUGIN_SOURCE, install_agent4rec_plugin
from fakes.shared_data import SHARED_DATA

# Taste discrimination on Steam, F1 at 1:1 and 1:9, as the papers report them.
PAPERS = {"SimUSER": (0.794, 0.399), "Agent4Rec": (0.679, 0.282)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--arms", help="default random,pop,trending,fm,deepfm,afn,mirror; with --offline random,pop,trending,fm,mf,ease"
    )
    parser.add_argument("--agents", type=int, default=300, help="agents simulated per arm (SIMAB_AGENTS)")
    parser.add_argument("--epochs", type=int, default=0, help="max epochs of the CTR arms (0: their default, 20)")
    parser.add_argument("--min-interactions", type=int, default=5, help="SIMAB_STEAM_MIN_INTERACTIONS")
    parser.add_argument("--data", type=Path, default=SHARED_DATA / "steam-australian")
    parser.add_argument("--home", type=Path, default=ROOT / "data" / "steam")
    parser.add_argument("--print-only", action="store_true", help="print the tables of the run in --home")
    parser.add_argument(
        "--plugin",
        action="store_true",
        help="make the Agent4Rec plug-in's arms (mf, multvae, lightgcn) importable in the run, as the tests install it",
    )
    parser.add_argument(
        "--table2-only",
        action="store_true",
        help="Table 2, tau and the pairs from the arms' stored assets in --home, without the report "
        "(for a run stopped before its read-out, e.g. during AFN's augmentation refits)",
    )
    parser.add_argument("--offline", action="store_true", help="the arms offline, without the simulation")
    parser.add_argument("--user-share", type=float, default=1.0, help="--offline: a seeded share of the users (1: all)")
    parser.add_argument("--ease-l2", type=float, default=200.0, help="--offline: EASE's L2")
    args = parser.parse_args()
    if args.offline:
        return offline(args)
    arms = args.arms or "random,pop,trending,fm,deepfm,afn,mirror"
    home = args.home.resolve()
    if args.table2_only:
        print(table2_from_assets(home, arm_names(arms)))
        return 0
    if not args.print_only:
        if not (args.data / "interactions.csv").is_file():
            raise SystemExit(f"bench.steam: no Steam data in {args.data} (--data, $SIMAB_SHARED_DATA)")
        env = {
            "SIMAB_SOURCE": "steam",
            "SIMAB_STEAM_PATH": str(args.data),
            "SIMAB_STEAM_MIN_INTERACTIONS": str(args.min_interactions),
            "SIMAB_AGENTS": str(args.agents),
            "SIMAB_CONTROL": "pop",
        }
        if args.epochs:
            env["SIMAB_MAX_EPOCHS"] = str(args.epochs)
        if args.plugin:
            site = install_agent4rec_plugin(Path(tempfile.mkdtemp()))
            env["PYTHONPATH"] = os.pathsep.join([str(site), str(PLUGIN_SOURCE), str(ROOT)])
        code = run_lifecycle(home, env, arms)
        if code:
            return code
    print(tables(home, arm_names(arms)))
    return 0


def arm_names(arms: str) -> list[str]:
    """The arms' names in an --arms value: `als=lists:FILE` is the arm "als"."""
    return [spec.split("=", 1)[0].strip() for spec in arms.split(",") if spec.strip()]


def _offline(assets: Path, arms: list[str]):
    # Relaxed: Random's and Pop's AUC columns may be all null.
    return pl.concat(
        [pl.read_parquet(assets / "offline_metrics" / f"{a}.parquet") for a in arms], how="vertical_relaxed"
    )


def table2_lines(arms: list[str], offline, readout_arms) -> list[str]:
    """Table 2's markdown rows: each arm's offline metrics and simulated CTR with its interval."""
    ctr = readout_arms.filter(pl.col("metric") == "ctr")
    lines = [
        "Table 2 on Steam (implicit; offline on the test window, CTR over agents with its 95 % interval)",
        "",
        "| arm | Recall@20 | NDCG@20 | AUC | simulated CTR |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for arm in arms:
        off = offline.filter(pl.col("arm") == arm).row(0, named=True)
        c = ctr.filter(pl.col("arm") == arm).row(0, named=True)
        auc = "n/a" if off.get("test_auc") is None else f"{off['test_auc']:.4f}"
        lines.append(
            f"| {arm} | {off['recall_at_k']:.4f} | {off['ndcg_at_k']:.4f} | {auc} | "
            f"{c['mean']:.4f} [{c['ci_low']:.4f}, {c['ci_high']:.4f}] |"
        )
    return lines


def table2_from_assets(home: Path, arms: list[str], control: str = "pop") -> str:
    """Table 2 as the report's read-out computes it (ab_readout, fidelity, pairwise_agreement
    with the asset's defaults: 2,000 bootstrap replicates, seed 0), from each arm's stored
    simulation_events, top20_lists and offline_metrics."""
    from ops.readout.ab_readout import ab_readout
    from ops.readout.fidelity import agreement_summary, fidelity, offline_per_user, pairwise_agreement
    from ops.readout.readout_config import ReadoutConfig
    from ops.readout.verdict import pair_counts

    assets = home / "assets"
    events = pl.concat([pl.read_parquet(assets / "simulation_events" / f"{a}.parquet") for a in arms])
    readout = ab_readout(events, control=control, config=ReadoutConfig(n_bootstrap=2000, seed=0))
    offline = _offline(assets, arms)
    lists = {a: pl.read_parquet(assets / "top20_lists" / f"{a}.parquet") for a in arms}
    per_user = offline_per_user(lists, pl.read_parquet(assets / "test_ratings.parquet"))
    fid = fidelity(readout.arms, offline, per_user)
    pairs = pairwise_agreement(readout.per_agent, per_user, paired=readout.design == "paired", seed=0)
    lines = table2_lines(arms, offline, readout.arms)
    tau = fid.filter((pl.col("simulated") == "ctr") & (pl.col("offline") == "ndcg_at_k")).row(0, named=True)
    lines += ["", f"τ(CTR, NDCG@20) = {tau['kendall_tau']:.2f}; same best arm: {tau['same_best_arm']}"]
    lines += [f"Arm against arm: {pairs.height} pairs; {pair_counts(agreement_summary(pairs))}"]
    lines += [
        f"- {r['arm_a']} − {r['arm_b']}: NDCG@20 {r['offline_difference']:+.4f} "
        f"[{r['offline_ci_low']:+.4f}, {r['offline_ci_high']:+.4f}], CTR {r['simulated_difference']:+.4f} "
        f"[{r['simulated_ci_low']:+.4f}, {r['simulated_ci_high']:+.4f}]: {r['verdict']}"
        for r in pairs.iter_rows(named=True)
    ]
    return "\n".join(lines)


def tables(home: Path, arms: list[str]) -> str:
    assets = home / "assets"
    readout = next(assets.glob("ab_readout.*.d"))
    lines = table2_lines(arms, _offline(assets, arms), pl.read_parquet(readout / "arms.parquet"))
    report = max((home / "reports").glob("*/report.md"), key=lambda p: p.stat().st_mtime).read_text()
    verdict = [line for line in report.splitlines() if line.startswith("- fidelity") or line.startswith("- trust")]
    pairs = report.split("## Fidelity arm against arm", 1)[1].split("\n## ", 1)[0]
    taste = {}
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and cells[0] == "per item" and cells[1] in ("1:1", "1:9"):
            taste[cells[1]] = cells[6]
    quality = report.split("### List quality", 1)[1].split("\n## ", 1)[0] if "### List quality" in report else ""
    quality = "\n".join(line for line in quality.splitlines() if not line.startswith("!["))
    lines += ["", *verdict, "", "Arm against arm" + pairs.rstrip(), "", "List quality" + quality.rstrip(), ""]
    lines += ["Taste discrimination F1 on Steam (1:1, 1:9)", "", "| who | 1:1 | 1:9 |", "| --- | --- | --- |"]
    lines.append(f"| simab, embedded brain (per item) | {taste.get('1:1', 'n/a')} | {taste.get('1:9', 'n/a')} |")
    lines += [f"| {paper} (reported) | {a:.3f} | {b:.3f} |" for paper, (a, b) in PAPERS.items()]
    return "\n".join(lines)


def offline(args) -> int:
    """The arms fitted and ranked on the copy (or `--user-share` of its users), their NDCG@20
    and Recall@20 with intervals, NDCG@20 as a ratio to Pop's where Pop is among them."""
    from ops.arms.base import FitData
    from ops.arms.ranking import lists_for, rank_once, ranking_users
    from ops.arms.recommenders import ArmDivergedError
    from ops.arms.registry import make_arm
    from ops.data.catalogue import build_catalogue
    from ops.data.split import chronological_split
    from ops.data.steam import load_steam
    from ops.readout.fidelity import offline_intervals, offline_per_user

    arm_specs = args.arms or "random,pop,trending,fm,mf,ease"
    if any(a.split(":")[0] in ("mf", "lightgcn", "multvae") for a in arm_specs.split(",")):
        install_agent4rec_plugin(Path(tempfile.mkdtemp()))
    steam = load_steam(args.data, args.min_interactions)
    ratings = steam.ratings
    if args.user_share < 1:
        ids = ratings.get_column("user_id").unique().sort().to_numpy()
        keep = ids[np.random.default_rng(3).random(ids.size) < args.user_share]
        ratings = ratings.filter(pl.col("user_id").is_in(keep.tolist()))
    split = chronological_split(ratings)
    catalogue = build_catalogue(steam.movies, steam.metadata)  # the catalogue as the lifecycle builds it
    items = np.sort(catalogue.get_column("item_id").to_numpy())
    ranked = ranking_users(split.train, split.test)
    train_users = split.train.get_column("user_id").unique().to_numpy()
    print(
        f"steam: {ratings.get_column('user_id').n_unique()} users; train/valid/test "
        f"{split.train.height}/{split.valid.height}/{split.test.height}; catalogue {items.size}"
    )
    lists, notes = {}, {}
    for spec in arm_specs.split(","):
        name, _, extra = spec.partition(":")
        started = time.perf_counter()
        if name == "ease":
            label = name
            lists[label] = ease_lists(split.train, np.sort(train_users), items, args.ease_l2)
            notes[label] = f"L2 {args.ease_l2:g}"
        else:
            overrides = dict(kv.split("=") for kv in extra.split(";")) if extra and "=" in extra else {}
            overrides = {k: float(v) for k, v in overrides.items()}
            label = spec if overrides else name
            if "=" in name:  # NAME=lists:FILE
                label = name.split("=")[0]
                arm = make_arm(spec)
            else:
                arm = make_arm(name, device="cpu", **overrides)
            try:
                arm.fit(FitData(split.train, split.valid, steam.users, catalogue, rank_users=ranked))
            except ArmDivergedError as exc:
                print(f"| {label} | diverged: {exc} |")
                continue
            lists[label] = lists_for(rank_once(arm, split.train, split.test, items), train_users).with_columns(
                pl.lit(label).alias("arm")
            )
            history = getattr(arm, "history", None) or []
            notes[label] = (
                f"{len(history)} epochs, validation AUC " + " ".join(f"{h['val_auc']:.3f}" for h in history)
                if history
                else ""
            )
        notes[label] += f" ({time.perf_counter() - started:.0f} s)"
    intervals = offline_intervals(offline_per_user(lists, split.test))
    cells = {(r["arm"], r["metric"]): r for r in intervals.iter_rows(named=True)}
    pop = cells.get(("pop", "ndcg_at_k"))
    print("| arm | users | NDCG@20 [95 %] | ÷ Pop | Recall@20 [95 %] | training |")
    print("| --- | ---: | --- | ---: | --- | --- |")
    for arm in lists:
        n, r = cells[(arm, "ndcg_at_k")], cells[(arm, "recall_at_k")]
        ratio = f"{n['mean'] / pop['mean']:.2f}" if pop and pop["mean"] > 0 else "–"
        print(
            f"| {arm} | {n['users']} | {n['mean']:.4f} [{n['ci_low']:.4f}, {n['ci_high']:.4f}] | {ratio} | "
            f"{r['mean']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}] | {notes[arm]} |"
        )
    return 0


def ease_lists(train: pl.DataFrame, users: np.ndarray, items: np.ndarray, l2: float, k: int = 20) -> pl.DataFrame:
    """EASE's top-k unseen items per user of `users` (train interactions as a binary matrix)."""
    from ops.schema import TOP_K

    known = np.unique(np.r_[users, train.get_column("user_id").to_numpy()])
    x = np.zeros((known.size, items.size))
    x[np.searchsorted(known, train["user_id"].to_numpy()), np.searchsorted(items, train["item_id"].to_numpy())] = 1
    p = np.linalg.inv(x.T @ x + l2 * np.eye(items.size))
    b = -p / np.diag(p)
    np.fill_diagonal(b, 0.0)
    rows = np.searchsorted(known, users)
    scores = np.where(x[rows] > 0, -np.inf, x[rows] @ b)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return pl.DataFrame(
        {
            "arm": "ease",
            "user_id": np.repeat(users, k),
            "rank": np.tile(np.arange(1, k + 1), users.size),
            "item_id": items[top.ravel()],
            "score": np.take_along_axis(scores, top, axis=1).ravel(),
        }
    ).cast(TOP_K)


if __name__ == "__main__":
    raise SystemExit(main())

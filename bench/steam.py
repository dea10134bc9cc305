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

    .venv/bin/python bench/steam.py --agents 300            # about 10-15 min on 2 cores
    .venv/bin/python bench/steam.py --agents 300 --print-only   # the tables of a finished run
    # an outside model's lists (bench/als_lists.py) and the Agent4Rec plug-in's arms beside them
    .venv/bin/python bench/als_lists.py --data steam --out /tmp/als-steam.parquet
    .venv/bin/python bench/steam.py --plugin --arms random,pop,fm,deepfm,mf,lightgcn,als=lists:/tmp/als-steam.parquet

Besides Table 2 it prints the verdict's first lines (the list-response calibration is in the
trust line: the yardstick's lists and the elasticity before and after) and the list-quality
protocol's table on the test window (CTR, CVR and AR by ratio, poorest lists first).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fakes.arm_packages import PLUGIN_SOURCE, install_agent4rec_plugin  # noqa: E402
from fakes.shared_data import SHARED_DATA  # noqa: E402

# Taste discrimination on Steam, F1 at 1:1 and 1:9, as the papers report them.
PAPERS = {"SimUSER": (0.794, 0.399), "Agent4Rec": (0.679, 0.282)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default="random,pop,fm,deepfm,afn")
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
    args = parser.parse_args()
    home = args.home.resolve()
    if args.table2_only:
        print(table2_from_assets(home, arm_names(args.arms)))
        return 0
    if not args.print_only:
        if not (args.data / "interactions.csv").is_file():
            raise SystemExit(f"bench/steam.py: no Steam data in {args.data} (--data, $SIMAB_SHARED_DATA)")
        env = {
            **os.environ,
            "SIMAB_HOME": str(home),
            "DAGSTER_HOME": str(home / "dagster_home"),
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
        resume = ["--resume"] if (home / "dagster_home").is_dir() else []
        command = [sys.executable, "-m", "pipelines.lifecycle", *resume, "--arms", args.arms]
        print(f"SIMAB_HOME={home} SIMAB_SOURCE=steam {' '.join(command[1:])}", flush=True)
        code = subprocess.call(command, cwd=ROOT, env=env)
        if code:
            return code
    print(tables(home, arm_names(args.arms)))
    return 0


def arm_names(arms: str) -> list[str]:
    """The arms' names in an --arms value: `als=lists:FILE` is the arm "als"."""
    return [spec.split("=", 1)[0].strip() for spec in arms.split(",") if spec.strip()]


def _offline(assets: Path, arms: list[str]):
    import polars as pl

    # Relaxed: Random's and Pop's AUC columns may be all null.
    return pl.concat(
        [pl.read_parquet(assets / "offline_metrics" / f"{a}.parquet") for a in arms], how="vertical_relaxed"
    )


def table2_lines(arms: list[str], offline, readout_arms) -> list[str]:
    """Table 2's markdown rows: each arm's offline metrics and simulated CTR with its interval."""
    import polars as pl

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
    import polars as pl

    from ops.readout.ab_readout import ReadoutConfig, ab_readout
    from ops.readout.fidelity import agreement_summary, fidelity, offline_per_user, pairwise_agreement
    from ops.readout.report import pair_counts

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
    import polars as pl

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


if __name__ == "__main__":
    raise SystemExit(main())

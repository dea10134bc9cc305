"""Why the embedded brain's agents were blind to list quality on Steam: its click model under
the two negative samplings the list-response calibration tries, read on a finished run.

From a run's stored assets (`--home`, e.g. after `bench/steam.py`): the agents, the windows,
the catalogue and the arms' top-20 lists (plus an outside lists file, `--lists NAME=FILE`,
e.g. `bench/als_lists.py`'s).  For each share of popularity-drawn negatives (`--shares`;
the brain's default 0.5, and 0 = uniform) the click model is refitted on train +
validation and printed:

- its coefficients and held-out click AUC (the fit's held-out users, against the fit's own
  negatives), and its collaborative variants' AUC (does PureSVD help here);
- test-window click AUC against uniform never-rated negatives (the negatives of the taste
  and list-quality protocols), beside train popularity's alone;
- NDCG@20 of the click model used as a recommender over the catalogue (test window, liked
  items relevant; `--users` test users), beside Pop's on the same users: a click model that
  ranks like a poor recommender cannot tell a good list from a poor one;
- per arm, the mean first-page click probability of the sampled agents (`--agents`) on the
  arm's list, at click scales 1, 2, 4 and 8 (the shift solved so that the mean over all
  arms' first pages stays the fitted one, as the calibration keeps its anchor).

    .venv/bin/python bench/brain_negatives.py --home data/steam --lists als=/tmp/als-steam.parquet
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
from scipy.optimize import brentq
from sklearn.metrics import roc_auc_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ops.agents.build import Agents  # noqa: E402
from ops.simulation.brains.embedded import EmbeddedBrainConfig, fit_embedded_brain  # noqa: E402
from ops.simulation.runner import sample_agents  # noqa: E402


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def top20(path: Path, train: pl.DataFrame, name: str) -> pl.DataFrame:
    """A lists file's first 20 items per user once the user's train items are removed."""
    lists = pl.read_parquet(path).rename({"item_id": "movie_id"})
    lists = lists.join(train.select("user_id", "movie_id").unique(), on=["user_id", "movie_id"], how="anti")
    lists = lists.sort("user_id", "rank").with_columns(pl.int_range(1, pl.len() + 1).over("user_id").alias("rank"))
    return lists.filter(pl.col("rank") <= 20).select(pl.lit(name).alias("arm"), "user_id", "rank", "movie_id")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True, help="a finished run's $SIMAB_HOME")
    parser.add_argument("--lists", action="append", default=[], help="NAME=FILE: an outside lists file")
    parser.add_argument("--shares", default="0.5,0", help="shares of popularity-drawn negatives to fit")
    parser.add_argument("--agents", type=int, default=300)
    parser.add_argument("--users", type=int, default=300, help="test users the click model ranks for")
    args = parser.parse_args()
    assets = args.home / "assets"
    agents = Agents.load(next(assets.glob("agents.*.d")))
    train, valid, test = (pl.read_parquet(assets / f"{w}_ratings.parquet") for w in ("train", "valid", "test"))
    users = pl.read_parquet(assets / "users.parquet")
    lists = {p.stem: pl.read_parquet(p) for p in sorted((assets / "top20_lists").glob("*.parquet"))}
    lists = {k: v for k, v in lists.items() if v.height}
    for spec in args.lists:
        name, path = spec.split("=", 1)
        lists[name] = top20(Path(path), train, name)
    ids = agents.vectors.movie_ids
    remembered = {u for u, m in agents.memories.items() if len(m)}
    known = pl.concat([f.select("user_id", "movie_id") for f in (train, valid, test)])
    seen_ever = {u: set(m) for u, m in known.group_by("user_id").agg("movie_id").iter_rows()}
    seen_before = {u: set(m) for u, m in pl.concat([train, valid]).group_by("user_id").agg("movie_id").iter_rows()}
    liked = {u: set(m) for u, m in test.filter(pl.col("rating") >= 4).group_by("user_id").agg("movie_id").iter_rows()}
    rng = np.random.default_rng(0)
    # Test-window pairs: every test item of a user with a memory, 4 uniform never-rated items each.
    pairs = []
    for u, movies in test.group_by("user_id").agg("movie_id").sort("user_id").iter_rows():
        if u not in remembered:
            continue
        draw = [int(m) for m in rng.choice(ids, 8 * len(movies)) if int(m) not in seen_ever[u]][: 4 * len(movies)]
        pairs += [(u, int(m), 1) for m in movies] + [(u, m, 0) for m in draw]
    pairs = pl.DataFrame(pairs, schema=["user_id", "movie_id", "y"], orient="row")
    ranked = sorted(set(liked) & remembered)
    ranked = sorted(rng.choice(ranked, min(args.users, len(ranked)), replace=False).tolist())
    candidates = {u: np.array([m for m in ids if int(m) not in seen_before.get(u, ())]) for u in ranked}
    idcg = {u: sum(1 / np.log2(r + 2) for r in range(min(20, len(liked[u])))) for u in ranked}

    def ndcg(score) -> float:
        values = []
        for u in ranked:
            top = candidates[u][np.argsort(-score(u, candidates[u]), kind="stable")[:20]]
            values.append(sum(1 / np.log2(r + 2) for r, m in enumerate(top) if int(m) in liked[u]) / idcg[u])
        return float(np.mean(values))

    counts = dict(train.group_by("movie_id").len().iter_rows())
    popularity = np.array([counts.get(int(m), 0) for m in ids], dtype=float)
    pop_score = dict(zip(ids.tolist(), popularity))
    chosen = sample_agents(sorted(set(lists["pop"].get_column("user_id").to_list()) & remembered), args.agents, 0)
    sessions = agents.sessions(chosen)
    first = {
        arm: dict(
            frame.filter(pl.col("user_id").is_in(chosen)).sort("rank").group_by("user_id").agg("movie_id").iter_rows()
        )
        for arm, frame in lists.items()
    }
    print(f"{args.home}: {len(ranked)} test users ranked, {len(chosen)} agents, {pairs.height} test pairs")
    print(f"pop as a recommender: NDCG@20 {ndcg(lambda u, c: np.array([pop_score[int(m)] for m in c]) - 1e-9 * c):.4f}")
    rows_of = agents.vectors.rows_of(pairs.get_column("movie_id").to_numpy())
    print(f"train popularity alone: test click AUC {roc_auc_score(pairs['y'].to_numpy(), popularity[rows_of]):.4f}")
    for share in (float(s) for s in args.shares.split(",")):
        model = fit_embedded_brain(agents, train, valid, users, EmbeddedBrainConfig(popular_negative_share=share))
        p = model.params
        brain = model.brain()
        by_user = pairs.group_by("user_id", maintain_order=True).agg("movie_id", "y")
        templates = {s.user_id: s for s in agents.sessions(sorted(set(by_user["user_id"]) | set(ranked)))}
        shown = dict(zip(by_user["user_id"], by_user["movie_id"]))
        for u in ranked:
            shown[u] = sorted(set(shown.get(u, [])) | set(candidates[u].tolist()))
        brain.prepare(list(templates.values()), shown)
        z = np.concatenate([brain.click_logits(templates[u], ms) for u, ms, _ in by_user.iter_rows()])
        y = np.concatenate([ys for _, _, ys in by_user.iter_rows()])
        print(f"\n## popular negatives {share:g}")
        print("click model:", json.dumps(dict(zip(p.click.features, np.round(p.click.coef, 3).tolist()))))
        ablation = ", ".join(f"{r['variant']} {r['click_auc_holdout']:.4f}" for r in p.click_ablation)
        print(
            f"held-out click AUC (fit's negatives) {p.click_auc_holdout:.4f}; variants: {ablation}; kept {p.click_variant}"
        )
        print(f"test click AUC against uniform negatives {roc_auc_score(y, z):.4f}")
        print(f"the click model as a recommender: NDCG@20 {ndcg(lambda u, c: brain.click_logits(templates[u], c)):.4f}")
        lens = model.brain()
        lens.prepare(sessions, {u: sorted({m for arm in first for m in first[arm].get(u, [])}) for u in chosen})
        logits = {
            arm: np.array(
                [lens.click_logits(s, first[arm][s.user_id][:5]) for s in sessions if s.user_id in first[arm]]
            )
            for arm in first
        }
        anchor = np.concatenate([v.ravel() for v in logits.values()])
        target = _sigmoid(anchor).mean()
        print("first-page click probability by arm, click scale 1 / 2 / 4 / 8:")
        for arm, v in logits.items():
            cells = []
            for scale in (1.0, 2.0, 4.0, 8.0):
                shift = brentq(lambda b: _sigmoid(scale * anchor + b).mean() - target, -50, 50)
                cells.append(f"{_sigmoid(scale * v + shift).mean():.3f}")
            print(f"  {arm}: {' / '.join(cells)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

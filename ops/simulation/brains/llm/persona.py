"""Persona matching for the LLM brain (SimUSER §3.1, "Persona Matching via Consistency Check").

For one user, the model writes `n_candidates` candidate personas — age, Big Five (1–3),
occupation, background, hobbies, taste — from a sample of the user's TRAIN history (rated
≥ 4 liked, < 3 disliked, SimUSER's cut) and SimUSER's lists of possible ages, personalities
and occupations; each candidate is a request with its own seed.  Each candidate then
role-plays the user and rates the user's held-out VALIDATION movies; the candidate whose
ratings are closest to the real ones (lowest RMSE) is kept — SimUSER's self-consistency,
scored on held-out ratings as the issue asks rather than SimUSER's "this user vs others"
comparison.  The kept persona replaces the profile's deterministic one
(`ops.agents.persona`), so every prompt of the LLM brain shows it (`with_persona`).

Every answer is schema-checked and re-asked like a page answer (`LLMBrain._ask`), asked with a
strict JSON schema where the endpoint takes one (`persona_schema`, `ratings_schema`: the ages
listed, traits 1-3, bounded strings; exactly the validation movies' ids), and comes from the
brain's response cache when it holds the request, so matching again is free.  Every candidate
that is not kept says why (`PersonaMatch.dropped`: it could not be written, could not rate the
movies, or rated them worse than the kept one), logged and stored beside it.
`match_personas` matches many users, and each user's candidates, at once (the transport's
`concurrency` bounds the requests in flight);
the asset `llm_personas` stores `personas_frame`, and a simulation with `persona: matched`
applies it (`apply_personas`); `ops.simulation.cost.estimate_persona_cost` is its bill.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from ops.figures import table_markdown
from ops.simulation.brains.llm.answers import (
    AnswerError,
    _parse,
    bounded_text,
    integer_range,
    strict_object,
)

log = logging.getLogger(__name__)

AGES = ("Under 18", "18-24", "25-34", "35-44", "45-49", "50-55", "56+")
OCCUPATIONS_HINT = (
    "student",
    "engineer",
    "teacher",
    "artist",
    "doctor",
    "lawyer",
    "manager",
    "writer",
    "retired",
    "homemaker",
    "sales",
    "scientist",
)
LEVEL_WORDS = {1: "low", 2: "moderate", 3: "high"}

PERSONA_TEMPLATE = """Here is a sample of one person's movie history.
Movies they liked (rated 4 or 5):
{liked}
Movies they disliked (rated 1 or 2):
{disliked}

Imagine who this person is. Possible ages: {ages}. Personality: the Big Five facets openness, conscientiousness, extraversion, agreeableness and neuroticism, each 1 (low), 2 (moderate) or 3 (high). Possible occupations include: {occupations}.
Reply with a JSON object with exactly these keys:
{{"age": one of the ages, "openness": 1-3, "conscientiousness": 1-3, "extraversion": 1-3, "agreeableness": 1-3, "neuroticism": 1-3, "occupation": a short occupation, "background": one sentence about their life, "hobbies": a list of up to three hobbies, "taste": one sentence on the movies they love and avoid}}"""

RATING_TEMPLATE = """You are this person: {persona}
Rate each of these movies from 1 to 5 stars as this person would, whether or not you have seen it:
{movies}
Reply with a JSON object: {{"ratings": {{"<the id in brackets>": 1-5, ... one key per movie}}}}"""


class PersonaCandidate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    age: str = Field(min_length=1)
    openness: int = Field(ge=1, le=3)
    conscientiousness: int = Field(ge=1, le=3)
    extraversion: int = Field(ge=1, le=3)
    agreeableness: int = Field(ge=1, le=3)
    neuroticism: int = Field(ge=1, le=3)
    occupation: str = Field(min_length=1)
    background: str = Field(min_length=1)
    hobbies: list[str] = Field(default_factory=list, max_length=5)
    taste: str = Field(min_length=1)

    def text(self) -> str:
        traits = ", ".join(
            f"{LEVEL_WORDS[getattr(self, n)]} {n}"
            for n in ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
        )
        hobbies = f" Hobbies: {', '.join(self.hobbies)}." if self.hobbies else ""
        return f"Aged {self.age}, {self.occupation}. {self.background} Personality (Big Five): {traits}.{hobbies} Taste: {self.taste}"


class _Rating(BaseModel):
    item_id: int
    rating: int = Field(ge=1, le=5)


class _Ratings(BaseModel):
    """Keyed by movie id, as the prompt and the schema ask; the list of entries older prompts
    asked for is still read (a model in json_object or text mode may answer either)."""

    model_config = ConfigDict(extra="ignore")

    ratings: dict[int, Annotated[int, Field(ge=1, le=5)]] | list[_Rating]

    def by_movie(self) -> dict[int, int]:
        if isinstance(self.ratings, dict):
            return dict(self.ratings)
        return {r.item_id: r.rating for r in self.ratings}


def persona_schema() -> tuple[str, dict]:
    """The candidate persona as a strict JSON schema (PersonaCandidate, with the ages listed)."""
    trait = integer_range(1, 3)
    return "persona", strict_object(
        {
            "age": {"type": "string", "enum": list(AGES)},
            "openness": trait,
            "conscientiousness": trait,
            "extraversion": trait,
            "agreeableness": trait,
            "neuroticism": trait,
            "occupation": bounded_text(60),
            "background": bounded_text(160),
            "hobbies": {"type": "array", "items": bounded_text(40), "maxItems": 3},
            "taste": bounded_text(160),
        }
    )


def ratings_schema(item_ids: Sequence[int]) -> tuple[str, dict]:
    """One rating 1-5 for each of `item_ids`: an object keyed by the ids, every key required and
    no other, so that a constrained decoder cannot rate a movie twice and skip another (Gemma 3
    270M did, given an array of entries with the ids as an enum)."""
    return "ratings", strict_object({"ratings": strict_object({str(int(m)): integer_range(1, 5) for m in item_ids})})


@dataclass(frozen=True)
class PersonaMatch:
    """The kept persona (None: no candidate could be scored; the user keeps its trait
    persona) and how every candidate did: its RMSE on the held-out ratings (None for a
    candidate the model could not write or rate) and why it was dropped (None for the kept one)."""

    user_id: int
    persona: str | None
    rmse: float | None
    candidates: tuple[str, ...]
    scores: tuple[float | None, ...]
    dropped: tuple[str | None, ...] = ()


async def amatch_persona(
    brain,
    user_id: int,
    history: Sequence[tuple[int, int]],
    validation: Sequence[tuple[int, int]],
    n_candidates: int = 5,
    seed: int = 0,
    history_sample: int = 50,
) -> PersonaMatch | None:
    """SimUSER persona matching for one user (module docstring).  `brain` is an
    `LLMBrain` (its transport, cache, checks and movie names); `history` and `validation`
    are (movie id, rating) pairs of the train and validation windows.  The candidates are
    asked at once; each has its own two seeds, drawn in order, so the match is the same
    whatever order the answers arrive in."""
    rng, prompt = persona_prompt(brain, user_id, history, seed, history_sample)
    movies = rating_movies(brain, validation)
    truth = {int(m): int(r) for m, r in validation}
    seeds = [(int(rng.integers(0, 2**31 - 1)), int(rng.integers(0, 2**31 - 1))) for _ in range(n_candidates)]

    async def candidate(write_seed: int, rate_seed: int) -> tuple[str, float | None, str | None]:
        written, _, errors, failure = await brain._ask(
            [{"role": "user", "content": prompt}],
            lambda t: _parse(t, PersonaCandidate),
            write_seed,
            None,
            persona_schema(),
        )
        if written is None:
            return "", None, f"not written: {_why(errors, failure)}"
        text = written.text()
        rated, _, errors, failure = await brain._ask(
            [
                {
                    "role": "user",
                    "content": in_domain(
                        RATING_TEMPLATE.format(persona=text, movies=movies), getattr(brain, "noun", "movie")
                    ),
                }
            ],
            lambda t: _check_ratings(t, truth),
            rate_seed,
            None,
            ratings_schema(list(truth)),
        )
        if rated is None:
            return text, None, f"not rated: {_why(errors, failure)}"
        return text, float(np.sqrt(np.mean([(rated[m] - r) ** 2 for m, r in truth.items()]))), None

    results = await asyncio.gather(*(candidate(w, r) for w, r in seeds))
    candidates = tuple(text for text, _, _ in results)
    scores = tuple(score for _, score, _ in results)
    scored = [i for i, s in enumerate(scores) if s is not None]
    kept = min(scored, key=lambda i: (scores[i], i)) if scored else None  # the first of equals, as asked
    dropped = tuple(
        None
        if i == kept
        else why
        if why is not None
        else f"worse: RMSE {scores[i]:.3f} against the kept candidate's {scores[kept]:.3f}"
        for i, (_, _, why) in enumerate(results)
    )
    for i, why in enumerate(dropped):
        if why is not None:
            log.info("persona matching: user %s, candidate %d of %d dropped: %s", user_id, i + 1, n_candidates, why)
    if kept is None:
        log.warning(
            "persona matching: user %s keeps its trait persona, none of %d candidates could be scored (%s)",
            user_id,
            n_candidates,
            "; ".join(sorted(set(dropped))),
        )
        return PersonaMatch(user_id, None, None, candidates, scores, dropped)
    return PersonaMatch(user_id, candidates[kept], scores[kept], candidates, scores, dropped)


def _why(errors: Sequence[str], failure: str | None) -> str:
    """Why an answer was not had: the endpoint's failure, or the last check it failed."""
    if failure:
        return failure
    return f"invalid_answer: invalid {len(errors)} times (last: {errors[-1]})" if errors else "no answer"


def drop_summary(matches: Mapping[int, PersonaMatch | None]) -> dict[str, int]:
    """How many candidates were dropped for each kind of reason (not written, not rated, worse)."""
    out: dict[str, int] = {}
    for m in matches.values():
        for why in m.dropped if m else ():
            if why is not None:
                kind = why.split(":", 1)[0]
                out[kind] = out.get(kind, 0) + 1
    return dict(sorted(out.items()))


async def amatch_personas(
    brain,
    inputs: Mapping[int, tuple[Sequence[tuple[int, int]], Sequence[tuple[int, int]]]],
    n_candidates: int = 5,
    seed: int = 0,
    progress=None,
) -> dict[int, PersonaMatch | None]:
    """`amatch_persona` for every user of `inputs` (user id -> (train history, validation
    pairs)), all in flight at once: the brain's transport bounds the requests (its
    `concurrency`).  `progress(done, total)` is called as users finish."""
    done = 0

    async def one(user_id: int):
        nonlocal done
        history, validation = inputs[user_id]
        match = await amatch_persona(brain, user_id, history, validation, n_candidates, seed)
        done += 1
        if progress is not None:
            progress(done, len(inputs))
        return user_id, match

    return dict(await asyncio.gather(*(one(u) for u in sorted(inputs))))


def match_personas(
    brain, inputs, n_candidates: int = 5, seed: int = 0, progress=None
) -> dict[int, PersonaMatch | None]:
    """`amatch_personas` from synchronous code."""
    return brain.transport.run_sync(amatch_personas, brain, inputs, n_candidates, seed, progress)


def persona_inputs(
    train: pl.DataFrame, valid: pl.DataFrame, users: Sequence[int], validation_movies: int = 10, seed: int = 0
) -> dict:
    """For each of `users` with at least one validation rating: its train history and up to
    `validation_movies` of its validation-window ratings (a seeded sample), the movies each
    candidate persona rates.  Users without a validation rating cannot be scored and are left
    out (they keep their trait persona)."""
    wanted = pl.DataFrame({"user_id": [int(u) for u in users]}, schema={"user_id": train.schema["user_id"]})
    history = {
        u: list(zip(g.get_column("item_id").to_list(), g.get_column("rating").to_list()))
        for (u,), g in train.join(wanted, on="user_id")
        .sort("user_id", "timestamp")
        .group_by("user_id", maintain_order=True)
    }
    out = {}
    for (u,), g in (
        valid.join(wanted, on="user_id").sort("user_id", "timestamp").group_by("user_id", maintain_order=True)
    ):
        pairs = list(zip(g.get_column("item_id").to_list(), g.get_column("rating").to_list()))
        if len(pairs) > validation_movies:
            rng = np.random.default_rng(np.random.SeedSequence([seed, int(u), 2718]))
            pairs = [pairs[i] for i in sorted(rng.choice(len(pairs), validation_movies, replace=False))]
        out[int(u)] = (history.get(u, []), pairs)
    return out


# What one answer of each kind costs in completion tokens, for the estimate
# (`ops.simulation.cost.estimate_persona_cost`): a candidate persona as the schema asks for
# it, and one rating entry.
SAMPLE_PERSONA = PersonaCandidate(
    age="25-34",
    openness=3,
    conscientiousness=2,
    extraversion=2,
    agreeableness=2,
    neuroticism=1,
    occupation="software engineer",
    background="Grew up in a small town and moved to the city for work; spends evenings at home.",
    hobbies=["hiking", "board games", "cooking"],
    taste="Loves clever science fiction and dry comedies; avoids horror and musicals.",
)
SAMPLE_RATING = '"1234": 4, '


def personas_frame(matches: Mapping[int, PersonaMatch | None]) -> pl.DataFrame:
    """One row per user: the kept persona and its RMSE (null when no candidate could be
    scored: the user keeps its trait persona), every candidate, its score and why it was
    dropped (null for the kept one)."""
    rows = [
        {
            "user_id": u,
            "persona": m.persona if m else None,
            "rmse": m.rmse if m else None,
            "candidates": list(m.candidates) if m else [],
            "scores": list(m.scores) if m else [],
            "dropped": list(m.dropped) if m else [],
        }
        for u, m in sorted(matches.items())
    ]
    schema = {
        "user_id": pl.Int64,
        "persona": pl.Utf8,
        "rmse": pl.Float64,
        "candidates": pl.List(pl.Utf8),
        "scores": pl.List(pl.Float64),
        "dropped": pl.List(pl.Utf8),
    }
    return pl.DataFrame(rows, schema=schema)


def apply_personas(sessions: Sequence, personas: pl.DataFrame) -> list:
    """The session templates with each matched persona in place of the trait one (users
    without a matched persona keep theirs)."""
    kept = {int(u): p for u, p in personas.select("user_id", "persona").iter_rows() if p}
    return [
        dataclasses.replace(s, profile=with_persona(s.profile, kept[s.user_id])) if s.user_id in kept else s
        for s in sessions
    ]


def with_persona(profile, persona: str):
    """The profile with the matched persona in place of the deterministic one."""
    return dataclasses.replace(profile, persona=persona)


def persona_prompt(brain, user_id: int, history, seed: int, history_sample: int):
    """The generator of this user's request seeds, and the persona prompt from a seeded
    sample of its train history."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, user_id, 3141]))
    history = list(history)
    if len(history) > history_sample:
        history = [history[i] for i in sorted(rng.choice(len(history), history_sample, replace=False))]
    liked = [m for m, r in history if r >= 4]
    disliked = [m for m, r in history if r < 3]
    prompt = PERSONA_TEMPLATE.format(
        liked=_names(brain, liked),
        disliked=_names(brain, disliked),
        ages=", ".join(AGES),
        occupations=", ".join(OCCUPATIONS_HINT),
    )
    return rng, in_domain(prompt, getattr(brain, "noun", "movie"))


def in_domain(text: str, noun: str) -> str:
    """A persona prompt for a domain whose items are `noun`s (docs/data_model.md); the JSON
    key `item_id` stays, it is the protocol."""
    if noun == "movie":
        return text
    text = re.sub(r"\bMovies\b", f"{noun.capitalize()}s", text)
    text = re.sub(r"\bmovies\b", f"{noun}s", text)
    return re.sub(r"\bmovie\b(?!_)", noun, text)


def rating_movies(brain, validation) -> str:
    return "\n".join(f"[{m}] {brain._movie_name(m)}" for m, _ in validation)


def _names(brain, item_ids: Sequence[int]) -> str:
    return "\n".join(f"- {brain._movie_name(m)}" for m in item_ids) if item_ids else "- none"


def _check_ratings(text: str, truth: dict[int, int]) -> dict[int, int]:
    answer = _parse(text, _Ratings)
    got = answer.by_movie()
    missing = sorted(set(truth) - set(got))
    if missing:
        raise AnswerError(f"ratings are missing for movie ids {missing}; rate every movie listed")
    return {m: got[m] for m in truth}


def persona_agents(user_ids: Sequence[int], n_agents: int = 0, seed: int = 0) -> list[int]:
    """The agents persona matching runs on: a seeded sample of `n_agents` (0: all), sorted."""
    users = sorted(user_ids)
    if n_agents and n_agents < len(users):
        users = sorted(np.random.default_rng(seed).choice(users, n_agents, replace=False).tolist())
    return users


def tenths(log, total: int):
    """A `progress(done, total)` for `match_personas` that logs at every tenth of `total` agents."""
    step = max(1, total // 10)

    def progress(done: int, total: int) -> None:
        if done % step == 0 or done == total:
            log(f"personas matched: {done}/{total} agents")

    return progress


@dataclass(frozen=True)
class PersonaOutcome:
    """What persona matching gave: one row per agent (`personas_frame`), those matched, the
    count of dropped candidates per reason and a few examples of why."""

    table: pl.DataFrame
    matched: pl.DataFrame
    drops: dict[str, int]
    examples: pl.DataFrame  # user_id, dropped: the first agent of each distinct reason, five at most

    @classmethod
    def of(cls, matches: Mapping[int, PersonaMatch | None]) -> PersonaOutcome:
        table = personas_frame(matches)
        examples = (
            table.select("user_id", "dropped")
            .explode("dropped")
            .drop_nulls("dropped")
            .unique("dropped", keep="first", maintain_order=True)
            .head(5)
        )
        return cls(table, table.filter(pl.col("persona").is_not_null()), drop_summary(matches), examples)

    @property
    def rmse(self) -> float | None:
        """The mean RMSE of the kept personas; None when none was kept."""
        return self.matched.get_column("rmse").mean() if self.matched.height else None

    def describe(self) -> str:
        """How many agents were matched, the dropped candidates by reason, and examples."""
        return (
            f"persona matching: {self.matched.height} of {self.table.height} agents matched; candidates dropped: "
            + (", ".join(f"{n} {kind}" for kind, n in self.drops.items()) or "none")
            + "".join(f"\n  user {u}: {why}" for u, why in self.examples.iter_rows())
        )

    def counts(self) -> dict[str, int]:
        return {
            "agents": self.table.height,
            "matched": self.matched.height,
            "unmatched (keep the trait persona)": self.table.height - self.matched.height,
        }

    def metrics(self) -> dict[str, float | int]:
        """agents, matched, rmse_kept_mean (when a persona was kept), candidates_dropped_<reason>."""
        rmse = self.rmse
        return {
            "agents": self.table.height,
            "matched": self.matched.height,
            **({"rmse_kept_mean": rmse} if rmse is not None else {}),
            **{f"candidates_dropped_{kind}": n for kind, n in self.drops.items()},
        }

    def examples_markdown(self) -> str:
        return table_markdown(self.examples) if self.examples.height else "none dropped"

    def personas_markdown(self, n: int = 5) -> str:
        """The first `n` kept personas with their RMSE."""
        return table_markdown(self.matched.select("user_id", "rmse", "persona").head(n))

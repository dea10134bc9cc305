"""The answers the LLM brain asks for, and their checks: JSON against a schema, then
against the page (a legal action, a movie on the page, a rating in range).  An
`AnswerError` says what is wrong in words the model can act on when it is re-asked."""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ops.simulation.brains.llm.config import LLMBrainConfig
from ops.simulation.observation import CLICK_MOVIE, WATCH_AND_RATE, Observation


class PageAnswer(BaseModel):
    """The JSON a page prompt asks for."""

    model_config = ConfigDict(extra="ignore")

    action: str
    movie_id: int | None = None
    rating: int | None = None
    interest: int
    caught_eye: list[int] = Field(default_factory=list)
    reason: str = Field(min_length=1)

    @field_validator("caught_eye", mode="before")
    @classmethod
    def _null_is_empty(cls, value):
        return [] if value is None else value

    @field_validator("movie_id", "rating", "interest", mode="before")
    @classmethod
    def _no_floats_or_bools(cls, value):
        # 4.5 is not a rating and true is not an id: refuse rather than round.
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(f"must be an integer, got {value!r}")
        return value


class InterviewAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    satisfaction: int
    reason: str = Field(min_length=1)


class ReflectionAnswer(BaseModel):
    """The JSON the reflection prompt asks for (Agent4Rec §2.1.2 memory reflection)."""

    model_config = ConfigDict(extra="ignore")

    preferences: str = Field(min_length=1)
    satisfaction: int
    fatigue: int


class AnswerError(ValueError):
    """An answer that is not valid JSON, breaks the schema or is illegal on the page."""


def check_answer(text: str, observation: Observation, config: LLMBrainConfig) -> PageAnswer:
    """Parse and check one page answer; AnswerError says what is wrong, in words the model
    can act on."""
    answer = _parse(text, PageAnswer)
    legal = observation.legal_actions
    if answer.action not in legal:
        raise AnswerError(f'action "{answer.action}" is not legal on this page; legal actions: {", ".join(legal)}')
    lo, hi = config.interest_range
    if not lo <= answer.interest <= hi:
        raise AnswerError(f"interest must be an integer from {lo} to {hi}, got {answer.interest}")
    if observation.page_type == "home":
        on_page = [card.movie_id for card in observation.items]
        if answer.action == CLICK_MOVIE and answer.movie_id not in on_page:
            raise AnswerError(
                f"click_movie needs the movie_id of a movie on this page, one of {on_page}; got {answer.movie_id}"
            )
    else:
        on_page = [observation.detail.card.movie_id]
        if answer.movie_id is not None and answer.movie_id != on_page[0]:
            raise AnswerError(f"this detail page shows movie {on_page[0]}, not movie {answer.movie_id}")
        if answer.action == WATCH_AND_RATE:
            rlo, rhi = config.rating_range
            if answer.rating is None or not rlo <= answer.rating <= rhi:
                raise AnswerError(f"watch_and_rate needs a rating from {rlo} to {rhi}, got {answer.rating}")
    stray = [m for m in answer.caught_eye if m not in on_page]
    if stray:
        raise AnswerError(f"caught_eye may only name movies on this page {on_page}; got {stray}")
    return answer


def check_interview(text: str, config: LLMBrainConfig) -> InterviewAnswer:
    answer = _parse(text, InterviewAnswer)
    lo, hi = config.satisfaction_range
    if not lo <= answer.satisfaction <= hi:
        raise AnswerError(f"satisfaction must be an integer from {lo} to {hi}, got {answer.satisfaction}")
    return answer


def check_reflection(text: str, config: LLMBrainConfig) -> ReflectionAnswer:
    answer = _parse(text, ReflectionAnswer)
    lo, hi = config.satisfaction_range
    if not lo <= answer.satisfaction <= hi:
        raise AnswerError(f"satisfaction must be an integer from {lo} to {hi}, got {answer.satisfaction}")
    flo, fhi = config.interest_range
    if not flo <= answer.fatigue <= fhi:
        raise AnswerError(f"fatigue must be an integer from {flo} to {fhi}, got {answer.fatigue}")
    return answer


def _parse(text: str, model: type[BaseModel]):
    body = text.strip()
    # Some local models wrap JSON in a Markdown fence despite JSON mode.
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, flags=re.DOTALL)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise AnswerError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(data, dict):
        raise AnswerError(f"expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors())
        raise AnswerError(f"does not follow the format: {problems}") from None

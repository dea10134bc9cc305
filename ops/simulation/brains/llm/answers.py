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
    item_id: int | None = None
    rating: int | None = None
    interest: int
    caught_eye: list[int] = Field(default_factory=list)
    reason: str = Field(min_length=1)

    @field_validator("caught_eye", mode="before")
    @classmethod
    def _null_is_empty(cls, value):
        return [] if value is None else value

    @field_validator("item_id", "rating", "interest", mode="before")
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
        on_page = [card.item_id for card in observation.items]
        if answer.action == CLICK_MOVIE and answer.item_id not in on_page:
            raise AnswerError(
                f"click_movie needs the item_id of a movie on this page, one of {on_page}; got {answer.item_id}"
            )
    else:
        on_page = [observation.detail.card.item_id]
        if answer.item_id is not None and answer.item_id != on_page[0]:
            raise AnswerError(f"this detail page shows movie {on_page[0]}, not movie {answer.item_id}")
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


# -- strict JSON schemas (response_format json_schema) ------------------------------------------
#
# One per request, from the answer model and the page: what the checks above refuse is, as far
# as JSON Schema can say it, left out of the schema, so an endpoint that enforces it while
# decoding cannot produce it.  Written in the subset that llama.cpp's grammar converter, vLLM,
# Ollama and OpenAI's strict mode share: every key required, additionalProperties false, an
# optional value as anyOf [..., null], small integer ranges as enums.  The checks stay: an
# endpoint may ignore the schema, and a schema cannot say "item_id only with click_movie".


def strict_object(properties: dict) -> dict:
    """An object schema with exactly `properties`, all required."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def integer_range(lo: int, hi: int) -> dict:
    return {"type": "integer", "enum": list(range(int(lo), int(hi) + 1))}


def one_of_ids(ids) -> dict:
    return {"type": "integer", "enum": [int(i) for i in ids]}


def nullable(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


def bounded_text(max_chars: int) -> dict:
    return {"type": "string", "minLength": 1, "maxLength": int(max_chars)}


def page_schema(observation: Observation, config: LLMBrainConfig) -> tuple[str, dict]:
    """(name, schema) of the answer to one page: the page's legal actions, the ids it shows
    (a detail page: its movie), interest and rating in range, a bounded reason."""
    legal = list(observation.legal_actions)
    common = {"interest": integer_range(*config.interest_range)}
    reason = {"reason": bounded_text(config.reason_max_chars)}
    if observation.page_type == "home":
        ids = [card.item_id for card in observation.items]
        if CLICK_MOVIE not in legal or not ids:
            movie = {"type": "null"}
        else:
            movie = one_of_ids(ids) if legal == [CLICK_MOVIE] else nullable(one_of_ids(ids))
        eye = (
            {"type": "array", "items": one_of_ids(ids), "maxItems": len(ids)}
            if ids
            else {"type": "array", "maxItems": 0}
        )
        props = {"action": {"type": "string", "enum": legal}, "item_id": movie, **common, "caught_eye": eye, **reason}
        return "home_page_answer", strict_object(props)
    shown = observation.detail.card.item_id
    if WATCH_AND_RATE not in legal:
        rating = {"type": "null"}
    else:
        scale = integer_range(*config.rating_range)
        rating = scale if legal == [WATCH_AND_RATE] else nullable(scale)
    props = {
        "action": {"type": "string", "enum": legal},
        "rating": rating,
        **common,
        "caught_eye": {"type": "array", "items": one_of_ids([shown]), "maxItems": 1},
        **reason,
    }
    return "detail_page_answer", strict_object(props)


def interview_schema(config: LLMBrainConfig) -> tuple[str, dict]:
    return "exit_interview", strict_object(
        {"satisfaction": integer_range(*config.satisfaction_range), "reason": bounded_text(config.reason_max_chars)}
    )


def reflection_schema(config: LLMBrainConfig) -> tuple[str, dict]:
    return "reflection", strict_object(
        {
            "preferences": bounded_text(2 * config.reason_max_chars),
            "satisfaction": integer_range(*config.satisfaction_range),
            "fatigue": integer_range(*config.interest_range),
        }
    )


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

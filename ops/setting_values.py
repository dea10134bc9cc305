"""A setting's value: the validators its type uses beyond pydantic's own (an IANA time zone)
and what a settings field accepts, in words — for the one-line refusal of a bad value
(`ops.settings.load`) and the table of docs/settings.md (`pipelines.settings_page`).
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Annotated, Literal


def time_zone(name: str) -> str:
    """An IANA time zone name the system knows (zoneinfo), else a ValueError."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}") from None
    return name


def allowed_words(info) -> str:
    """What a settings field (its pydantic FieldInfo) accepts, in words."""
    kinds = _value_types(info.annotation)
    if len(kinds) > 1:  # e.g. bool | Literal["auto"]
        words = [allowed_type(k, info) for k in kinds]
        return " or ".join(w.removeprefix("one of ") for w in words)
    return allowed_type(kinds[0], info)


def allowed_type(kind, info) -> str:
    metadata = list(info.metadata)
    if typing.get_origin(kind) is Annotated:  # a bound on one member of a union (a number > 0 or "none")
        metadata += list(kind.__metadata__)
        kind = typing.get_args(kind)[0]
    bounds = {type(m).__name__: m for m in metadata}
    words = {"Ge": "≥", "Gt": ">", "Le": "≤", "Lt": "<"}
    limits = " and ".join(f"{words[k]} {getattr(m, k.lower())}" for k, m in bounds.items() if k in words)
    if any(getattr(m, "pattern", None) == r"^[0-9a-fA-F]{64}$" for m in info.metadata):
        return "64 hexadecimal digits (a SHA-256)"
    if any(getattr(m, "func", None) is time_zone for m in metadata):
        return "an IANA time zone (UTC, Europe/Berlin, …)"
    if typing.get_origin(kind) is Literal:
        return "one of " + ", ".join(typing.get_args(kind))
    if kind is bool:
        return "true or false (1/0, yes/no, on/off)"
    if kind is int:
        return "a whole number" + (f" {limits}" if limits else "")
    if kind is float:
        return "a number" + (f" {limits}" if limits else "")
    if typing.get_origin(kind) is list:
        sep = info.json_schema_extra["sep"]
        return f"a {sep!r}-separated list"
    return "a path" if kind is Path else "text"


def _value_types(annotation) -> list:
    """The types a setting's value may take (None left out)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]

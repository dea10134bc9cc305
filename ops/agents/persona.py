"""The agent's persona (SimUSER §3.1, §3.2.1): Big Five personality, occupation, background
and hobbies, consistent with the user's history.

SimUSER has an LLM write candidate personas and keeps the one that best explains the
user's history (`ops.simulation.brains.llm.persona` does that for the LLM brain).  Offline,
`trait_persona` derives one deterministically from what the history says, so the same
user always gets the same persona and every part of it can be traced to a statistic:

- each Big Five facet on SimUSER's scale 1–3 (low, moderate, high):
  - openness ← genre diversity tier (Agent4Rec's diversity trait), one step up for a user
    who likes what critics rate lower ("offbeat"): curiosity beyond the mainstream;
  - conscientiousness ← activity tier: rating many films is a methodical habit;
  - extraversion ← conformity tier: agreeing with the crowd's ratings is a social taste;
  - agreeableness ← pickiness: generous raters are easy to please (not picky → 3);
  - neuroticism ← the spread of the user's own ratings (`ProfileConfig.persona_spread_cuts`):
    swinging between 1 and 5 stars is a volatile reaction;
- occupation: the MovieLens occupation;
- background: age group, gender, occupation and the US region of the zip code's first digit;
- hobbies: one per liked genre (`GENRE_HOBBIES`), at most `persona_hobbies`.

The profile shows it (`AgentProfile.persona`, and the LLM brain's system prompt); the
embedded brain decides from the statistics the persona is written from, not from the words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BIG_FIVE = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
LEVELS = {1: "low", 2: "moderate", 3: "high"}
_TIER_LEVEL = {"low": 1, "medium": 2, "high": 3}
_PICKINESS_AGREEABLENESS = {"not picky": 3, "moderately picky": 2, "extremely picky": 1}
# US ZIP codes' first digit: the national area (USPS).
ZIP_REGIONS = {
    "0": "New England",
    "1": "New York and Pennsylvania",
    "2": "Mid-Atlantic",
    "3": "South-East",
    "4": "Great Lakes",
    "5": "Upper Midwest",
    "6": "Central Plains",
    "7": "South Central",
    "8": "Mountain West",
    "9": "Pacific coast",
}
GENRE_HOBBIES = {
    "Action": "working out",
    "Adventure": "hiking and travel",
    "Animation": "drawing",
    "Children's": "family outings",
    "Comedy": "stand-up comedy nights",
    "Crime": "true-crime podcasts",
    "Documentary": "reading history and science",
    "Drama": "theatre",
    "Fantasy": "tabletop role-playing games",
    "Film-Noir": "detective novels",
    "Horror": "ghost stories",
    "Musical": "singing",
    "Mystery": "puzzles",
    "Romance": "poetry",
    "Sci-Fi": "astronomy",
    "Thriller": "escape rooms",
    "War": "military history",
    "Western": "horse riding",
}


@dataclass(frozen=True)
class Persona:
    openness: int
    conscientiousness: int
    extraversion: int
    agreeableness: int
    neuroticism: int
    occupation: str
    background: str
    hobbies: tuple[str, ...]

    def text(self) -> str:
        """The persona in words, as the profile and the LLM prompt show it."""
        traits = ", ".join(f"{LEVELS[getattr(self, name)]} {name}" for name in BIG_FIVE)
        hobbies = f" Hobbies: {', '.join(self.hobbies)}." if self.hobbies else ""
        return f"{self.background} Personality (Big Five): {traits}.{hobbies}"


def trait_persona(
    *,
    age_label: str,
    gender: str,
    occupation_label: str,
    zip_code: str,
    activity_tier: str,
    conformity_tier: str,
    diversity_tier: str,
    pickiness: str,
    vote_preference: str,
    rating_spread: float,
    liked_genres: Sequence[str],
    spread_cuts: tuple[float, float] = (0.9, 1.2),
    max_hobbies: int = 2,
) -> Persona:
    """The deterministic persona of one user (module docstring)."""
    openness = min(3, _TIER_LEVEL[diversity_tier] + (vote_preference == "offbeat"))
    neuroticism = 1 + (rating_spread >= spread_cuts[0]) + (rating_spread >= spread_cuts[1])
    who = {"M": "man", "F": "woman"}.get(gender, "person")
    region = ZIP_REGIONS.get((zip_code or "")[:1])
    if not (age_label or occupation_label or gender):
        # A domain without demographics (docs/data_model.md): nothing invented.
        background = "A person known only by what they rated."
    else:
        background = f"A {age_label} {who} working as {occupation_label}" + (
            f", living in the {region} of the US." if region else "."
        )
    hobbies = tuple(dict.fromkeys(GENRE_HOBBIES[g] for g in liked_genres if g in GENRE_HOBBIES))[:max_hobbies]
    return Persona(
        openness=int(openness),
        conscientiousness=_TIER_LEVEL[activity_tier],
        extraversion=_TIER_LEVEL[conformity_tier],
        agreeableness=_PICKINESS_AGREEABLENESS.get(pickiness, 2),
        neuroticism=int(neuroticism),
        occupation=occupation_label,
        background=background,
        hobbies=hobbies,
    )

"""What crosses the boundary between the sandbox and a brain (A/B Agent §2.3, design.md).

The sandbox renders each page as an `Observation`; a brain answers with a `Decision`.
Neither side knows how the other works: the sandbox validates every action against the
page's legal actions, and a brain sees only what a person on that page would see plus the
agent's own profile and memories.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    import numpy as np

PageType = Literal["home", "detail"]

# Action names of the sandbox (A/B Agent §2.3.1, Table 8).
CLICK_MOVIE = "click_movie"
NEXT_PAGE = "next_page"
PREVIOUS_PAGE = "previous_page"
EXIT = "exit"
WATCH_AND_RATE = "watch_and_rate"
BACK = "back"
HOME_ACTIONS = (CLICK_MOVIE, NEXT_PAGE, PREVIOUS_PAGE, EXIT)
DETAIL_ACTIONS = (WATCH_AND_RATE, BACK)
ACTIONS = HOME_ACTIONS + DETAIL_ACTIONS


@dataclass(frozen=True)
class ItemCard:
    """A movie as the home page shows it: small poster, title, vote average, genres."""

    movie_id: int
    position: int  # 1..20 in the arm's top-20 list
    title: str
    vote_average: float | None
    genres: tuple[str, ...]
    poster_small: str | None  # path to the image file


@dataclass(frozen=True)
class DetailCard:
    """A movie as the detail page shows it: the card plus overview, credits, large poster."""

    card: ItemCard
    overview: str | None
    vote_count: int | None
    release_date: str | None  # ISO date
    directors: tuple[str, ...]
    actors: tuple[str, ...]
    poster_large: str | None


@dataclass(frozen=True)
class Observation:
    page_type: PageType
    page_number: int  # home page number 1..4 (the detail page keeps the page it came from)
    legal_actions: tuple[str, ...]
    items: tuple[ItemCard, ...] = ()  # home page: up to 5 cards
    detail: DetailCard | None = None  # detail page: the movie opened


@dataclass(frozen=True)
class Decision:
    """A brain's answer to one observation."""

    action: str  # one of ACTIONS, legal on the page
    interest: int  # 1..5, the agent's interest in the current page (drives fatigue)
    reason: str  # short, human-readable
    movie_id: int | None = None  # click_movie: which card
    rating: int | None = None  # watch_and_rate: 1..5
    caught_eye: tuple[int, ...] = ()  # movie ids that caught the eye (short-term memory)
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    extra: dict = field(default_factory=dict)


@dataclass
class ShortTermEntry:
    """One step of the session as the agent remembers it (A/B Agent §2.4.2, short-term memory)."""

    step: int
    page_type: PageType
    page_number: int
    caught_eye: tuple[int, ...]
    interest: int
    action: str
    movie_id: int | None = None
    rating: int | None = None


@dataclass
class AgentSession:
    """What a brain may read about its agent during one session.

    `profile` is an `ops.agents.profile.AgentProfile`, `memory` the agent's long-term memory
    (`ops.agents.memory`); both are typed loosely here so the sandbox does not depend on them.
    """

    user_id: int
    profile: object
    memory: object
    fatigue_spent: float
    fatigue_budget: float
    short_term: list[ShortTermEntry] = field(default_factory=list)


class Brain(Protocol):
    """How an agent decides; pluggable (design.md "Brains")."""

    name: str

    def prepare(self, sessions: Sequence[AgentSession], shown: Mapping[int, Sequence[int]]) -> None:
        """Optional batch work before the sessions run: `shown` maps user id -> the movie ids of
        that user's top-20 list, so a brain can score every (user, item) pair at once."""

    def decide(self, session: AgentSession, observation: Observation, rng: "np.random.Generator") -> Decision:
        """The next action for the page observed; must be one of `observation.legal_actions`."""

    def exit_interview(self, session: AgentSession, rng: "np.random.Generator") -> tuple[int, str]:
        """Satisfaction 1..10 with a one-line reason, asked when the session ends."""

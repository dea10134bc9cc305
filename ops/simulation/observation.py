"""What crosses the boundary between the sandbox and a brain (A/B Agent §2.3, docs/definitions.md).

The sandbox renders each page as an `Observation`; a brain answers with a `Decision`.
Neither side knows how the other works: the sandbox validates every action against the
page's legal actions, and a brain sees only what a person on that page would see plus the
agent's own profile and memories.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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
# Not an action: the event row of the post-session interview (Agent4Rec §3.3).
EXIT_INTERVIEW = "exit_interview"

# Why a brain fell back to a safe action (`Decision.fallback_reason` = "<kind>: <detail>"):
# the model's answers stayed invalid after the re-ask, the endpoint kept failing after
# every retry, or the decision's overall deadline passed.  All three are failures of the
# agent, not behaviour: the runner ends that agent's session and counts it against the
# arm's allowed share of failed agents (an arm of invalid answers fails, naming the share
# and examples, rather than reading out as an arm of agents that clicked nothing).
FALLBACK_INVALID_ANSWER = "invalid_answer"
FALLBACK_TRANSPORT = "transport"
FALLBACK_DEADLINE = "deadline"
FALLBACK_KINDS = (FALLBACK_INVALID_ANSWER, FALLBACK_TRANSPORT, FALLBACK_DEADLINE)
AGENT_FAILURES = (FALLBACK_INVALID_ANSWER, FALLBACK_TRANSPORT, FALLBACK_DEADLINE)


def fallback_kind(reason: str | None) -> str | None:
    """The kind of a `fallback_reason` ("transport: HTTP 503 …" -> "transport")."""
    return None if reason is None else reason.split(":", 1)[0].strip()


@dataclass(frozen=True)
class ItemCard:
    """A movie as the home page shows it: small poster, title, vote average, genres."""

    item_id: int
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
    # Any domain (docs/data_model.md): the item's further attributes, (name, value) in the
    # items file's order; empty on MovieLens.
    attributes: tuple[tuple[str, str], ...] = ()


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
    item_id: int | None = None  # click_movie: which card
    rating: int | None = None  # watch_and_rate: 1..5
    caught_eye: tuple[int, ...] = ()  # movie ids that caught the eye (short-term memory)
    # click_movie: the card's slot (1 = first) on the page as the brain was shown it, when
    # it showed the cards in another order than the sandbox's (the LLM brain's shuffle);
    # None: the sandbox's order, the runner records the card's place on the page.
    slot: int | None = None
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    # Set when the brain could not decide and recorded a safe action instead:
    # "<kind>: <detail>" with a kind of FALLBACK_KINDS.
    fallback_reason: str | None = None
    extra: dict = field(default_factory=dict)

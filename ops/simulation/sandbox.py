"""The recommendation sandbox (A/B Agent §2.3, §3.1; docs/definitions.md#sandbox).

A plain state machine with no knowledge of how an agent decides:

- **home page** p (1..4) shows items 5(p−1)+1 … 5p of the arm's top-20 list, each as a
  card (small poster, title, vote average, genres).  Actions: `click_movie(item on the
  page)` → the detail page, `next_page`, `previous_page` (within 1..4), `exit`.
- **detail page** adds overview, vote count, release date, directors, cast, the large
  poster.  Actions: `watch_and_rate(1..5)` and `back`, both returning to the home page at
  the page number the agent came from.

Every action is validated: an illegal one raises `IllegalActionError` naming the action,
the page and the legal actions, never a silent no-op.  Each page is rendered as an
`ops.simulation.observation.Observation` (structured fields plus poster paths).

Home impressions (docs/definitions.md#metrics) are the distinct items shown on a home page
during the session: an item enters the set when the agent lands on its page (page 1 when
the session opens), so seeing page 2 again does not count twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

from pydantic import BaseModel, model_validator

from ops.simulation.catalogue import Catalogue
from ops.simulation.observation import (
    BACK,
    CLICK_MOVIE,
    EXIT,
    NEXT_PAGE,
    PREVIOUS_PAGE,
    WATCH_AND_RATE,
    Decision,
    DetailCard,
    ItemCard,
    Observation,
)


class SandboxConfig(BaseModel):
    # A/B Agent §3.1: "the agent views 5 items from a top-20 recommendation list".
    items_per_page: int = 5
    list_length: int = 20
    # The rating scale of watch_and_rate (A/B Agent §2.3.1, MovieLens 1–5 stars).
    rating_min: int = 1
    rating_max: int = 5
    # A movie is watched and rated at most once a session (a second watch would count one
    # conversion twice); clicking it again to reopen its detail page stays legal.
    allow_rewatch: bool = False

    @model_validator(mode="after")
    def _check(self) -> SandboxConfig:
        if self.items_per_page < 1 or self.list_length < 1:
            raise ValueError(
                f"sandbox needs items_per_page >= 1 and list_length >= 1, got {self.items_per_page}, {self.list_length}"
            )
        if self.rating_min > self.rating_max:
            raise ValueError(f"sandbox rating_min ({self.rating_min}) exceeds rating_max ({self.rating_max})")
        return self


class IllegalActionError(ValueError):
    """An action the current page does not allow; names the action, page and legal actions."""

    def __init__(
        self, action: str, page_type: str, page_number: int, legal_actions: Sequence[str], problem: str
    ) -> None:
        self.action = action
        self.page_type = page_type
        self.page_number = page_number
        self.legal_actions = tuple(legal_actions)
        self.problem = problem
        super().__init__(
            f"illegal action {action!r} on the {page_type} page (home page {page_number}): {problem}; "
            f"legal actions here: {list(self.legal_actions)}"
        )


@dataclass(frozen=True)
class StepResult:
    """What one validated action did: the movie it touched and that movie's list position."""

    action: str
    item_id: int | None = None
    position: int | None = None  # 1..20 in the top-20 list
    rating: int | None = None


class Sandbox:
    """One agent's session on one arm's top-20 list."""

    def __init__(
        self, ranked_item_ids: Sequence[int], catalogue: Catalogue, config: SandboxConfig | None = None
    ) -> None:
        self.config = config or SandboxConfig()
        ranked = [int(m) for m in ranked_item_ids]
        if not ranked:
            raise ValueError("sandbox: the recommendation list is empty")
        if len(ranked) > self.config.list_length:
            raise ValueError(
                f"sandbox: the recommendation list has {len(ranked)} items, more than list_length={self.config.list_length}"
            )
        if len(set(ranked)) != len(ranked):
            raise ValueError(f"sandbox: the recommendation list repeats movies: {ranked}")
        absent = [m for m in ranked if m not in catalogue]
        if absent:
            raise ValueError(f"sandbox: movie id(s) {absent} of the recommendation list are not in the catalogue")
        self.ranked = tuple(ranked)
        self.catalogue = catalogue
        per_page = self.config.items_per_page
        self.n_pages = (len(ranked) + per_page - 1) // per_page
        self._position = {m: i + 1 for i, m in enumerate(ranked)}
        self._pages = tuple(tuple(ranked[p * per_page : (p + 1) * per_page]) for p in range(self.n_pages))
        self.page_type = "home"
        self.page_number = 1
        self.detail_movie: int | None = None
        self.done = False
        self.exited_by: str | None = None  # "agent" or the reason the session was ended
        self.watched: dict[int, int] = {}  # movie id -> rating
        self._impressions: dict[int, None] = {}  # insertion-ordered set
        self._home_cache: dict[int, Observation] = {}
        self._detail_cache: dict[tuple[int, bool], Observation] = {}
        self._land_on_home(1)

    # -- what the agent sees -------------------------------------------------------------

    @property
    def home_impressions(self) -> tuple[int, ...]:
        """Distinct movie ids shown on a home page so far, in the order first shown."""
        return tuple(self._impressions)

    def page_items(self, page_number: int | None = None) -> tuple[int, ...]:
        """The movie ids on a home page (default: the current one)."""
        return self._pages[(page_number or self.page_number) - 1]

    def legal_actions(self) -> tuple[str, ...]:
        if self.done:
            return ()
        if self.page_type == "detail":
            if self.config.allow_rewatch or self.detail_movie not in self.watched:
                return (WATCH_AND_RATE, BACK)
            return (BACK,)
        actions = [CLICK_MOVIE]
        if self.page_number < self.n_pages:
            actions.append(NEXT_PAGE)
        if self.page_number > 1:
            actions.append(PREVIOUS_PAGE)
        actions.append(EXIT)
        return tuple(actions)

    def observe(self) -> Observation:
        """The current page as a brain reads it (after the session ended: the last page,
        with no legal actions)."""
        if self.done:
            return self._render(legal=())
        if self.page_type == "home":
            obs = self._home_cache.get(self.page_number)
            if obs is None:
                obs = self._home_cache[self.page_number] = self._render(self.legal_actions())
            return obs
        key = (self.detail_movie, self.detail_movie in self.watched)
        obs = self._detail_cache.get(key)
        if obs is None:
            obs = self._detail_cache[key] = self._render(self.legal_actions())
        return obs

    # -- actions ---------------------------------------------------------------------------

    def apply(self, decision: Decision) -> StepResult:
        """Validate and carry out a brain's decision.  Fields the action does not use
        (a movie id on `next_page`, say) are ignored; fields that contradict the page
        (a `watch_and_rate` naming another movie than the one open) are errors."""
        action = decision.action
        if action == CLICK_MOVIE:
            return self.click_movie(decision.item_id)
        if action == WATCH_AND_RATE:
            if decision.item_id is not None and self.page_type == "detail" and decision.item_id != self.detail_movie:
                self._illegal(action, f"the detail page shows movie {self.detail_movie}, not movie {decision.item_id}")
            return self.watch_and_rate(decision.rating)
        if action == NEXT_PAGE:
            return self.next_page()
        if action == PREVIOUS_PAGE:
            return self.previous_page()
        if action == BACK:
            return self.back()
        if action == EXIT:
            return self.exit()
        self._illegal(action, "not an action of the sandbox")

    def click_movie(self, item_id: int | None) -> StepResult:
        self._require(CLICK_MOVIE, "home")
        if item_id is None:
            self._illegal(CLICK_MOVIE, "no movie id given")
        on_page = self.page_items()
        if item_id not in on_page:
            self._illegal(
                CLICK_MOVIE, f"movie {item_id} is not on home page {self.page_number}, which shows {list(on_page)}"
            )
        self.page_type = "detail"
        self.detail_movie = int(item_id)
        return StepResult(CLICK_MOVIE, self.detail_movie, self._position[self.detail_movie])

    def watch_and_rate(self, rating: int | None) -> StepResult:
        self._require(WATCH_AND_RATE, "detail")
        c = self.config
        if isinstance(rating, bool) or not isinstance(rating, Integral) or not c.rating_min <= rating <= c.rating_max:
            self._illegal(
                WATCH_AND_RATE, f"rating must be an integer in {c.rating_min}..{c.rating_max}, got {rating!r}"
            )
        item_id = self.detail_movie
        if not c.allow_rewatch and item_id in self.watched:
            self._illegal(WATCH_AND_RATE, f"movie {item_id} was already watched and rated in this session")
        self.watched[item_id] = int(rating)
        self._return_home()
        return StepResult(WATCH_AND_RATE, item_id, self._position[item_id], int(rating))

    def back(self) -> StepResult:
        self._require(BACK, "detail")
        item_id = self.detail_movie
        self._return_home()
        return StepResult(BACK, item_id, self._position[item_id])

    def next_page(self) -> StepResult:
        self._require(NEXT_PAGE, "home")
        if self.page_number >= self.n_pages:
            self._illegal(NEXT_PAGE, f"home page {self.page_number} is the last of {self.n_pages}")
        self._land_on_home(self.page_number + 1)
        return StepResult(NEXT_PAGE)

    def previous_page(self) -> StepResult:
        self._require(PREVIOUS_PAGE, "home")
        if self.page_number <= 1:
            self._illegal(PREVIOUS_PAGE, "home page 1 is the first")
        self._land_on_home(self.page_number - 1)
        return StepResult(PREVIOUS_PAGE)

    def exit(self) -> StepResult:
        self._require(EXIT, "home")
        self.done = True
        self.exited_by = "agent"
        return StepResult(EXIT)

    def end(self, reason: str) -> None:
        """Close the session from outside, whatever the page (the fatigue budget is spent,
        or a step limit is reached); not an agent action, so no legality check."""
        if self.done:
            raise IllegalActionError(EXIT, self.page_type, self.page_number, (), "the session has already ended")
        self.done = True
        self.exited_by = reason

    # -- helpers ---------------------------------------------------------------------------

    def _land_on_home(self, page_number: int) -> None:
        self.page_type = "home"
        self.page_number = page_number
        self.detail_movie = None
        for item_id in self._pages[page_number - 1]:
            self._impressions[item_id] = None

    def _return_home(self) -> None:
        # The agent comes back to the page it clicked from; those items are already counted.
        self.page_type = "home"
        self.detail_movie = None

    def _require(self, action: str, page_type: str) -> None:
        if self.done:
            self._illegal(action, "the session has ended")
        if self.page_type != page_type:
            self._illegal(action, f"{action} is an action of the {page_type} page")

    def _illegal(self, action: str, problem: str):
        raise IllegalActionError(action, self.page_type, self.page_number, self.legal_actions(), problem)

    def _card(self, item_id: int) -> ItemCard:
        return self.catalogue.card(item_id, self._position[item_id])

    def _render(self, legal: tuple[str, ...]) -> Observation:
        if self.page_type == "home":
            cards = tuple(self._card(m) for m in self.page_items())
            return Observation("home", self.page_number, legal, items=cards)
        info = self.catalogue[self.detail_movie]
        detail = DetailCard(
            card=self._card(self.detail_movie),
            overview=info.overview,
            vote_count=info.vote_count,
            release_date=info.release_date,
            directors=info.directors,
            actors=info.actors,
            poster_large=info.poster_large,
            attributes=info.attributes,
        )
        return Observation("detail", self.page_number, legal, detail=detail)


def describe(observation: Observation) -> str:
    """A page as plain text, for prompts of text-only models and for people reading logs."""
    lines = []
    if observation.page_type == "home":
        lines.append(f"Home page {observation.page_number}.")
        for card in observation.items:
            vote = "n/a" if card.vote_average is None else f"{card.vote_average:.1f}/10"
            lines.append(
                f"[{card.item_id}] #{card.position} {card.title} — {', '.join(card.genres) or 'no genre'} — rating {vote}"
            )
    else:
        d = observation.detail
        card = d.card
        vote = "n/a" if card.vote_average is None else f"{card.vote_average:.1f}/10"
        votes = "" if d.vote_count is None else f" from {d.vote_count} votes"
        lines.append(f"Detail page of [{card.item_id}] {card.title} (from home page {observation.page_number}).")
        lines.append(
            f"Genres: {', '.join(card.genres) or 'n/a'}. Rating {vote}{votes}. Released {d.release_date or 'n/a'}."
        )
        lines.append(f"Directors: {', '.join(d.directors) or 'n/a'}. Cast: {', '.join(d.actors) or 'n/a'}.")
        lines.append(f"Overview: {d.overview or 'n/a'}")
        if d.attributes:
            lines.append("; ".join(f"{name}: {value}" for name, value in d.attributes) + ".")
    lines.append(f"Legal actions: {', '.join(observation.legal_actions) or 'none (the session has ended)'}.")
    return "\n".join(lines)

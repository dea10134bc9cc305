"""The LLM brain's prompts (A/B Agent §2.4, Appendix A; Agent4Rec §2.1.3, §3.5).

One prompt per page the agent sees, built from the same parts in the same order as the
A/B Agent workflow (§2.4.3: "retrieving relevant memories, analyzing the current page, and
contextually determining its next action"):

1. the system message: who the agent is (profile, §2.4.1), how the site and the fatigue
   system work (§2.3, §2.4.4) and the JSON answer it must give;
2. the user message: fatigue spent / budget, memories retrieved from long-term memory
   (§2.4.2), the session so far (short-term memory), then the page itself with its posters
   (images for vision models, a palette caption for text-only models).

The exit interview asks Agent4Rec's question (§3.5, Figure 7): "Do you feel satisfied with
the recommender system? Rate it from 1-10 and give an explanation."

Every function returns plain strings or OpenAI chat "content parts"; nothing here talks
to the network, so prompts can be read and tested on their own.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Mapping, Sequence

from PIL import Image

from ops.agents.embeddings import load_poster, poster_look
from ops.agents.session import AgentSession
from ops.simulation.observation import (
    BACK,
    CLICK_MOVIE,
    EXIT,
    NEXT_PAGE,
    PREVIOUS_PAGE,
    WATCH_AND_RATE,
    Observation,
)

MOVIE = "movie"


def plural(noun: str) -> str:
    return f"{noun}s"


def action_meanings(noun: str = MOVIE) -> dict[str, str]:
    """What each action means on a domain whose items are `noun`s (the action names stay:
    they are the sandbox's protocol)."""
    if noun == MOVIE:
        return ACTION_MEANINGS
    return {
        **ACTION_MEANINGS,
        CLICK_MOVIE: f"open a {noun}'s detail page (give its item_id)",
        WATCH_AND_RATE: f"choose this {noun} (read, play or use it, as one does with a {noun}) and rate it (give a rating)",
        BACK: "return to the home page without choosing it",
    }


# What each action means, in the words the agent reads (A/B Agent §2.3.1).
ACTION_MEANINGS = {
    CLICK_MOVIE: "open a movie's detail page (give its item_id)",
    NEXT_PAGE: "see the next five recommendations",
    PREVIOUS_PAGE: "go back to the previous five recommendations",
    EXIT: "leave the site; the session ends",
    WATCH_AND_RATE: "watch this movie and rate it (give a rating)",
    BACK: "return to the home page without watching",
}

SYSTEM_TEMPLATE = """You are role-playing one real person browsing a movie recommendation website, like Netflix or IMDb. Act as this person would, following their tastes, habits and mood, not as an assistant.

Who you are:
{profile}

How the website works:
- The home page shows five recommended movies at a time (poster, title, vote average, genres); next_page is offered while more recommendations remain. On the home page you can: {home_actions}.
- A movie's detail page adds the overview, vote count, release date, directors, cast and a larger poster. There you can: {detail_actions}.
- Fatigue: every action tires you. Base costs: {costs}. An action costs less when the page interests you (interest 5 multiplies the cost by {phi_min:g}) and more when it bores you (interest 1 multiplies it by {phi_max:g}). When your fatigue budget is spent you leave. Like a real person, you do not explore forever: you leave when you are tired or bored.

Answer with ONE JSON object and nothing else."""

# Any other domain (docs/data_model.md): the same site, told in the domain's noun, showing
# what its items have (title, categories, an image only where there is one, a description,
# further attributes).
SYSTEM_TEMPLATE_ANY = """You are role-playing one real person browsing a website that recommends {nouns}. Act as this person would, following their tastes, habits and mood, not as an assistant.

Who you are:
{profile}

How the website works:
- The home page shows five recommended {nouns} at a time (title, categories, and an image where the {noun} has one); next_page is offered while more recommendations remain. On the home page you can: {home_actions}.
- A {noun}'s detail page adds its description, release date and further details, and a larger image where there is one. There you can: {detail_actions}.
- Fatigue: every action tires you. Base costs: {costs}. An action costs less when the page interests you (interest 5 multiplies the cost by {phi_min:g}) and more when it bores you (interest 1 multiplies it by {phi_max:g}). When your fatigue budget is spent you leave. Like a real person, you do not explore forever: you leave when you are tired or bored.

Answer with ONE JSON object and nothing else."""

HOME_ANSWER = """Reply with a JSON object with exactly these keys:
{{"action": one of {legal}, "item_id": the id in [brackets] of the movie to open if the action is "click_movie", else null, "interest": your interest in this page from 1 (none) to 5 (very high), "caught_eye": a list of the ids of the movies on this page that caught your eye (may be empty), "reason": one short first-person sentence explaining the action}}"""

DETAIL_ANSWER = """Reply with a JSON object with exactly these keys:
{{"action": one of {legal}, "rating": your rating from {rating_min} to {rating_max} if the action is "watch_and_rate", else null, "interest": your interest in this movie from 1 (none) to 5 (very high), "caught_eye": [{item_id}] if the movie caught your eye, else [], "reason": one short first-person sentence explaining the action (and the rating)}}"""

REASK_TEMPLATE = """Your answer cannot be used: {error}
Answer again with ONE JSON object that follows the format asked for, and only actions legal on this page: {legal}."""

INTERVIEW_QUESTION = (
    "Do you feel satisfied with the recommender system? Rate it from {lo}-{hi} and give an explanation."
)

INTERVIEW_ANSWER = """Reply with a JSON object with exactly these keys:
{{"satisfaction": an integer from {lo} to {hi}, "reason": a short first-person explanation}}"""


REFLECTION_QUESTION = """Pause and reflect, as this person, on your recent experiences on the website: what do the movies you watched, how you rated them and how you felt tell you about your taste right now; how satisfied are you with the recommendations so far; how tired are you?"""

REFLECTION_ANSWER = """Reply with a JSON object with exactly these keys:
{{"preferences": one or two first-person sentences on what you want to watch now and what you want to avoid, "satisfaction": your satisfaction with the recommendations so far, an integer from {lo} to {hi}, "fatigue": how tired you are, an integer from {flo} (fresh) to {fhi} (exhausted)}}"""


def _in_domain(text: str, noun: str) -> str:
    """A movie sentence told for another domain: movies -> the plural, watched -> chosen."""
    if noun == MOVIE:
        return text
    for old, new in (
        ("Movies", plural(noun).capitalize()),
        ("movies", plural(noun)),
        ("this movie", f"this {noun}"),
        ("the movie to open", f"the {noun} to open"),
        ("the movie caught", f"the {noun} caught"),
        ("You have watched nothing yet", "You have chosen nothing yet"),
        ("You watched nothing", "You chose nothing"),
        ("you watched", "you chose"),
        ("you want to watch now", "you want now"),
        ("remember watching", "remember choosing"),
        ("your viewing history", "your history"),
    ):
        text = text.replace(old, new)
    return text


def reflection_text(
    session_described: str,
    watched: Sequence[str],
    satisfaction_range: tuple[int, int],
    fatigue_range: tuple[int, int],
    noun: str = MOVIE,
) -> str:
    """The reflection prompt (Agent4Rec §2.1.2): the session so far, then the question."""
    seen = "\n".join(watched) if watched else _in_domain("You have watched nothing yet.", noun)
    return (
        "This session so far:\n"
        + (session_described or "nothing yet.")
        + _in_domain("\nMovies you watched and your ratings:\n", noun)
        + seen
        + "\n\n"
        + _in_domain(REFLECTION_QUESTION, noun)
        + "\n"
        + _in_domain(
            REFLECTION_ANSWER.format(
                lo=satisfaction_range[0], hi=satisfaction_range[1], flo=fatigue_range[0], fhi=fatigue_range[1]
            ),
            noun,
        )
    )


def reflection_state_text(preferences: str, satisfaction: int, fatigue: int) -> str:
    """What the page prompts after a reflection carry: the agent's own summary."""
    return f"Your reflection on this session so far: {preferences} (satisfaction {satisfaction}, tiredness {fatigue})."


def system_prompt(
    profile: object, base_costs: Mapping[str, float], phi_min: float, phi_max: float, noun: str = MOVIE
) -> str:
    costs = ", ".join(f"{a} {c:g}" for a, c in base_costs.items())
    meanings = action_meanings(noun)
    template = SYSTEM_TEMPLATE if noun == MOVIE else SYSTEM_TEMPLATE_ANY
    return template.format(
        profile=profile_text(profile, noun),
        home_actions="; ".join(f"{a} ({meanings[a]})" for a in (CLICK_MOVIE, NEXT_PAGE, PREVIOUS_PAGE, EXIT)),
        detail_actions="; ".join(f"{a} ({meanings[a]})" for a in (WATCH_AND_RATE, BACK)),
        costs=costs,
        phi_min=phi_min,
        phi_max=phi_max,
        noun=noun,
        nouns=plural(noun),
    )


def profile_text(profile: object, noun: str = MOVIE) -> str:
    """The agent's profile (A/B Agent §2.4.1): demographics where the users have them,
    Agent4Rec social traits, SimUSER pickiness, the preference summary and the per-page
    preferences."""
    get = lambda name, default=None: getattr(profile, name, default)  # noqa: E731 - loosely typed on purpose
    if get("age_label") is None:
        # Not an ops.agents.profile.AgentProfile: say what there is rather than invent fields.
        return str(get("summary") or profile)
    gender = {"M": "man", "F": "woman"}.get(get("gender"), "person")
    kinds = "Genre" if noun == MOVIE else "Category"
    # No demographics (a domain without them): traits from behaviour only, nothing invented.
    who = (
        [f"- A {get('age_label')} {gender}, {get('occupation_label')}, living in zip code {get('zip')}."]
        if get("gender") is not None or get("age") is not None or get("occupation") is not None
        else []
    )
    lines = [
        *who,
        f"- Activity: {get('activity_tier')} (you have rated {get('activity')} {plural(noun)}). "
        f"Conformity with the crowd's ratings: {get('conformity_tier')}. {kinds} diversity: {get('diversity_tier')} "
        f"({get('diversity')} {'genres' if noun == MOVIE else 'categories'}).",
        f"- Pickiness: {get('pickiness')} (your average rating is {get('mean_rating'):.2f} out of 5).",
        f"- {get('home_page_preferences')}",
        f"- {get('detail_page_preferences')}",
    ]
    if get("persona"):
        lines.append(f"- Persona: {get('persona')}")
    return "\n".join(lines)


def fatigue_text(session: AgentSession) -> str:
    left = max(session.fatigue_budget - session.fatigue_spent, 0.0)
    return (
        f"Your fatigue: {session.fatigue_spent:.1f} spent of a budget of {session.fatigue_budget:.1f} "
        f"({left:.1f} left)."
    )


def memories_text(lines: Sequence[str], noun: str = MOVIE) -> str:
    if not lines:
        return _in_domain("Movies you remember watching that resemble this page: none found.", noun)
    return _in_domain(
        "Movies you remember watching that resemble this page (from your viewing history):\n", noun
    ) + "\n".join(lines)


def short_term_text(described: str) -> str:
    return "This session so far:\n" + described if described else "This session so far: you have just arrived."


def page_parts(
    observation: Observation,
    poster: Callable[[str | None, str], list[dict]],
    noun: str = MOVIE,
    show_rank: bool = True,
    taken: Mapping[int, int] | None = None,
) -> list[dict]:
    """The page as content parts, the cards in the observation's order.  `poster(path,
    size)` returns the parts for one poster: an image part for vision models, a caption text
    part for text-only models.  `show_rank`: each card says its rank in the arm's list.
    `taken`: the shown items the agent already took (item id -> its rating), each card of
    one saying so."""
    parts: list[dict] = []
    taken = taken or {}
    if noun != MOVIE:
        return _page_parts_any(observation, poster, noun, show_rank, taken)
    if observation.page_type == "home":
        parts.append(_text(f"You are on home page {observation.page_number}. It shows:"))
        for card in observation.items:
            vote = "n/a" if card.vote_average is None else f"{card.vote_average:.1f}/10"
            genres = ", ".join(card.genres) or "n/a"
            parts.append(
                _text(
                    f"[{card.item_id}] {card.title}{_rank(card, show_rank)} | genres: {genres} | vote average: {vote}"
                    + _taken_note(card, taken, noun)
                )
            )
            parts.extend(poster(card.poster_small, "small"))
    else:
        d = observation.detail
        card = d.card
        vote = "n/a" if card.vote_average is None else f"{card.vote_average:.1f}/10"
        votes = "n/a" if d.vote_count is None else str(d.vote_count)
        parts.append(
            _text(
                f"You are on the detail page of [{card.item_id}] {card.title} (opened from home page {observation.page_number}).\n"
                f"Genres: {', '.join(card.genres) or 'n/a'}\n"
                f"Vote average: {vote} from {votes} votes\n"
                f"Release date: {d.release_date or 'n/a'}\n"
                f"Directors: {', '.join(d.directors) or 'n/a'}\n"
                f"Cast: {', '.join(d.actors) or 'n/a'}\n"
                f"Overview: {d.overview or 'n/a'}"
            )
        )
        parts.extend(poster(d.poster_large or card.poster_small, "large"))
    parts.append(_text(f"Legal actions: {', '.join(observation.legal_actions)}."))
    return parts


def _rank(card, show: bool) -> str:
    return f" (recommendation #{card.position})" if show else ""


def _taken_note(card, taken: Mapping[int, int], noun: str) -> str:
    rating = taken.get(int(card.item_id))
    if rating is None:
        return ""
    return _in_domain(f" | you watched it already and rated it {rating}", noun)


def _page_parts_any(
    observation: Observation,
    image: Callable[[str | None, str], list[dict]],
    noun: str,
    show_rank: bool = True,
    taken: Mapping[int, int] | None = None,
) -> list[dict]:
    """A page of any domain: the title, categories, an image only where the item has one
    (never a stand-in), and on the detail page its description, date and attributes."""
    parts: list[dict] = []
    if observation.page_type == "home":
        parts.append(_text(f"You are on home page {observation.page_number}. It shows:"))
        for card in observation.items:
            vote = "" if card.vote_average is None else f" | rating: {card.vote_average:.1f}/10"
            parts.append(
                _text(
                    f"[{card.item_id}] {card.title}{_rank(card, show_rank)} | categories: {', '.join(card.genres) or 'n/a'}{vote}"
                    + _taken_note(card, taken or {}, noun)
                )
            )
            if card.poster_small:
                parts.extend(image(card.poster_small, "small"))
    else:
        d = observation.detail
        card = d.card
        lines = [
            f"You are on the detail page of the {noun} [{card.item_id}] {card.title} (opened from home page {observation.page_number}).",
            f"Categories: {', '.join(card.genres) or 'n/a'}",
        ]
        if d.release_date:
            lines.append(f"Release date: {d.release_date}")
        lines += [f"{name.capitalize()}: {value}" for name, value in d.attributes]
        lines.append(f"Description: {d.overview or 'n/a'}")
        parts.append(_text("\n".join(lines)))
        if d.poster_large or card.poster_small:
            parts.extend(image(d.poster_large or card.poster_small, "large"))
    parts.append(_text(f"Legal actions: {', '.join(observation.legal_actions)}."))
    return parts


def answer_instructions(observation: Observation, rating_range: tuple[int, int], noun: str = MOVIE) -> str:
    legal = ", ".join(f'"{a}"' for a in observation.legal_actions)
    if observation.page_type == "home":
        return _in_domain(HOME_ANSWER.format(legal=legal), noun)
    return _in_domain(
        DETAIL_ANSWER.format(
            legal=legal,
            rating_min=rating_range[0],
            rating_max=rating_range[1],
            item_id=observation.detail.card.item_id,
        ),
        noun,
    )


def reask_text(error: str, observation: Observation | None) -> str:
    legal = ", ".join(observation.legal_actions) if observation is not None else "n/a"
    return REASK_TEMPLATE.format(error=error, legal=legal)


def interview_text(
    session_described: str, watched: Sequence[str], satisfaction_range: tuple[int, int], noun: str = MOVIE
) -> str:
    lo, hi = satisfaction_range
    seen = "\n".join(watched) if watched else _in_domain("You watched nothing.", noun)
    return (
        "You have left the website. This was your session:\n"
        + (session_described or "You left at once.")
        + _in_domain("\nMovies you watched and your ratings:\n", noun)
        + seen
        + "\n\nQuestion: "
        + INTERVIEW_QUESTION.format(lo=lo, hi=hi)
        + "\n"
        + INTERVIEW_ANSWER.format(lo=lo, hi=hi)
    )


def poster_data_url(path: str, max_side: int, quality: int = 85) -> str:
    """The poster file as a base64 JPEG data URL, longest side at most `max_side` pixels."""
    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
            img.thumbnail((max_side, max_side))
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=quality)
    except Exception as exc:  # pillow raises many types for unreadable files
        raise ValueError(f"poster {path} cannot be read: {exc}") from exc
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


_LOOK_WORDS = {
    "warm": "warm colours (reds, oranges, yellows)",
    "cool": "cool colours (greens, blues, purples)",
    "dark": "mostly dark",
    "bright": "bright and pale",
}


def poster_caption(path: str, word: str = "Poster") -> str:
    """What a text-only model is told about a poster (or another domain's image, `word`):
    its palette, measured from pixels."""
    look = poster_look(load_poster(path))
    return f"{word} (palette measured from the image's colours; the picture itself is not described): {_LOOK_WORDS.get(look, look)}."


def merge_text_parts(parts: list[dict]) -> str | list[dict]:
    """Adjacent text parts joined; a plain string when there is no image (text-only
    endpoints may not accept content lists)."""
    merged: list[dict] = []
    for part in parts:
        if part["type"] == "text" and merged and merged[-1]["type"] == "text":
            merged[-1] = {"type": "text", "text": merged[-1]["text"] + "\n" + part["text"]}
        else:
            merged.append(dict(part))
    if all(p["type"] == "text" for p in merged):
        return "\n".join(p["text"] for p in merged)
    return merged


def _text(text: str) -> dict:
    return {"type": "text", "text": text}

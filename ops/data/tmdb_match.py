"""Matching MovieLens movies to TMDB ids (A/B Agent §2.2: MM-ML-1M extends ML-1M with TMDB).

MovieLens titles carry the year and move a leading article to the end, with alternate
(often original-language) titles in parentheses:

    "American President, The (1995)"
    "City of Lost Children, The (Cité des enfants perdus, La) (1995)"

`parse_movielens_title` turns such a title into the titles TMDB knows, and
`choose_candidate` picks the best of a TMDB search result page by title similarity, year
and popularity.  The search order (year, year ± 1, no year) lives in `search_plan`; the
crawler in `ops.data.tmdb` runs it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from pydantic import BaseModel, Field


class MatchConfig(BaseModel):
    """How a search result is judged.  Defaults tuned on the ML-1M title conventions."""

    # A candidate below this title similarity (0..1, on normalised titles) is not a match.
    min_title_similarity: float = Field(0.75, ge=0.0, le=1.0)
    # Years to try around the MovieLens year, after the exact year: release years in
    # MovieLens and TMDB differ by one for festival vs. theatrical releases (data README).
    year_tolerance: int = Field(1, ge=0)
    # Try once more without any year before giving up.
    search_without_year: bool = True
    # Tie-breakers added to the similarity: popularity (log-scaled, capped) and the year gap.
    popularity_weight: float = Field(0.02, ge=0.0)
    year_gap_penalty: float = Field(0.05, ge=0.0)
    # Articles MovieLens moves to the end of a title ("American President, The").
    articles: tuple[str, ...] = (
        "The",
        "A",
        "An",
        "La",
        "Le",
        "Les",
        "L'",
        "Il",
        "Lo",
        "Gli",
        "I",
        "Der",
        "Die",
        "Das",
        "Den",
        "Det",
        "De",
        "El",
        "Los",
        "Las",
        "Un",
        "Une",
        "Una",
        "Uno",
        "O",
        "Os",
        "As",
    )


@dataclass(frozen=True)
class ParsedTitle:
    """A MovieLens title split into the main title, alternate titles and the year."""

    title: str  # article restored: "The American President"
    alternates: tuple[str, ...] = ()
    year: int | None = None

    @property
    def queries(self) -> tuple[str, ...]:
        """Titles to search for, main title first, without duplicates."""
        seen: dict[str, None] = {}
        for t in (self.title, *self.alternates):
            if t and t not in seen:
                seen[t] = None
        return tuple(seen)


@dataclass(frozen=True)
class SearchStep:
    query: str
    year: int | None


@dataclass
class MatchDecision:
    tmdb_id: int | None
    score: float = 0.0
    similarity: float = 0.0
    candidate_title: str | None = None
    candidate_year: int | None = None
    notes: list[str] = field(default_factory=list)


_YEAR_AT_END = re.compile(r"\s*\((\d{4})(?:[-–]\d{0,4})?\)\s*$")
_AKA = re.compile(r"^(?:a\.?k\.?a\.?|aka)\s+", re.IGNORECASE)


def parse_movielens_title(raw: str, config: MatchConfig | None = None) -> ParsedTitle:
    """Split "Main, The (Alt, La) (1995)" into ("The Main", ("La Alt",), 1995)."""
    config = config or MatchConfig()
    text = raw.strip()
    year = None
    m = _YEAR_AT_END.search(text)
    if m:
        year = int(m.group(1))
        text = text[: m.start()].rstrip()
    main, alternates = _split_parentheses(text)
    title = restore_article(main, config.articles)
    alts = tuple(restore_article(_AKA.sub("", a).strip(), config.articles) for a in alternates)
    return ParsedTitle(title=title, alternates=tuple(a for a in alts if a), year=year)


def search_plan(parsed: ParsedTitle, config: MatchConfig) -> list[SearchStep]:
    """Searches in the order the issue fixes: title + year, year ± tolerance, no year.

    Each step is tried for the main title and then the alternates before widening the year.
    """
    years: list[int | None] = []
    if parsed.year is not None:
        years.append(parsed.year)
        for d in range(1, config.year_tolerance + 1):
            years.extend([parsed.year - d, parsed.year + d])
    if config.search_without_year or parsed.year is None:
        years.append(None)
    return [SearchStep(q, y) for y in years for q in parsed.queries]


def choose_candidate(parsed: ParsedTitle, results: list[dict], config: MatchConfig) -> MatchDecision:
    """The best TMDB search result for `parsed`, or a decision with tmdb_id None and a note.

    Similarity is the best SequenceMatcher ratio between any of our titles and the
    candidate's `title` / `original_title` after normalisation; popularity and the year gap
    only break near-ties.
    """
    import math

    best: MatchDecision | None = None
    for r in results:
        if not isinstance(r, dict) or not isinstance(r.get("id"), int):
            continue
        names = [n for n in (r.get("title"), r.get("original_title")) if isinstance(n, str) and n]
        if not names:
            continue
        sim = max(title_similarity(q, n) for q in parsed.queries for n in names)
        cand_year = _year_of(r.get("release_date"))
        gap = abs(cand_year - parsed.year) if (cand_year and parsed.year) else 0
        pop = r.get("popularity") if isinstance(r.get("popularity"), (int, float)) else 0.0
        score = (
            sim + config.popularity_weight * min(math.log1p(max(pop, 0.0)), 5.0) - config.year_gap_penalty * min(gap, 5)
        )
        if best is None or score > best.score:
            best = MatchDecision(r["id"], score, sim, names[0], cand_year)
    if best is None:
        return MatchDecision(None, notes=["no search results"])
    if best.similarity < config.min_title_similarity:
        return MatchDecision(
            None,
            best.score,
            best.similarity,
            best.candidate_title,
            best.candidate_year,
            [
                f"best candidate {best.candidate_title!r} ({best.candidate_year}) has title similarity "
                f"{best.similarity:.2f} < {config.min_title_similarity}"
            ],
        )
    return best


def title_similarity(a: str, b: str, subtitle_discount: float = 0.9) -> float:
    """SequenceMatcher ratio of the normalised titles; a title that matches only once the
    subtitles are dropped ("Gendernauts" vs "Gendernauts: A Journey Through ...") scores
    its main-title ratio times `subtitle_discount`, so that the exact title wins a tie."""
    full = SequenceMatcher(None, normalise_title(a), normalise_title(b)).ratio()
    main_a, main_b = normalise_title(_main_title(a)), normalise_title(_main_title(b))
    if not main_a or not main_b:
        return full
    return max(full, subtitle_discount * SequenceMatcher(None, main_a, main_b).ratio())


def normalise_title(title: str) -> str:
    """Lower case, accents and punctuation removed, '&' read as 'and', spaces collapsed."""
    text = unicodedata.normalize("NFKD", title)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower().replace("&", " and ")
    text = re.sub(r"[^\w\s]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def restore_article(title: str, articles: tuple[str, ...]) -> str:
    """ "American President, The" -> "The American President"; "Appartement, L'" -> "L'Appartement"."""
    for art in articles:
        suffix = ", " + art
        if title.endswith(suffix):
            head = title[: -len(suffix)].strip()
            return f"{art}{head}" if art.endswith("'") else f"{art} {head}"
    return title


def _main_title(title: str) -> str:
    return re.split(r":|\s[-–—]\s", title, maxsplit=1)[0]


def _split_parentheses(text: str) -> tuple[str, list[str]]:
    """Peel trailing "(...)" groups off a title; they are alternate titles in MovieLens."""
    alternates: list[str] = []
    while text.endswith(")"):
        depth, i = 0, len(text) - 1
        while i >= 0:
            if text[i] == ")":
                depth += 1
            elif text[i] == "(":
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        if i <= 0:  # the whole title is parenthesised: keep it as the title
            break
        alternates.insert(0, text[i + 1 : -1].strip())
        text = text[:i].rstrip()
    return text, alternates


def _year_of(date: object) -> int | None:
    if isinstance(date, str) and len(date) >= 4 and date[:4].isdigit():
        return int(date[:4])
    return None

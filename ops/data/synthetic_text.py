"""The synthetic catalogue's words (`ops.data.synthetic`): MovieLens-looking titles and
TMDB-like overviews built from the genre vocabulary (`ops.data.synthetic_vocabulary`)."""

from __future__ import annotations

import numpy as np

from ops.data import synthetic_vocabulary as vocab


def titles_of(article_share: float, rng: np.random.Generator, genres: list[list[str]], years: np.ndarray) -> list[str]:
    """MovieLens-looking titles from genre words; articles go to the end ("Harbor, The")."""
    seen: set[tuple[str, int]] = set()
    titles = []
    for gs, year in zip(genres, years, strict=True):
        for attempt in range(50):
            title = _one_title(article_share, rng, gs)
            if attempt >= 40:  # a crowded word space: fall back on a sequel mark
                title = f"{title} {vocab.SEQUEL_MARKS[attempt % len(vocab.SEQUEL_MARKS)]}"
            if (title, int(year)) not in seen:
                break
        number = 2
        while (title, int(year)) in seen:  # still taken: number it, as MovieLens does remakes
            title, number = f"{title.rsplit(' #', 1)[0]} #{number}", number + 1
        seen.add((title, int(year)))
        titles.append(title)
    return titles


def _one_title(article_share: float, rng: np.random.Generator, genres: list[str]) -> str:
    def word(kind: str) -> str:
        source = genres[0] if rng.random() < 0.7 or len(genres) == 1 else genres[int(rng.integers(1, len(genres)))]
        if rng.random() < 0.25:
            return str(rng.choice(vocab.COMMON_ADJECTIVES if kind == "adjectives" else vocab.COMMON_NOUNS))
        return str(rng.choice(vocab.GENRE_WORDS[source][kind]))

    pattern = int(rng.integers(7))
    if pattern == 0:
        core = f"{word('adjectives')} {word('nouns')}"
    elif pattern == 1:
        core = word("nouns")
    elif pattern == 2:
        core = f"{word('nouns')} of the {word('nouns')}"
    elif pattern == 3:
        core = f"{word('nouns')} in {rng.choice(vocab.PLACES)}"
    elif pattern == 4:
        core = f"{word('nouns')} and {word('nouns')}"
    elif pattern == 5:
        core = f"{rng.choice(vocab.FIRST_NAMES)}'s {word('nouns')}"
    else:
        core = f"{word('adjectives')} {word('nouns')} {rng.choice(vocab.SEQUEL_MARKS)}"
    if pattern != 5 and rng.random() < article_share:
        article = "An" if core[0] in "AEIOU" and rng.random() < 0.5 else str(rng.choice(["The", "A"]))
        core = f"{core}, {article}"
    return core


def overview(rng: np.random.Generator, genres: list[str]) -> str:
    """Two or three sentences built from the main genre's hook and, if any, the second's."""
    hook = str(rng.choice(vocab.GENRE_WORDS[genres[0]]["hooks"]))
    who = str(rng.choice(vocab.PROTAGONISTS))
    sentences = [f"{rng.choice(vocab.SETTINGS)}, {who[0].lower()}{who[1:]} {hook}."]
    if len(genres) > 1:
        other = str(rng.choice(vocab.PROTAGONISTS))
        sentences.append(
            f"Meanwhile, {other[0].lower()}{other[1:]} {rng.choice(vocab.GENRE_WORDS[genres[1]]['hooks'])}."
        )
    sentences.append(str(rng.choice(vocab.CLOSERS)))
    return " ".join(sentences)

"""Write the made-up bookshop example (docs/data_model.md): 60 invented books, 40 readers,
their ratings over 2024, six generated cover images, and a random bucket: half the readers
shown six books drawn uniformly at random from those they had not rated, and their ratings
(`random_exposure.csv`, the judge of the verdict, docs/data_model.md#the-random-exposure-file).

Every title, author and rating is invented by this seeded script (no licensed data): each
reader is given two favourite categories, and rates books of those higher, so that the
arms have a taste to find; the random bucket's ratings come from the same model.  The
bucket is drawn after the log from the same seeded stream, so the log is what it was
without it.  Re-running it rewrites the same files byte for byte.

    .venv/bin/python examples/bookshop/make_bookshop.py
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATEGORIES = ("Mystery", "Fantasy", "History", "Cooking", "Science", "Romance")
ADJECTIVES = ("Salt", "Quiet", "Copper", "Hidden", "Northern", "Paper", "Winter", "Glass", "Last", "Amber")
NOUNS = ("Lantern", "Harbour", "Garden", "Atlas", "Kitchen", "Orchard", "Engine", "Letter", "Crown", "Tide")
SURNAMES = ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Alvarez", "Novak", "Haddad", "Byrne", "Kowalski", "Reyes")
FIRST = ("Ada", "Bruno", "Chidi", "Dana", "Elif", "Farah", "Goran", "Hana", "Ivo", "Juno")
BLURB = {
    "Mystery": "a detective unpicks a small town's secret",
    "Fantasy": "an apprentice mapmaker finds a door between kingdoms",
    "History": "the story of a port city across three centuries",
    "Cooking": "seasonal recipes from a family kitchen",
    "Science": "how tides, stars and clocks taught us to measure time",
    "Romance": "two rival bakers share one market stall",
}
N_BOOKS, N_READERS, PER_READER = 60, 40, 14
BUCKET_READERS, BUCKET_BOOKS = 20, 6  # the random bucket: this many readers, this many books each
COVERS = 6  # the first books carry a generated cover; the rest have none


def main() -> None:
    rng = random.Random(7)
    books = []
    for i in range(1, N_BOOKS + 1):
        main_category = CATEGORIES[(i - 1) % len(CATEGORIES)]
        second = rng.choice([c for c in CATEGORIES if c != main_category]) if rng.random() < 0.3 else None
        title = f"The {ADJECTIVES[rng.randrange(10)]} {NOUNS[rng.randrange(10)]}" + (
            f" {['II', 'III'][i % 2]}" if i > 50 else ""
        )
        books.append(
            {
                "item_id": i,
                "title": title,
                "categories": "|".join([main_category] + ([second] if second else [])),
                "description": f"{title}: {BLURB[main_category]}.",
                "image": f"cover_{i}.png" if i <= COVERS else "",
                "release_date": dt.date(
                    2000 + rng.randrange(24), 1 + rng.randrange(12), 1 + rng.randrange(28)
                ).isoformat(),
                "author": f"{FIRST[rng.randrange(10)]} {SURNAMES[rng.randrange(10)]}",
                "pages": 120 + rng.randrange(500),
                "price_eur": f"{6 + rng.randrange(20)}.99",
            }
        )
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    rows = []
    tastes: dict[int, list[str]] = {}
    for reader in range(1, N_READERS + 1):
        favourites = tastes[reader] = rng.sample(CATEGORIES, 2)
        liked = [b for b in books if b["categories"].split("|")[0] in favourites]
        others = [b for b in books if b not in liked]
        chosen = rng.sample(liked, PER_READER // 2 + 2) + rng.sample(others, PER_READER // 2 - 2)
        for book in chosen:
            rating = _rating(rng, book, favourites)
            moment = start + dt.timedelta(minutes=rng.randrange(365 * 24 * 60))
            rows.append((reader, book["item_id"], rating, moment.strftime("%Y-%m-%dT%H:%M:%SZ")))
    rows.sort(key=lambda r: (r[3], r[0], r[1]))
    bucket = _random_bucket(rng, books, tastes, {(r[0], r[1]) for r in rows})
    with (HERE / "items.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(books[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(books)
    with (HERE / "interactions.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(("user_id", "item_id", "rating", "timestamp"))
        writer.writerows(rows)
    with (HERE / "random_exposure.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(("user_id", "item_id", "rating"))
        writer.writerows(bucket)
    (HERE / "dataset.json").write_text(
        json.dumps({"name": "bookshop", "item_noun": "book", "feedback": "explicit"}, indent=2) + "\n", encoding="utf-8"
    )
    _covers(books[:COVERS])


def _rating(rng: random.Random, book: dict, favourites: list[str]) -> int:
    """A reader's rating of a book: high for a book of a favourite category, low otherwise."""
    fits = bool(set(book["categories"].split("|")) & set(favourites))
    return min(5, max(1, round(rng.gauss(4.3 if fits else 2.4, 0.7))))


def _random_bucket(
    rng: random.Random, books: list[dict], tastes: dict[int, list[str]], rated: set[tuple[int, int]]
) -> list[tuple[int, int, int]]:
    """(reader, book, rating) for BUCKET_READERS readers drawn at random, each shown
    BUCKET_BOOKS books drawn uniformly from those they had not rated, rated by their tastes."""
    rows = []
    for reader in sorted(rng.sample(sorted(tastes), BUCKET_READERS)):
        unrated = [b for b in books if (reader, b["item_id"]) not in rated]
        for book in rng.sample(unrated, BUCKET_BOOKS):
            rows.append((reader, book["item_id"], _rating(rng, book, tastes[reader])))
    return rows


def _covers(books: list[dict]) -> None:
    """Plain generated covers: a colour field per category and the title's initials."""
    from PIL import Image, ImageDraw

    colours = dict(zip(CATEGORIES, ("#2f3e5c", "#5c2f58", "#7a5a2b", "#b5542c", "#2b6e6a", "#b03a5b"), strict=True))
    (HERE / "images").mkdir(exist_ok=True)
    for book in books:
        image = Image.new("RGB", (200, 300), colours[book["categories"].split("|")[0]])
        draw = ImageDraw.Draw(image)
        draw.rectangle((16, 16, 184, 284), outline="#f2e9d8", width=3)
        draw.text((30, 130), book["title"], fill="#f2e9d8")
        image.save(HERE / "images" / book["image"], optimize=True)


if __name__ == "__main__":
    main()

"""A tiny made-up data set in the schema of the Steam reference copy
(`../shared/data/steam-australian/README`): `interactions.csv` and `items.jsonl`, with each
of its caveats planted — year-less dates, a pair reviewed twice, a game without a metadata
row, users with a single review.  Values are invented (seeded); no real data is copied."""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
from pathlib import Path

GENRES = ("Action", "Strategy", "RPG", "Casual", "Simulation", "Indie")


def write_steam_fixture(folder: Path, n_users: int = 40, n_games: int = 36, per_user: int = 8, seed: int = 0) -> Path:
    """Write the two files into `folder` and return it.  Users prefer two genres each and
    recommend games of those more often; the last 5 users review one game each."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    games = []
    for i in range(n_games):
        genre = GENRES[i % len(GENRES)]
        games.append(
            {
                "publisher": f"Studio {i % 7}",
                "genres": [genre] + ([GENRES[(i + 2) % len(GENRES)]] if i % 4 == 0 else []),
                "app_name": f"Game {i}",
                "title": f"Made-up Game {i}",
                "url": f"http://store.example/app/{1000 + 10 * i}/",
                "release_date": f"{2005 + i % 10}-0{1 + i % 9}-1{i % 10}",
                "tags": [genre, "Singleplayer"],
                "specs": ["Single-player"],
                "price": 4.99 if i % 3 else "Free To Play",
                "early_access": False,
                "id": str(1000 + 10 * i),
                "developer": f"Dev {i % 5}",
            }
        )
    with (folder / "items.jsonl").open("w", encoding="utf-8") as f:
        for game in games:
            f.write(json.dumps(game) + "\n")
    rows = []
    months = ("January", "February", "March", "April", "May", "June")
    for u in range(n_users):
        name = f"player_{u:03d}"
        liked = set(rng.sample(GENRES, 2))
        count = 1 if u >= n_users - 5 else per_user
        for game in rng.sample(games, count):
            fits = game["genres"][0] in liked
            recommend = int(rng.random() < (0.95 if fits else 0.55))
            if rng.random() < 0.15:  # Steam omits the year of the crawl year's reviews
                month, day = rng.choice(months), 1 + rng.randrange(28)
                rows.append((name, game["id"], recommend, 1, f"Posted {month} {day}.", "", ""))
                continue
            date = dt.date(2011 + rng.randrange(5), 1 + rng.randrange(12), 1 + rng.randrange(28))
            stamp = int(dt.datetime(date.year, date.month, date.day, tzinfo=dt.UTC).timestamp())
            posted = f"Posted {date.strftime('%B')} {date.day}, {date.year}."
            rows.append((name, game["id"], recommend, 1, posted, date.isoformat(), str(stamp)))
    rows.append(rows[0][:4] + ("Posted March 3, 2015.", "2015-03-03", "1425340800"))  # the pair reviewed twice
    rows.append(("player_000", "999990", 1, 1, "Posted May 1, 2014.", "2014-05-01", "1398902400"))  # no metadata row
    with (folder / "interactions.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(("user_id", "item_id", "recommend", "sentiment", "posted_raw", "date", "timestamp"))
        writer.writerows(rows)
    return folder


def steam_original_files(folder: Path) -> dict[str, bytes]:
    """The fixture of `write_steam_fixture(folder)` as the UCSD lab ships its originals: gzips of
    Python-literal lines (not JSON), `australian_user_reviews.json.gz` one record per user
    with a nested `reviews` list (a user's later rows a second record, as the real file repeats
    some users), `steam_games.json.gz` one dict per game.  Byte-for-byte reproducible."""
    import gzip
    import io

    write_steam_fixture(folder)
    with (folder / "interactions.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    records: list[dict] = []
    for row in rows:
        if not records or records[-1]["user_id"] != row["user_id"]:
            records.append(
                {"user_url": f"http://steam.example/id/{row['user_id']}", "user_id": row["user_id"], "reviews": []}
            )
        records[-1]["reviews"].append(
            {
                "funny": "",
                "posted": row["posted_raw"],
                "last_edited": "",
                "item_id": row["item_id"],
                "helpful": "No ratings yet",
                "recommend": row["recommend"] == "1",
                "review": "made-up review text",
            }
        )
    games = [json.loads(line) for line in (folder / "items.jsonl").read_text(encoding="utf-8").splitlines()]

    def gz(lines: list[str]) -> bytes:
        buffer = io.BytesIO()
        with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as stream:
            stream.write("".join(line + "\n" for line in lines).encode("utf-8"))
        return buffer.getvalue()

    return {
        "australian_user_reviews.json.gz": gz([repr(r) for r in records]),
        "steam_games.json.gz": gz([repr(g) for g in games]),
    }

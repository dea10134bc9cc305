"""A planted synthetic world written as a team's files: a `files` source folder
(docs/data_model.md) whose random bucket is known to come from the world's own model.

The world is `ops.data.synthetic.generate` at the sizes and logging policy given
(`--exposure-bias`: 0 = a log free of exposure, 1 = the default world, 2.5 strong), written as

- `items.csv`: item_id, title, categories (the genres), description (the overview), image,
  release_date, and the attributes director, actors, vote_average, vote_count;
- `interactions.csv`: user_id, item_id, rating, timestamp (unix seconds) — the log;
- `users.csv`: user_id, gender, age, occupation, zip (MovieLens-1M codes);
- `images/<id>.jpg`: each movie's drawn poster (the large one; `--no-images` leaves them out);
- `dataset.json`: the world's name, "movie", explicit feedback;
- `random_exposure.csv`: user_id, item_id, rating, clicked — the world's random bucket (its
  GROUND_TRUTH rows of judge "random_exposure": a share of users shown items drawn uniformly
  from what they had not rated, rated and clicked by the planted model).

So a files source carries a judge whose truth is exact, and the verdict's truth line can be
checked on a world where it is known.  The planted probabilities themselves (judge
"planted") are no part of the files data model and are not written.

    .venv/bin/python -m tools.planted_files --out /tmp/planted --users 300 --movies 400 --exposure-bias 2.5
    SIMAB_SOURCE=files SIMAB_FILES_PATH=/tmp/planted .venv/bin/simab run

Prints what it wrote.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ops.data.synthetic import SyntheticConfig, SyntheticData, generate

LIST_SEPARATOR = "|"  # the items file's separator of categories, and of the actors attribute


@dataclass(frozen=True)
class PlantedFiles:
    folder: Path
    data: SyntheticData  # the world as generated, planted truth included
    counts: dict[str, int]


def write_planted_files(config: SyntheticConfig, folder: Path | str, images: bool = True) -> PlantedFiles:
    """Generate the world of `config` and write it as a files-source folder at `folder`
    (created; the files it writes are replaced)."""
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as posters:
        data = generate(config, Path(posters))
        image_names = _copy_posters(data, folder / "images") if images else [""] * data.movies.height
    items = _items(data, image_names)
    interactions = data.ratings.select("user_id", pl.col("item_id").alias("item_id"), "rating", "timestamp").sort(
        "timestamp", "user_id", "item_id"
    )
    users = data.users.select("user_id", "gender", "age", "occupation", "zip")
    bucket = (
        data.truth.filter(pl.col("judge") == "random_exposure")
        .select(
            "user_id",
            pl.col("item_id").alias("item_id"),
            pl.col("rating").cast(pl.Int64),
            pl.col("clicked").cast(pl.Int64),
        )
        .sort("user_id", "item_id")
    )
    items.write_csv(folder / "items.csv")
    interactions.write_csv(folder / "interactions.csv")
    users.write_csv(folder / "users.csv")
    bucket.write_csv(folder / "random_exposure.csv")
    description = {"name": f"planted-{config.seed}-exposure-{config.exposure_bias:g}", "item_noun": "movie"}
    (folder / "dataset.json").write_text(json.dumps({**description, "feedback": "explicit"}, indent=2) + "\n")
    counts = {
        "items": items.height,
        "interactions": interactions.height,
        "users": users.height,
        "random_exposure": bucket.height,
        "images": sum(1 for name in image_names if name),
    }
    return PlantedFiles(folder, data, counts)


def _copy_posters(data: SyntheticData, images: Path) -> list[str]:
    """Each movie's large poster copied to `images/<id><suffix>`; the file names, in the
    movies' order."""
    images.mkdir(parents=True, exist_ok=True)
    large = dict(zip(data.metadata["item_id"].to_list(), data.metadata["poster_large"].to_list(), strict=True))
    names = []
    for item_id in data.movies["item_id"].to_list():
        source = Path(large[item_id])
        name = f"{item_id}{source.suffix}"
        shutil.copyfile(source, images / name)
        names.append(name)
    return names


def _items(data: SyntheticData, image_names: list[str]) -> pl.DataFrame:
    meta = data.metadata.select(
        "item_id", "overview", "release_date", "directors", "actors", "vote_average", "vote_count"
    )
    return (
        data.movies.join(meta, on="item_id", how="left", maintain_order="left")
        .with_columns(image=pl.Series(image_names, dtype=pl.Utf8))
        .select(
            pl.col("item_id").alias("item_id"),
            "title",
            pl.col("genres").list.join(LIST_SEPARATOR).alias("categories"),
            pl.col("overview").alias("description"),
            "image",
            pl.col("release_date").dt.strftime("%Y-%m-%d"),
            pl.col("directors").list.join(LIST_SEPARATOR).alias("director"),
            pl.col("actors").list.join(LIST_SEPARATOR).alias("actors"),
            "vote_average",
            "vote_count",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the folder to write (SIMAB_FILES_PATH)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--users", type=int, default=SyntheticConfig().n_users)
    parser.add_argument("--movies", type=int, default=SyntheticConfig().n_movies)
    parser.add_argument("--ratings-per-user", type=float, default=SyntheticConfig().mean_ratings_per_user)
    parser.add_argument(
        "--exposure-bias",
        type=float,
        default=SyntheticConfig().exposure_bias,
        help="the logging policy's strength (SyntheticConfig.exposure_bias): 0 none, 1 the default world, 2.5 strong",
    )
    parser.add_argument(
        "--bucket-share", type=float, default=SyntheticConfig().random_exposure_share, help="share of users in it"
    )
    parser.add_argument(
        "--bucket-items", type=int, default=SyntheticConfig().random_exposure_items, help="random items per user"
    )
    parser.add_argument("--no-images", action="store_true", help="write no posters (items without an image)")
    args = parser.parse_args(argv)
    config = SyntheticConfig(
        seed=args.seed,
        n_users=args.users,
        n_movies=args.movies,
        mean_ratings_per_user=args.ratings_per_user,
        min_ratings_per_user=min(SyntheticConfig().min_ratings_per_user, int(args.ratings_per_user)),
        exposure_bias=args.exposure_bias,
        random_exposure_share=args.bucket_share,
        random_exposure_items=args.bucket_items,
    )
    written = write_planted_files(config, args.out, images=not args.no_images)
    print(f"{written.folder}: {written.counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

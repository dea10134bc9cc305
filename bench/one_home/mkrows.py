"""The inputs of the rows of issue 50 (`rows.py`): lists files and team logs (the files source),
under $ONE_HOME/rows."""

import os
from pathlib import Path

import polars as pl

R = Path(os.environ.get("ONE_HOME", "/tmp/one_home")) / "rows"
R.mkdir(parents=True, exist_ok=True)


def lists(name, rows):
    (R / name).write_text("user_id,rank,item_id,score\n" + "".join(f"{r}\n" for r in rows))


lists("nan.csv", ["1,1,4,0.9", "1,2,5,0.8", "1,3,6,nan"])
lists("minus.csv", ["1,1,4,0.9", "1,2,5,0.8", "1,-1,6,0.7"])


def world(name, users, stamp, items=30, extra=None, bom=False, sep=","):
    f = R / name
    f.mkdir(exist_ok=True)
    pl.DataFrame({"item_id": range(1, items + 1), "title": [f"item {i}" for i in range(1, items + 1)]}).write_csv(
        f / "items.csv"
    )
    rows = [(u, i, 1 + (u + i) % 5) for u in range(1, users + 1) for i in range(1, items + 1)]
    rows += extra or []
    frame = pl.DataFrame(
        {
            "user_id": [r[0] for r in rows],
            "item_id": [r[1] for r in rows],
            "rating": [r[2] for r in rows],
            "timestamp": [stamp(k, r) for k, r in enumerate(rows)],
        }
    )
    text = frame.write_csv(separator=sep)
    (f / "interactions.csv").write_text(("\ufeff" if bom else "") + text, encoding="utf-8")


# Each user's interactions one after another (three users: train holds users 1, 2 and the start of 3);
# the others interleaved in time (item i of every user at about the same time), as a real log is.


def spread(k, r):
    return 1_700_000_000 + 100 * r[1] + r[0]


world("same", 20, lambda k, r: 1_700_000_000)
world("three", 3, lambda k, r: 1_700_000_000 + k)
world("dup", 20, spread, extra=[(1, 1, 3)])
world("missing_item", 20, spread, extra=[(1, 999, 3)])
world("bom_same", 20, lambda k, r: 1_700_000_000, bom=True)
world("semicolon", 20, spread, sep=";")

"""Which window each alignment protocol holds out, and the guard that keeps it out of the
brain's fitting.

Every protocol measures the brain on the TEST window: the embedded brain is fitted on the
train and validation windows and the agents' memories hold the train window only, so the
test window is the one thing neither has seen.  (The validation window is not held out:
the embedded brain's click, like and rating models are fitted on it.)

`check_threshold_window` does the same for the window a per-item decision threshold is
fitted on (the taste protocol "per item": validation, never test).

`check_held_out` refuses to score a brain on a window that reached its fitting: a pair the
fitting read, or a held-out rating older than the last one fitting read (a chronological
split never produces one; a brain fitted on the test window does).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl


class LeakageError(ValueError):
    """A protocol's held-out window reached the brain's fitting or the agents' memories."""


def check_held_out(
    held_out: pl.DataFrame,
    fitted: Mapping[str, pl.DataFrame],
    protocol: str,
    fit_last_timestamp: int | None = None,
) -> None:
    """Raise LeakageError when `held_out` (user_id, item_id[, timestamp]) shares a (user,
    movie) pair with any window in `fitted` (name -> frame), or holds a rating older than
    `fit_last_timestamp` (the last rating the brain was fitted on, None for a brain that
    fits nothing)."""
    if held_out.is_empty():
        return
    keys = held_out.select("user_id", "item_id")
    for name, frame in fitted.items():
        if frame.is_empty():
            continue
        shared = keys.join(frame.select("user_id", "item_id"), on=["user_id", "item_id"], how="semi")
        if shared.height:
            raise LeakageError(
                f"{protocol}: {shared.height} held-out (user, movie) pairs are in the {name} window the brain was fitted on, "
                f"e.g. {shared.head(3).rows()}; hold out a window the brain never read (the test window)"
            )
    if fit_last_timestamp is not None and "timestamp" in held_out.columns:
        first = held_out.get_column("timestamp").min()
        if first is not None and int(first) < int(fit_last_timestamp):
            early = held_out.filter(pl.col("timestamp") < fit_last_timestamp).height
            raise LeakageError(
                f"{protocol}: the brain was fitted on ratings up to timestamp {fit_last_timestamp}, but {early} held-out "
                f"ratings are older (first {first}): its fitting reached the held-out window; refit it on train + validation only"
            )


def check_threshold_window(window: pl.DataFrame, held_out: pl.DataFrame, protocol: str) -> None:
    """Raise LeakageError when the window a decision threshold is fitted on (the validation
    window) shares a (user, movie) pair with the held-out `held_out` window or holds a rating
    newer than the first held-out one: the threshold, like the brain, must never read the
    window it is judged on."""
    last = window.get_column("timestamp").max() if "timestamp" in window.columns and window.height else None
    check_held_out(held_out, {"threshold": window}, protocol, None if last is None else int(last))

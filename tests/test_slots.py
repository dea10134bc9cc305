"""Clicks by slot on the page: a brain that clicks by place rather than content is flagged."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ops.readout.slots import click_share_by_slot, slot_clicks, slot_warning, slots_markdown


def _events(arm: str, brain: str, displayed: list[int | None], listed: list[int]) -> pl.DataFrame:
    """One home-page click per entry: the card in list slot `listed[i]` of a five-card page,
    shown in displayed slot `displayed[i]`; plus a non-click row that must not count."""
    rows = []
    for i, (d, li) in enumerate(zip(displayed, listed)):
        shown = [100 * i + k for k in range(1, 6)]
        rows.append(
            {"arm": arm, "brain": brain, "user_id": i, "page_type": "home", "action": "click_movie"}
            | {"item_id": shown[li - 1], "shown": shown, "slot": d}
        )
    rows.append(
        {"arm": arm, "brain": brain, "user_id": 0, "page_type": "home", "action": "next_page"}
        | {"item_id": None, "shown": [1, 2, 3, 4, 5], "slot": None}
    )
    return pl.DataFrame(rows, schema_overrides={"slot": pl.Int64, "item_id": pl.Int64})


def test_a_brain_that_clicks_the_first_card_it_reads_on_shuffled_pages_is_flagged_and_a_content_reader_is_not():
    rng = np.random.default_rng(0)
    n = 200
    listed = rng.integers(1, 6, n).tolist()
    # By place: always displayed slot 1, whatever list slot the shuffle put there.
    by_place = _events("pop", "llm:small", [1] * n, listed)
    # By content: clicks the arm's best card (list slot 1 mostly), shown wherever the shuffle put it.
    by_content = _events("fm", "llm:big", rng.integers(1, 6, n).tolist(), [1 if u < 0.7 else 2 for u in rng.random(n)])
    # The embedded brain: the list's order, clicks decaying down the page (not shuffled: never flagged).
    decaying = rng.choice([1, 2, 3, 4, 5], n, p=[0.4, 0.25, 0.15, 0.12, 0.08]).tolist()
    embedded = _events("pop", "embedded", decaying, decaying)

    clicks = slot_clicks(by_place)
    assert clicks.height == n and (clicks.get_column("slot") == 1).all()
    warned = slot_warning(clicks)
    assert warned is not None and "displayed slot 1 took 100% of 200 clicks against a fair 20%" in warned
    assert slot_warning(slot_clicks(by_content)) is None
    assert slot_warning(slot_clicks(embedded)) is None

    table = click_share_by_slot(slot_clicks(pl.concat([by_place, embedded])))
    place = table.filter(pl.col("brain") == "llm:small")
    assert place.get_column("displayed_share").to_list() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert place.get_column("shuffled").all() and max(place.get_column("list_share")) < 0.3
    assert place.get_column("uniform_share").to_list() == pytest.approx([0.2] * 5)
    same = table.filter(pl.col("brain") == "embedded")
    assert not same.get_column("shuffled").any()
    assert same.get_column("displayed_share").to_list() == same.get_column("list_share").to_list()
    text = slots_markdown(slot_clicks(pl.concat([by_place, embedded])))
    assert "## Clicks by slot on the page" in text and "| pop" in text and "100 / " in text

    # Events stored before the slot was recorded: list shares only, no test.
    old = by_content.drop("slot")
    legacy = click_share_by_slot(slot_clicks(old))
    assert legacy.get_column("displayed_share").is_null().all() and legacy.get_column("list_share").sum() == 1.0
    assert slot_warning(slot_clicks(old)) is None

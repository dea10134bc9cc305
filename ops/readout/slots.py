"""Where on the page the agents click: the share of clicks by displayed slot and by the
list's own slot, per arm, for any brain.

A home page shows up to five cards.  The *list slot* is the card's place in the arm's
order on that page (1 = the arm's best of the five); the *displayed slot* is where the
brain was shown it (the events' `slot`).  The embedded brain sees the arm's order, so the
two are the same and a fall from slot 1 to 5 is its position decay.  The LLM brain is shown
each page visit in an order shuffled per agent (`LLMBrainConfig.shuffle_page`): there the
displayed slot says nothing of the card, so a brain that clicks by content clicks every
displayed slot about equally often — and one that clicks by place (the first card it
reads, whatever it is) bunches its clicks on a displayed slot while spreading them over
the list's slots.

The test, over the clicks on shuffled pages (a displayed slot differing from its list slot
somewhere in the arm's events): χ² goodness of fit of the displayed-slot counts against
the uniform share on each clicked page (1/cards on the page).  The verdict warns when
p < `WARN_P` and the most-clicked displayed slot takes more than twice its fair share:
the brain clicks by place, not content, and cannot tell lists apart by what they hold.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy.stats import chisquare

from ops.figures import table_markdown

WARN_P = 0.001
PAGE_SLOTS = 5

CLICKS = {
    "arm": pl.Utf8,
    "brain": pl.Utf8,
    "slot": pl.Int64,  # displayed slot; null in events stored before it was recorded
    "list_slot": pl.Int64,  # the card's place in the arm's order on the page
    "cards": pl.Int64,  # cards on the page
}

SLOTS = {
    "arm": pl.Utf8,
    "brain": pl.Utf8,
    "clicks": pl.Int64,
    "shuffled": pl.Boolean,  # the brain was shown other orders than the list's
    "slot": pl.Int64,
    "displayed_share": pl.Float64,
    "list_share": pl.Float64,
    "uniform_share": pl.Float64,
}


def click_share_by_slot(clicks: pl.DataFrame) -> pl.DataFrame:
    """SLOTS rows, one per (arm, brain, slot 1..5) of `clicks` (`slot_clicks`): the share of
    home-page clicks on each displayed slot (null where the events predate the `slot`
    column) and on each list slot, beside the share a slot-blind brain would give it."""
    rows = []
    for (arm, brain), group in clicks.group_by("arm", "brain", maintain_order=True):
        n = group.height
        shuffled = bool((group.get_column("slot").fill_null(0) != group.get_column("list_slot")).any())
        has_slot = group.get_column("slot").is_not_null().all()
        uniform = _uniform(group.get_column("cards").to_numpy())
        for slot in range(1, PAGE_SLOTS + 1):
            rows.append(
                {
                    "arm": arm,
                    "brain": brain,
                    "clicks": n,
                    "shuffled": shuffled,
                    "slot": slot,
                    "displayed_share": float((group.get_column("slot") == slot).sum()) / n if has_slot else None,
                    "list_share": float((group.get_column("list_slot") == slot).sum()) / n,
                    "uniform_share": float(uniform[slot - 1]) / n,
                }
            )
    return pl.DataFrame(rows, schema=SLOTS).sort("arm", "brain", "slot")


def slot_test(clicks: pl.DataFrame) -> dict | None:
    """The χ² test of the module docstring over every shuffled arm's clicks (`slot_clicks`):
    {"clicks", "chi2", "p_value", "top_slot", "top_share", "fair_share"}; None without
    shuffled clicks."""
    shuffled_arms = (
        clicks.filter(pl.col("slot").is_not_null() & (pl.col("slot") != pl.col("list_slot")))
        .select("arm", "brain")
        .unique()
    )
    clicks = clicks.join(shuffled_arms, on=["arm", "brain"], how="semi")
    if clicks.height < PAGE_SLOTS:
        return None
    observed = np.bincount(clicks.get_column("slot").to_numpy() - 1, minlength=PAGE_SLOTS)[:PAGE_SLOTS]
    expected = _uniform(clicks.get_column("cards").to_numpy())
    keep = expected > 0
    result = chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum())
    top = int(np.argmax(observed))
    return {
        "clicks": int(clicks.height),
        "chi2": float(result.statistic),
        "p_value": float(result.pvalue),
        "top_slot": top + 1,
        "top_share": float(observed[top]) / clicks.height,
        "fair_share": float(expected[top]) / clicks.height,
    }


def slot_warning(clicks: pl.DataFrame) -> str | None:
    """The verdict's warning when the brain clicks by place rather than content."""
    test = slot_test(clicks)
    if test is None or test["p_value"] >= WARN_P or test["top_share"] <= 2 * test["fair_share"]:
        return None
    return (
        f"the brain clicks by place on the page, not by content: on pages shown in a shuffled order, displayed slot "
        f"{test['top_slot']} took {test['top_share']:.0%} of {test['clicks']} clicks against a fair "
        f"{test['fair_share']:.0%} (χ² p = {test['p_value']:.2g}); its CTR cannot tell lists apart by what they hold"
    )


def slots_markdown(clicks: pl.DataFrame) -> str:
    """The report's section: per arm the click shares by displayed slot and by list slot."""
    table = click_share_by_slot(clicks)
    lines = ["## Clicks by slot on the page", ""]
    if table.is_empty():
        return "\n".join(lines + ["No home-page clicks to count.", "", ""])
    lines += [
        "Share of each arm's home-page clicks by the slot the brain was shown the card in (displayed) and by "
        "the card's place in the arm's order on that page (list); a slot-blind brain would give each slot its "
        "uniform share. The embedded brain sees the arm's order (displayed = list); the LLM brain sees each "
        "page visit shuffled, so there a displayed-slot share far from uniform means clicks by place, not content.",
        "",
    ]
    wide = (
        table.with_columns(
            pl.format(
                "{} / {}",
                (pl.col("displayed_share") * 100).round(0).cast(pl.Int64, strict=False).cast(pl.Utf8).fill_null("–"),
                (pl.col("list_share") * 100).round(0).cast(pl.Int64).cast(pl.Utf8),
            ).alias("cell"),
            pl.format("slot {} (%)", pl.col("slot")).alias("column"),
        )
        .pivot(on="column", index=["arm", "brain", "clicks", "shuffled"], values="cell")
        .sort("arm", "brain")
    )
    lines += ["Cells: displayed / list share, %.", "", table_markdown(wide), ""]
    test = slot_test(clicks)
    if test is not None:
        lines += [
            f"Shuffled pages, all arms: displayed slot {test['top_slot']} took {test['top_share']:.1%} of "
            f"{test['clicks']} clicks (uniform: {test['fair_share']:.1%}); χ² against uniform p = {test['p_value']:.3g}.",
            "",
        ]
    return "\n".join(lines) + "\n"


def slot_clicks(events: pl.DataFrame) -> pl.DataFrame:
    """CLICKS rows, one per home-page click of the events: what the other functions read
    (the read-out keeps it, `ABReadout.slot_clicks`, rather than every event)."""
    slot = pl.col("slot") if "slot" in events.columns else pl.lit(None, dtype=pl.Int64)
    brain = pl.col("brain") if "brain" in events.columns else pl.lit("")
    clicks = events.filter(
        (pl.col("page_type") == "home") & (pl.col("action") == "click_movie") & pl.col("item_id").is_not_null()
    ).select(
        "arm",
        brain.alias("brain"),
        slot.cast(pl.Int64).alias("slot"),
        "shown",
        "item_id",
    )
    list_slot = [
        (shown.index(movie) + 1) if movie in shown else None
        for shown, movie in zip(clicks.get_column("shown").to_list(), clicks.get_column("item_id").to_list())
    ]
    return (
        clicks.with_columns(
            pl.Series("list_slot", list_slot, dtype=pl.Int64), pl.col("shown").list.len().cast(pl.Int64).alias("cards")
        )
        .drop_nulls("list_slot")
        .select(list(CLICKS))
        .cast(CLICKS)
    )


def _uniform(cards: np.ndarray) -> np.ndarray:
    """Expected clicks per slot 1..5 of a slot-blind brain: each click spread over its page's cards."""
    out = np.zeros(PAGE_SLOTS)
    for n in np.asarray(cards, dtype=np.int64):
        if n > 0:
            out[: min(n, PAGE_SLOTS)] += 1.0 / min(n, PAGE_SLOTS)
    return out

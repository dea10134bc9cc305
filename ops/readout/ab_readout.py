"""The A/B read-out of simulated sessions (docs/definitions.md#lifecycle, step 9): `ab_readout`
computes it from the events of every arm, `ABReadout` holds it, stores itself without pickle
and writes its Markdown tables.

What it is made of, each in a module of its own: the metrics per agent
(`ops.readout.agent_metrics`), each arm's means and pooled ratios with bootstrap intervals
(`ops.readout.arm_summaries`), each arm against the control, Holm-corrected
(`ops.readout.comparisons`), the brain's fallbacks per arm (`ops.readout.fallbacks`), the
clicks by slot (`ops.readout.slots`), and its settings (`ops.readout.readout_config`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl

from ops.figures import rows_markdown
from ops.readout.agent_metrics import LABELS, METRICS, RATIO_PARTS, agent_means, per_session_metrics
from ops.readout.arm_summaries import summarise_arm
from ops.readout.comparisons import compare_paired, compare_unpaired, empty_comparisons, with_holm
from ops.readout.fallbacks import FALLBACKS, fallback_counts
from ops.readout.readout_config import ReadoutConfig
from ops.readout.slots import slot_clicks
from ops.storage.codec import check_format, load_json, load_table, save_json, save_table


@dataclass
class ABReadout:
    """The read-out: per-agent metrics, per-arm summaries, comparisons with the control."""

    per_agent: pl.DataFrame  # arm, user_id, counts, metrics
    arms: pl.DataFrame  # arm, metric, n_agents, mean, ci_low, ci_high, pooled, pooled_ci_low, pooled_ci_high
    comparisons: (
        pl.DataFrame
    )  # arm, control, metric, n, difference, ci_low, ci_high, test, p_value, p_holm, significant
    control: str
    design: str  # "paired" / "random"
    config: ReadoutConfig
    # arm, agents, fallback_events, fallback_agents, failed_agents (see `fallback_counts`)
    fallbacks: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=FALLBACKS))
    per_session: pl.DataFrame | None = None  # arm, user_id, session, counts, metrics (the power analysis reads it)
    # One row per home-page click: displayed and list slot (`ops.readout.slots`, the report's clicks by slot).
    slot_clicks: pl.DataFrame | None = None

    @property
    def sessions_per_agent(self) -> int:
        """The most sessions any agent had (1 for a single-session run)."""
        if self.per_session is None or self.per_session.is_empty():
            return 1
        return int(self.per_session.group_by("arm", "user_id").len().get_column("len").max())

    def table(self, pooled: bool = False) -> pl.DataFrame:
        """One row per arm, one "mean [low, high]" column per metric: the table people read
        (`pooled=True`: the pooled ratios and their intervals instead)."""
        cols = ("pooled", "pooled_ci_low", "pooled_ci_high") if pooled else ("mean", "ci_low", "ci_high")
        frame = self.arms.filter(pl.col(cols[0]).is_not_null()) if pooled else self.arms
        metrics = [m for m in self.config.metrics if m in set(frame.get_column("metric").to_list())]
        out: dict[str, list[str]] = {"arm": []}
        for m in metrics:
            out[LABELS[m]] = []
        for arm in frame.get_column("arm").unique(maintain_order=True).to_list():
            out["arm"].append(arm)
            rows = {r["metric"]: r for r in frame.filter(pl.col("arm") == arm).iter_rows(named=True)}
            for m in metrics:
                r = rows.get(m)
                out[LABELS[m]].append("n/a" if r is None else _cell(r[cols[0]], r[cols[1]], r[cols[2]], m))
        return pl.DataFrame(out, schema={k: pl.Utf8 for k in out})

    def save(self, folder: Path) -> None:
        """Into `folder`, without pickle: the tables as Parquet, the rest as JSON."""
        folder.mkdir(parents=True, exist_ok=True)
        for name in _TABLES:
            save_table(folder / f"{name}.parquet", getattr(self, name))
        if self.per_session is not None:
            save_table(folder / "per_session.parquet", self.per_session)
        if self.slot_clicks is not None:
            save_table(folder / "slot_clicks.parquet", self.slot_clicks)
        save_json(
            folder / "readout.json",
            {
                "kind": "ABReadout",
                "format_version": 1,
                "control": self.control,
                "design": self.design,
                "config": self.config.model_dump(mode="json"),
            },
        )

    @classmethod
    def load(cls, folder: Path) -> ABReadout:
        meta = load_json(folder / "readout.json")
        check_format(meta, "ABReadout", 1, folder / "readout.json")
        tables = {name: load_table(folder / f"{name}.parquet") for name in _TABLES}
        if (folder / "per_session.parquet").exists():
            tables["per_session"] = load_table(folder / "per_session.parquet")
        if (folder / "slot_clicks.parquet").exists():
            tables["slot_clicks"] = load_table(folder / "slot_clicks.parquet")
        return cls(
            **tables,
            control=meta["control"],
            design=meta["design"],
            config=ReadoutConfig.model_validate(meta["config"]),
        )

    def to_markdown(self) -> str:
        sessions = self.sessions_per_agent
        fewest = (
            int(self.per_session.group_by("arm", "user_id").len().get_column("len").min())
            if self.per_session is not None and not self.per_session.is_empty()
            else sessions
        )
        # Visits by activity tier (ops/simulation/visits.py): agents come a different number of times.
        count = f"{fewest}–{sessions}" if fewest < sessions else f"{sessions}"
        unit = f"; {count} sessions per agent, averaged per agent" if sessions > 1 else ""
        lines = [
            f"### Arms ({self.design} design, {self.config.confidence:.0%} bootstrap intervals over agents{unit})",
            "",
        ]
        table = self.table()
        if self.fallbacks.height:
            # Recorded fallbacks beside each arm: agents with one (events), of which failed.
            cells = {
                r["arm"]: f"{r['fallback_agents']} agents ({r['fallback_events']} events), {r['failed_agents']} failed"
                for r in self.fallbacks.iter_rows(named=True)
            }
            table = table.with_columns(pl.col("arm").replace_strict(cells, default="0").alias("fallbacks"))
        lines += _markdown(table)
        if self.arms.get_column("pooled").is_not_null().any():
            lines += ["", "### Pooled ratios (sum over agents of numerators ÷ denominators)", ""]
            lines += _markdown(self.table(pooled=True))
        if not self.comparisons.is_empty():
            family = "all comparisons" if self.config.holm_family == "all" else "arms within each metric"
            lines += ["", f"### Against the control {self.control} (Holm-corrected over {family})", ""]
            header = ["arm", "metric", "n", "difference [CI]", "test", "p", "p (Holm)", "significant"]
            lines += rows_markdown(
                header,
                (
                    [
                        r["arm"],
                        LABELS[r["metric"]],
                        r["n"],
                        _cell(r["difference"], r["ci_low"], r["ci_high"], r["metric"]),
                        r["test"],
                        _fmt_p(r["p_value"]),
                        _fmt_p(r["p_holm"]),
                        "yes" if r["significant"] else "no",
                    ]
                    for r in self.comparisons.iter_rows(named=True)
                ),
            )
        return "\n".join(lines) + "\n"


def ab_readout(
    events: pl.DataFrame,
    control: str,
    design: Literal["auto", "paired", "random"] = "auto",
    config: ReadoutConfig | None = None,
) -> ABReadout:
    """The whole read-out from the events of every arm (ops.schema.EVENTS rows).

    `design="auto"` is paired when every arm simulated exactly the same agents."""
    config = config or ReadoutConfig()
    unknown = [m for m in config.metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"read-out: unknown metric(s) {unknown}; the metrics are {METRICS}")
    per_session = per_session_metrics(events, config.like_threshold)
    per_agent = agent_means(per_session)
    arms = per_agent.get_column("arm").unique(maintain_order=True).sort().to_list()
    if control not in arms:
        raise ValueError(f"read-out: control arm {control!r} has no events; the arms are {arms}")
    users = {a: per_agent.filter(pl.col("arm") == a).get_column("user_id") for a in arms}
    if design == "auto":
        first = set(users[control].to_list())
        design = "paired" if all(set(u.to_list()) == first for u in users.values()) else "random"
    if design not in ("paired", "random"):
        raise ValueError(f"read-out: design must be 'auto', 'paired' or 'random', got {design!r}")

    summaries, boots = [], {}
    for arm in arms:
        frame = per_agent.filter(pl.col("arm") == arm).sort("user_id")
        summary, boot = summarise_arm(arm, frame, config)
        summaries.append(summary)
        boots[arm] = boot
    arm_table = pl.concat(summaries)

    comparisons = []
    for arm in arms:
        if arm == control:
            continue
        if design == "paired":
            comparisons.append(compare_paired(arm, control, per_agent, config))
        else:
            comparisons.append(compare_unpaired(arm, control, per_agent, boots, config))
    comparison_table = with_holm(pl.concat(comparisons) if comparisons else empty_comparisons(), config)
    fallbacks = pl.DataFrame(
        [{"arm": arm, **fallback_counts(events.filter(pl.col("arm") == arm))} for arm in arms], schema=FALLBACKS
    )
    return ABReadout(
        per_agent, arm_table, comparison_table, control, design, config, fallbacks, per_session, slot_clicks(events)
    )


def _cell(value: float | None, low: float | None, high: float | None, metric: str) -> str:
    # Ratios read best with 4 decimals; counts and scales (AR, likes, exit page,
    # satisfaction) with 2.
    digits = 4 if metric in RATIO_PARTS and metric != "average_rating" else 2

    def f(v):
        return "n/a" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"

    return f"{f(value)} [{f(low)}, {f(high)}]"


def _fmt_p(p: float | None) -> str:
    if p is None or not np.isfinite(p):
        return "n/a"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _markdown(frame: pl.DataFrame) -> list[str]:
    """A table of written cells (`ABReadout.table`) as Markdown lines, its cells as they are."""
    return rows_markdown(frame.columns, frame.iter_rows())


# ABReadout's tables, one Parquet file each (`ABReadout.save`).
_TABLES = ("per_agent", "arms", "comparisons", "fallbacks")

"""What the viewer shows, read once from the stored assets.

`ExperimentStore.from_definitions()` reads through the code location's own IO managers
(`Definitions.get_asset_value_loader`), never a file layout, so it keeps working whatever
format an asset is stored in: the events of every simulated arm (`simulation_events`, one
partition per arm), the catalogue (`catalogue`), the agents' profiles (`agents`: an object
with `.profiles`, user id → `ops.agents.profile.AgentProfile`) and the read-out
(`ab_readout`, optional).  The report's figures come from the newest report folder under
`$SIMAB_HOME/reports/` (the `simab_report` asset writes it).

A stored value that fails its checksum or cannot be read (`resources.storage.StoredDataError`)
does not stop the viewer when the pages can do without it: an arm's events, the profiles or
the read-out are left out and the error's message (asset, partition, path, "materialise it
again") is shown at the top of every page (`problems`).  Only a damaged catalogue, or every
arm damaged, leaves nothing to show: then the error is raised.

`ExperimentStore(...)` takes the same values directly (tests, notebooks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ops.readout.agent_metrics import per_agent_metrics
from ops.simulation.observation import CLICK_MOVIE, EXIT_INTERVIEW, WATCH_AND_RATE

# Agent filters of the agents page: name -> (label, condition on the per-agent summary).
FILTERS: dict[str, tuple[str, Callable[[], pl.Expr]]] = {
    "all": ("all agents", lambda: pl.lit(True)),
    "exited_page_1": ("exited on page 1", lambda: pl.col("exit_page") == 1),
    "never_clicked": ("never clicked", lambda: pl.col("clicks") == 0),
    "clicked_never_watched": ("clicked, never watched", lambda: (pl.col("clicks") > 0) & (pl.col("watches") == 0)),
    "watched": ("watched at least one movie", lambda: pl.col("watches") > 0),
    "tired": ("stopped by fatigue", lambda: pl.col("forced")),
    "fallback": ("a fallback was recorded", lambda: pl.col("fallbacks") > 0),
}


@dataclass
class Card:
    """A movie as the agent saw it on a page."""

    item_id: int
    title: str
    vote_average: float | None
    genres: tuple[str, ...]
    has_poster: bool
    chosen: bool = False  # the movie this step's action concerned
    caught_eye: bool = False


@dataclass
class Step:
    """One event row of a session, ready to show."""

    step: int
    page_type: str
    page_number: int | None
    action: str
    cards: list[Card]
    reason: str
    interest: int | None
    fatigue_before: float | None
    fatigue_after: float | None
    fatigue_budget: float | None
    rating: int | None = None
    satisfaction: int | None = None
    forced: bool = False
    fallback_reason: str | None = None

    @property
    def fatigue_spent(self) -> float | None:
        if self.fatigue_before is None or self.fatigue_after is None:
            return None
        return self.fatigue_after - self.fatigue_before

    @property
    def is_interview(self) -> bool:
        return self.action == EXIT_INTERVIEW


@dataclass
class ExperimentStore:
    """Events per arm, the catalogue, the profiles, the read-out and the report's folder."""

    events: Mapping[str, pl.DataFrame]
    catalogue: pl.DataFrame
    profiles: Mapping[int, object] = field(default_factory=dict)
    readout: object | None = None  # ops.readout.ab_readout.ABReadout
    report_dir: Path | None = None
    problems: list[str] = field(default_factory=list)  # stored values that could not be read, and why
    _summaries: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    _movies: dict[int, dict] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.events:
            raise ValueError(
                "viewer: no simulated arm in the store (materialise simulation_events for at least one arm)"
            )
        self.events = {arm: frame.sort("user_id", "step") for arm, frame in sorted(self.events.items())}
        self._movies = {row["item_id"]: row for row in self.catalogue.iter_rows(named=True)}

    # -- loading ------------------------------------------------------------------------------

    @classmethod
    def from_definitions(cls, defs=None, reports: Path | None = None) -> ExperimentStore:
        """Everything stored by the code location (default: `pipelines.definitions`, built
        from the environment, so $SIMAB_HOME chooses the store)."""
        if defs is None:
            from pipelines.definitions import build_definitions

            defs = build_definitions()
        from dagster import DagsterInstance

        from resources.storage import StoredDataError

        arms = defs.get_assets_def("simulation_events").partitions_def.get_partition_keys()
        problems: list[str] = []
        damaged: list[StoredDataError] = []

        def optional(asset: str, partition: str | None = None):
            """The value, or None when never stored or damaged (the damage noted in `problems`)."""
            try:
                return loader.load_asset_value(asset, partition_key=partition)
            except FileNotFoundError:
                return None
            except StoredDataError as exc:
                problems.append(str(exc))
                damaged.append(exc)
                return None

        # Reading values needs the IO managers only: an ephemeral instance, so the viewer does
        # not depend on $DAGSTER_HOME existing (a fresh clone has none until the first run).
        with defs.get_asset_value_loader(instance=DagsterInstance.ephemeral()) as loader:
            events = {arm: frame for arm in arms if (frame := optional("simulation_events", arm)) is not None}
            if not events and damaged:
                raise damaged[0]  # nothing left to show: say why, not "nothing simulated"
            catalogue = loader.load_asset_value("catalogue")
            agents = optional("agents")
            readout = optional("ab_readout")
        return cls(events, catalogue, getattr(agents, "profiles", {}), readout, newest_report(reports), problems)

    # -- what the pages ask ---------------------------------------------------------------

    @property
    def arms(self) -> list[str]:
        return list(self.events)

    def summary(self, arm: str) -> pl.DataFrame:
        """One row per agent of the arm: steps, clicks, watches, exit page, satisfaction,
        whether fatigue stopped it, fallbacks; sorted by user id."""
        if arm not in self._summaries:
            events = self.arm_events(arm)
            per_agent = per_agent_metrics(events)
            extra = events.group_by("user_id").agg(
                (pl.col("action") != EXIT_INTERVIEW).sum().alias("steps"),
                pl.col("forced").fill_null(False).any().alias("forced"),
                pl.col("fallback").fill_null(False).sum().alias("fallbacks")
                if "fallback" in events.columns
                else pl.lit(0).alias("fallbacks"),
            )
            self._summaries[arm] = per_agent.join(extra, on="user_id", how="left").sort("user_id")
        return self._summaries[arm]

    def agents(self, arm: str, filter_name: str = "all") -> pl.DataFrame:
        """The arm's agents that pass a filter of `FILTERS`."""
        if filter_name not in FILTERS:
            raise KeyError(f"unknown filter {filter_name!r}; choose one of {sorted(FILTERS)}")
        return self.summary(arm).filter(FILTERS[filter_name][1]())

    def arm_events(self, arm: str) -> pl.DataFrame:
        if arm not in self.events:
            raise KeyError(f"arm {arm!r} was not simulated; simulated arms: {', '.join(self.arms)}")
        return self.events[arm]

    def trajectory(self, arm: str, user_id: int) -> list[Step]:
        """The agent's session on the arm, step by step, each page with its cards."""
        rows = self.arm_events(arm).filter(pl.col("user_id") == user_id)
        if rows.is_empty():
            raise KeyError(f"agent {user_id} has no session on arm {arm!r}")
        return [self._step(row) for row in rows.iter_rows(named=True)]

    def profile(self, user_id: int) -> dict | None:
        """The agent's profile as a mapping (None when the profiles were not loaded)."""
        found = self.profiles.get(user_id)
        if found is None:
            return None
        return found.to_dict() if hasattr(found, "to_dict") else dict(found)

    def movie(self, item_id: int) -> dict | None:
        return self._movies.get(item_id)

    def poster_path(self, item_id: int, size: str) -> Path | None:
        """The poster file of a catalogue movie (only catalogue paths are ever served)."""
        movie = self._movies.get(item_id)
        if movie is None:
            return None
        path = movie.get("poster_large" if size == "large" else "poster_small") or movie.get("poster_small")
        return Path(path) if path and Path(path).is_file() else None

    def metrics_table(self) -> pl.DataFrame | None:
        """Per-arm metrics with their intervals (the read-out's table), if there is one."""
        return None if self.readout is None else self.readout.table()

    def plots(self) -> list[str]:
        """The report's figures (file names under its plots/ folder)."""
        if self.report_dir is None or not (self.report_dir / "plots").is_dir():
            return []
        return sorted(p.name for p in (self.report_dir / "plots").glob("*.png"))

    # -- helpers --------------------------------------------------------------------------------

    def _step(self, row: dict) -> Step:
        chosen = row.get("item_id")
        caught = set(row.get("caught_eye") or [])
        cards = []
        for item_id in row.get("shown") or []:
            movie = self._movies.get(item_id, {})
            cards.append(
                Card(
                    item_id=item_id,
                    title=movie.get("title") or f"movie {item_id}",
                    vote_average=movie.get("vote_average"),
                    genres=tuple(movie.get("genres") or ()),
                    has_poster=bool(movie.get("poster_small") or movie.get("poster_large")),
                    chosen=item_id == chosen and row["action"] in (CLICK_MOVIE, WATCH_AND_RATE),
                    caught_eye=item_id in caught,
                )
            )
        return Step(
            step=row["step"],
            page_type=row["page_type"],
            page_number=row.get("page_number"),
            action=row["action"],
            cards=cards,
            reason=row.get("reason") or "",
            interest=row.get("interest"),
            fatigue_before=row.get("fatigue_before"),
            fatigue_after=row.get("fatigue_after"),
            fatigue_budget=row.get("fatigue_budget"),
            rating=row.get("rating"),
            satisfaction=row.get("satisfaction"),
            forced=bool(row.get("forced")),
            fallback_reason=row.get("fallback_reason"),
        )


def newest_report(reports: Path | None = None) -> Path | None:
    """The newest report folder under `reports` (default `$SIMAB_HOME/reports`), or None."""
    if reports is None:
        from resources.storage import data_root

        reports = data_root() / "reports"
    found = [p.parent for p in Path(reports).glob("*/report.md")]
    return max(found, key=lambda p: (p / "report.md").stat().st_mtime) if found else None

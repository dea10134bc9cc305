"""The trust protocols that ask the brain, each one call from one opening (`open_protocol`).

Every protocol opens the same way: switched off, it is not measured; a brain that does not
answer it (`BrainKind.answers`) is not measured either; the held-out (test) window must
not overlap what the brain was fitted on (`windows.check_held_out` with
`BrainKind.fitted_through`); the agents are a seeded sample of those with enough held-out
items, sized for the interval half-width the figures must reach (`sizing.protocol_agents`);
the brain is made of the run's sources, its calls charged to the run's bill.  Before the
first call, a brain that pays per decision has the protocol dry-run (`Opening.check_bill`:
every prompt written and counted while the embedded brain decides) and the estimate checked
against what the run has left.  What cannot be measured raises `NotMeasurable` with the
reason in a few words and, where known, what it would have cost.

`measure_taste`, `measure_rating` and `measure_list_quality` are the protocols
(`taste`, `rating`, `list_quality`), each from its opening to its result with the brain's
name on it; the assets record them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from ops.agents.session import AgentSession
from ops.simulation.assignment import sample_agents
from ops.simulation.brains.protocol import Brain
from ops.simulation.budget import RunBudget, estimate_refusal
from ops.simulation.catalogue import Catalogue
from ops.simulation.kinds import BrainKind, BrainSources
from ops.simulation.request import SimulationConfig
from ops.studies.alignment.list_quality import ListQuality, list_quality, simulate_lists
from ops.studies.alignment.mixed_lists import LADDERS, Ladder, choose_ladder, mixed_lists
from ops.studies.alignment.per_item import (
    CountedTasteQuestion,
    TasteQuestion,
    fit_taste_thresholds,
    papers_holdout_taste,
    taste_per_item,
    thresholds_on_lists,
)
from ops.studies.alignment.rating import RatingAlignment, brain_ratings, offline_rating_predictors, rating_pairs
from ops.studies.alignment.rating import rating_alignment as score_ratings
from ops.studies.alignment.sizing import protocol_agents
from ops.studies.alignment.taste import TASTE_RATIOS, TasteDiscrimination, taste_discrimination
from ops.studies.alignment.windows import check_held_out

Log = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


class NotMeasurable(ValueError):
    """A protocol that cannot be measured: the data hold no agent for it (a small data set),
    it is switched off, its brain does not answer it, or the run's cost limit refuses it.
    `why`: the reason in a few words; `estimate`: what it would have cost, in words, where known."""

    def __init__(self, message: str, why: str = "", estimate: str = "") -> None:
        super().__init__(message)
        self.why, self.estimate = why or message, estimate


@dataclass(frozen=True)
class ProtocolSettings:
    """What every protocol's configuration says: on or off, how many agents (None: as many
    as `half_width` needs; 0: all), the seed, the bootstrap replicates."""

    enabled: bool = True
    n_agents: int | None = None
    half_width: float = 0.1
    seed: int = 0
    n_bootstrap: int = 1000

    @property
    def agents(self) -> int:
        return protocol_agents(self.n_agents, self.half_width)


@dataclass
class Opening:
    """A protocol opened: its name, the brain (of `kind`, made from `sources`), the sampled
    agents and their session templates, the catalogue, and the settings."""

    protocol: str
    kind: BrainKind
    sources: BrainSources
    brain: Brain
    users: list[int]
    sessions: list[AgentSession]
    settings: ProtocolSettings
    log: Log = _quiet

    @property
    def catalogue(self) -> Catalogue:
        return self.sources.catalogue

    @property
    def concurrency(self) -> int:
        return self.kind.concurrency(self.sources)

    def check_bill(self, dry_run: Callable[[object], object]) -> None:
        """A brain that pays per decision, with a cost limit: the protocol's bill before its
        first call — `dry_run(meter)` is the protocol run with a brain that writes and counts
        every prompt while the embedded brain decides — recorded in the run's bill;
        NotMeasurable above what the run has left."""
        bill = self.sources.bill
        if self.kind.decides_offline or bill is None or not bill.cap_usd:
            return
        estimate = self.kind.protocol_estimate(self.sources, bill.label, dry_run, len(self.users))
        if estimate is None:
            return
        refused = estimate_refusal(RunBudget(bill.path, bill.cap_usd), bill.label, estimate, self.log)
        if refused is not None:
            raise NotMeasurable(
                refused,
                f"refused by the cost limit: ${bill.cap_usd:,.2f}",
                f"estimated ${estimate.cost_usd:,.2f} ({estimate.calls:,} calls) by its dry run",
            )

    def __enter__(self) -> Opening:
        return self

    def __exit__(self, *exc) -> None:
        close = getattr(self.brain, "close", None)
        if close is not None:
            close()


def open_protocol(
    protocol: str,
    answers: str,
    kind: BrainKind,
    sources: BrainSources,
    agents,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    settings: ProtocolSettings,
    held: pl.DataFrame | None = None,
    min_items: int = 1,
    off_estimate: Callable[[], str] = lambda: "",
    log: Log = _quiet,
) -> Opening:
    """The opening (module docstring) of `protocol` (its name in words), one of the
    `PROTOCOLS` a brain `answers`; the agents are those with at least `min_items` rows in
    `held` (default: the test window).  `off_estimate()`: what the protocol would cost, in
    words, said when it is switched off; `log`: where the bill before the first call is said."""
    if not settings.enabled:
        raise NotMeasurable(f"{protocol}: switched off (SIMAB_TRUST_PROTOCOLS=off)", "switched off", off_estimate())
    if answers not in kind.answers:
        raise NotMeasurable(f"{protocol}: the {kind.name} brain does not answer it", f"not answered by {kind.name}")
    check_held_out(test, {"train": train, "validation": valid}, protocol, kind.fitted_through(sources))
    users = protocol_users(test if held is None else held, agents.population, settings, min_items)
    if not users:
        raise NotMeasurable(f"{protocol}: no agent has {min_items} or more ratings in the held-out (test) window")
    return Opening(protocol, kind, sources, kind.brain(sources), users, agents.sessions(users), settings, log)


def protocol_users(held: pl.DataFrame, population, settings: ProtocolSettings, min_items: int = 1) -> list[int]:
    """The agents a protocol asks: a seeded sample of `settings.agents` among the users of
    the population (`Agents.population`, whether built or not) with at least `min_items`
    rows in `held`.  The agents asset builds them (`ops.studies.read_users`)."""
    counts = held.group_by("user_id").len().filter(pl.col("len") >= min_items)
    candidates = sorted(set(counts.get_column("user_id").to_list()) & {int(u) for u in population})
    return sample_agents(candidates, settings.agents, settings.seed)


def list_quality_ladder(test: pl.DataFrame, like_threshold: int, population) -> tuple[pl.DataFrame, Ladder]:
    """The list-quality protocol's liked held-out items and its ladder: full lists at every
    ratio, the papers' 20 (10 liked held-out items at 1:1) where enough agents of the
    population hold them, shorter lists where users like few items (`choose_ladder`)."""
    liked = test.filter(pl.col("rating") >= like_threshold)
    return liked, choose_ladder(liked, population) or Ladder(*LADDERS[0], 0)


def measure_taste(
    opening: Opening,
    agents,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    item_ids: np.ndarray,
    papers_holdout: int = 0,
    users_frame: pl.DataFrame | None = None,
    rebuild: Callable[[pl.DataFrame], object] | None = None,
    warn: Log = _quiet,
) -> TasteDiscrimination:
    """Taste discrimination at 1:1, 1:3, 1:9 and 1:4 (SimUSER Table 1, Agent4Rec Table 1):
    the sandbox protocol; beside it the papers' per-item protocol on the test window when
    the brain's kind answers it (`BrainKind.answer_taste`, thresholds fitted on the
    validation window), and again under the papers' hold-out (`papers_holdout` ratings per
    judged user drawn from its train window; `rebuild(kept)` builds the agents from the kept
    ratings, `users_frame` every user)."""
    s, brain, catalogue, sessions = opening.settings, opening.brain, opening.catalogue, opening.sessions
    kind = opening.kind
    known = pl.concat([f.select("user_id", "item_id") for f in (train, valid, test)])
    lists = mixed_lists(test, known, item_ids, TASTE_RATIOS, 20, s.seed, opening.users, stream="taste")

    def dry_run(meter):  # both protocols, every prompt written and counted, nothing sent
        taste_discrimination(meter, sessions, lists, catalogue, s.seed, n_bootstrap=10, progress=False)
        counted = kind.answer_taste(meter, CountedTasteQuestion(catalogue))
        for _ in range((2 if papers_holdout else 1) if counted is not None else 0):  # the hold-out: about as many again
            taste_per_item(counted[0], sessions, lists, s.seed, n_bootstrap=10, progress=False)

    opening.check_bill(dry_run)
    result = taste_discrimination(brain, sessions, lists, catalogue, s.seed, n_bootstrap=s.n_bootstrap, progress=True)

    def on_validation(scorer):
        return fit_taste_thresholds(
            scorer, agents.sessions(), valid, {"train": train}, test, item_ids, TASTE_RATIOS, 20, s.seed, s.agents
        )

    answered = kind.answer_taste(brain, TasteQuestion(catalogue, s.seed, on_validation))
    if answered is None:
        result.brain = brain.name
        return result
    answer, thresholds = answered
    per_item = taste_per_item(answer, sessions, lists, s.seed, n_bootstrap=s.n_bootstrap, progress=True)
    result = result.with_per_item(per_item, thresholds)
    if papers_holdout and rebuild is not None:
        holdout, cuts = papers_holdout_taste(
            _holdout_answerer(opening, valid, users_frame),
            rebuild,
            train,
            opening.users,
            known,
            item_ids,
            held_out=papers_holdout,
            seed=s.seed,
            n_bootstrap=s.n_bootstrap,
            progress=True,
        )
        if holdout is None:
            warn("taste under the papers' hold-out not measured: no judged user has train ratings to draw")
        else:
            result = result.with_holdout(holdout, cuts)
    result.brain = brain.name
    return result


def measure_rating(
    opening: Opening,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    arms: Mapping,
    max_pairs_per_agent: int = 20,
) -> RatingAlignment:
    """Rating prediction beside the user mean and the offline `arms` (SimUSER Table 2) and the
    rating distribution (Agent4Rec Fig. 3), on the same held-out pairs."""
    s, brain, catalogue, sessions = opening.settings, opening.brain, opening.catalogue, opening.sessions
    pairs = rating_pairs(test, opening.users, max_pairs_per_agent, s.seed)
    opening.check_bill(lambda meter: brain_ratings(meter, sessions, pairs, catalogue, s.seed, progress=False))
    rated = brain_ratings(brain, sessions, pairs, catalogue, s.seed, progress=True)
    predictors = offline_rating_predictors(arms, valid, seed=s.seed)
    result = score_ratings(rated, train, predictors, s.n_bootstrap, seed=s.seed)
    result.brain = brain.name
    return result


def measure_list_quality(
    opening: Opening,
    liked: pl.DataFrame,
    ladder: Ladder,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    item_ids: np.ndarray,
) -> ListQuality:
    """Sandbox sessions on lists of rising quality (A/B Agent Fig. 5) on the `ladder`'s lists of
    the `liked` held-out items, through the one simulation path; the read-out beside real
    users' response on the same lists, and the brain's own calibration where it has one."""
    s, brain, catalogue, sessions = opening.settings, opening.brain, opening.catalogue, opening.sessions
    known = pl.concat([f.select("user_id", "item_id") for f in (train, valid, test)])
    lists = mixed_lists(
        liked,
        known,
        item_ids,
        ladder.ratios,
        ladder.list_length,
        s.seed,
        opening.users,
        stream="quality",
        full_lists_only=True,
    )
    opening.check_bill(lambda meter: simulate_lists(meter, sessions, lists, catalogue, SimulationConfig(), seed=s.seed))
    events = simulate_lists(
        brain, sessions, lists, catalogue, SimulationConfig(), seed=s.seed, concurrency=opening.concurrency
    )
    result = list_quality(events, lists, window=test, n_bootstrap=s.n_bootstrap, seed=s.seed)
    result.brain = brain.name
    result.calibration = opening.kind.list_response(opening.sources)
    return result


def _holdout_answerer(opening: Opening, valid: pl.DataFrame, users_frame: pl.DataFrame | None):
    """The per-item answerer under the papers' hold-out, for the agents rebuilt without the
    drawn ratings: the brain's kind refits it on the kept ratings (`BrainKind.refitted`; a
    kind that fits nothing asks the same brain) and answers, thresholds fitted on the second
    drawn set (`papers_holdout_taste`)."""
    kind, sources = opening.kind, opening.sources

    def answerer_for(agents_h, kept: pl.DataFrame, threshold_lists: pl.DataFrame):
        refitted = kind.refitted(sources, agents_h, kept, valid, users_frame)
        brain = opening.brain if refitted is sources else kind.brain(refitted)
        sessions = agents_h.sessions()
        question = TasteQuestion(
            opening.catalogue,
            opening.settings.seed,
            lambda scorer: thresholds_on_lists(scorer, sessions, threshold_lists),
        )
        return kind.answer_taste(brain, question)

    return answerer_for

"""The embedded brain's decisions (package docstring, "Decisions"): the Brain protocol
(`ops.simulation.brains.protocol`) answered from fitted parameters, with no network."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ops.agents.memory import LongTermMemory, ShortTermEntry
from ops.agents.profile import DECADES
from ops.agents.session import AgentSession
from ops.simulation.brains.embedded.config import FEATURES, EmbeddedBrainConfig, EmbeddedBrainParams, LinearModel
from ops.simulation.brains.embedded.features import AgentState, BrainContext, PairScores, agent_states, pair_features
from ops.simulation.brains.embedded.rating_rule import crowd_cuts
from ops.simulation.observation import BACK, CLICK_MOVIE, EXIT, NEXT_PAGE, WATCH_AND_RATE, Decision, Observation

_CROWD = FEATURES.index("crowd_rating")
# The click log-odds of a card whose item the agent already has in memory (skip_seen): a
# probability of 1e-13, never drawn.
SEEN_LOGIT = -30.0


class EmbeddedBrain:
    """Brain protocol (ops.simulation.brains.protocol.Brain) with fitted parameters; no network."""

    decides_offline = True  # no call per decision: studies may repeat its simulations freely

    def __init__(
        self, params: EmbeddedBrainParams, ctx: BrainContext, config: EmbeddedBrainConfig | None = None
    ) -> None:
        self.params = params
        self.ctx = ctx
        self.config = config or EmbeddedBrainConfig()
        # The name goes into every event row: a "w/o vision" simulation (Table 5) must stay
        # distinguishable from the seeing one downstream (read-out, augmentation).
        self.name = "embedded" + ("" if self.config.use_posters else ":no-vision")
        if ctx.vectors.digest != params.catalogue_digest:
            raise ValueError(
                "embedded brain parameters were fitted on another catalogue "
                f"(digest {params.catalogue_digest[:12]}…, catalogue {ctx.vectors.digest[:12]}…): refit them"
            )
        self._agents: dict[int, AgentState] = {}
        self._click_terms = _terms(params.click)
        self._like_terms = _terms(params.like)
        self._scores: dict[int, PairScores] = {}
        self._reflected: dict[int, int] = {}  # user -> session watches its state reflects
        self._crowd_cuts: dict[float, np.ndarray] = {}  # spread -> the rule "crowd"'s cut points

    # -- batch work --------------------------------------------------------------------

    def prepare(self, sessions: Sequence[AgentSession], shown: Mapping[int, Sequence[int]]) -> None:
        """Score every (user, shown movie) pair once; `decide` then only looks them up."""
        self._score_many([(s, shown.get(s.user_id, ())) for s in sessions])

    def click_probability(self, session: AgentSession, item_ids: Sequence[int], slot: int = 1) -> np.ndarray:
        """P(a card catches the eye) at a given page slot (1..5): the home-page decision's core."""
        scores = self._ensure(session, item_ids)
        logit = scores.click_logit[[scores.index[int(m)] for m in item_ids]]
        return _sigmoid(logit - self.config.position_decay * (slot - 1) + self.config.click_bias)

    def click_logits(self, session: AgentSession, item_ids: Sequence[int]) -> np.ndarray:
        """The click decision's log-odds (calibrated scale and shift applied) before the
        position decay and `click_bias`."""
        scores = self._ensure(session, item_ids)
        return scores.click_logit[[scores.index[int(m)] for m in item_ids]]

    def like_probability(self, session: AgentSession, item_ids: Sequence[int]) -> np.ndarray:
        scores = self._ensure(session, item_ids)
        return _sigmoid(scores.like_logit[[scores.index[int(m)] for m in item_ids]])

    def click_and_watch_log_probability(self, session: AgentSession, item_ids: Sequence[int]) -> np.ndarray:
        """log P(the card catches the eye at the first slot) + log P(watch on its detail page),
        in log space so that no two movies tie where the probabilities round to 1."""
        scores = self._ensure(session, item_ids)
        idx = [scores.index[int(m)] for m in item_ids]
        click = scores.click_logit[idx] + self.config.click_bias
        watch = scores.like_logit[idx] + self.config.watch_bias
        return -np.logaddexp(0.0, -click) - np.logaddexp(0.0, -watch)

    def watch_probability(self, session: AgentSession, item_ids: Sequence[int]) -> np.ndarray:
        """P(watch | on its detail page): the detail page's decision when `back` is offered."""
        scores = self._ensure(session, item_ids)
        return _sigmoid(scores.like_logit[[scores.index[int(m)] for m in item_ids]] + self.config.watch_bias)

    # -- one step ----------------------------------------------------------------------

    def decide(self, session: AgentSession, observation: Observation, rng: np.random.Generator) -> Decision:
        self._reflect(session)
        if observation.page_type == "detail":
            return self._detail_page(session, observation, rng)
        return self._home_page(session, observation, rng)

    def _home_page(self, session: AgentSession, obs: Observation, rng: np.random.Generator) -> Decision:
        c = self.config
        ids = [card.item_id for card in obs.items]
        scores = self._ensure(session, ids)
        logits = scores.click_logit
        # Plain floats: a handful of cards per page, where numpy's per-call cost dominates.
        p = [
            _sigmoid1(float(logits[scores.index[m]]) - c.position_decay * slot + c.click_bias)
            for slot, m in enumerate(ids)
        ]
        best_p = max(p, default=0.0)
        interest = 1 + sum(best_p >= cut for cut in c.home_interest_cuts)
        clicked = {e.item_id for e in session.short_term if e.action == CLICK_MOVIE}
        caught = _carried_caught_eye(session.short_term, obs.page_number)
        if caught is None:  # a fresh look at this page
            u = rng.random(len(ids)).tolist()
            caught = tuple(m for m, ui, pi in zip(ids, u, p) if ui < pi and m not in clicked)
        remaining = [m for m in caught if m not in clicked and m in scores.index]
        if remaining and CLICK_MOVIE in obs.legal_actions:
            best = max(remaining, key=lambda m: (p[ids.index(m)], -ids.index(m)))
            return Decision(
                action=CLICK_MOVIE,
                interest=interest,
                reason=self._reason(session, scores, scores.index[best], self._click_terms, positive=True),
                item_id=best,
                caught_eye=caught,
            )
        if NEXT_PAGE in obs.legal_actions:
            fatigue = session.fatigue_spent / max(session.fatigue_budget, 1e-9)
            p_exit = _sigmoid1(c.exit_bias + c.exit_fatigue_weight * fatigue + c.exit_interest_weight * (3 - interest))
            if rng.random() >= p_exit:
                why = "nothing else here fits my taste" if caught else f"page {obs.page_number} doesn't fit my taste"
                return Decision(NEXT_PAGE, interest, f"{why}; looking further", caught_eye=caught)
            why = f"tired ({session.fatigue_spent:.0f}/{session.fatigue_budget:.0f} fatigue)"
            if interest <= 2:
                why += f" and page {obs.page_number} holds little for me"
            return Decision(EXIT, interest, why, caught_eye=caught)
        why = "reached the end of the recommendations" if obs.page_number > 1 else "nothing more to see"
        if ids and not caught:
            top = ids[p.index(best_p)]
            why += f"; even {self.ctx.facts.titles[int(scores.rows[scores.index[top]])]} did not tempt me"
        return Decision(EXIT, interest, why, caught_eye=caught)

    def _detail_page(self, session: AgentSession, obs: Observation, rng: np.random.Generator) -> Decision:
        c = self.config
        item_id = obs.detail.card.item_id
        scores = self._ensure(session, [item_id])
        i = scores.index[item_id]
        like_logit = float(scores.like_logit[i])
        p_like = _sigmoid1(like_logit)
        interest = 1 + sum(p_like >= cut for cut in c.detail_interest_cuts)
        u, z = rng.random(), rng.standard_normal()
        # Without `back` (asked to rate, as the rating-prediction protocol asks) the agent
        # watches and rates; the same draws are made either way.
        must_rate = BACK not in obs.legal_actions
        if WATCH_AND_RATE in obs.legal_actions and (must_rate or u < _sigmoid1(like_logit + c.watch_bias)):
            rating = self._rating(
                float(scores.rating_mean[i]),
                z,
                self._agents[session.user_id].conformity,
                float(scores.features[i, _CROWD]) + self.params.global_mean_rating,
            )
            liked = rating >= c.like_threshold
            return Decision(
                action=WATCH_AND_RATE,
                interest=interest,
                reason=f"rated {rating}: " + self._reason(session, scores, i, self._like_terms, positive=liked),
                item_id=item_id,
                rating=rating,
            )
        reason = "not for me: " + self._reason(session, scores, i, self._like_terms, positive=False)
        return Decision(BACK, interest, reason, item_id=item_id)

    def _rating(self, mean: float, z: float, conformity: float = 0.0, crowd: float | None = None) -> int:
        """The star rating for a predicted mean `mean` under the configured rule (z: the
        step's standard normal draw, used by "sampled" and "personal" only; conformity: the
        agent's, −1 … +1, used by "personal" and "crowd"; crowd: the movie's crowd rating,
        used by "crowd")."""
        c = self.config
        lo, hi = c.rating_range
        if c.rating_rule == "crowd":
            weight = self.params.rating_crowd_weight if c.rating_crowd_weight is None else c.rating_crowd_weight
            spread = self.params.rating_spread if c.rating_spread is None else c.rating_spread
            cuts = self._crowd_cuts.get(spread)
            if cuts is None:
                cuts = self._crowd_cuts[spread] = crowd_cuts(self.params.rating_cuts, spread, c.rating_range)
            moved = mean if crowd is None else crowd + (1.0 - weight * conformity) * (mean - crowd)
            return lo + int(np.searchsorted(cuts, moved, side="right"))
        if c.rating_rule == "matched" and self.params.rating_cuts:
            return lo + int(np.searchsorted(self.params.rating_cuts, mean, side="right"))
        noise = c.rating_noise * self.params.rating_residual_sd * z if c.rating_rule in ("sampled", "personal") else 0.0
        if c.rating_rule == "personal":
            # An independent rater strays further from the predicted (crowd-informed) mean
            # than a conformist: Agent4Rec Fig. 4, the rating gap falls with conformity.
            noise *= max(0.0, 1.0 - c.rating_conformity_weight * conformity)
        return min(hi, max(lo, int(round(mean + noise))))

    def exit_interview(self, session: AgentSession, rng: np.random.Generator) -> tuple[int, str]:
        c = self.config
        watched = [
            (e.item_id, e.rating) for e in session.short_term if e.action == WATCH_AND_RATE and e.rating is not None
        ]
        likes = [m for m, r in watched if r >= c.like_threshold]
        dislikes = [m for m, r in watched if r <= 2]
        home = [e.interest for e in session.short_term if e.page_type == "home"]
        mean_interest = sum(home) / len(home) if home else 3.0
        pickiness = getattr(session.profile, "pickiness", "moderately picky")
        score = (
            c.satisfaction_base
            + c.satisfaction_per_like * len(likes)
            + c.satisfaction_per_watch * (len(watched) - len(likes) - len(dislikes))
            + c.satisfaction_per_dislike * len(dislikes)
            + c.satisfaction_interest_weight * (mean_interest - 3.0)
            + c.satisfaction_pickiness.get(pickiness, 0.0)
            + c.satisfaction_noise_sd * float(rng.standard_normal())
        )
        lo, hi = c.satisfaction_range
        satisfaction = min(hi, max(lo, int(round(score))))
        titles = self.ctx.facts.titles
        rows = self.ctx.facts
        named = ", ".join(titles[rows.row(m)] for m in likes[:2])
        if likes:
            reason = f"liked {len(likes)} of {len(watched)} watched ({named})"
        elif watched:
            reason = f"watched {len(watched)} but liked none"
        else:
            reason = "found nothing worth watching"
        reason += "; the pages " + (
            "suited my taste"
            if mean_interest >= 3.5
            else "were hit and miss"
            if mean_interest >= 2.5
            else "rarely matched my taste"
        )
        return satisfaction, reason

    # -- reflection (package docstring, "Reflection") ----------------------------------

    def _reflect(self, session: AgentSession) -> None:
        """Every `reflect_every` actions, the agent's state from its long-term memory plus
        the session's watches; a new session starts again from the long-term memory."""
        uid = session.user_id
        if not session.short_term:
            if self._reflected.pop(uid, None) is not None:
                self._agents.pop(uid, None)
                self._scores.pop(uid, None)
            return
        every = self.config.reflect_every
        if not every or len(session.short_term) % every:
            return
        watches = [
            e
            for e in session.short_term
            if e.action == WATCH_AND_RATE and e.rating is not None and e.item_id is not None
        ]
        if len(watches) == self._reflected.get(uid, 0):
            return  # nothing new to reflect on
        memory = session.memory
        start = int(memory.timestamps.max()) + 1 if len(memory) else 0
        grown = memory.grow(
            [e.item_id for e in watches],
            [e.rating for e in watches],
            start + np.arange(len(watches)),
            [""] * len(watches),
        )
        self._agents[uid] = agent_states({uid: grown}, {uid: session.profile}, self.ctx, self.config)[uid]
        self._scores.pop(uid, None)
        self._reflected[uid] = len(watches)

    # -- scoring -----------------------------------------------------------------------

    def _ensure(self, session: AgentSession, item_ids: Sequence[int]) -> PairScores:
        scores = self._scores.get(session.user_id)
        if scores is not None and all(int(m) in scores.index for m in item_ids):
            return scores
        self._score_many([(session, item_ids)])
        return self._scores[session.user_id]

    def _score_many(self, requests: Sequence[tuple[AgentSession, Sequence[int]]]) -> None:
        """Score the (agent, movie) pairs not scored yet, all agents in one batch."""
        fresh = {}
        for session, _ in requests:
            uid = session.user_id
            if uid not in self._agents and uid not in fresh:
                memory = session.memory
                if not isinstance(memory, LongTermMemory):
                    raise TypeError(f"embedded brain: agent {uid} has no LongTermMemory (got {type(memory).__name__})")
                if memory.vectors is not self.ctx.vectors and memory.vectors.digest != self.ctx.vectors.digest:
                    raise ValueError(f"embedded brain: agent {uid}'s memory points at another catalogue")
                fresh[uid] = session
        if fresh:
            profiles = {u: s.profile for u, s in fresh.items()}
            self._agents.update(agent_states({u: s.memory for u, s in fresh.items()}, profiles, self.ctx, self.config))
        # Group by the HistoryStats chunk the agents were prepared with (one per batch).
        groups: dict[int, list[tuple[int, list[int]]]] = {}
        for session, item_ids in requests:
            uid = session.user_id
            known = self._scores.get(uid)
            new = [int(m) for m in dict.fromkeys(item_ids) if known is None or int(m) not in known.index]
            if new:
                groups.setdefault(id(self._agents[uid].stats), []).append((uid, new))
        for items in groups.values():
            agents = [self._agents[u] for u, _ in items]
            rows = [self.ctx.vectors.rows_of(new) for _, new in items]
            X, tnn, pnn = pair_features(agents, rows, self.ctx, self.config)
            # The click decision's log-odds: the click model's, sharpened and shifted by the
            # list-response calibration (EmbeddedBrainParams.click_scale / click_shift).
            click = self.params.click_scale * self.params.click.score(X) + self.params.click_shift
            like, mean = self.params.like.score(X), self.params.rating.score(X)
            start = 0
            for (uid, new), r in zip(items, rows):
                sl = slice(start, start + len(new))
                start += len(new)
                if self.config.skip_seen:
                    # What the agent already took it does not take again (EmbeddedBrainConfig.skip_seen).
                    click[sl] = np.where(np.isin(r, self._agents[uid].rows), SEEN_LOGIT, click[sl])
                self._add_scores(uid, new, r, X[sl], click[sl], like[sl], mean[sl], tnn[sl], pnn[sl])

    def _add_scores(self, uid, new, rows, X, click, like, mean, tnn, pnn) -> None:
        scores = self._scores.get(uid)
        if scores is None:
            self._scores[uid] = PairScores({m: i for i, m in enumerate(new)}, rows, X, click, like, mean, tnn, pnn)
            return
        base = len(scores.index)
        scores.index.update({m: base + i for i, m in enumerate(new)})
        self._scores[uid] = PairScores(
            scores.index,
            np.r_[scores.rows, rows],
            np.vstack([scores.features, X]),
            np.r_[scores.click_logit, click],
            np.r_[scores.like_logit, like],
            np.r_[scores.rating_mean, mean],
            np.r_[scores.text_neighbour, tnn],
            np.r_[scores.poster_neighbour, pnn],
        )

    # -- reasons -----------------------------------------------------------------------

    def _reason(self, session: AgentSession, scores: PairScores, i: int, terms, positive: bool) -> str:
        """The two features that pushed the decision most, in words."""
        idx, coef, names = terms
        contrib = scores.features[i, idx] * coef
        order = np.argsort(-contrib if positive else contrib, kind="stable")
        phrases: list[str] = []
        for j in order.tolist():
            value = contrib[j]
            if (value <= 0 if positive else value >= 0) or len(phrases) == 2:
                break
            phrase = self._phrase(session, scores, i, names[j], positive)
            if phrase and phrase not in phrases:
                phrases.append(phrase)
        if not phrases:
            return "a close call" if positive else "nothing about it stands out"
        return "; ".join(phrases)

    def _genre_names(self, row: int) -> list[str]:
        return [self.ctx.facts.genre_names[j] for j in np.flatnonzero(self.ctx.facts.genres[row])]

    def _phrase(self, session: AgentSession, scores: PairScores, i: int, feature: str, positive: bool) -> str | None:
        facts = self.ctx.facts
        movie_row = int(scores.rows[i])
        user = self._agents[session.user_id]
        stats, srow = user.stats, user.stat_row
        if feature in ("genre_lift", "genre_deviation"):
            genres = self._genre_names(movie_row)
            if not genres:
                return None
            names = facts.genre_names
            pref = {
                g: stats.genre_lift[srow, names.index(g)] + stats.genre_deviation[srow, names.index(g)] for g in genres
            }
            g = max(pref, key=pref.get) if positive else min(pref, key=pref.get)
            return (
                f"{g} matches my taste"
                if positive
                else f"{g} is not my {'genre' if facts.item_noun == 'movie' else 'kind of thing'}"
            )
        if feature in ("text_affinity", "text_familiarity", "poster_affinity", "poster_familiarity"):
            nn = scores.poster_neighbour[i] if feature.startswith("poster") else scores.text_neighbour[i]
            what = "poster" if feature.startswith("poster") else "story"
            if positive and nn >= 0:
                title = facts.titles[int(user.rows[nn])]
                return f"{what} like {title}, which I rated {int(user.ratings[nn])}"
            return f"{what} unlike the films I enjoyed" if not positive else f"{what} looks like my kind of film"
        if feature == "era_lift":
            dec = self.ctx.decade[movie_row]
            return (
                (f"from the {DECADES[dec]}s, an era I like" if positive else f"from the {DECADES[dec]}s, not my era")
                if dec >= 0
                else None
            )
        if feature in ("vote", "vote_x_conformity"):
            vote = facts.vote_average[movie_row]
            if not np.isfinite(vote):
                return None
            return f"well reviewed ({vote:.1f}/10)" if positive else f"weak reviews ({vote:.1f}/10)"
        if feature in ("crowd_rating", "crowd_rating_x_conformity"):
            mean = facts.mean_rating[movie_row]
            if not np.isfinite(mean):
                return None
            return f"people rate it {mean:.1f}/5 on average" if positive else f"people rate it only {mean:.1f}/5"
        if feature in ("popularity", "popularity_x_conformity", "popularity_head"):
            return "a popular pick" if positive else "too obscure for me"
        if feature == "trend":
            return "everyone is watching it lately" if positive else "its moment has passed"
        if feature == "age":
            return "an old favourite" if positive else "new, just out"
        if feature == "director_match":
            directors = facts.directors[movie_row]
            return (
                (
                    f"directed by {directors[0]}, whose films I liked"
                    if positive
                    else f"directed by {directors[0]}, not my director"
                )
                if directors
                else None
            )
        if feature == "actor_match":
            liked = stats.liked_actors[srow]
            names = self.ctx.credits.actors
            fav = {names[j] for j in liked.indices[liked.data > 0]}
            actors = [a for a in facts.actors[movie_row][: self.ctx.profile_config.actors_per_movie] if a in fav]
            return f"stars {actors[0]}, whom I like" if actors and positive else None
        if feature == "demographic_lift":
            profile = session.profile
            gender = {"M": "men", "F": "women"}.get(getattr(profile, "gender", None), "people")
            age = getattr(profile, "age_label", None)
            who = f"{gender} aged {age}" if age else gender
            return f"popular with {who}, like me" if positive else f"not what {who} like me watch"
        if feature in ("collab", "collab_recent"):
            when = " lately" if feature == "collab_recent" else ""
            who = f"people who watch what I watched{when}"
            return f"{who} watch it" if positive else f"not what {who} watch"
        if feature == "user_mean":
            return "I rarely rate highly" if not positive else "I enjoy most films"
        return None


def _carried_caught_eye(short_term: Sequence[ShortTermEntry], page_number: int) -> tuple[int, ...] | None:
    """The caught-eye set of this page visit when coming back from its detail pages.

    A visit continues while the steps since its last home-page step are detail-page steps
    and that home step clicked a movie on this same page; otherwise the page is looked at
    afresh (a new page, or the same page reached again by next / previous).
    """
    for e in reversed(short_term):
        if e.page_type == "detail":
            continue
        if e.action == CLICK_MOVIE and e.page_number == page_number:
            return e.caught_eye
        return None
    return None


def _terms(model: LinearModel) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    return np.array([FEATURES.index(f) for f in model.features]), np.asarray(model.coef), tuple(model.features)


def _sigmoid1(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-min(30.0, max(-30.0, x))))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))

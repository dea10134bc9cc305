"""The embedded brain: the offline default way an agent decides (docs/definitions.md#brains).

It reads what an LLM brain would read — the page (A/B Agent §2.3), the agent's profile
(§2.4.1), memories retrieved from long-term memory by text and by poster similarity
(§2.4.2), the session so far (short-term memory) and its fatigue (§2.4.4) — and turns them
into actions with a few parameters fitted on data instead of a prompt.

Features of a (user, movie) pair, all from the TRAIN window (`pair_features`):
- text_familiarity / poster_familiarity: mean cosine similarity of the movie to the k
  remembered movies retrieved by text / by poster (how much it resembles what the user
  watches at all);
- text_affinity / poster_affinity: the rating-weighted similarity of those k memories,
  Σ sim·(rating − user mean) / Σ sim (does it resemble what the user rated highly);
- genre_lift, genre_deviation: over the movie's genres, the user's over-representation of
  the genre (log share ratio against all users) and mean rating gap in it;
- era_lift: the same log share ratio for the movie's release decade;
- vote, popularity: vote average and log train popularity, standardised over the
  catalogue, each also multiplied by the conformity trait (−1 most independent … +1 most
  conforming): conformists follow the crowd (Agent4Rec §2.1.1);
- popularity_head: the square of the standardised log popularity above the catalogue's
  mean (0 below it): where a few items take most interactions (Steam) the rate of
  interaction rises faster than exp(linear in log popularity) at the head, and a linear
  term alone ranks a learned model's mid-popular items above the head (Steam's validation
  window: FM's first five items 41 % fewer real interactions than Pop's, the linear click
  model scoring them 2 % higher; docs/trust.md); the click model uses it only when fitted
  on uniform negatives (`popular_negative_share` 0), the like and rating models always;
- crowd_rating: the movie's mean train rating shrunk towards the global mean
  (`crowd_rating_prior` pseudo-ratings), minus the global mean, and its product with the
  conformity trait — what the crowd thinks of it, as an LLM knows a film's reputation;
- user_mean: the user's mean rating minus the global mean (SimUSER's pickiness);
- demographic_lift: how much more than expected people of the agent's gender and age
  group rated the movie in the train window, log((observed + 5) / (expected + 5)) — the
  profile's demographics, which an LLM reads as "people like me tend to watch …";
- collab, collab_recent: the collaborative score — the movie's item factor (a truncated SVD
  of the train window's user x movie matrix, less its leading, popularity factor, rows at
  unit length) dotted with the mean factor of the agent's remembered movies / of its
  `collab_recent` most recent ones, or (`collab_family="itemknn"`) an item-item cosine
  neighbourhood instead of factors; the click model leaves them out by default
  (`click_collaborative="none"`): they raise its held-out click AUC (ML-1M users 1-1999:
  0.752 -> 0.778) but make the simulation favour factor models' lists (docs/trust.md);
- director_match, actor_match (detail page only: the home page does not show credits):
  how often the user liked movies by the same director / with the same top actors.

Fitting (`fit`), on the train and validation windows only — the test window is never read:
1. click model (home page): users with validation ratings; positives = the movies each
   rated in the validation window; negatives = movies the user rated in neither window,
   `negatives_per_positive` per positive, half drawn uniformly from the catalogue and half
   in proportion to train popularity (so the model must separate taste from popularity).
   A logistic regression (scikit-learn, L2) on the home-page features.  With
   `exposure_correction` p > 0 the log's exposure is taken out (docs/definitions.md#the-truth):
   each positive weighs 1 / (its item's train count + 1) ** p, rescaled to the positives'
   total, so the model estimates what users take up when shown an item, not what the
   production system showed them (inverse propensity scoring).
2. like model (detail page): on the validation positives, label = rating >= 4; a
   logistic regression on all features.
3. rating model: least squares (ridge) of the validation rating on all features; its
   residual standard deviation is the spread of sampled ratings, and the cut points that
   give the validation window's per-star shares are stored for the "matched" rule.
Click × like is P(rated in the validation window and rated >= 4): the label the issue
names, split in two because the home page and the detail page show different things.
A share of the users (`holdout_share`) is held out and the held-out AUCs and RMSE are
stored with the parameters.  Not fitted (no log records them): the position effect on the
home page, the watch/exit/interest mappings and the satisfaction formula; their constants
sit in `EmbeddedBrainConfig` with the reason for each.

Decisions (`EmbeddedBrain.decide`), each drawn from the generator the loop passes in, so a
session is a pure function of (seed, agent, arm):
- home page, first look at a page: each card catches the eye with probability
  sigmoid(s·click logit + b − position_decay·(slot − 1) + click_bias), where s and b
  (`click_scale`, `click_shift`; 1 and 0 as fitted) are calibrated afterwards to real
  users' response to list quality on the validation window
  (`ops.studies.alignment.calibration`; on ML-1M users 1–1999 it moved the elasticity of
  the sandbox CVR to the share of relevant items from 0.28 to ~0.6, real users' being 1); the agent then clicks the
  caught cards best first, coming back to the page after each detail page.  With nothing
  left it moves on or exits, more likely to exit when tired and when the page bores it.
- detail page: watch with probability sigmoid(like logit + watch_bias) (always, when
  `back` is not offered: the rating-prediction protocol asks the agent to rate); the
  rating follows `rating_rule` ("Ratings" below); otherwise back.
- interest (1–5, drives fatigue): cut points on the page's best click probability (home)
  or the like probability (detail).
- exit interview: satisfaction 1..10 from likes, dislikes, interest and pickiness.
Every action carries a short reason built from the features that drove it.

Reflection (`reflect_every`, Agent4Rec §2.1.2 memory reflection; off by default): after
every `reflect_every` actions of a session, if the agent has watched and rated something
since it last reflected, its state is rebuilt from its long-term memory plus those watches
(`LongTermMemory.grow` on a copy): the memory-derived features — text / poster familiarity
and affinity, genre and era lifts, genre deviations, liked credits — then count them like
any remembered interaction, and the agent's scores are recomputed for the rest of the
session.  An agent that watched three romances it rated 5 becomes likelier to click the
next romance.  The fitted coefficients do not change (they weigh features, not tastes); a
new session starts from the long-term memory again.  Across rounds, the watches are
written to long-term memory for good (`ops.studies.rounds`).

Ratings (`rating_rule`): a sampled rating (μ + noise) reproduces the real spread of stars
but cannot predict a real rating better than √2 × the model's residual error; the rounded
mean ("expected") does, with stars bunched at 3 and 4, every agent the same small gap to the
crowd; cut points fitted to the validation window's per-star shares ("matched") keep the
spread with a smaller loss; "personal" scales the sampled noise down for conforming agents.
The default, "crowd" (`ops.simulation.brains.embedded.rating_rule`), moves μ away from the
movie's crowd rating for independent agents and towards it for conformists, and cuts it
part of the way to the matched cut points, with both amounts chosen on the validation
window within 1 % of rounding's RMSE: small steps from the least-squares mean cost RMSE to
second order and buy the trait and the spread to first order.  Measured on ML-1M users
1–1999 (test window, bench/alignment.py): RMSE 0.94 / 1.04 / 1.27 / 1.25 / 0.95, Wasserstein
distance to the real stars 0.34 / 0.02 / 0.07 / 0.05 / 0.23 and ρ(conformity tier, rating
gap) −0.10 / +0.03 / −0.14 / −0.78 / −0.36 (real −0.39) for "expected" / "matched" /
"sampled" / "personal" / "crowd"; "crowd" is the one rule that keeps the RMSE target (the
best offline arm's, 0.96) while it moves the gap and the spread the real way.

Speed: `prepare` scores every (agent, shown movie) pair of an arm in one batch — the
history statistics as sparse matrix products, the memory retrieval as gathers from the
catalogue's cosine matrix (computed once per context), agents grouped by memory size — so
`decide` is a few dictionary look-ups and float operations.
"""

from ops.simulation.brains.embedded.brain import EmbeddedBrain
from ops.simulation.brains.embedded.config import (
    DETAIL_FEATURES,
    FEATURES,
    HOME_FEATURES,
    EmbeddedBrainConfig,
    EmbeddedBrainParams,
    ExposureCalibration,
    LinearModel,
    ListResponse,
)
from ops.simulation.brains.embedded.features import (
    AgentState,
    BrainContext,
    PairScores,
    agent_states,
    demographic_group,
    pair_features,
)
from ops.simulation.brains.embedded.fitting import EmbeddedBrainModel, fit, fit_embedded_brain

__all__ = [
    "AgentState",
    "BrainContext",
    "DETAIL_FEATURES",
    "EmbeddedBrain",
    "EmbeddedBrainConfig",
    "EmbeddedBrainModel",
    "EmbeddedBrainParams",
    "FEATURES",
    "HOME_FEATURES",
    "LinearModel",
    "ExposureCalibration",
    "ListResponse",
    "PairScores",
    "agent_states",
    "demographic_group",
    "fit",
    "fit_embedded_brain",
    "pair_features",
]

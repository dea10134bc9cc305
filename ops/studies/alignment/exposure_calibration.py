"""Calibrating the embedded brain's click decision on a random-exposure sample.

The click model is fitted on the log (`ops.simulation.brains.embedded.fitting`): what users
took up next among what the production system exposed, against sampled negatives.  Its
log-odds rank items, but their level and spread answer "taken up next, from the log's
exposure", not "clicked when shown".  A random bucket answers the second directly: users shown
items drawn uniformly at random, their clicks recorded.  Where a run has one with clicks, a
seeded half of its users (`ops.data.random_exposure.calibration_users`; the judge reads only
the other half) sets the click decision's log-odds to s × (click model) + b, the two numbers
a logistic regression of those users' clicks on the model's log-odds at the simulation clock
(the agents' own features, as they decide) gives.  This replaces the list-response
calibration, which can only read the log's exposure.

What it does and does not do.  Calibrated on random items, the decision is P(click | shown,
the model's log-odds): the simulated CTR of a random list is the users' own (on the planted
worlds 0.074–0.096 against a truth of 0.083–0.091, where the list response gives 0.035–0.111),
and the mirror's lists, picked by those log-odds alone, are clicked as often as the log-odds
predict.  It does not hold the mirror's excess at 0 (docs/findings/truth.md): the other arms'
lists carry what the click model does not know (a neighbourhood's co-occurrence), so their
items are clicked more than the model predicts and the mirror, by comparison, less; the list
response's sharper scale hides some of that by saturating the best lists.  Opt-in,
`SIMAB_CLICK_CALIBRATION=random_exposure`.

It reads the calibration half's rows only (user, item, clicked), never the planted truth nor
the judging half (`tests/test_exposure_calibration.py` checks both).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from ops.simulation.brains.embedded import EmbeddedBrainModel, ExposureCalibration
from ops.simulation.brains.embedded.brain import SEEN_LOGIT


class NoExposureSignal(ValueError):
    """The click model's log-odds do not rise with the sample's clicks: no scale to set."""


def calibrate_on_random_exposure(model: EmbeddedBrainModel, agents, rows: pl.DataFrame) -> EmbeddedBrainModel:
    """`model` with its click decision's scale and shift set on `rows` (user_id, item_id,
    clicked: the calibration half of a random bucket, `ops.data.random_exposure.calibration_rows`),
    the record in `params.exposure_calibration`.  Rows of users without an agent are left out.
    NoExposureSignal where the fitted scale is not positive (the caller keeps another calibration)."""
    raw = model.with_params(model.params.model_copy(update={"click_scale": 1.0, "click_shift": 0.0}))
    brain = raw.brain()
    known = rows.filter(pl.col("user_id").is_in(list(agents.profiles)))
    logits, clicked = [], []
    by_user = known.partition_by("user_id", as_dict=True, maintain_order=True)
    sessions = {s.user_id: s for s in agents.sessions(sorted(int(k[0]) for k in by_user))}
    for (uid,), part in by_user.items():
        logits.append(brain.click_logits(sessions[int(uid)], part.get_column("item_id").to_list()))
        clicked.append(part.get_column("clicked").to_numpy())
    x = np.concatenate(logits) if logits else np.zeros(0)
    y = np.concatenate(clicked).astype(int) if clicked else np.zeros(0, dtype=int)
    # An item already in the agent's memory is never clicked again (`skip_seen`): not a
    # decision the calibration can set (a team's bucket may show what a user took later).
    fresh = x > SEEN_LOGIT
    x, y = x[fresh], y[fresh]
    if y.size == 0 or y.min() == y.max():
        raise NoExposureSignal(f"the random-exposure calibration rows hold {int(y.sum())} clicks of {y.size}")
    # Nearly unpenalised: two numbers on hundreds of rows need no shrinkage.
    fit = LogisticRegression(C=1e6, max_iter=1000).fit(x[:, None], y)
    scale, shift = float(fit.coef_[0, 0]), float(fit.intercept_[0])
    if scale <= 0:
        raise NoExposureSignal(
            f"the click model's log-odds fall with the random-exposure clicks (scale {scale:.3f} on {y.size} rows)"
        )
    record = ExposureCalibration(
        users=len(by_user),
        rows=int(y.size),
        clicks=int(y.sum()),
        click_rate=float(y.mean()),
        scale=scale,
        shift=shift,
        auc=float(roc_auc_score(y, x)),
        mean_probability=float(fit.predict_proba(x[:, None])[:, 1].mean()),
    )
    params = model.params.model_copy(
        update={
            "click_scale": scale,
            "click_shift": shift,
            "list_response": None,
            "list_response_skipped": None,
            "exposure_calibration": record,
        }
    )
    return model.with_params(params)


def exposure_calibration_line(record: ExposureCalibration) -> str:
    """The calibration in one line, for the step's log."""
    return (
        f"click decision calibrated on the random-exposure sample: {record.users} users, {record.rows} rows, "
        f"{record.clicks} clicks; log-odds × {record.scale:.3f} {record.shift:+.3f} (the click model's AUC there {record.auc:.3f})"
    )

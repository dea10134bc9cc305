"""The verdict never depends on the trust checks' budget: with every protocol that asks the
brain not measured (switched off, refused by the cost limit, failed), the report and the
console still open on the A/B verdict and the fidelity, and say for each protocol why it
was not measured and what it would have cost.  The protocol assets' own behaviour (a record
instead of a failure) is in tests/test_run_budget.py."""

from __future__ import annotations

import polars as pl

from ops.readout.ab_readout import ab_readout
from ops.readout.readout_config import ReadoutConfig
from ops.readout.verdict import verdict_lines
from ops.studies.alignment.trust import trust_section
from ops.studies.verdict import Trust, VerdictInputs, build_verdict
from tests.test_ab_readout import shifted_world

RECORDS = {
    "taste": {
        "not_measured": "taste_alignment is estimated at $0.8900 (2,328 calls), above max_cost_usd=$0.2000 less what "
        "this run has spent ($0.1784 left)",
        "why": "refused by the cost limit: $0.20",
        "estimate": "estimated $0.89 (2,328 calls) by its dry run",
    },
    "rating": {
        "not_measured": "rating prediction: switched off (SIMAB_TRUST_PROTOCOLS=off)",
        "why": "switched off",
        "estimate": "about $0.20 for 97 agents (at most $1.75), from the settings",
    },
    "list_quality": {
        "not_measured": "list_quality_alignment: failed: the endpoint refused the request (HTTP 401)",
        "why": "failed",
        "estimate": "",
    },
}


def test_with_no_trust_protocol_measured_the_verdict_and_the_fidelity_still_open_the_report():
    readout = ab_readout(shifted_world(n=60), control="A", config=ReadoutConfig(n_bootstrap=300, seed=0))
    fid = pl.DataFrame({"simulated": ["ctr"], "offline": ["ndcg_at_k"], "kendall_tau": [1.0], "same_best_arm": [True]})
    pairs = pl.DataFrame({"arm_a": ["B"], "arm_b": ["A"], "verdict": ["agree"]})
    trust = Trust(RECORDS["taste"], RECORDS["rating"], list_quality=RECORDS["list_quality"])
    said = verdict_lines(build_verdict(VerdictInputs(readout, fid, pairs, 0.6, 0.02, trust=trust)))
    assert said[0].startswith("Winner on CTR: B, +")  # the A/B read-out the run paid for
    assert said[1].startswith("fidelity: Kendall τ(CTR, NDCG@20) = 1.00")  # no LLM call needed
    assert said[2] == (
        "trust in the agents: not measured: taste (refused by the cost limit: $0.20; estimated $0.89 (2,328 calls) by "
        "its dry run); rating (switched off; about $0.20 for 97 agents (at most $1.75), from the settings); "
        "list quality (failed)"
    )
    section = "\n".join(trust_section(social=None, not_measured=RECORDS))
    for record in RECORDS.values():  # each protocol's reason in its place, with its estimate
        assert f"**Not measured**: {record['not_measured']}" in section
        assert record["estimate"] in section
    assert "Not run." not in section.split("### Social traits")[0]


def test_a_protocol_measured_beside_one_not_measured_keeps_its_figures():
    readout = ab_readout(shifted_world(n=40), control="A", config=ReadoutConfig(n_bootstrap=100, seed=0))

    class Rating:  # a measured rating protocol: the brain's RMSE beside the best offline arm's
        prediction = pl.DataFrame({"predictor": ["brain", "fm"], "kind": ["brain", "offline arm"], "rmse": [0.95, 0.9]})

    verdict = build_verdict(
        VerdictInputs(readout, pl.DataFrame(), pl.DataFrame(), 0.6, 0.02, trust=Trust(RECORDS["taste"], Rating()))
    )
    trust = verdict_lines(verdict)[2]
    assert trust.startswith(
        "trust in the agents: rating RMSE 0.950 (best offline arm, fm: 0.900); not measured: taste ("
    )

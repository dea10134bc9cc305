"""The report of a run (docs/definitions.md#lifecycle, step 11), written: the A/B read-out
beside the offline metrics, the fidelity of the simulation, the power of the test and how far
to trust the agents (the alignment protocols), as Markdown and as one HTML page with its
figures, under a folder of the run and as the latest report.

The verdict is built by `ops.studies.verdict`, the Markdown and the HTML page by
`ops.readout.report_markdown` and `ops.readout.report_html`; this module gathers what
they hold, which needs the studies (the alignment protocols' trust section), so it sits
above the read-out.  The `simab_report` asset calls `write_report` and logs the result.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ops.arms.ranking import evaluation_users
from ops.arms.registry import has_capability
from ops.data.random_exposure import calibration_users
from ops.figures import save_figure
from ops.readout.bias import simulator_bias
from ops.readout.fidelity import arm_agreement, offline_intervals
from ops.readout.gaps import gap_sizes
from ops.readout.power import PowerAnalysis, power_analysis
from ops.readout.readout_figures import fidelity_pairs, gap_figure, power_figure, write_ab_figures
from ops.readout.report_html import report_html
from ops.readout.report_markdown import bill_lines, report_markdown
from ops.readout.slots import slots_markdown
from ops.readout.truth import judge_against_truth
from ops.readout.verdict import Verdict
from ops.simulation.budget import RunBudget
from ops.storage.atomic import atomic_write_bytes
from ops.studies.alignment.protocol_figures import (
    calibration_figure,
    list_quality_figure,
    rating_figure,
    sensitivity_figure,
    social_figure,
    taste_figure,
)
from ops.studies.alignment.trust import trust_section
from ops.studies.verdict import Trust, VerdictInputs, build_verdict


@dataclass(frozen=True)
class Report:
    """A written report: where it lies, its text, its verdict and what the verdict read
    (`measured`), and the tables and figures it logs (`metrics`, `tables`)."""

    path: Path
    html_path: Path
    text: str
    verdict: Verdict
    measured: VerdictInputs

    @property
    def plots(self) -> Path:
        return self.path.parent / "plots"

    def metrics(self) -> dict[str, float]:
        """Kendall τ per pair of rankings, the mirror's excess CTR, the gap factor with each
        arm's simulated and logged ratio, the arm pairs' counts, and per pair of arms the
        minimum detectable CTR difference and sensitivity ratio."""
        m = self.measured
        metrics = {
            f"kendall_tau_{row['simulated']}_vs_{row['offline']}": row["kendall_tau"]
            for row in m.fid.iter_rows(named=True)
        }
        if m.bias.excess is not None:
            metrics["mirror_excess_ctr"] = m.bias.excess
        if m.gaps is not None:
            metrics |= m.gaps.metrics()
        if m.truth is not None:
            metrics |= m.truth.metrics()
        if m.pairs.height:
            metrics |= {
                f"pairs_{k.replace(' ', '_')}": v
                for k, v in self.verdict.fidelity.counts.items()
                if isinstance(v, (int, float))
            }
        if m.power is not None and m.power.pairs.height:
            for row in m.power.pairs.iter_rows(named=True):
                pair = f"{row['arm_a']}_vs_{row['arm_b']}"
                metrics[f"mde_ctr_{pair}"] = row["minimum_detectable_difference"]
                if row["sensitivity_ratio"] is not None:
                    metrics[f"sensitivity_{pair}"] = row["sensitivity_ratio"]
        return metrics

    def tables(self) -> dict[str, pl.DataFrame]:
        """The tables behind the report, by the name they are logged under."""
        m = self.measured
        tables = {"fidelity": m.fid} if m.fid.height else {}
        tables["simulator_bias"] = m.bias.arms
        if m.gaps is not None and m.gaps.arms.height:
            tables["gap_sizes"] = m.gaps.arms
        if m.truth is not None and m.truth.measured:
            tables |= {"truth_arms": m.truth.arms, "truth_taus": m.truth.taus}
        if m.pairs.height:
            tables |= {"fidelity_pairs": m.pairs, "offline_intervals": m.intervals}
        if m.power is not None and m.power.pairs.height:
            tables |= {"power": m.power.pairs, "power_plan": m.power.plan}
        return tables


def write_report(
    folder: Path,
    latest: Path,
    ab_readout,
    offline_metrics: dict,
    top20_lists: dict,
    test_ratings: pl.DataFrame,
    augmentation_metrics: dict,
    trust: Trust,
    *,
    tau_floor: float,
    primary_metric: str,
    spread_floor: float,
    eval_users: int = 0,
    bill: RunBudget | None = None,
    truth: pl.DataFrame | None = None,
) -> Report:
    """Write the report under `folder` (report.md, report.html, plots/) and as `latest`/latest.md
    and latest.html: the verdict first (`ops.studies.verdict.build_verdict`), then the
    read-out, the offline metrics, the fidelity pairs, the power, the augmentation table and
    the trust section; `bill`, when the LLM was called in this run (its file exists), closes
    it with what each asset spent.  `truth`: the run's judge (GROUND_TRUTH; `ops.readout.truth`), None or empty
    where it has none.  `eval_users`: the offline metrics over a seeded sample of that many test
    users (`ops.arms.ranking.evaluation_users`, as the arms measured them); 0: every one."""
    evaluated = evaluation_users(test_ratings, eval_users)
    test_users = test_ratings.get_column("user_id").n_unique()
    # The gap sizes read the simulated agents' own users in the window, whoever the offline
    # metrics' sample holds: cut to the sample, most agents would count no logged interaction.
    window = test_ratings
    if evaluated.size < test_users:
        test_ratings = test_ratings.filter(pl.col("user_id").is_in(pl.Series(evaluated).implode()))
    # Simulated against offline, once: τ, the arm pairs, the diagnostic arms (the mirror:
    # the brain's own ranking, no candidate; it goes to the bias section).
    is_diagnostic = functools.partial(has_capability, attribute="diagnostic")
    agreement = arm_agreement(ab_readout, offline_metrics, top20_lists, test_ratings, is_diagnostic)
    fid, pairs, diagnostic = agreement.fid, agreement.pairs, agreement.diagnostic
    seed = ab_readout.config.seed
    intervals = offline_intervals(agreement.per_user, seed=seed)
    paired = ab_readout.design == "paired"
    bias = simulator_bias(ab_readout.per_agent, agreement.per_user, top20_lists, diagnostic, paired=paired, seed=seed)
    power = _power(ab_readout, pairs, intervals)
    # Gap sizes against the test window: the agents stand at its start, and the offline metrics read it too.
    candidates = [a for a in ab_readout.per_agent.get_column("arm").unique().to_list() if a not in diagnostic]
    gaps = gap_sizes(
        ab_readout.per_agent, top20_lists, window, ab_readout.control, candidates, paired=paired, seed=seed
    )
    # Where the random bucket's calibration half set the click decision, only the other half judges.
    calibrated = getattr(getattr(trust.embedded_brain, "params", None), "exposure_calibration", None) is not None
    judged = judge_against_truth(
        truth,
        top20_lists,
        ab_readout.per_agent,
        agreement.per_user,
        diagnostic,
        primary_metric,
        seed=seed,
        held_out=calibration_users(truth) if calibrated else (),
    )
    folder.mkdir(parents=True, exist_ok=True)
    # The read-out's asset drew its figures into this folder when it ran in the same run.
    plots = write_ab_figures(ab_readout, folder / "plots", drawn=True)
    if pairs.height:
        plots.append(save_figure(fidelity_pairs(pairs), folder / "plots" / "fidelity_pairs.png"))
    if power is not None and power.pairs.height:
        plots.append(save_figure(power_figure(power), folder / "plots" / "power.png"))
    if gaps.arms.height:
        plots.append(save_figure(gap_figure(gaps), folder / "plots" / "gap_sizes.png"))
    if judged.measured:
        plots.append(save_figure(judged.figure(), folder / "plots" / "truth.png"))
    sections = _trust_section(folder, trust)
    clicks = getattr(ab_readout, "slot_clicks", None)  # None in a read-out stored before it was kept
    # The same figures open the report and close the console's output (verdict_lines).
    measured = VerdictInputs(
        ab_readout,
        fid,
        pairs,
        tau_floor=tau_floor,
        spread_floor=spread_floor,
        primary_metric=primary_metric,
        intervals=intervals,
        trust=trust,
        power=power,
        bias=bias,
        gaps=gaps,
        truth=judged,
        slot_clicks=clicks,
        diagnostic=diagnostic,
        offline_users="over test users"
        if evaluated.size >= test_users
        else f"over a seeded sample of {evaluated.size:,} of the {test_users:,} test users",
    )
    verdict = build_verdict(measured)
    sections = [
        judged.to_markdown(),
        gaps.to_markdown(),
        *sections,
        bias.to_markdown(),
        *([slots_markdown(clicks)] if clicks is not None else []),
    ]
    text = report_markdown(
        ab_readout,
        agreement.offline,
        fid,
        plots,
        folder,
        intervals,
        pairs,
        verdict,
        augmentation_metrics,
        power,
        sections,
    )
    if bill is not None and bill.path.exists():
        text += "\n" + "\n".join(bill_lines(bill.bill()))
    path, html_path = folder / "report.md", folder / "report.html"
    atomic_write_bytes(path, text.encode("utf-8"))
    atomic_write_bytes(latest / "latest.md", text.encode("utf-8"))
    # The HTML page is made from the Markdown as written, so every section anyone adds to it is there.
    page = report_html(text, folder).encode("utf-8")
    atomic_write_bytes(html_path, page)
    atomic_write_bytes(latest / "latest.html", page)
    return Report(path, html_path, text, verdict, measured)


def _power(ab_readout, pairs: pl.DataFrame, intervals: pl.DataFrame) -> PowerAnalysis | None:
    """The power of the simulated test; None unless the design is paired (each agent its own
    control, which the power figures assume) and there are arm pairs."""
    if ab_readout.design != "paired" or getattr(ab_readout, "per_session", None) is None or not pairs.height:
        return None
    ndcg = intervals.filter(pl.col("metric") == "ndcg_at_k")
    return power_analysis(
        ab_readout.per_session, pairs, dict(zip(ndcg.get_column("arm").to_list(), ndcg.get_column("mean").to_list()))
    )


def _trust_section(folder: Path, trust: Trust) -> list[str]:
    """ "How far to trust the agents": the alignment results and their figures under `folder`/plots."""
    # A protocol that could not be measured ({"not_measured": why, ...}) has no figure; its reason is said.
    records = {"taste": trust.taste, "rating": trust.rating, "list_quality": trust.list_quality}
    not_measured = {k: r for k, r in records.items() if isinstance(r, Mapping)}
    skipped = trust.sensitivity.get("not_measured") if isinstance(trust.sensitivity, Mapping) else None
    taste, rating, list_quality, sensitivity = map(trust.measured, ("taste", "rating", "list_quality", "sensitivity"))
    social = trust.social
    plots = folder / "plots"
    figures = {}
    if taste is not None:
        figure = taste_figure(taste.summary, getattr(taste, "per_item", None), getattr(taste, "holdout", None))
        figures["taste"] = save_figure(figure, plots / "alignment_taste.png")
    if rating is not None:
        figures["rating"] = save_figure(
            rating_figure(rating.distribution, rating.prediction), plots / "alignment_rating.png"
        )
    if list_quality is not None:
        figures["list_quality"] = save_figure(
            list_quality_figure(list_quality.readout.arms, list_quality.ratios),
            plots / "alignment_list_quality.png",
        )
    if social is not None and social.height:
        figures["social"] = save_figure(social_figure(social), plots / "alignment_social.png")
    if sensitivity is not None:
        figures["sensitivity"] = save_figure(sensitivity_figure(sensitivity), plots / "sensitivity_ladder.png")
    calibration = getattr(list_quality, "calibration", None)
    if calibration is not None:
        figures["calibration"] = save_figure(
            calibration_figure(calibration.grid, calibration.real_elasticity, calibration.click_scale),
            plots / "list_response_calibration.png",
        )
    brain = next((r.brain for r in (taste, rating, list_quality) if r is not None), "")
    return trust_section(
        taste,
        rating,
        social,
        list_quality,
        brain=brain,
        plots=figures,
        folder=folder,
        calibration=calibration,
        not_measured=not_measured,
        sensitivity=sensitivity,
        sensitivity_skipped=skipped,
    )

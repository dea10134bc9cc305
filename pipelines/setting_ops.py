"""Which op config fields each setting fills: the jobs' side of the settings.

`ops.settings` declares what a team may set (the variable, its type, bounds and default);
this module says where each value goes in the jobs' run config, as "op.field", beside the
jobs that define those ops.  `op_config(settings)` is the run config's `ops` part the
environment asks for; `setting_of(op, field)` names the variable behind a field Dagster
refuses.  A setting with no entry here reaches a resource (`resource=` in its declaration)
or is read by the runner itself.
"""

from __future__ import annotations

from typing import Any

_ASKING = ("taste_alignment", "rating_alignment", "list_quality_alignment")  # the protocols that ask the brain
_ALIGNMENT = (*_ASKING, "social_traits_alignment")

# setting (its field in `ops.settings.Settings`) -> the op config fields it fills
SETTING_OPS: dict[str, tuple[str, ...]] = {
    "source": ("ingestion.source",),
    "files_path": ("ingestion.files_path",),
    "steam_path": ("ingestion.steam_path",),
    "steam_url": ("ingestion.steam_url",),
    "steam_sha256_reviews": ("ingestion.steam_sha256_reviews",),
    "steam_sha256_games": ("ingestion.steam_sha256_games",),
    "steam_min_interactions": ("ingestion.steam_min_interactions",),
    "local_path": ("ingestion.local_path",),
    "dataset": ("ingestion.dataset",),
    "synthetic_exposure_bias": ("ingestion.synthetic_exposure_bias",),
    "metadata_source": ("movie_metadata.source",),
    "metadata_path": ("movie_metadata.metadata_path",),
    "poster_dirs": ("movie_metadata.poster_dirs",),
    "links_path": ("movie_metadata.links_path",),
    "arms": (
        "simulation_events.arms",
        "llm_cost_estimate.arms",
        "ab_agent_table2.arms",
        "brain_comparison.arms",
        "simuser_believability.arms",
    ),
    "max_epochs": (
        "recommender_arm.max_epochs",
        "augmentation_metrics.max_epochs",
        "ab_agent_table5.max_epochs",
        "agent_round.max_epochs",
        "filter_bubble.max_epochs",
        "agent4rec_causal_graph.max_epochs",
    ),
    "validation_negatives": ("recommender_arm.validation_negatives", "augmentation_metrics.validation_negatives"),
    "control": ("ab_readout.control",),
    "click_calibration": ("embedded_brain.click_calibration", "agents.click_calibration"),
    "agents": (
        "simulation_events.n_agents",
        "llm_cost_estimate.n_agents",
        "experiment_simulation_events.n_agents",
        "agent_round.n_agents",
        "filter_bubble.n_agents",
        "agent4rec_causal_graph.n_agents",
        "agents.n_agents",
        "arm_rankings.n_agents",
    ),
    "brain": (
        "simulation_events.brain",
        "agent_round.brain",
        *(f"{op}.brain" for op in _ASKING),
        "list_sensitivity.brain",
    ),
    "sessions": ("simulation_events.sessions_per_agent", "llm_cost_estimate.sessions_per_agent"),
    "activity_drives": ("simulation_events.activity_drives", "llm_cost_estimate.activity_drives"),
    "visits": ("simulation_events.visits_per_tier", "llm_cost_estimate.visits_per_tier"),
    "persona": ("simulation_events.persona", "llm_cost_estimate.persona"),
    "eval_users": (
        "arm_rankings.eval_users",
        "offline_metrics.eval_users",
        "augmentation_metrics.eval_users",
        "social_traits_alignment.eval_users",
        "simab_report.eval_users",
        "ab_readout_fidelity_trust.eval_users",
    ),
    "alignment_agents": (*(f"{op}.n_agents" for op in _ALIGNMENT), "agents.protocol_agents"),
    "trust_protocols": (*(f"{op}.enabled" for op in _ASKING), "agents.trust_protocols"),
    "trust_half_width": (*(f"{op}.half_width" for op in _ASKING), "agents.half_width"),
    "fidelity_tau_floor": ("ab_readout_fidelity_trust.tau_floor", "simab_report.tau_floor"),
    "list_quality_spread_floor": ("simab_report.spread_floor",),
    "primary_metric": ("simab_report.primary_metric",),
}


def op_config(settings) -> dict[str, dict[str, Any]]:
    """op name -> {config field: value} for every setting the environment set, then the
    `--set OP.FIELD=VALUE` overrides (`settings.overrides`)."""
    ops: dict[str, dict[str, Any]] = {}
    for name, targets in SETTING_OPS.items():
        value = getattr(settings, name)
        if value is None:
            continue
        for target in targets:
            op, field = target.split(".")
            ops.setdefault(op, {})[field] = list(value) if isinstance(value, list) else value
    for op, fields in settings.overrides.items():
        ops.setdefault(op, {}).update(fields)
    return ops


def setting_name_of(op: str, field: str) -> str | None:
    """The setting (its field name) that fills `op.field`, or None."""
    for name, targets in SETTING_OPS.items():
        if f"{op}.{field}" in targets:
            return name
    return None


def resolved_values(defs, configs: dict[str, dict]) -> dict[str, Any]:
    """lifecycle parameter -> the value the jobs' validated run config gives its setting's
    first op field (the asset's default where the environment left it), for the `configs` of
    each job (`resources.lifecycle_run.PARAMS` names the parameters)."""
    from dagster import validate_run_config

    from resources.lifecycle_run import PARAMS

    found: dict[str, Any] = {}
    for job, config in configs.items():
        ops = validate_run_config(defs.resolve_job_def(job), config).get("ops", {})
        for name, field in PARAMS.items():
            for target in SETTING_OPS.get(field, ()) if name not in found else ():
                op, key = target.split(".")
                value = ops.get(op, {}).get("config", {}).get(key)
                if value is not None:
                    found[name] = value
                    break
    return found

"""The environment becomes run config in one place, read when asked, never at import."""

import pytest

from pipelines.run_config import run_config_for, settings_from_env, with_arms


def test_each_job_gets_only_its_own_ops_settings():
    settings = settings_from_env(
        {"SIMAB_SOURCE": "local", "SIMAB_LOCAL_PATH": "/data/ml-1m", "SIMAB_POSTER_DIRS": "/a:/b", "SIMAB_MAX_EPOCHS": "3",
         "SIMAB_AGENTS": "50", "SIMAB_BRAIN": "llm", "SIMAB_SESSIONS": "4", "SIMAB_CONTROL": "random", "SIMAB_ARMS": "pop, fm"}
    )
    prepare = run_config_for("simab_prepare", settings)["ops"]
    assert prepare["movielens"]["config"] == {"source": "local", "local_path": "/data/ml-1m"}
    assert prepare["movie_metadata"]["config"] == {"poster_dirs": ["/a", "/b"]}
    assert set(prepare) == {"movielens", "movie_metadata"}
    arm = run_config_for("simab_arm", settings)["ops"]
    assert arm["recommender_arm"]["config"] == {"max_epochs": 3} and arm["augmentation_metrics"]["config"] == {"max_epochs": 3}
    assert arm["simulation_events"]["config"] == {"n_agents": 50, "brain": "llm", "sessions_per_agent": 4, "arms": ["pop", "fm"]}
    # The brain of the simulation is also the brain the alignment protocols ask (the social
    # traits read the simulation's own sessions, so they take no brain).
    # With the LLM brain the bill is estimated first, for the same agents.
    assert arm["llm_cost_estimate"]["config"] == {"n_agents": 50, "sessions_per_agent": 4, "arms": ["pop", "fm"]}
    llm = {"config": {"brain": "llm"}}
    readout = {"ab_readout": {"config": {"control": "random"}}, "taste_alignment": llm, "rating_alignment": llm, "list_quality_alignment": llm}
    assert run_config_for("simab_readout", settings) == {"ops": readout}
    assert run_config_for("simab_alignment", settings) == {"ops": {k: v for k, v in readout.items() if k != "ab_readout"}}
    assert settings.arms == ["pop", "fm"]


def test_alignment_sample_and_fidelity_floor_come_from_the_environment():
    settings = settings_from_env({"SIMAB_ALIGNMENT_AGENTS": "40", "SIMAB_FIDELITY_TAU_FLOOR": "0.8"})
    ops = run_config_for("simab_readout", settings)["ops"]
    assert ops["ab_readout_fidelity_trust"] == {"config": {"tau_floor": 0.8}}
    assert {op: c["config"] for op, c in ops.items() if op.endswith("_alignment")} == {
        op: {"n_agents": 40} for op in ("taste_alignment", "rating_alignment", "list_quality_alignment", "social_traits_alignment")
    }
    with pytest.raises(ValueError, match="SIMAB_FIDELITY_TAU_FLOOR"):
        settings_from_env({"SIMAB_FIDELITY_TAU_FLOOR": "high"})


def test_no_environment_leaves_the_papers_defaults():
    settings = settings_from_env({})
    assert settings.arms == ["random", "pop", "fm", "deepfm"]
    assert run_config_for("simab_prepare", settings) == {}
    assert "llm_cost_estimate" not in run_config_for("simab_arm", settings)["ops"]  # the embedded brain costs nothing


def test_the_jobs_estimate_the_bill_before_an_llm_simulation_only():
    from dagster import AssetKey

    from pipelines.definitions import build_definitions

    def selected(environ: dict) -> dict[str, bool]:
        defs = build_definitions(environ=environ)
        return {job: AssetKey("llm_cost_estimate") in defs.resolve_job_def(job).asset_layer.executable_asset_keys
                for job in ("simab_arm", "simab_resimulate", "simab_readout")}

    assert selected({"SIMAB_BRAIN": "llm"}) == {"simab_arm": True, "simab_resimulate": True, "simab_readout": False}
    assert selected({}) == {"simab_arm": False, "simab_resimulate": False, "simab_readout": False}
    with pytest.raises(ValueError, match="SIMAB_MAX_COST_USD"):
        build_definitions(environ={"SIMAB_MAX_COST_USD": "ten dollars"})
    defs = build_definitions(environ={"SIMAB_MAX_COST_USD": "2.5"})
    assert defs.resources["llm"].max_cost_usd == 2.5


def test_bad_values_name_the_variable():
    with pytest.raises(ValueError, match="SIMAB_MAX_EPOCHS"):
        settings_from_env({"SIMAB_MAX_EPOCHS": "many"})
    with pytest.raises(ValueError, match="unknown arm"):
        settings_from_env({"SIMAB_ARMS": "pop,wizard"})
    assert with_arms(settings_from_env({}), ["afn"]).arms == ["afn"]


def test_importing_the_code_location_reads_no_environment(monkeypatch):
    import importlib
    import os

    import pipelines.definitions as definitions

    reads = []
    real_get = os.environ.get
    monkeypatch.setattr(os.environ, "get", lambda key, *default: reads.append(key) or real_get(key, *default))
    for module in ("assets.ingestion", "assets.mm_ml_1m", "assets.recommenders", "assets.simulation", "assets.augmentation", "assets.report"):
        importlib.reload(importlib.import_module(module))
    importlib.reload(definitions)
    assert not [k for k in reads if k.startswith("SIMAB_")]

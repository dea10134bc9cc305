"""The environment becomes run config in one place, read when asked, never at import."""

import os

import pytest

from pipelines.jobs import run_config_for
from pipelines.run_config import settings_from_env, with_arms


def test_each_job_gets_only_its_own_ops_settings():
    settings = settings_from_env(
        {
            "SIMAB_SOURCE": "local",
            "SIMAB_LOCAL_PATH": "/data/ml-1m",
            "SIMAB_POSTER_DIRS": "/a:/b",
            "SIMAB_MAX_EPOCHS": "3",
            "SIMAB_AGENTS": "50",
            "SIMAB_BRAIN": "llm",
            "SIMAB_SESSIONS": "4",
            "SIMAB_CONTROL": "random",
            "SIMAB_ARMS": "pop, fm",
        }
    )
    prepare = run_config_for("simab_prepare", settings)["ops"]
    assert prepare["ingestion"]["config"] == {"source": "local", "local_path": "/data/ml-1m"}
    assert prepare["movie_metadata"]["config"] == {"poster_dirs": ["/a", "/b"]}
    # The agents asset builds the users the run reads: the 50 agents' sample among them.
    assert prepare["agents"]["config"] == {"n_agents": 50}
    assert set(prepare) == {"ingestion", "movie_metadata", "agents"}
    arm = run_config_for("simab_arm", settings)["ops"]
    assert arm["recommender_arm"]["config"] == {"max_epochs": 3} and arm["augmentation_metrics"]["config"] == {
        "max_epochs": 3
    }
    assert arm["arm_rankings"]["config"] == {"n_agents": 50}  # the agents' lists, not every user's
    assert arm["simulation_events"]["config"] == {
        "n_agents": 50,
        "brain": "llm",
        "sessions_per_agent": 4,
        "arms": ["pop", "fm"],
    }
    # The brain of the simulation is also the brain the alignment protocols ask (the social
    # traits read the simulation's own sessions, so they take no brain).
    # With the LLM brain the bill is estimated first, for the same agents.
    assert arm["llm_cost_estimate"]["config"] == {"n_agents": 50, "sessions_per_agent": 4, "arms": ["pop", "fm"]}
    llm = {"config": {"brain": "llm"}}
    readout = {
        "ab_readout": {"config": {"control": "random"}},
        "taste_alignment": llm,
        "rating_alignment": llm,
        "list_quality_alignment": llm,
        "list_sensitivity": llm,  # which then says "not measured" unless told to pay for it
    }
    assert run_config_for("simab_readout", settings) == {"ops": readout}
    assert run_config_for("simab_alignment", settings) == {
        "ops": {k: v for k, v in readout.items() if k != "ab_readout"}
    }
    assert settings.arms == ["pop", "fm"]


def test_alignment_sample_and_fidelity_floor_come_from_the_environment():
    settings = settings_from_env({"SIMAB_ALIGNMENT_AGENTS": "40", "SIMAB_FIDELITY_TAU_FLOOR": "0.8"})
    ops = run_config_for("simab_readout", settings)["ops"]
    assert ops["ab_readout_fidelity_trust"] == {"config": {"tau_floor": 0.8}}
    assert {op: c["config"] for op, c in ops.items() if op.endswith("_alignment")} == {
        op: {"n_agents": 40}
        for op in ("taste_alignment", "rating_alignment", "list_quality_alignment", "social_traits_alignment")
    }
    with pytest.raises(ValueError, match="SIMAB_FIDELITY_TAU_FLOOR"):
        settings_from_env({"SIMAB_FIDELITY_TAU_FLOOR": "high"})


def test_no_environment_leaves_the_papers_defaults():
    settings = settings_from_env({})
    # Table 2's arms, and beside them the brain's own ranking: the embedded brain measures its bias for free.
    assert settings.arms == ["random", "pop", "fm", "deepfm", "mirror"]
    assert settings_from_env({"SIMAB_BRAIN": "llm"}).arms == ["random", "pop", "fm", "deepfm"]  # it would pay for it
    assert run_config_for("simab_prepare", settings) == {}
    assert "llm_cost_estimate" not in run_config_for("simab_arm", settings)["ops"]  # the embedded brain costs nothing


def test_the_jobs_estimate_the_bill_before_an_llm_simulation_only():
    from dagster import AssetKey

    from pipelines.definitions import build_definitions

    def selected(environ: dict) -> dict[str, bool]:
        defs = build_definitions(environ=environ)
        return {
            job: AssetKey("llm_cost_estimate") in defs.resolve_job_def(job).asset_layer.executable_asset_keys
            for job in ("simab_arm", "simab_resimulate", "simab_readout")
        }

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
    for module in (
        "assets.ingestion",
        "assets.catalogue",
        "assets.recommenders",
        "assets.simulation",
        "assets.augmentation",
        "assets.report",
    ):
        importlib.reload(importlib.import_module(module))
    importlib.reload(definitions)
    assert not [k for k in reads if k.startswith("SIMAB_")]


@pytest.mark.parametrize(
    "variable, value, allowed",
    [
        ("SIMAB_AGENTS", "-5", "≥ 0"),  # not "every agent": with the LLM brain a typo would pay for all of them
        ("SIMAB_SHARDS", "0", "≥ 1"),
        ("SIMAB_SESSIONS", "abc", "whole number"),
        ("SIMAB_MAX_COST_USD", "-5", "a number > 0 or none"),
        ("SIMAB_MAX_COST_USD", "0", "a number > 0 or none"),  # 0 no longer means "no limit": `none` says it
        ("SIMAB_ROUNDS", "-1", "≥ 1"),
        ("SIMAB_BRAIN", "foo", "unknown brain 'foo'; known: embedded, embedded-no-vision, llm"),
        ("SIMAB_PERSONA", "zzz", "one of traits, matched"),
        ("SIMAB_ARMS", "nonexistent", "unknown arm"),
        ("SIMAB_LLM_VISION", "maybe", "true or false"),
    ],
)
def test_a_bad_setting_stops_the_lifecycle_before_any_work_in_one_line(
    tmp_path, monkeypatch, capfd, variable, value, allowed
):
    home = tmp_path / "home"
    if variable == "SIMAB_AGENTS":
        # Once as the process a user starts: whatever Python would print at exit is in its output.
        import subprocess
        import sys

        env = {**os.environ, "SIMAB_HOME": str(home), variable: value}
        env.pop("DAGSTER_HOME", None)
        out = subprocess.run(
            [sys.executable, "-m", "pipelines.lifecycle"], env=env, capture_output=True, text=True, timeout=120
        )
        returncode, printed = out.returncode, out.stdout + out.stderr
    else:
        # The other values in this process (a second of start-up each saved): the message of
        # the SystemExit is what the interpreter prints, any other exception fails the test.
        from pipelines.lifecycle import main

        monkeypatch.setenv("SIMAB_HOME", str(home))
        monkeypatch.setenv(variable, value)
        monkeypatch.delenv("DAGSTER_HOME", raising=False)
        with pytest.raises(SystemExit) as stopped:
            main([])
        code = stopped.value.code
        returncode = code if isinstance(code, int) else 1
        captured = capfd.readouterr()
        printed = captured.out + captured.err + (code if isinstance(code, str) else "")
    assert returncode != 0
    lines = [line for line in printed.splitlines() if line.strip()]
    assert len(lines) == 1, lines  # no traceback
    assert lines[0].startswith(f"simab: {variable}={value!r}: ") and allowed in lines[0], lines[0]
    assert not home.exists()  # nothing stored, not even a log


def test_a_field_dagster_refuses_is_named_by_its_variable_before_the_first_step():
    # The settings' own bounds catch what the environment sets; the job's config schema is
    # checked as well, for every job of the plan, before the first one runs.
    from ops.settings import SettingError
    from pipelines.definitions import build_definitions
    from pipelines.preflight import check_run_configs

    settings = settings_from_env({})
    defs = build_definitions(settings)
    bad = settings.model_copy(update={"agents": -3})  # as if the settings had no bound
    with pytest.raises(SettingError, match=r"^SIMAB_AGENTS=-3: [a-z_]+.n_agents refuses it"):
        check_run_configs(bad, defs, ["simab_prepare", "simab_arm", "simab_readout"])
    check_run_configs(settings, defs, ["simab_prepare", "simab_arm", "simab_readout"])


def test_a_shared_embedding_cache_reaches_the_resource_and_moves_no_asset_version(tmp_path):
    from dagster import AssetKey

    from pipelines.definitions import build_definitions

    def agents_version(environ):
        defs = build_definitions(environ={"SIMAB_HOME": str(tmp_path / "home"), **environ})
        spec = defs.resolve_assets_def(AssetKey("agents")).specs_by_key[AssetKey("agents")]
        return defs.resources["embeddings"], spec.code_version

    own, default_version = agents_version({})
    assert own.cache_folder() == tmp_path / "home" / "cache" / "embeddings"
    shared, shared_version = agents_version({"SIMAB_EMBEDDING_CACHE": str(tmp_path / "rows")})
    assert shared.cache_folder() == tmp_path / "rows"
    # Where the rows are kept is not what they are: the agents are not stale for it.
    assert shared_version == default_version


def test_the_llm_settings_reach_the_resource_and_a_local_server_needs_no_key():
    from pipelines.definitions import build_definitions

    llm = build_definitions(
        environ={
            "SIMAB_LLM_BASE_URL": "http://127.0.0.1:8080/v1",
            "SIMAB_LLM_MODEL": "gemma-3-270m",
            "SIMAB_LLM_API_KEY_REQUIRED": "false",
            "SIMAB_LLM_VISION": "0",
            "SIMAB_LLM_CONCURRENCY": "2",
            "SIMAB_LLM_TIMEOUT_S": "90",
            "SIMAB_MAX_COST_USD": "1.5",
        }
    ).resources["llm"]
    assert (
        llm.base_url,
        llm.model,
        llm.api_key_required,
        llm.vision,
        llm.concurrency,
        llm.timeout_s,
        llm.max_cost_usd,
    ) == ("http://127.0.0.1:8080/v1", "gemma-3-270m", False, "false", 2, 90.0, 1.5)  # vision: true|false|auto
    assert llm.has_credentials()
    config = llm.brain_config()
    assert (config.base_url, config.model, config.vision, config.concurrency) == (
        "http://127.0.0.1:8080/v1",
        "gemma-3-270m",
        False,
        2,
    )


def test_settings_are_read_from_the_environment_in_one_module_only():
    # Elsewhere a SIMAB_* name may be passed through or printed, never read.
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    read = re.compile(r"(environ(\.get)?\s*[\[(]|getenv\s*\()\s*[\"']SIMAB_")
    offenders = [
        f"{p.relative_to(root)}:{n}"
        for p in root.rglob("*.py")
        if not {".venv", "tests", "data"} & set(p.relative_to(root).parts)
        and p.relative_to(root).as_posix() != "ops/settings.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if read.search(line)
    ]
    assert offenders == []


def test_docs_settings_is_the_page_generated_from_the_declarations_and_the_precedence():
    from pathlib import Path

    from ops.settings import PRECEDENCE
    from pipelines.settings_page import markdown_page

    page = (Path(__file__).resolve().parents[1] / "docs" / "settings.md").read_text(encoding="utf-8")
    assert page == markdown_page(), "docs/settings.md is stale: python -m pipelines.settings_page > docs/settings.md"
    assert "--set OP.FIELD=VALUE" in PRECEDENCE[1] and "launchpad" in PRECEDENCE[0]


def test_arm_specs_in_the_environment_become_arm_partitions_named_in_run_config(tmp_path):
    from assets.partitions import arm_partitions, arm_partitions_of
    from ops.arms.registry import forget, spec_of
    from ops.settings import SettingError
    from pipelines.jobs import build_assets

    lists = tmp_path / "ours.parquet"
    try:
        settings = settings_from_env({"SIMAB_ARMS": f"pop,ours_spec=lists:{lists},half_spec=deepfm;train_fraction=0.5"})
        # Run config and partitions carry the names; the specs stay in the registry.
        assert settings.arms == ["pop", "ours_spec", "half_spec"]
        assert {"ours_spec", "half_spec"} <= set(arm_partitions_of(settings.arms).get_partition_keys())
        # The definitions built from the settings carry them; the asset modules' own do not.
        built = {k.to_user_string(): a for a in build_assets(settings)[0] for k in a.keys}
        assert {"ours_spec", "half_spec"} <= set(built["recommender_arm"].partitions_def.get_partition_keys())
        assert "ours_spec" not in arm_partitions.get_partition_keys()
        assert spec_of("ours_spec").source == str(lists)
        assert spec_of("half_spec").params == {"train_fraction": 0.5}
        arm = run_config_for("simab_arm", settings)["ops"]
        assert arm["simulation_events"]["config"]["arms"] == ["pop", "ours_spec", "half_spec"]
        # The same spec again, or its bare name, is the same arm; another target under the name is refused.
        assert settings_from_env({"SIMAB_ARMS": "ours_spec,pop"}).arms == ["ours_spec", "pop"]
        with pytest.raises(
            SettingError, match=r"^SIMAB_ARMS='ours_spec=mlflow:models:/m/1': arm 'ours_spec' is declared"
        ):
            settings_from_env({"SIMAB_ARMS": "ours_spec=mlflow:models:/m/1"})
    finally:
        for name in ("ours_spec", "half_spec"):
            forget(name)
    for bad, message in [
        ("pop,Bad Name=lists:/x", "name 'Bad Name' must be"),
        ("pop,x=", "nothing after '='"),
        ("pop,nosuch", "unknown arm 'nosuch'"),
    ]:
        with pytest.raises(SettingError, match=f"^SIMAB_ARMS={bad!r}: .*{message}"):
            settings_from_env({"SIMAB_ARMS": bad})


def test_the_celery_executor_without_its_extra_says_which_extra_to_install(monkeypatch):
    """celery, redis and dagster-celery are the `celery` extra: the code location loads without
    them, and SIMAB_EXECUTOR=celery names what to install instead of an ImportError."""
    import sys

    from ops.settings import SettingError
    from pipelines.definitions import build_definitions
    from pipelines.resources import executor_for_deployment

    monkeypatch.setitem(sys.modules, "dagster_celery", None)  # as if not installed: importing it fails
    assert build_definitions(environ={}).resolve_job_def("simab_prepare") is not None
    celery = settings_from_env({"SIMAB_EXECUTOR": "celery", "SIMAB_CELERY_BROKER": "redis://127.0.0.1:6379/0"})
    with pytest.raises(SettingError, match=r"SIMAB_EXECUTOR='celery': dagster-celery is not installed.*\[celery\]"):
        executor_for_deployment(celery)

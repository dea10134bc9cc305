"""Before the first step: the spending limit in force, the whole LLM bill from the settings
alone (and the refusal when it does not fit, with the settings that would make it fit),
and every value the settings name checked in one line each."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from fakes.openai_server import FakeOpenAI, scripted_agent
from ops.preflight.bill import cost_limit, lifecycle_bill, night_bill
from ops.preflight.checks import check_values
from ops.settings import DEFAULT_MAX_COST_USD, SettingError
from pipelines.run_config import settings_from_env, with_arms

ROOT = Path(__file__).resolve().parents[1]


def _settings(arms=("random", "pop"), **env):
    return with_arms(settings_from_env({k: str(v) for k, v in env.items()}), list(arms))


# -- the limit in force ---------------------------------------------------------------------


def test_a_priced_llm_run_has_a_limit_unless_one_says_none():
    from pipelines.definitions import build_definitions
    from resources.llm import LLMResource

    # The resource itself (a run launched from the Dagster UI) and the lifecycle agree.
    assert LLMResource().max_cost_usd == DEFAULT_MAX_COST_USD > 0
    assert cost_limit(_settings(SIMAB_BRAIN="llm")).usd == DEFAULT_MAX_COST_USD
    assert "default" in cost_limit(_settings(SIMAB_BRAIN="llm")).text()
    assert cost_limit(_settings(SIMAB_BRAIN="llm", SIMAB_MAX_COST_USD="0.5")).usd == 0.5
    lifted = cost_limit(_settings(SIMAB_BRAIN="llm", SIMAB_MAX_COST_USD="none"))
    assert lifted.usd is None and "SIMAB_MAX_COST_USD=none" in lifted.text()
    assert build_definitions(environ={"SIMAB_MAX_COST_USD": "none"}).resources["llm"].max_cost_usd is None
    assert build_definitions(environ={}).resources["llm"].max_cost_usd == DEFAULT_MAX_COST_USD
    # Nothing to pay, nothing to limit: the embedded brain, a local server priced at 0.
    assert cost_limit(_settings()).usd is None
    free = _settings(SIMAB_BRAIN="llm", SIMAB_LLM_PRICE_PROMPT_PER_1M=0, SIMAB_LLM_PRICE_COMPLETION_PER_1M=0)
    assert cost_limit(free).usd is None and "$0" in cost_limit(free).text()
    assert lifecycle_bill(free).usd == 0 and lifecycle_bill(free).fits
    # 0 used to mean "no limit": a typo would have paid for everything.  Now it is refused.
    with pytest.raises(SettingError, match=r"SIMAB_MAX_COST_USD='0': a number > 0 or none"):
        settings_from_env({"SIMAB_MAX_COST_USD": "0"})


# -- the bill from the settings alone -----------------------------------------------------------


def test_the_bill_names_every_step_sizes_the_trust_protocols_and_bounds_what_the_arms_may_do():
    bill = lifecycle_bill(_settings(SIMAB_BRAIN="llm", SIMAB_AGENTS=12))
    steps = {s.step: s for s in bill.steps}
    assert list(steps) == [
        "simulation_events[random]",
        "simulation_events[pop]",
        "taste_alignment",
        "rating_alignment",
        "list_quality_alignment",
    ]
    assert all(s.agents == 12 for s in bill.steps if not s.trust)
    # The trust protocols are sized by their intervals, not by SIMAB_AGENTS: ±0.10 needs 97 agents.
    assert all(s.agents == 97 and "±0.1" in s.sizing for s in bill.steps if s.trust)
    assert {
        s.agents for s in lifecycle_bill(_settings(SIMAB_BRAIN="llm", SIMAB_TRUST_HALF_WIDTH=0.05)).steps if s.trust
    } == {385}
    assert {
        s.agents for s in lifecycle_bill(_settings(SIMAB_BRAIN="llm", SIMAB_ALIGNMENT_AGENTS=30)).steps if s.trust
    } == {30}
    assert all(0 < s.usd < s.usd_at_most and s.calls < s.calls_at_most for s in bill.steps)
    assert bill.usd == pytest.approx(sum(s.usd for s in bill.steps))
    # Twice the agents, twice an arm's bill; another arm, one more step.
    double = lifecycle_bill(_settings(SIMAB_BRAIN="llm", SIMAB_AGENTS=24))
    assert double.steps[0].usd == pytest.approx(2 * bill.steps[0].usd)
    assert len(lifecycle_bill(_settings(("random", "pop", "fm"), SIMAB_BRAIN="llm", SIMAB_AGENTS=12)).steps) == 6
    # Off, the trust protocols cost nothing and are not on the bill.
    off = lifecycle_bill(_settings(SIMAB_BRAIN="llm", SIMAB_AGENTS=12, SIMAB_TRUST_PROTOCOLS="off"))
    assert [s.step for s in off.steps] == ["simulation_events[random]", "simulation_events[pop]"]
    text = "\n".join(bill.lines())
    assert "at most" in text and "not known before they are trained" in text and "97 agents" in text
    # A night of the schedule: the arms again, then the read-out (fresh); rounds alone (continue).
    assert night_bill(_settings(SIMAB_BRAIN="llm", SIMAB_AGENTS=12)).usd == pytest.approx(bill.usd)
    assert night_bill(_settings(SIMAB_BRAIN="llm", SIMAB_AGENTS=12, SIMAB_NIGHTLY="continue")).usd == pytest.approx(
        off.usd
    )


def test_every_user_is_priced_where_the_source_says_how_many_and_refused_where_it_cannot(tmp_path):
    assert lifecycle_bill(_settings(SIMAB_BRAIN="llm")).steps[0].agents == 1000  # the synthetic generator's users
    assert lifecycle_bill(_settings(SIMAB_BRAIN="llm", SIMAB_SOURCE="download")).steps[0].agents == 6040  # ML-1M
    folder = tmp_path / "own"
    folder.mkdir()
    pl.DataFrame({"user_id": [1, 1, 2, 3], "item_id": [1, 2, 1, 1], "rating": [4] * 4, "timestamp": [1] * 4}).write_csv(
        folder / "interactions.csv"
    )
    own = lifecycle_bill(_settings(SIMAB_BRAIN="llm", SIMAB_SOURCE="files", SIMAB_FILES_PATH=folder))
    assert own.steps[0].agents == 3 and all(s.agents == 3 for s in own.steps if s.trust)  # no more than there are
    steam = _settings(SIMAB_BRAIN="llm", SIMAB_SOURCE="steam-download")
    assert not lifecycle_bill(steam).fits and "set SIMAB_AGENTS" in lifecycle_bill(steam).refusal(steam)
    assert lifecycle_bill(steam.model_copy(update={"agents": 10, "trust_protocols": False})).fits


@pytest.mark.parametrize("remedy", ["trust off", "agents", "trust agents", "limit"])
def test_each_setting_the_refusal_names_brings_the_bill_under_the_limit(remedy):
    import re

    settings = _settings(SIMAB_BRAIN="llm", SIMAB_AGENTS=12, SIMAB_MAX_COST_USD="0.20")
    bill = lifecycle_bill(settings)
    assert not bill.fits and bill.usd > 0.20
    said = bill.refusal(settings)
    assert said.startswith("simab: the LLM bill of this lifecycle is expected at $") and "nothing was run" in said
    assert all(s.step in said for s in bill.steps)  # every step, with its figure
    named = dict(re.findall(r"(SIMAB_[A-Z_]+)=([\w.]+)", said))
    if remedy == "trust off":
        fixed = settings.model_copy(update={"trust_protocols": named["SIMAB_TRUST_PROTOCOLS"] != "off"})
    elif remedy == "agents":  # with the trust protocols off: a dozen agents already fit alone
        assert "SIMAB_AGENTS" not in named
        big = _settings(SIMAB_BRAIN="llm", SIMAB_AGENTS=2000, SIMAB_MAX_COST_USD="5", SIMAB_TRUST_PROTOCOLS="off")
        named = dict(re.findall(r"(SIMAB_[A-Z_]+)=([\w.]+)", lifecycle_bill(big).refusal(big)))
        settings, fixed = big, big.model_copy(update={"agents": int(named["SIMAB_AGENTS"])})
        assert lifecycle_bill(big.model_copy(update={"agents": int(named["SIMAB_AGENTS"]) + 20})).fits is False
    elif remedy == "trust agents":
        fixed = settings.model_copy(update={"alignment_agents": int(named["SIMAB_ALIGNMENT_AGENTS"])})
    else:
        fixed = settings.model_copy(update={"max_cost_usd": float(named["SIMAB_MAX_COST_USD"])})
    assert lifecycle_bill(fixed).fits
    assert "cheaper" in said and "SIMAB_LLM_PRICE_PROMPT_PER_1M" in said


def test_the_lifecycle_refuses_a_bill_above_the_limit_before_the_first_step(tmp_path):
    # The probe of the issue: a cap of $0.20, 12 agents, two arms, the LLM brain at gpt-4o-mini's
    # prices.  It used to run prepare and both arms (minutes), then fail with no report.
    fake = FakeOpenAI(scripted_agent)
    home = tmp_path / "home"
    with fake.serve() as url:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "SIMAB_HOME": str(home),
            "SIMAB_BRAIN": "llm",
            "SIMAB_LLM_BASE_URL": url,
            "SIMAB_MAX_COST_USD": "0.20",
            "SIMAB_AGENTS": "12",
        }
        env.pop("DAGSTER_HOME", None)
        started = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "pipelines.lifecycle", "--arms", "random,pop"],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            cwd=ROOT,
        )
        took = time.monotonic() - started
    said = out.stdout + out.stderr
    assert out.returncode != 0, said
    assert "simulation_events[random]" in said and "taste_alignment" in said and "97 agents" in said
    assert "above the cost limit $0.20 (SIMAB_MAX_COST_USD); nothing was run" in said
    assert "SIMAB_TRUST_PROTOCOLS=off" in said and "SIMAB_ALIGNMENT_AGENTS=" in said
    assert fake.calls == 0 and not home.exists()  # no step ran, nothing was stored
    print(f"refused in {took:.1f} s")  # the time is reported, not asserted (a loaded machine)


# -- every value checked before work ----------------------------------------------------------------


def _refused(settings, match: str, **kwargs) -> str:
    with pytest.raises(SettingError) as refused:
        check_values(settings, **kwargs)
    said = str(refused.value)
    assert "\n" not in said and match in said, said
    return said


def test_an_arms_lists_file_is_checked_as_far_as_its_header(tmp_path):
    from ops.arms.registry import forget

    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    pl.DataFrame({"user_id": [1], "rank": [1], "item_id": [3]}).write_csv(good)
    pl.DataFrame({"user_id": [1], "position": [1], "item_id": [3]}).write_csv(bad)
    try:
        check_values(_settings(["pop", f"mine_good=lists:{good}"]))
        said = _refused(_settings(["pop", f"mine_bad=lists:{bad}"]), "field 'rank': column missing")
        assert said.startswith(f"SIMAB_ARMS='pop,mine_bad=lists:{bad}': arm mine_bad: {bad}")
        _refused(_settings([f"mine_gone=lists:{tmp_path / 'gone.parquet'}"]), "gone.parquet: no such file")
        (tmp_path / "x.parquet").write_bytes(b"not parquet")
        _refused(_settings([f"mine_broken=lists:{tmp_path / 'x.parquet'}"]), "not readable as parquet")
    finally:
        for name in ("mine_good", "mine_bad", "mine_gone", "mine_broken"):
            forget(name)


def test_an_mlflow_model_uri_must_resolve_in_the_store(tmp_path, monkeypatch):
    from ops.arms.registry import forget

    arms = ["prod_gone=mlflow:models:/nobody/3", "run_gone=mlflow:runs:/0123abc/model"]
    try:
        # The local store not made yet: nothing is in it, and asking would create it.
        store = tmp_path / "mlflow.db"
        said = _refused(_settings(arms[:1]), f"no MLflow store at {store}", tracking_uri=lambda: f"sqlite:///{store}")
        assert said.startswith("SIMAB_ARMS='prod_gone=mlflow:models:/nobody/3': arm prod_gone")
        assert not store.exists()
        # A store that answers (a folder store: no migrations to wait for) and lacks the model, the run.
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        folder = f"file://{tmp_path / 'mlruns'}"
        _refused(_settings(arms[:1]), "Registered Model with name=nobody not found", tracking_uri=lambda: folder)
        _refused(_settings(arms[1:]), "Run '0123abc' not found", tracking_uri=lambda: folder)
    finally:
        for name in ("prod_gone", "run_gone"):
            forget(name)


def test_the_data_sources_folders_and_files_are_checked(tmp_path):
    _refused(_settings(SIMAB_SOURCE="files"), "SIMAB_SOURCE='files': needs SIMAB_FILES_PATH")
    _refused(_settings(SIMAB_SOURCE="files", SIMAB_FILES_PATH=tmp_path / "nowhere"), "not a folder")
    folder = tmp_path / "own"
    folder.mkdir()
    pl.DataFrame({"item_id": [1], "title": ["A"]}).write_csv(folder / "items.csv")
    _refused(_settings(SIMAB_SOURCE="files", SIMAB_FILES_PATH=folder), "no interactions.csv or interactions.parquet")
    pl.DataFrame({"user_id": [1], "item_id": [1], "timestamp": [1]}).write_parquet(folder / "interactions.parquet")
    said = _refused(_settings(SIMAB_SOURCE="files", SIMAB_FILES_PATH=folder), "field 'rating': missing column")
    assert said.startswith(f"SIMAB_FILES_PATH='{folder}': {folder / 'interactions.parquet'}, row 1")
    # The fewest interactions a lifecycle can split and fit the brain on: two users in the train
    # and the validation window (`ops.preflight.checks.log_problem`; tests/test_reliability.py).
    n = 10
    pl.DataFrame({"item_id": range(1, 2 * n + 1), "title": [f"item {i}" for i in range(1, 2 * n + 1)]}).write_csv(
        folder / "items.csv"
    )
    log = pl.DataFrame(
        {"user_id": [1, 2] * n, "item_id": range(1, 2 * n + 1), "rating": [4] * (2 * n), "timestamp": range(2 * n)}
    )
    log.write_parquet(folder / "interactions.parquet")
    check_values(_settings(SIMAB_SOURCE="files", SIMAB_FILES_PATH=folder))
    # What the ingestion step would refuse, named as it names it, before the work.
    pl.concat([log, log.head(1)]).write_parquet(folder / "interactions.parquet")
    _refused(
        _settings(SIMAB_SOURCE="files", SIMAB_FILES_PATH=folder),
        f"{folder / 'interactions.parquet'}, row 21, field 'item_id': user 1 and item 1 appear twice (first on row 1)",
    )
    log.with_columns(item_id=pl.col("item_id") + 5).write_parquet(folder / "interactions.parquet")
    _refused(
        _settings(SIMAB_SOURCE="files", SIMAB_FILES_PATH=folder),
        f"{folder / 'interactions.parquet'}, row 16, field 'item_id': item 21 is not in the items file",
    )
    _refused(_settings(SIMAB_SOURCE="local"), "SIMAB_SOURCE='local': needs SIMAB_LOCAL_PATH")
    _refused(_settings(SIMAB_SOURCE="local", SIMAB_LOCAL_PATH=folder), f"SIMAB_LOCAL_PATH='{folder}'")
    _refused(_settings(SIMAB_METADATA_PATH=tmp_path / "no.dat"), "SIMAB_METADATA_PATH=")
    _refused(_settings(SIMAB_POSTER_DIRS=tmp_path / "none"), "is not a folder")
    (tmp_path / "file").write_text("x")
    _refused(_settings(SIMAB_HOME=tmp_path / "file" / "home"), "SIMAB_HOME=")


def test_the_llm_endpoint_is_well_formed_keyed_and_answering():
    for url, why in [
        ("notaurl", "not an http(s) URL"),
        ("http://", "no host"),
        ("http://127.0.0.1:port/v1", "port is not a number"),
        ("https://me:secret@example.com/v1", "user:password in the URL is refused"),
    ]:
        said = _refused(_settings(SIMAB_LLM_BASE_URL=url), why)  # whatever the brain: a bad URL is a bad value
        assert said.startswith("SIMAB_LLM_BASE_URL=") and "secret" not in said
    # With the LLM brain one request shows a server answers (any status: a 404 is a server).
    fake = FakeOpenAI(scripted_agent)
    with fake.serve() as url:
        check_values(_settings(SIMAB_BRAIN="llm", SIMAB_LLM_BASE_URL=url), environ={}, uses_llm=True)
    assert fake.calls == 0  # the probe is no chat request: nothing billed
    _refused(_settings(SIMAB_BRAIN="llm", SIMAB_LLM_BASE_URL=url), "no server answers there", environ={}, uses_llm=True)
    said = _refused(
        _settings(SIMAB_BRAIN="llm", SIMAB_LLM_BASE_URL="https://llm.example.com/v1"),
        "$OPENAI_API_KEY is not set",
        environ={},
        uses_llm=True,
    )
    assert said.startswith("SIMAB_LLM_API_KEY_ENV='OPENAI_API_KEY'")


# -- values each allowed that cannot work together ---------------------------------------------

# (arms, settings, what the one line says): each refused by check_values before the first step.
UNWORKABLE = {
    "a control that is no arm": (
        ["random", "pop"],
        {"SIMAB_CONTROL": "zzz"},
        "SIMAB_CONTROL='zzz': not one of the arms (random, pop)",
    ),
    "a diagnostic arm as the control": (
        ["random", "pop", "mirror"],
        {"SIMAB_CONTROL": "mirror"},
        "SIMAB_CONTROL='mirror': arm mirror measures the simulator and is no candidate",
    ),
    "more shards than agents": (
        ["random", "pop"],
        {"SIMAB_SHARDS": 5, "SIMAB_AGENTS": 3},
        "SIMAB_SHARDS=5: more user shards than the 3 agents per arm (SIMAB_AGENTS)",
    ),
    "more shards than users": (
        ["random", "pop"],
        {"SIMAB_SHARDS": 1001},
        "SIMAB_SHARDS=1001: more user shards than the 1000 users of source synthetic",
    ),
    "visits for two tiers": (
        ["random", "pop"],
        {"SIMAB_ACTIVITY_DRIVES": "visits", "SIMAB_VISITS": "1,2"},
        "SIMAB_VISITS='1,2': one whole number ≥ 1 per activity tier (low, medium, high)",
    ),
    "no visit for a tier": (
        ["random", "pop"],
        {"SIMAB_ACTIVITY_DRIVES": "visits", "SIMAB_VISITS": "0,1,2"},
        "SIMAB_VISITS='0,1,2': one whole number ≥ 1 per activity tier",
    ),
    "visits the design does not read": (
        ["random", "pop"],
        {"SIMAB_VISITS": "2,3,4"},
        "SIMAB_VISITS='2,3,4': read only with SIMAB_ACTIVITY_DRIVES=visits (here session_length",
    ),
    "an arm parameter its kind does not take": (
        ["pop", "deep_x=deepfm;dropout=0.1"],
        {},
        "arm deep_x: kind 'deepfm' takes no parameter 'dropout'; it takes batch_size, ",
    ),
    "an arm parameter value its kind refuses": (
        ["pop", "deep_y=deepfm;train_fraction=2"],
        {},
        "arm deep_y: parameter train_fraction=2: Input should be less than or equal to 1",
    ),
    "a negative embedding size": (
        ["pop", "deep_z=deepfm;embedding_dim=-4"],
        {},
        "arm deep_z: parameter embedding_dim=-4: Input should be greater than or equal to 1",
    ),
    "a DNN layer of no units": (
        ["pop", "deep_w=deepfm;dnn_hidden_units=[64,0]"],
        {},
        "arm deep_w: parameter dnn_hidden_units.1=0: Input should be greater than or equal to 1",
    ),
    "a parameter of a source arm its kind does not take": (
        ["pop", "ours_x=lists:LISTS;colour=red"],
        {},
        "arm ours_x: kind 'lists' takes no parameter 'colour'; it takes fill, min_items, path",
    ),
    "a rung of a quality ladder past the list": (
        ["pop", "pop@25"],
        {},
        "arm pop-at-25: slots must be a whole number from 0 to 20, got 25",
    ),
    "matched personas for the embedded brain": (
        ["random", "pop"],
        {"SIMAB_PERSONA": "matched"},
        "SIMAB_PERSONA='matched': the embedded brain decides from the traits",
    ),
    "a primary metric the read-out lacks": (
        ["random", "pop"],
        {"SIMAB_PRIMARY_METRIC": "ndcg"},
        "SIMAB_PRIMARY_METRIC='ndcg': one of ctr, cvr, ",
    ),
    "synthetic metadata on MovieLens": (
        ["random", "pop"],
        {"SIMAB_SOURCE": "download", "SIMAB_METADATA_SOURCE": "synthetic"},
        "SIMAB_METADATA_SOURCE='synthetic': source download has no side information",
    ),
    "local metadata with nothing named": (
        ["random", "pop"],
        {"SIMAB_METADATA_SOURCE": "local"},
        "SIMAB_METADATA_SOURCE='local': needs SIMAB_METADATA_PATH (a metadata file) and/or SIMAB_POSTER_DIRS",
    ),
    "TMDB metadata without a credential": (
        ["random", "pop"],
        {"SIMAB_METADATA_SOURCE": "tmdb"},
        "SIMAB_METADATA_SOURCE='tmdb': neither $TMDB_READ_TOKEN nor $TMDB_API_KEY is set",
    ),
}


@pytest.fixture
def declared_arms():
    """The arm specs a test declares, forgotten afterwards."""
    from ops.arms.registry import forget, known_arm_names

    before = known_arm_names()
    yield
    for name in [a for a in known_arm_names() if a not in before]:
        forget(name)


@pytest.mark.parametrize("case", list(UNWORKABLE))
def test_values_that_cannot_work_together_are_refused_before_the_first_step(case, tmp_path, declared_arms):
    arms, env, said = UNWORKABLE[case]
    lists = tmp_path / "lists.csv"
    pl.DataFrame({"user_id": [1], "rank": [1], "item_id": [3]}).write_csv(lists)
    arms = [a.replace("LISTS", str(lists)) for a in arms]
    home = tmp_path / "home"
    started = time.monotonic()
    _refused(_settings(arms, SIMAB_HOME=home, **env), said, environ={})
    assert time.monotonic() - started < 30  # seconds: nothing is read but headers and counts
    assert not home.exists()  # nothing stored


def test_the_same_values_made_workable_pass(tmp_path, declared_arms):
    home = tmp_path / "home"
    lists = tmp_path / "lists.csv"
    pl.DataFrame({"user_id": [1], "rank": [1], "item_id": [3]}).write_csv(lists)
    for arms, env in [
        (["random", "pop"], {"SIMAB_CONTROL": "random"}),
        (["random", "pop", "mirror"], {"SIMAB_CONTROL": "pop"}),
        (["random", "pop"], {"SIMAB_SHARDS": 3, "SIMAB_AGENTS": 3}),
        (["random", "pop"], {"SIMAB_SHARDS": 4}),
        (["random", "pop"], {"SIMAB_ACTIVITY_DRIVES": "visits", "SIMAB_VISITS": "1,1,4"}),
        (["pop", "deep_z=deepfm;train_fraction=0.5;dnn_dropout=0.1", "pop@20"], {}),
        (["pop", f"ours_y=lists:{lists};fill=pop", f"ours_z=lists:{lists};fill=none"], {}),
        (["random", "pop"], {"SIMAB_PRIMARY_METRIC": "like_ratio"}),
        (["random", "pop"], {"SIMAB_SOURCE": "download", "SIMAB_METADATA_SOURCE": "none"}),
        (["random", "pop"], {"SIMAB_METADATA_SOURCE": "local", "SIMAB_POSTER_DIRS": tmp_path}),
    ]:
        check_values(_settings(arms, SIMAB_HOME=home, **env), environ={})
    check_values(_settings(SIMAB_METADATA_SOURCE="tmdb"), environ={"TMDB_API_KEY": "k"})
    assert not home.exists()


@pytest.mark.parametrize(
    "env, said",
    [
        ({"SIMAB_CONTROL": "zzz"}, "simab: SIMAB_CONTROL='zzz': not one of the arms (random, pop, fm, deepfm, mirror)"),
        (
            {"SIMAB_ARMS": "x=lists:/nope.parquet"},
            "simab: SIMAB_ARMS='x=lists:/nope.parquet': arm x: /nope.parquet: no such file",
        ),
        (
            {"SIMAB_BRAIN": "llm", "SIMAB_LLM_BASE_URL": "notaurl"},
            "simab: SIMAB_LLM_BASE_URL='notaurl': not an http(s) URL",
        ),
        ({"SIMAB_SOURCE": "files"}, "simab: SIMAB_SOURCE='files': needs SIMAB_FILES_PATH"),
    ],
)
def test_a_value_that_would_fail_a_later_step_stops_the_lifecycle_first_in_one_line(tmp_path, env, said):
    home = tmp_path / "home"
    full = {**os.environ, "PYTHONPATH": str(ROOT), "SIMAB_HOME": str(home), **env}
    full.pop("DAGSTER_HOME", None)
    out = subprocess.run(
        [sys.executable, "-m", "pipelines.lifecycle"], env=full, capture_output=True, text=True, timeout=90, cwd=ROOT
    )
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode != 0 and len(lines) == 1, lines  # no Dagster cascade, no traceback
    assert lines[0].startswith(said), lines[0]
    assert not home.exists()

"""The `simab` command over one home: a lifecycle started with `simab run` (no $DAGSTER_HOME
set) leaves its Dagster runs, its MLflow runs and its report under $SIMAB_HOME, where
`simab resume`, `simab report`, `simab ui` and `simab mlflow` find them; in MLflow the
lifecycle is one top-level run carrying its parameters and its verdict, everything else
nested under it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fakes.planted_data import planted_movielens, write_ml1m

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROJECT = Path(__file__).resolve().parents[1]
STEPS = ["simab_arm[pop]", "simab_arm[random]", "simab_prepare", "simab_readout"]


def _environ(home: Path, folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "MLFLOW_TRACKING_URI")}
    env.update(
        SIMAB_HOME=str(home),
        SIMAB_SOURCE="local",
        SIMAB_LOCAL_PATH=str(folder),
        SIMAB_ARMS="random,pop",
        SIMAB_AGENTS="12",
        PYTHONPATH=str(PROJECT),
    )
    return env


@pytest.fixture(scope="module")
def lifecycle(tmp_path_factory):
    """One tiny lifecycle (40 users, arms random and pop, 12 agents), run as a user runs it."""
    users, movies, ratings = planted_movielens(seed=5, n_users=40, n_movies=50, ratings_per_user=15)
    folder = write_ml1m(tmp_path_factory.mktemp("ml") / "ml-1m", users, movies, ratings)
    home = tmp_path_factory.mktemp("home")
    env = _environ(home, folder)
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "run"],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return home, env, done.stdout


@pytest.fixture
def in_home(lifecycle, monkeypatch):
    home, env, _ = lifecycle
    for name in ("DAGSTER_HOME", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    for name in ("SIMAB_HOME", "SIMAB_SOURCE", "SIMAB_LOCAL_PATH", "SIMAB_ARMS", "SIMAB_AGENTS"):
        monkeypatch.setenv(name, env[name])
    return home


def _dagster_runs(home: Path):
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        return [r for r in instance.get_runs()]


def test_the_run_lands_in_the_homes_dagster_instance_and_report_finds_its_report(lifecycle, in_home, capsys):
    from pipelines.cli import main

    home = in_home
    runs = _dagster_runs(home)
    assert sorted(r.tags["simab/step"] for r in runs) == STEPS
    assert {r.status.value for r in runs} == {"SUCCESS"} and len({r.tags["simab/lifecycle"] for r in runs}) == 1
    readout = next(r for r in runs if r.tags["simab/step"] == "simab_readout")
    assert main(["report"]) == 0
    assert capsys.readouterr().out.strip() == str(home / "reports" / readout.run_id / "report.html")
    assert main(["report", "--markdown"]) == 0
    assert Path(capsys.readouterr().out.strip()).read_text().startswith("#")


def test_resume_finds_the_lifecycle_and_skips_every_step(lifecycle, in_home, capsys):
    from pipelines.cli import main

    before = {r.run_id for r in _dagster_runs(in_home)}
    assert main(["resume", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "--resume: lifecycle" in out and "4 of 4 steps done" in out
    assert {r.run_id for r in _dagster_runs(in_home)} == before


def test_the_lifecycle_is_one_top_level_mlflow_run_with_its_verdict_and_the_rest_nested(lifecycle, in_home):
    from resources.mlflow_tracking import MlflowTracking

    home = in_home
    assert (home / "mlflow.db").is_file()
    tracking = MlflowTracking()
    assert tracking.resolved_uri() == f"sqlite:///{home / 'mlflow.db'}"
    client = tracking.client()
    every = client.search_runs([tracking.experiment_id()], "", max_results=1000)
    top = [r for r in every if "mlflow.parentRunId" not in r.data.tags]
    assert len(top) == 1
    (run,) = top
    assert run.data.tags["simab_role"] == "lifecycle" and run.info.status == "FINISHED"
    assert run.info.run_id in lifecycle[2]  # the runner names it
    params = run.data.params
    assert (params["arms"], params["source"], params["brain"], params["agents"]) == (
        "random,pop",
        "local",
        "embedded",
        "12",
    )
    assert params["model"] == "none (no LLM)" and params["control"] == "pop"
    metrics = run.data.metrics
    for arm in ("random", "pop"):
        for metric in ("ctr", "cvr", "average_rating"):
            low, mean, high = (metrics[f"{arm}_{metric}{s}"] for s in ("_ci_low", "", "_ci_high"))
            assert low <= mean <= high
    assert metrics["primary_ci_low"] <= metrics["primary_difference"] <= metrics["primary_ci_high"]
    assert -1 <= metrics["kendall_tau_ctr_ndcg"] <= 1 and "pairs_agree" in metrics
    assert {"taste_f1_1_1", "taste_f1_1_3", "rmse_brain"} <= set(metrics) and metrics["rmse_brain"] > 0
    assert metrics["bill_usd"] == 0.0
    # The Dagster runs' parents under it, the assets' runs under those.
    parents = {r.info.run_id: r for r in every if r.data.tags.get("simab_role") == "dagster_run"}
    assert len(parents) == 4
    assert {r.data.tags["mlflow.parentRunId"] for r in parents.values()} == {run.info.run_id}
    assets = [r for r in every if r.data.tags.get("simab_role") == "asset"]
    assert assets and {r.data.tags["mlflow.parentRunId"] for r in assets} <= set(parents)
    # The same figures as the read-out's own run.
    (readout,) = [r for r in assets if r.data.tags["dagster_asset"] == "ab_readout"]
    assert readout.data.metrics["pop_ctr"] == pytest.approx(metrics["pop_ctr"])
    assert readout.data.metrics["random_cvr"] == pytest.approx(metrics["random_cvr"])


def test_the_uis_are_started_on_the_homes_stores(tmp_path, monkeypatch):
    import pipelines.cli as cli

    started = []
    # The server is started by `_serve` with the home's environment: record it instead.
    monkeypatch.setattr(
        cli,
        "_serve",
        lambda command, extra_env=None: started.append((command, {**cli.home_environ(), **(extra_env or {})})) or 0,
    )
    monkeypatch.setenv("SIMAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert cli.main(["ui"]) == 0 and cli.main(["mlflow", "--port", "5055"]) == 0
    assert cli.main(["viewer", "--port", "8055"]) == 0
    (dagster, dagster_env), (mlflow, mlflow_env), (viewer, viewer_env) = started
    assert viewer[1:] == ["-m", "viewer", "--port", "8055"] and viewer_env["SIMAB_HOME"] == str(tmp_path / "home")
    assert dagster[1:3] == ["dev", "-w"] and dagster_env["DAGSTER_HOME"] == str(tmp_path / "home" / "dagster_home")
    assert (tmp_path / "home" / "dagster_home" / "dagster.yaml").is_file()
    store = mlflow[mlflow.index("--backend-store-uri") + 1]
    assert store == f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}" and mlflow[-2:] == ["--port", "5055"]
    assert mlflow_env["DAGSTER_HOME"] == dagster_env["DAGSTER_HOME"]


def test_settings_shows_the_homes_stores_and_no_password(tmp_path, monkeypatch, capsys):
    from pipelines.cli import main

    monkeypatch.setenv("SIMAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("SIMAB_LLM_BASE_URL", "http://someone:hunter2@127.0.0.1:8080/v1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert "hunter2" not in out and "***@127.0.0.1:8080" in out
    assert re.search(rf"^Dagster instance +{re.escape(str(tmp_path / 'elsewhere'))}$", out, re.M)
    assert str(tmp_path / "home" / "mlflow.db") in out
    assert main(["settings", "--markdown"]) == 0 and "| `SIMAB_HOME` |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no report under"):
        main(["report"])


def test_the_lifecycle_parameters_name_the_model_only_where_the_llm_decides():
    from ops.readout.verdict import Verdict
    from ops.settings import load
    from resources.lifecycle_run import lifecycle_params, verdict_metrics

    llm = lifecycle_params(load({"SIMAB_BRAIN": "llm", "SIMAB_LLM_MODEL": "gemma-3-270m", "SIMAB_AGENTS": "7"}))
    assert (llm["brain"], llm["model"], llm["agents"]) == ("llm", "gemma-3-270m", "7")
    assert lifecycle_params(load({}), {"source": "synthetic"})["source"] == "synthetic"
    assert lifecycle_params(load({}))["model"] == "none (no LLM)"
    # An interval cell becomes three metrics; what was not measured is left out, not 0.
    stored = {"arms": {"fm": {"ctr": [0.2, 0.1, 0.3], "ndcg_at_k": None}}, "trust": {"taste_f1": {"1:3": 0.5}}}
    metrics = verdict_metrics(Verdict.from_dict(stored), 0.25)
    assert metrics == {
        "fm_ctr": 0.2,
        "fm_ctr_ci_low": 0.1,
        "fm_ctr_ci_high": 0.3,
        "taste_f1_1_3": 0.5,
        "warnings": 0.0,
        "bill_usd": 0.25,
    }


def _shape(line: str) -> tuple[str, ...]:
    """What a console line is, whatever its figures, arms and paths: its first word and the
    second where it is a word, not a path or a figure (a warning's first word only); a winner line and a no-winner line are one kind."""
    words = re.sub(r"\d", "#", line).split()
    if words[:1] == ["WARNING:"]:
        return ("WARNING:",)
    if words[0].startswith("[") or (len(words) > 1 and words[1].startswith("#") and words[0].isidentifier()):
        return ("table row",)  # an arm's row of the read-out, or its intervals
    shape = tuple(w for i, w in enumerate(words[:2]) if i == 0 or re.fullmatch(r"[A-Za-zτ(][\w()@-]*:?", w))
    return ("Winner", "on") if shape == ("No", "arm") else shape


# The verdict's lines about the truth: "against the truth (…)", "of the simulated metrics, …",
# "the mirror (…) against the truth: …".
_TRUTH_LINES = {("against", "the"), ("of", "the"), ("the", "mirror")}


def _readme_sample() -> list[str]:
    text = (PROJECT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- demo:begin -->", 1)[1].split("<!-- demo:end -->", 1)[0]
    body = block.strip().removeprefix("```text").removesuffix("```")
    return [line for line in body.splitlines() if line.strip() and line.strip() != "…"]


def test_the_readme_shows_what_the_demo_prints(lifecycle):
    # The README's sample is a real `make demo` console; every kind of line in it must still be
    # printed, in the same order, by `simab run` here (other arms, other figures).
    _, _, printed = lifecycle
    sample = _readme_sample()
    assert len(sample) >= 8 and sample[0].startswith("simab lifecycle: arms")
    shapes = [_shape(line) for line in printed.splitlines() if line.strip()]
    at, previous = 0, None
    for line in sample:
        kind = _shape(line)
        if kind == previous:  # more arms in the sample than here: one kind of line, repeated
            continue
        if kind == ("WARNING:",):  # printed where that run's figures fail a check; this run's may pass
            continue
        if kind in _TRUTH_LINES:  # printed where a run has a truth (ops/readout/truth.py); this one's log has none
            continue
        assert kind in shapes[at:], f"README sample line no longer printed by the demo: {line!r}\n{printed}"
        at, previous = shapes.index(kind, at) + 1, kind
    # The shape check itself tells lines apart.
    assert _shape("Winner on CTR: fm, +0.1") == _shape("No arm beats the control pop on CTR: the best")
    assert _shape("fidelity: Kendall τ 1.00") != _shape("trust in the agents: taste F1")
    assert _shape("deepfm   0.507  0.466") == _shape("pop  0.188  0.139") == _shape("  [0.492, 0.522]  [0.450, 0.482]")

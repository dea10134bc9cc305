"""The lifecycle runner's console: stage lines driven by a real Dagster run's events, the
closing summary, and everything else sent to the full log."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import uuid

from dagster import DagsterInstance, Definitions, asset, define_asset_job


def test_everything_but_the_console_goes_to_the_log(tmp_path, capfd):
    from pipelines.console import to_log_file

    log = tmp_path / "logs" / "run.log"
    library = logging.getLogger("some.library")  # a library that set up its handler at import
    library.addHandler(logging.StreamHandler(sys.__stderr__))
    library.propagate = False
    with to_log_file(log) as terminal:
        print("python print")
        os.write(2, b"written on fd 2\n")
        library.warning("a library warning")
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('from a subprocess\\n')"], check=True)
        terminal.write("for the person\n")
    print("after the block")
    text = log.read_text()
    assert all(s in text for s in ("python print", "written on fd 2", "a library warning", "from a subprocess"))
    assert "for the person" not in text and "after the block" not in text
    out, err = capfd.readouterr()
    assert "for the person" in out and "after the block" in out
    assert "python print" not in out + err and "from a subprocess" not in out + err


def test_a_stage_line_follows_the_run_and_shows_its_warnings():
    from pipelines.console import LifecycleConsole

    @asset
    def first(context):
        context.log.warning("control arm 'pop' was not simulated; using 'fm'")
        return 1

    @asset
    def second(first):
        return first + 1

    @asset
    def third(second):
        return second + 1

    job = Definitions(assets=[first, second, third], jobs=[define_asset_job("three", selection="*")]).resolve_job_def(
        "three"
    )
    instance = DagsterInstance.ephemeral()
    stream = io.StringIO()
    console = LifecycleConsole(stream)
    run_id = str(uuid.uuid4())
    seen = []
    with console.stage("arm pop", len(job.nodes)) as stage:
        stage.watch(instance, run_id)
        instance.add_event_listener(
            run_id,
            lambda e: seen.append(stage.progress.tasks[0].completed)
            if e.dagster_event and e.dagster_event.event_type_value == "STEP_START"
            else None,
        )
        result = job.execute_in_process(instance=instance, run_id=run_id)
        stage.succeeded = result.success
    lines = [line for line in stream.getvalue().splitlines() if line.strip()]
    assert lines[0].startswith("✓ arm pop") and "3/3" in lines[0]
    assert seen == [0, 1, 2]  # the bar moved as each step ended, not only at the end
    assert "control arm 'pop' was not simulated" in lines[1] and len(lines) == 2


def test_a_failed_stage_says_so():
    from pipelines.console import LifecycleConsole

    @asset
    def broken():
        raise ValueError("no")

    job = Definitions(assets=[broken], jobs=[define_asset_job("one", selection="*")]).resolve_job_def("one")
    instance = DagsterInstance.ephemeral()
    stream = io.StringIO()
    run_id = str(uuid.uuid4())
    with LifecycleConsole(stream).stage("read-out", 1) as stage:
        stage.watch(instance, run_id)
        stage.succeeded = job.execute_in_process(instance=instance, run_id=run_id, raise_on_error=False).success
    line = stream.getvalue().strip()
    assert line.startswith("✗ read-out") and "failed: broken" in line


def test_a_failed_stage_keeps_its_warnings_for_after_the_cause_and_drops_the_cascade():
    from pipelines.console import LifecycleConsole, failure_lines

    @asset
    def reads(context):
        context.log.warning("3 rows without a timestamp were dropped")
        raise ValueError("interactions.csv, line 3, field 'rating': '7' is not a whole rating 1..5")

    @asset
    def splits(reads):
        return reads

    @asset
    def trains(splits):
        return splits

    job = Definitions(assets=[reads, splits, trains], jobs=[define_asset_job("j", selection="*")]).resolve_job_def("j")
    instance = DagsterInstance.ephemeral()
    stream = io.StringIO()
    run_id = str(uuid.uuid4())
    with LifecycleConsole(stream).stage("prepare", 3) as stage:
        stage.watch(instance, run_id)
        result = job.execute_in_process(instance=instance, run_id=run_id, raise_on_error=False)
        stage.succeeded = result.success
    assert [line for line in stream.getvalue().splitlines() if line.strip()][-1].startswith("✗ prepare")
    assert stage.notes == ["reads: 3 rows without a timestamp were dropped"]  # not Dagster's "Not executing" lines
    # One line per failed step, the step's own error; not the run's failure repeating it.
    assert failure_lines(result.all_events) == [
        "reads: ValueError: interactions.csv, line 3, field 'rating': '7' is not a whole rating 1..5"
    ]


def test_the_console_opens_a_failure_on_its_cause_a_bad_row_named_by_file_line_and_field(tmp_path, capfd, monkeypatch):
    import shutil

    import pytest

    from ops.settings import PROJECT_ROOT
    from pipelines.lifecycle import main

    shop = tmp_path / "shop"
    shutil.copytree(PROJECT_ROOT / "examples" / "bookshop", shop, ignore=shutil.ignore_patterns("*.py"))
    lines = (shop / "interactions.csv").read_text().splitlines(keepends=True)
    user, item, _, when = lines[2].split(",")
    lines[2] = f"{user},{item},7,{when}"  # line 3 of the file: a rating of 7
    (shop / "interactions.csv").write_text("".join(lines))
    settings = {
        "SIMAB_HOME": tmp_path / "home",
        "SIMAB_SOURCE": "files",
        "SIMAB_FILES_PATH": shop,
        # A folder store: no SQLite migrations to wait for (seconds), the runner's console the same.
        "SIMAB_DEPLOYMENT": "server",
        "MLFLOW_TRACKING_URI": (tmp_path / "mlruns").as_uri(),
        "MLFLOW_ALLOW_FILE_STORE": "true",
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    capfd.readouterr()
    with pytest.raises(SystemExit) as stopped:
        main(["--arms", "random,pop"])
    screen = capfd.readouterr().out.splitlines() + str(stopped.value.code).splitlines()
    bar = next(i for i, line in enumerate(screen) if line.startswith("✗ prepare"))
    cause = screen[bar + 1]
    assert cause.startswith("ingestion: DataFileError: ") and cause.endswith(
        f"{shop / 'interactions.csv'}, line 3, field 'rating': '7' is not a whole rating 1..5"
    ), screen
    rest = "\n".join(screen[bar + 2 :])
    assert "Not executing" not in rest and "None:" not in rest and "line 3" not in rest, rest
    assert rest.startswith("simab_prepare failed (Dagster run ") and "simab resume" in rest
    log = next((tmp_path / "home" / "logs").glob("lifecycle-*.log")).read_text()
    assert "Not executing" in log  # the cascade is in the full log


def test_the_summary_shows_each_arm_with_intervals_the_verdict_and_where_to_look():
    from ops.readout.verdict import Verdict
    from pipelines.console import LifecycleConsole

    stored = {
        "control": "pop",
        "arms": {
            "fm": {
                "ctr": [0.21, 0.19, 0.23],
                "cvr": [0.05, 0.04, 0.06],
                "average_rating": [3.9, 3.8, 4.0],
                "ndcg_at_k": [0.061, 0.055, 0.067],
            },
            "random": {
                "ctr": [0.11, 0.1, 0.12],
                "cvr": [0.01, 0.0, 0.02],
                "average_rating": [None, None, None],
                "ndcg_at_k": None,
            },
        },
        "fidelity": {
            "kendall_tau_ctr_ndcg": 0.67,
            "same_best_arm": True,
            "pairs": 3,
            "agree": 2,
            "disagree": 0,
            "offline tie": 1,
            "missed": 0,
            "separated": 2,
        },
    }
    stream = io.StringIO()
    LifecycleConsole(stream).summary(
        Verdict.from_dict(stored), [("report", "/x/report.html"), ("viewer", "make viewer → http://127.0.0.1:8050/")]
    )
    text = stream.getvalue()
    lines = text.splitlines()
    table = lines[lines.index(next(line for line in lines if line.startswith("A/B read-out"))) + 1 :]
    table = table[: table.index("")]
    assert len(table) == 1 + 2 * 2 and max(len(line) for line in table) <= 80  # header, two lines per arm
    fm = lines.index(next(line for line in lines if line.startswith("fm")))
    assert lines[fm].split() == ["fm", "0.210", "0.050", "3.90", "0.061"]  # means, intervals below them
    assert lines[fm + 1].split() == ["[0.190,", "0.230]", "[0.040,", "0.060]", "[3.80,", "4.00]", "[0.055,", "0.067]"]
    random = next(line for line in lines if line.startswith("random"))
    assert random.count("n/a") == 2
    assert (
        "Kendall τ(CTR, NDCG@20) = 0.67; same best arm; arm against arm, of the 2 pairs the offline metric "
        "separates: 2 agree, 0 disagree, 0 missed; 1 offline tie" in text
    )
    assert "/x/report.html" in text and "http://127.0.0.1:8050/" in text


def test_the_console_opens_on_the_same_verdict_lines_as_the_report():
    from ops.readout.verdict import Verdict, verdict_lines
    from pipelines.console import LifecycleConsole

    stored = {
        "control": "pop",
        "verdict": {
            "metric": "ctr",
            "arm": "fm",
            "control": "pop",
            "difference": 0.021,
            "ci_low": 0.015,
            "ci_high": 0.027,
            "p_holm": 0.001,
            "significant": True,
        },
        "trust": {
            "taste_protocol": "per item",
            "taste_f1": {"1:1": 0.8, "1:9": 0.56},
            "rmse": 0.93,
            "rmse_best_arm": 0.96,
            "best_arm": "deepfm",
        },
        "warnings": ["Kendall τ(ctr, ndcg_at_k) = 0.333 is below the floor 0.60"],
        "arms": {"fm": {"ctr": [0.21, 0.19, 0.23], "cvr": None, "average_rating": None, "ndcg_at_k": None}},
        "fidelity": {
            "kendall_tau_ctr_ndcg": 0.33,
            "same_best_arm": True,
            "pairs": 1,
            "agree": 1,
            "disagree": 0,
            "offline tie": 0,
            "missed": 0,
            "separated": 1,
        },
    }
    said = verdict_lines(Verdict.from_dict(stored))
    assert said[0] == (
        "Winner on CTR: fm, +0.0210 [+0.0150, +0.0270] against the control pop (95 % interval; Holm p = 0.001)"
    )
    assert said[2] == (
        "trust in the agents: taste F1 (per item protocol) 1:1 0.80, 1:9 0.56; rating RMSE 0.930 "
        "(best offline arm, deepfm: 0.960)"
    )
    assert said[-1].startswith("WARNING: Kendall")
    stream = io.StringIO()
    LifecycleConsole(stream).summary(Verdict.from_dict(stored), [])
    lines = [line for line in stream.getvalue().splitlines() if line]
    assert lines[: len(said)] == said and lines[len(said)].startswith("A/B read-out")
    # Not significant: no winner is named.
    stored["verdict"] |= {
        "difference": 0.002,
        "ci_low": -0.001,
        "ci_high": 0.005,
        "p_holm": 0.4,
        "significant": False,
    }
    assert verdict_lines(Verdict.from_dict(stored))[0].startswith(
        "No arm beats the control pop on CTR: the best, fm, differs by +0.002"
    )

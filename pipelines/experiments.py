"""Run the papers' experiments from the command line and print their tables:

    python -m pipelines.experiments table2 [table3 table4 table5 thumbnails brains causal believability] [--reuse]

Each experiment runs the same jobs the Dagster UI shows, in order, against the home's
instance ($DAGSTER_HOME, by default `$SIMAB_HOME/dagster_home`: `pipelines.home`): `simab_prepare`, `experiment_arm` for each arm it needs
(train, top-20, offline metrics, simulation — no augmentation refits), `experiment_simulation`
for each (arm, condition) it needs (Table 5: the simulated arm with and without vision; the
brain comparison: every arm under each brain), then its own job (`experiment_<name>`), which
writes `$SIMAB_HOME/experiments/<name>/table.md` and `table.csv` and logs them to MLflow.
The table is printed at the end with the wall time of every step.

`--reuse` skips a step whose assets (for its partition) are already materialised in this
instance — several experiments share the data preparation and DeepFM.  Run config comes from
the `SIMAB_*` environment (`pipelines.run_config`); `--set OP.FIELD=VALUE` (JSON value)
overrides one field, e.g. `--set ab_agent_table5.seeds=2 --set ab_agent_table5.models='["deepfm"]'`.
"""

from __future__ import annotations

import json
import os
import sys
import time

from ops.environment import offline_defaults
from pipelines.plan import Step
from pipelines.run_config import EXPERIMENT_ASSETS
from pipelines.setting_ops import op_config


def plan(name: str, settings) -> list[Step]:
    """The steps of one experiment under these settings (arms, run config)."""
    from assets.experiments.arm_tables import TABLE3_ARMS, TABLE4_ARMS
    from assets.experiments.augmentation_table import Table5Config
    from assets.experiments.believability import BelievabilityConfig
    from assets.experiments.brain_comparison import BrainComparisonConfig
    from assets.partitions import condition_name

    ops = op_config(settings)

    def arms(op: str, default) -> list[str]:
        return list(ops.get(op, {}).get("arms") or default)

    def arm_steps(names) -> list[Step]:
        return [Step("experiment_arm", a) for a in names]

    prepare = Step("simab_prepare")
    own = Step(f"experiment_{name}")
    if name == "table2":
        return [prepare, *arm_steps(arms("ab_agent_table2", settings.arms)), own]
    if name == "table3":
        return [prepare, *arm_steps(arms("ab_agent_table3", TABLE3_ARMS)), own]
    if name == "table4":
        return [prepare, *arm_steps(arms("ab_agent_table4", TABLE4_ARMS)), own]
    if name == "table5":
        cfg = ops.get("ab_agent_table5", {})
        arm, brain = cfg.get("simulated_arm", "deepfm"), cfg.get("brain", Table5Config().brain)
        visions = (True, False) if cfg.get("vision_ablation", True) else (True,)
        return [
            prepare,
            Step("experiment_arm", arm),
            *(Step("experiment_simulation", f"{arm}|{condition_name(brain, v)}") for v in visions),
            own,
        ]
    if name in ("thumbnails", "causal"):
        return [prepare, own]
    if name == "brains":
        cfg = ops.get("brain_comparison", {})
        names = arms("brain_comparison", settings.arms)
        brains = cfg.get("brains", BrainComparisonConfig().brains)
        vision = cfg.get("vision", True)
        return [
            prepare,
            *arm_steps(names),
            *(Step("experiment_simulation", f"{a}|{condition_name(b, vision)}") for a in names for b in brains),
            own,
        ]
    if name == "believability":
        cfg = ops.get("simuser_believability", {})
        names = arms("simuser_believability", settings.arms)
        brains = cfg.get("brains") or BelievabilityConfig().brains
        vision = cfg.get("vision", True)
        return [
            prepare,
            *arm_steps(names),
            *(Step("experiment_simulation", f"{a}|{condition_name(b, vision)}") for a in names for b in brains),
            own,
        ]
    raise ValueError(f"unknown experiment {name!r}; known: {list(EXPERIMENT_ASSETS)}")


# Ops renamed since they were first named, so that an old `--set` gets told the new name.
RENAMED_OPS = {"movielens": "ingestion"}


def with_overrides(settings, assignments: list[str]):
    """The settings with `OP.FIELD=VALUE` assignments (VALUE is JSON, or a plain string)."""
    from pipelines.jobs import op_names

    ops = {op: dict(fields) for op, fields in settings.overrides.items()}
    known = op_names(settings) if assignments else set()
    for assignment in assignments:
        target, _, text = assignment.partition("=")
        op, _, field = target.partition(".")
        if not op or not field or not _:
            raise SystemExit(f"--set {assignment!r}: expected OP.FIELD=VALUE, e.g. ab_agent_table5.seeds=2")
        if op not in known:  # never dropped unseen: a run config of an op that is not there does nothing
            renamed = f"; {op!r} is called {RENAMED_OPS[op]!r} now" if op in RENAMED_OPS else ""
            raise SystemExit(f"--set {assignment!r}: no op {op!r}{renamed}; the ops: {', '.join(sorted(known))}")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        ops.setdefault(op, {})[field] = value
    return settings.model_copy(update={"overrides": ops})


def run_experiments(names: list[str], settings, reuse: bool = False, instance=None, say=print) -> dict[str, dict]:
    """Run each experiment's plan; returns {name: {"steps": [(label, seconds, skipped)],
    "wall_s": seconds, "table": path}}.  Raises SystemExit naming a failed step."""
    from dagster import DagsterInstance

    from pipelines.definitions import build_definitions
    from pipelines.jobs import run_config_for
    from resources.storage import data_root

    if "believability" in names:
        judge_preflight(settings, os.environ, say)
    defs = build_definitions(settings)
    if instance is None:
        from pipelines.home import dagster_home
        from pipelines.instance import write_instance_config

        home = str(dagster_home())
        write_instance_config(home)
        instance = DagsterInstance.from_config(home)
    done: set[str] = set()
    results = {}
    for name in names:
        started = time.perf_counter()
        steps = []
        for step in plan(name, settings):
            if step.label in done or (
                reuse and step.job != f"experiment_{name}" and _materialised(instance, defs, step)
            ):
                say(f"{name}: {step.label} already materialised, skipped")
                steps.append((step.label, 0.0, True))
                continue
            t0 = time.perf_counter()
            say(f"{name}: {step.label} …")
            job = defs.resolve_job_def(step.job)
            result = job.execute_in_process(
                instance=instance,
                partition_key=step.partition,
                run_config=run_config_for(step.job, settings),
                raise_on_error=False,
                tags={"simab/experiment": name},
            )
            seconds = time.perf_counter() - t0
            if not result.success:
                from pipelines.console import failure_lines

                # The cause first: each failed step's own error, then the run.
                raise SystemExit(
                    "\n".join(
                        [
                            *failure_lines(result.all_events),
                            f"experiment {name}: {step.label} failed (Dagster run {result.run_id})",
                        ]
                    )
                )
            say(f"{name}: {step.label} done in {seconds:.0f} s")
            steps.append((step.label, seconds, False))
            done.add(step.label)
        wall = time.perf_counter() - started
        table = data_root() / "experiments" / name / "table.md"
        results[name] = {"steps": steps, "wall_s": wall, "table": table}
    return results


def judge_preflight(settings, environ, say=print) -> None:
    """The believability judge's LLM bill before step 1 (`ops.preflight.bill.judge_bill`);
    SystemExit when it is expected above the cost limit.  With no endpoint configured it
    says the judge will report "not measured"."""
    from assets.experiments.believability import BelievabilityConfig
    from ops.preflight.bill import experiment_bill, judge_bill, judge_configured

    if not judge_configured(settings, environ):
        say(
            "believability: no LLM endpoint configured for the judge (SIMAB_LLM_BASE_URL, or the key in "
            "$OPENAI_API_KEY): its table will say 'not measured'"
        )
        return
    defaults = BelievabilityConfig()
    cfg = op_config(settings).get("simuser_believability", {})
    arms = cfg.get("arms") or settings.arms or defaults.arms
    brains = cfg.get("brains") or defaults.brains
    per = int(cfg.get("per_arm_and_brain", defaults.per_arm_and_brain))
    lines, refusal = experiment_bill(judge_bill(settings, len(arms) * len(brains) * per), settings)
    for line in lines:
        say(line)
    if refusal:
        raise SystemExit(refusal)


def _materialised(instance, defs, step: Step) -> bool:
    """Whether every asset of the step's job has a materialisation (of its partition)."""
    from dagster import AssetRecordsFilter

    keys = defs.resolve_job_def(step.job).asset_layer.selected_asset_keys
    graph = defs.resolve_asset_graph()
    for key in keys:
        partitioned = graph.get(key).partitions_def is not None
        if partitioned and step.partition is None:
            return False
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=key, asset_partitions=[step.partition] if partitioned else None), limit=1
        ).records
        if not records:
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "experiments",
        nargs="+",
        choices=list(EXPERIMENT_ASSETS),
        metavar="EXPERIMENT",
        help=f"one or more of {', '.join(EXPERIMENT_ASSETS)}",
    )
    parser.add_argument("--arms", help="comma-separated arms of Table 2 and the brain comparison (default $SIMAB_ARMS)")
    parser.add_argument("--reuse", action="store_true", help="skip steps already materialised in this $DAGSTER_HOME")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="OP.FIELD=VALUE",
        help="override one run-config field (JSON value)",
    )
    args = parser.parse_args(argv)
    offline_defaults()
    from ops.settings import SettingError
    from pipelines.run_config import settings_from_env, with_arms

    try:
        settings = settings_from_env(os.environ)
        if args.arms:
            settings = with_arms(settings, [a.strip() for a in args.arms.split(",") if a.strip()])
    except SettingError as exc:
        raise SystemExit(f"simab: {exc}") from None
    settings = with_overrides(settings, args.set)
    results = run_experiments(args.experiments, settings, reuse=args.reuse)
    for name, result in results.items():
        print(f"\n{result['table'].read_text(encoding='utf-8')}")
        times = ", ".join(
            f"{label} {seconds:.0f} s" + (" (reused)" if skipped else "") for label, seconds, skipped in result["steps"]
        )
        print(f"{name}: wall time {result['wall_s']:.0f} s ({times}); table in {result['table'].parent}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

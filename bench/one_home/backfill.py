"""A backfill of every arm from the Dagster UI (its GraphQL, the launchpad's "Launch backfill"
of `recommender_arm` over all its partitions) on a home whose prepare step is stored: how many
runs and arm-pool steps run at once, against the limits the instance config simab writes sets
($SIMAB_MAX_CONCURRENT_RUNS, $SIMAB_ARM_POOL_LIMIT; 2 and 2 by default).  Run by
`backfill.sh` (env.sh sourced) on `$ONE_HOME/uihome` (`ui_trials.sh` stores its prepare step).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import requests
from dagster import DagsterInstance, RunsFilter
from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION
from ui import wait_loaded  # this folder's, beside the script

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SCRATCH = Path(os.environ.get("ONE_HOME", "/tmp/one_home"))
HOME = SCRATCH / "uihome"
PORT = 3151
POOLED = {"recommender_arm", "arm_rankings", "simulation_events", "augmentation_metrics"}


def graphql(query: str, variables: dict | None = None) -> dict:
    r = requests.post(
        f"http://127.0.0.1:{PORT}/graphql", json={"query": query, "variables": variables or {}}, timeout=60
    )
    r.raise_for_status()
    return r.json()


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def main() -> int:
    from assets.partitions import arm_partitions
    from bench.executors import step_spans

    arms = arm_partitions.get_partition_keys()
    env = {**os.environ, "SIMAB_HOME": str(HOME)}
    env.pop("DAGSTER_HOME", None)
    ui = subprocess.Popen(
        [str(ROOT / ".venv/bin/simab"), "ui", "-p", str(PORT)],
        env=env,
        cwd=ROOT,
        stdout=open(SCRATCH / "backfill_ui.log", "w"),  # noqa: SIM115 - the UI's, closed with it
        stderr=subprocess.STDOUT,
    )
    try:
        wait_loaded(PORT)
        started = time.time()
        answer = graphql(
            LAUNCH_PARTITION_BACKFILL_MUTATION,
            {"backfillParams": {"partitionNames": arms, "assetSelection": [{"path": ["recommender_arm"]}]}},
        )["data"]["launchPartitionBackfill"]
        backfill = answer.get("backfillId")
        if backfill is None:
            raise SystemExit(f"the backfill was not launched: {answer}")
        print(f"backfill {backfill} of recommender_arm over {len(arms)} arms: {', '.join(arms)}", flush=True)
        sampled = 0
        with DagsterInstance.from_config(str(HOME / "dagster_home")) as instance:
            while time.time() - started < 1200:
                records = instance.get_run_records(RunsFilter(tags={"dagster/backfill": backfill}))
                running = sum(r.dagster_run.status.value in ("STARTING", "STARTED") for r in records)
                sampled = max(sampled, running)
                done = [r for r in records if r.dagster_run.is_finished]
                if len(records) == len(arms) and len(done) == len(arms):
                    break
                time.sleep(0.5)
            records = instance.get_run_records(RunsFilter(tags={"dagster/backfill": backfill}))
            runs = [(r.start_time, r.end_time) for r in records if r.start_time and r.end_time]
            spans = step_spans(instance, [r.dagster_run for r in records])
            steps = [span for (_, step), span in spans.items() if step in POOLED and None not in span]
            statuses = sorted({r.dagster_run.status.value for r in records})
        print(
            f"{len(records)} runs ({', '.join(statuses)}) in {time.time() - started:.0f} s; at once: "
            f"runs {most_at_once(runs)} (start to end; {sampled} STARTING or STARTED in the samples), "
            f"arm-pool steps {most_at_once(steps)} of {len(steps)}; load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    finally:
        ui.terminate()
        ui.wait(90)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

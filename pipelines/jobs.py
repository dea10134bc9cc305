"""Jobs, the nightly re-simulation schedule and the sensor that reads it out.

The lifecycle is three jobs because arms are partitions: `simab_prepare` (unpartitioned
data, contracts, split, agents), `simab_arm` once per arm (train, top-20, offline metrics,
simulation, augmentation) and `simab_readout` (A/B read-out, fidelity, the alignment
protocols, report); `simab_alignment` re-runs the alignment protocols alone.  In the Dagster UI,
"Materialize all" launches the same thing as one backfill.  Each job's default run config
comes from the environment (`pipelines.run_config`), read once when the definitions are built.

With user shards ($SIMAB_SHARDS = N > 1) a job still has one partitions definition, so an
arm is three jobs: `simab_arm` (train, top-20 lists, offline metrics), `simab_simulate` once
per shard (`simulation_shard`, partition `<arm>|<shard>`: the shards of all arms can run at
once, on as many workers as the executor has) and `simab_combine` (the shards combined into
`simulation_events`, then the refit).  The nightly schedule re-simulates every arm × shard;
the `combine_after_shards` sensor combines an arm once all its shards are newer than its
events, and the read-out sensor follows as before.

What spends is opt-in: with the LLM brain on an endpoint that has a price, the nightly
schedule and the read-out sensor start stopped, and their descriptions in the Dagster UI
say what a night costs at these settings (`ops.preflight.bill.night_bill`) and the limit it
runs under.  Turned on, the runs of one night share one bill (tag `simab/lifecycle` =
`night-<date>`), so the limit holds for the night as a whole: every arm and the read-out.
"""

from __future__ import annotations

import functools

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    MultiPartitionKey,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    load_assets_from_modules,
    schedule,
    sensor,
)

from assets import (
    agents,
    augmentation,
    catalogue,
    ingestion,
    recommenders,
    report,
    rounds,
    simulation,
    split,
)
from assets.alignment import list_quality, rating, sensitivity, social, taste
from assets.alignment.fidelity import ALIGNMENT_CHECKS
from assets.experiments import (
    arm_tables,
    augmentation_table,
    believability,
    brain_comparison,
    causal_graph,
    simulation_events,
    thumbnails,
)
from assets.partitions import arm_partitions_of, arm_shard_key, with_arm_partitions
from data_contracts.checks import CONTRACT_CHECKS
from ops.preflight.bill import night_bill
from ops.settings import Settings
from pipelines.run_config import EXPERIMENT_ASSETS, op_config_for, uses_llm
from pipelines.versions import versioned_assets
from resources.llm import LIFECYCLE_TAG

ASSET_MODULES = [
    ingestion,
    catalogue,
    split,
    recommenders,
    agents,
    simulation,
    augmentation,
    taste,
    rating,
    list_quality,
    sensitivity,
    social,
    report,
    simulation_events,
    arm_tables,
    augmentation_table,
    thumbnails,
    brain_comparison,
    causal_graph,
    believability,
]

JOB_SELECTIONS = {
    "simab_prepare": (
        AssetSelection.groups("ingestion", "catalogue", "split", "agents"),
        "MovieLens → MM-ML-1M → contracts → chronological split → agents and the embedded brain",
    ),
    "simab_arm": (
        AssetSelection.groups("recommenders", "simulation", "augmentation"),
        "one arm: train, top-20 lists, offline metrics, simulation, models refit on the simulated data",
    ),
    "simab_readout": (
        AssetSelection.groups("report", "alignment"),
        "A/B read-out over the simulated arms, fidelity (with its warning check), the agents' alignment protocols, report",
    ),
    "simab_alignment": (
        AssetSelection.groups("alignment"),
        "the alignment protocols alone: how far to trust the agents (e.g. for the LLM brain)",
    ),
    "simab_resimulate": (
        AssetSelection.assets("simulation_events"),
        "re-simulate one arm against its current model and agents",
    ),
    "simab_personas": (
        AssetSelection.assets("llm_personas"),
        "SimUSER persona matching for the LLM brain (candidates written and scored on held-out ratings; then SIMAB_PERSONA=matched)",
    ),
    "simab_rounds": (
        AssetSelection.assets("round_events", "memory_after_round", "round_training_rows"),
        "one round of one arm (partition arm|round): retrain on the earlier rounds' clicks and views, simulate with the grown memories",
    ),
    "simab_filter_bubble": (
        AssetSelection.assets("filter_bubble"),
        "Agent4Rec §4.1: the filter bubble over four rounds of an MF-style arm",
    ),
    # The papers' experiments (`python -m pipelines.experiments <name>` runs each with what it needs).
    "experiment_arm": (
        AssetSelection.groups("recommenders") | AssetSelection.assets("simulation_events"),
        "one arm for the experiments' tables: train, top-20 lists, offline metrics, simulation (no augmentation refits)",
    ),
    "experiment_simulation": (
        AssetSelection.assets("experiment_simulation_events"),
        "an arm simulated under one condition (brain, with or without vision), beside the lifecycle's simulation",
    ),
    **{
        f"experiment_{name}": (
            AssetSelection.assets(asset),
            f"writes {asset} beside the paper from the stored arms and simulations it reads (materialise them first with experiment_arm / "
            f"experiment_simulation, or run `python -m pipelines.experiments {name}`, which does)",
        )
        for name, asset in EXPERIMENT_ASSETS.items()
    },
}

SHARDED_JOB_SELECTIONS = {
    **JOB_SELECTIONS,
    "simab_arm": (
        AssetSelection.groups("recommenders"),
        "one arm: train, top-20 lists, offline metrics (then simab_simulate per shard, simab_combine)",
    ),
    "simab_simulate": (
        AssetSelection.assets("simulation_shard"),
        "one user shard of one arm: its agents' sessions (partition <arm>|<shard>)",
    ),
    "simab_combine": (
        AssetSelection.assets("simulation_events") | AssetSelection.groups("augmentation"),
        "one arm: its shards' events combined, models refit on the simulated data",
    ),
    "simab_resimulate": (
        AssetSelection.assets("simulation_shard"),
        "re-simulate one shard of one arm against its current model and agents",
    ),
}
# The jobs that estimate the LLM bill first: those that hold the arm-partitioned estimate.
LLM_BILL_JOBS = {False: ("simab_arm", "simab_resimulate", "experiment_arm"), True: ("simab_arm",)}


def build_assets(settings: Settings) -> tuple[list, list]:
    """The asset graph for these settings: (assets, asset checks), each asset's code version
    covering its source and the settings it is computed with (`pipelines.versions`)."""
    assets, checks = _build_assets(settings.shards, settings.rounds, tuple(settings.arms or ()))
    return versioned_assets(assets, checks, settings), checks


def op_names(settings: Settings) -> set[str]:
    """The ops (asset, multi-asset and check nodes) of the code location these settings build."""
    assets, checks = _build_assets(settings.shards, settings.rounds, tuple(settings.arms or ()))
    return {a.node_def.name for a in assets if a.is_executable} | {c.node_def.name for c in checks}


@functools.cache
def _build_assets(shards: int, rounds_: int, arms: tuple[str, ...]) -> tuple[list, list]:
    assets = load_assets_from_modules(ASSET_MODULES)
    if shards > 1:
        # The simulation in user shards: `simulation_events` becomes their combination.
        assets = [
            a for a in assets if AssetKey("simulation_events") not in a.keys
        ] + simulation.sharded_simulation_assets(shards)
    assets = with_arm_partitions([*assets, *rounds.build_round_assets(rounds_)], arm_partitions_of(arms))
    return assets, [*CONTRACT_CHECKS, *ALIGNMENT_CHECKS]


def job_selection(name: str, settings: Settings) -> tuple[AssetSelection, str]:
    """A job's assets and description.  With the LLM brain, the jobs that simulate estimate
    the bill first (`llm_cost_estimate`)."""
    sharded = settings.shards > 1
    selection, description = (SHARDED_JOB_SELECTIONS if sharded else JOB_SELECTIONS)[name]
    if uses_llm(settings) and name in LLM_BILL_JOBS[sharded]:
        selection = selection | AssetSelection.assets("llm_cost_estimate")
    return selection, description


def job_ops(name: str, settings: Settings) -> dict[str, set[str]]:
    """The ops (asset, multi-asset and check nodes) a job runs, each with the fields its
    config accepts: the job's selection resolved against the graph, so that which op belongs
    to which job is written once."""
    if name not in (SHARDED_JOB_SELECTIONS if settings.shards > 1 else JOB_SELECTIONS):
        return {}
    assets, checks = _build_assets(settings.shards, settings.rounds, tuple(settings.arms or ()))
    keys = job_selection(name, settings)[0].resolve(assets)
    nodes = [a.node_def for a in assets if set(a.keys) & keys]
    nodes += [c.node_def for c in checks if any(spec.asset_key in keys for spec in c.check_specs)]
    return {
        n.name: set(getattr(n.config_schema.config_type, "fields", None) or ()) if n.config_schema else set()
        for n in nodes
    }


def run_config_for(job_name: str, settings: Settings) -> dict:
    """The run config of one job: of the environment's settings, those of the ops it runs
    that their config accepts (the combining `simulation_events` of a sharded run takes
    none); then the `--set` overrides, unfiltered, so that a misspelt field is refused."""
    ops = {}
    for op, accepts in job_ops(job_name, settings).items():
        config = op_config_for(op, accepts, settings)
        if config:
            ops[op] = {"config": config}
    return {"ops": ops} if ops else {}


def build_jobs(settings: Settings) -> dict:
    """The lifecycle's jobs, each with the environment's run config as its default."""
    jobs = {}
    for name in SHARDED_JOB_SELECTIONS if settings.shards > 1 else JOB_SELECTIONS:
        selection, description = job_selection(name, settings)
        jobs[name] = define_asset_job(
            name, selection=selection, description=description, config=run_config_for(name, settings) or None
        )
    return jobs


def build_schedules_and_sensors(settings: Settings, jobs: dict) -> tuple[list, list]:
    arms = list(settings.arms)
    shards = settings.shards
    resimulate_config = run_config_for("simab_resimulate", settings)
    readout_config = run_config_for("simab_readout", settings)
    # One partition per arm, or per arm × shard when sharded.
    partitions = [arm_shard_key(arm, k) for arm in arms for k in range(shards)] if shards > 1 else arms

    rounds_config = run_config_for("simab_rounds", settings)
    continuing = settings.nightly == "continue"
    spends, cost = night_cost(settings)
    # What spends starts stopped: a person turns it on knowing what a night costs.
    schedule_status = DefaultScheduleStatus.STOPPED if spends else DefaultScheduleStatus.RUNNING
    sensor_status = DefaultSensorStatus.STOPPED if spends else DefaultSensorStatus.RUNNING

    @schedule(
        job=jobs["simab_rounds" if continuing else "simab_resimulate"],
        cron_schedule="0 2 * * *",
        execution_timezone=settings.schedule_timezone,
        default_status=schedule_status,
        description=f"Every night at 02:00 ({settings.schedule_timezone}, $SIMAB_SCHEDULE_TIMEZONE), every configured arm ($SIMAB_ARMS), each of its user shards, is simulated "
        "again: afresh from the train-window memories, or ($SIMAB_NIGHTLY=continue) as its next round, from the "
        f"memories the last round left (a longitudinal A/B test). {cost}",
    )
    def nightly_resimulation(context: ScheduleEvaluationContext):
        night = context.scheduled_execution_time.strftime("%Y-%m-%d")
        # One bill per night: its runs (every arm, the read-out after them) share the limit.
        tags = {"simab/night": night, LIFECYCLE_TAG: f"night-{night}"}
        if not continuing:
            for key in partitions:
                yield RunRequest(
                    run_key=f"{night}-{key}",
                    partition_key=key,
                    tags=tags,
                    run_config=resimulate_config,
                )
            return
        done = context.instance.get_materialized_partitions(AssetKey("memory_after_round"))
        for arm in arms:
            next_round = next_round_of(arm, done)
            if next_round >= settings.rounds:
                context.log.info(f"arm {arm!r}: all {settings.rounds} rounds simulated ($SIMAB_ROUNDS)")
                continue
            key = MultiPartitionKey({"arm": arm, "round": str(next_round)})
            yield RunRequest(run_key=f"{night}-{key}", partition_key=key, tags=tags, run_config=rounds_config)

    @sensor(
        job=jobs["simab_readout"],
        minimum_interval_seconds=300,
        default_status=sensor_status,
        description="Reads out once every configured arm has been simulated since the last read-out; after a night "
        f"of the schedule, on that night's bill. {cost}",
    )
    def readout_after_simulation(context: SensorEvaluationContext):
        instance = context.instance
        last_readout = instance.get_latest_materialization_event(AssetKey("ab_readout"))
        since = last_readout.timestamp if last_readout else 0.0
        newest, nights = [], set()
        for arm in arms:
            event = _latest_partition_materialization(instance, arm)
            if event is None or event.timestamp <= since:
                return SkipReason(f"arm {arm!r} not simulated since the last read-out")
            newest.append(event.timestamp)
            run = instance.get_run_by_id(event.run_id) if event.run_id else None
            nights.add(run.tags.get(LIFECYCLE_TAG) if run is not None else None)
        # The arms of one night: the read-out joins their bill, and the night's limit.
        night = next(iter(nights)) if len(nights) == 1 and None not in nights else None
        # Millisecond run keys: a key repeated within one second would be dropped by Dagster
        # as a duplicate and the second round of simulations never read out.
        return RunRequest(
            run_key=f"readout-{max(newest) * 1000:.0f}",
            run_config=readout_config,
            tags={LIFECYCLE_TAG: night} if night else {},
        )

    if shards == 1:
        return [nightly_resimulation], [readout_after_simulation]
    # The combining asset has no config; the job's default config (the refit's) is not its.
    combine_config: dict = {"ops": {}}

    @sensor(job=jobs["simab_combine"], minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING)
    def combine_after_shards(context: SensorEvaluationContext):
        """Combine an arm's shards into its events once every shard is newer than them."""
        instance = context.instance
        requests, waiting = [], []
        for arm in arms:
            combined = _latest_partition_materialization(instance, arm)
            since = combined.timestamp if combined else 0.0
            newest = []
            for k in range(shards):
                event = _latest_partition_materialization(instance, arm_shard_key(arm, k), "simulation_shard")
                newest.append(event.timestamp if event is not None and event.timestamp > since else None)
            if all(t is not None for t in newest):
                requests.append(
                    RunRequest(
                        run_key=f"combine-{arm}-{max(newest) * 1000:.0f}",
                        partition_key=arm,
                        run_config=combine_config,
                        asset_selection=[AssetKey("simulation_events")],
                    )
                )
            else:
                waiting.append(f"{arm}: shard(s) {[k for k, t in enumerate(newest) if t is None]}")
        return requests or SkipReason(
            f"no arm has all {shards} shards simulated since its events were combined ({'; '.join(waiting)})"
        )

    return [nightly_resimulation], [readout_after_simulation, combine_after_shards]


def night_cost(settings: Settings) -> tuple[bool, str]:
    """Whether a night of the schedule spends on the LLM, and what it costs and under which
    limit, in words for the schedule's and the sensor's descriptions."""
    bill = night_bill(settings)
    if not bill.steps or not bill.usd:
        return False, "No LLM bill at these settings (embedded brain, or an endpoint priced at $0)."
    limit = (
        f"its runs share one bill of at most ${bill.limit.usd:,.2f} per night ({bill.limit.why})"
        if bill.limit.usd is not None
        else "NO limit per night (SIMAB_MAX_COST_USD=none)"
    )
    return True, (
        f"LLM brain ({bill.model}): a night costs about ${bill.usd:,.2f} at these settings (at most "
        f"${bill.usd_at_most:,.2f}); {limit}. Stopped by default: turn it on in Overview → Automation, or "
        "`dagster schedule start` / `dagster sensor start` (docs/cost.md)."
    )


def next_round_of(arm: str, materialised: set[str]) -> int:
    """The round after the highest one of `arm` among materialised "arm|round" keys (0: none)."""
    rounds = [int(key.split("|")[1]) for key in materialised if key.split("|")[0] == arm]
    return max(rounds) + 1 if rounds else 0


def _latest_partition_materialization(instance, partition: str, asset: str = "simulation_events"):
    result = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[partition]), limit=1
    )
    return result.records[0] if result.records else None

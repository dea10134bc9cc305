"""What the lifecycle recomputes and what it reuses: Dagster's code versions, data versions and
staleness, with the settings made part of the versions.

Every asset's code version — the one Dagster records with each materialisation and compares
to tell "stale" in the UI — is composed by `versioned_assets` when the definitions are built,
as `<decorator's version>;code=<digest>;settings=<digest>`:

- the version written in the asset's decorator, kept (bumping it still forces a recompute);
- `code`: the source of the asset's module and of every project module it imports, directly
  or not, and the same for the asset checks on it (`ops.versions.source_digest`).  Derived,
  because a hand-set string is bumped by nobody reliably, and a stale value reused after a
  code change is worse than a recompute: a change anywhere in that import closure counts (a
  comment, a docstring or the formatting does not);
- `settings`: the run config of its op and of the checks on it as the environment sets it
  (`pipelines.run_config.op_config_for`), with the config schema's defaults filled in (so
  setting a value to its default changes nothing); the fields the environment sets of the
  resources it uses (the LLM endpoint and model, its limits; not the name of the key's
  variable or the requests in flight, `TRANSPORT_FIELDS`); the size and time of the files
  and folders those settings name (`ops.versions.path_fingerprint`).

So a changed setting or a changed line of code shows in the Dagster UI as "stale: has a new
code version" on exactly the assets it feeds (once the code location is reloaded: it reads
the environment when it loads), and Dagster's own rule does the rest: an asset is stale when
its code version differs from the stored one or when the data version of one of its inputs
(partition by partition) moved since it was computed.

`judge_step` is what the lifecycle runner asks before each step: for each asset of the
step's job, at the step's partition, Dagster's stale status (`CachingStaleStatusResolver`,
the resolver behind the UI's "stale" and its "materialize stale and missing"), and two
things a code version cannot carry:

- the run config a stored value was actually computed with: a run launched from the
  launchpad with edited config records the code version of the environment's defaults, so
  the stored run's config of the op (and of its checks) is compared, defaults filled in;
- what an asset reads besides its inputs (`outside_inputs`): an arm's own spec
  (`half=deepfm;train_fraction=0.5`, and the lists file it names: a code version is one per
  asset, not per partition), and the stored values an asset reads through the IO manager
  rather than as inputs, so as not to wait on them (`OUTSIDE_READS`: the brain an arm that
  mirrors it ranks by, the personas a simulation may take).  The runner tags each run with
  their digests (`OUTSIDE_INPUTS_TAG`) and compares; a value stored by a run without the tag
  counts as changed where there is anything to compare (a declared spec, a value read).

A step whose assets are all fresh is skipped; otherwise it re-runs the assets that are not,
every asset of the job downstream of them (their inputs are about to change), and whole
multi-assets (they run as one op).  Not covered: an installed package's version (torch,
deepctr-torch, an arm plug-in), a model an MLflow URI names by alias or "latest", files an
op reads that no setting names.
"""

from __future__ import annotations

import functools
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field

from dagster import AssetKey, AssetRecordsFilter, DagsterInstance

from ops.settings import Settings
from ops.versions import path_fingerprint, source_digest, value_digest
from pipelines.run_config import op_config_for

OUTSIDE_INPUTS_TAG = "simab/outside_inputs"  # JSON {asset: digest of what it reads besides its inputs}
# Stored values an asset reads through the IO manager instead of as an input, so that it does
# not wait on them (assets/recommenders.py, assets/simulation.py): (asset, the capability of
# the arms that read them, None: every arm) -> the assets read.
OUTSIDE_READS = {
    ("recommender_arm", "mirrors_brain"): ("agents", "embedded_brain"),
    ("simulation_events", None): ("llm_personas",),
    ("simulation_shard", None): ("llm_personas",),
    ("experiment_simulation_events", None): ("llm_personas",),
}
# Resource fields that change how an answer is fetched or what it is billed, never what it
# is: raising the spending limit or a timeout re-simulates nothing.
TRANSPORT_FIELDS = {
    "llm": frozenset(
        {
            "api_key_env",
            "api_key_required",
            "concurrency",
            "timeout_s",
            "price_prompt_per_1m",
            "price_completion_per_1m",
            "max_cost_usd",
            "trace_share",  # which sessions MLflow traces, not what they do
        }
    ),
    "embeddings": frozenset({"cache_dir"}),  # where rows are kept, not what they are
}
# Config fields that change an op's output only when another field has a value: elsewhere they
# are left out of its version.  The arms of the experiment deal the agents among them only
# with design "random" (`ops.simulation.assignment.agents_of_arm`): with "paired", adding an arm
# re-simulates no other arm.  (op, field) -> (the other field, the value where it counts).
CONDITIONAL_FIELDS = {
    (op, "arms"): ("design", "random") for op in ("simulation_events", "simulation_shard", "llm_cost_estimate")
}
PARTS = ("code", "settings")


def versioned_assets(assets: list, checks: list, settings: Settings) -> list:
    """`assets` with each code version composed as above."""
    checks_by_key = defaultdict(list)
    for check in checks:
        for spec in check.check_specs:
            checks_by_key[spec.asset_key].append(check.node_def)
    result = []
    for asset in assets:
        if not asset.is_executable:
            result.append(asset)
            continue
        nodes = {asset.node_def.name: asset.node_def}
        for key in asset.keys:
            nodes.update({node.name: node for node in checks_by_key[key]})
        parts = version_parts(list(nodes.values()), asset.required_resource_keys, settings)
        result.append(asset.map_asset_specs(functools.partial(_with_parts, parts=parts)))
    return result


def _with_parts(spec, parts: dict[str, str]):
    suffix = ";".join(f"{name}={parts[name]}" for name in PARTS)
    return spec.replace_attributes(code_version=f"{spec.code_version or '0'};{suffix}")


def version_parts(nodes: list, resource_keys, settings: Settings) -> dict[str, str]:
    """{"code": digest, "settings": digest} of the ops `nodes` (an asset's and its checks')."""
    modules = sorted({_module(node) for node in nodes})
    config = {node.name: resolved_config(node, op_config_for(node.name, _accepts(node), settings)) for node in nodes}
    resources = {}
    for key in sorted(resource_keys):
        fields = settings.resource_fields(key)
        fields = {k: v for k, v in fields.items() if k not in TRANSPORT_FIELDS.get(key, ())}
        if fields:
            resources[key] = fields
    return {
        "code": value_digest([source_digest(module) for module in modules]),
        "settings": value_digest({"config": config, "resources": resources, "files": path_fingerprint(config)}),
    }


def resolved_config(node, config: dict) -> dict:
    """An op's config with its schema's defaults filled in (as given when it does not resolve),
    less the fields that do not count at its other values (`CONDITIONAL_FIELDS`)."""
    from dagster._config import process_config

    schema = getattr(node, "config_schema", None)
    if schema is None or schema.config_type is None:
        return config
    resolved = process_config(schema.config_type, config)
    value = resolved.value if resolved.success and isinstance(resolved.value, dict) else dict(config)
    for (op, name), (other, where) in CONDITIONAL_FIELDS.items():
        if op == node.name and value.get(other) != where:
            value.pop(name, None)
    return value


def _accepts(node) -> set[str]:
    schema = getattr(node, "config_schema", None)
    return set(getattr(getattr(schema, "config_type", None), "fields", None) or ())


def _module(node) -> str:
    """The module defining an op's function (for a node without one: every asset module)."""
    module = getattr(getattr(getattr(node, "compute_fn", None), "decorated_fn", None), "__module__", None)
    if module:
        return module
    return ",".join(sorted(m for m in sys.modules if m.startswith(("assets.", "data_contracts."))))


def split_version(code_version: str | None) -> dict[str, str]:
    """{"hand": …, "code": …, "settings": …} of a composed code version ({} when not one)."""
    if not code_version or ";" not in code_version:
        return {}
    hand, *rest = code_version.split(";")
    parts = dict(part.split("=", 1) for part in rest if "=" in part)
    return {"hand": hand, **parts}


def outside_inputs(instance: DagsterInstance, defs, job_name: str, partition: str | None) -> dict[str, str]:
    """{asset: digest} of what each asset of a step reads besides its inputs (see above):
    the spec of the arm its partition names unless a plain name, the data versions of the
    stored values it reads (`OUTSIDE_READS`); assets with nothing of the kind are left out."""
    from ops.arms.registry import has_capability, known_arm_names, spec_of

    graph = defs.resolve_asset_graph()
    arm = (partition or "").split("|")[0]
    arm = arm if arm and arm in known_arm_names() else None
    spec = spec_of(arm) if arm else None
    found = {}
    for key in defs.resolve_job_def(job_name).asset_layer.selected_asset_keys:
        name = key.to_user_string()
        what: dict = {}
        if spec is not None and graph.get(key).is_partitioned and spec.text() != arm:
            what["spec"] = [spec.text(), path_fingerprint(spec.source)]
        for (asset, capability), reads in OUTSIDE_READS.items():
            if asset == name and (capability is None or (arm is not None and has_capability(arm, capability))):
                for read in reads:
                    stored = latest_materialization(instance, AssetKey(read), None)
                    if stored is not None:
                        what[read] = stored.event_log_entry.tags.get("dagster/data_version", str(stored.storage_id))
        if what:
            found[name] = value_digest(what)
    return found


@dataclass
class Judgement:
    """What one step of the lifecycle must do: `rerun` (empty: nothing, every asset is
    reused), why each asset that changed is re-run, and the runs that stored what is kept."""

    keys: set[AssetKey]
    rerun: set[AssetKey] = field(default_factory=set)
    why: dict[AssetKey, str] = field(default_factory=dict)
    stored_by: dict[AssetKey, tuple[int, str]] = field(default_factory=dict)  # (storage id, run id)

    @property
    def reused(self) -> bool:
        return not self.rerun

    def newest_run(self) -> str | None:
        """The run that stored the newest of the values kept."""
        return max(self.stored_by.values())[1] if self.stored_by else None

    def text(self) -> str:
        """e.g. "simab_report: settings changed; re-running 1 of 5 assets"."""
        changed = "; ".join(f"{key.to_user_string()}: {why}" for key, why in sorted(self.why.items()))
        return f"{changed}; re-running {len(self.rerun)} of {len(self.keys)} assets"


def stale_status_resolver(instance: DagsterInstance, graph):
    """Dagster's resolver of stale status, as the UI builds it, for one question at a time."""
    from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
    from dagster._core.definitions.data_version import CachingStaleStatusResolver
    from dagster._time import get_current_datetime

    view = AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance,
        asset_graph=graph,
    )
    return CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)


def judge_step(instance: DagsterInstance, defs, job_name: str, partition: str | None, run_config: dict) -> Judgement:
    """Which assets of one step (a job at a partition, run with `run_config`) must be
    computed again, and why (see the module's docstring)."""
    from dagster._core.definitions.data_version import StaleStatus

    job = defs.resolve_job_def(job_name)
    graph = defs.resolve_asset_graph()
    keys = set(job.asset_layer.selected_asset_keys)
    judgement = Judgement(keys)
    resolver = stale_status_resolver(instance, graph)
    outside = outside_inputs(instance, defs, job_name, partition)
    runs: dict[str, object] = {}
    for key in sorted(keys):
        node = graph.get(key)
        at = partition if node.is_partitioned else None
        status = resolver.get_status(key, at)
        if status == StaleStatus.MISSING:
            judgement.why[key] = "not stored yet"
            continue
        record = latest_materialization(instance, key, at)
        if status == StaleStatus.STALE:
            judgement.why[key] = _stale_text(resolver.get_stale_causes(key, at), node, record)
            continue
        if record is None:  # stored only as an observation: nothing to reuse
            judgement.why[key] = "not stored yet"
            continue
        if record.run_id not in runs:
            runs[record.run_id] = instance.get_run_by_id(record.run_id)
        run = runs[record.run_id]
        if run is None:
            judgement.why[key] = "its run is gone from the instance"
            continue
        differs = _config_differences(node.assets_def, key, graph, run.run_config, run_config)
        if differs:
            judgement.why[key] = f"stored with other run config ({', '.join(differs)})"
        elif _stored_outside(run).get(key.to_user_string()) != outside.get(key.to_user_string()):
            judgement.why[key] = "what it reads besides its inputs changed (arm spec, stored brain or personas)"
        else:
            judgement.stored_by[key] = (record.storage_id, record.run_id)
    judgement.rerun = _with_downstream(set(judgement.why), keys, graph)
    return judgement


def _stored_outside(run) -> dict:
    try:
        return json.loads(run.tags.get(OUTSIDE_INPUTS_TAG) or "{}")
    except json.JSONDecodeError:
        return {}


def latest_materialization(instance: DagsterInstance, key: AssetKey, partition: str | None):
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition is not None else None), limit=1
    ).records
    return records[0] if records else None


def _stale_text(causes, node, record) -> str:
    """Dagster's stale causes in a few words: which part of the code version moved, which input."""
    from dagster._core.definitions.data_version import StaleCauseCategory

    said = []
    for cause in causes:
        if cause.category == StaleCauseCategory.CODE:
            stored = split_version(record.event_log_entry.tags.get("dagster/code_version") if record else None)
            now = split_version(node.code_version)
            moved = [part for part in PARTS if stored.get(part) != now.get(part)] if stored and now else []
            if stored and now and stored.get("hand") != now.get("hand"):
                moved.insert(0, "version")
            said.append(f"{' and '.join(moved) or 'code version'} changed")
        elif cause.dependency is not None:
            dep = cause.dependency.asset_key.to_user_string()
            at = f"[{cause.dependency.partition_key}]" if cause.dependency.partition_key else ""
            said.append(f"input {dep}{at} changed")
        else:
            said.append(cause.reason)
    return ", ".join(dict.fromkeys(said)) or "stale"


def _config_differences(assets_def, key: AssetKey, graph, stored: dict, now: dict) -> list[str]:
    """The op config fields (of the asset's op and the checks on it) the stored run set
    otherwise than `now`, defaults filled in on both sides."""
    nodes = {assets_def.node_def.name: assets_def.node_def}
    for checks in graph.assets_defs:
        if any(check.asset_key == key for check in checks.check_keys):
            nodes.setdefault(checks.node_def.name, checks.node_def)
    differs = []
    for node in nodes.values():
        before = resolved_config(node, _op_config(stored, node.name))
        after = resolved_config(node, _op_config(now, node.name))
        differs += [f"{node.name}.{k}" for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    return differs


def _op_config(run_config: dict | None, op: str) -> dict:
    return dict(((run_config or {}).get("ops", {}).get(op) or {}).get("config") or {})


def _with_downstream(changed: set[AssetKey], keys: set[AssetKey], graph) -> set[AssetKey]:
    """`changed`, every asset of `keys` downstream of it, and the rest of each multi-asset."""
    todo, found = list(changed), set()
    while todo:
        key = todo.pop()
        if key in found or key not in keys:
            continue
        found.add(key)
        todo += list(graph.get(key).child_keys)
        todo += list(graph.get(key).assets_def.keys)
    return found

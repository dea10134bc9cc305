"""What every alignment protocol asset that asks the brain shares: its config, its opening
with the run's brain (`protocol_opening`), and the "not measured" record it stores instead of
failing (`degrades`).

The protocols that ask the brain never stop the read-out: one switched off
(`enabled: false`, $SIMAB_TRUST_PROTOCOLS=off), refused by the run's cost limit before its
first call, stopped at the limit or failed on the endpoint stores a "not measured" record
(the reason and the protocol's estimate) instead of failing, and the report says so beside
the A/B verdict; so does one that breaks (its traceback in the log).  Dagster skips an
asset whose input failed, so a failed protocol would leave no report at all; a record keeps
the graph, the lineage and the verdict.
"""

import functools
import traceback

import polars as pl
from dagster import AssetExecutionContext, Config, Output
from pydantic import Field

from ops.preflight.bill import protocol_bill
from ops.settings import config_default
from ops.simulation.brains.llm import LLMEndpointError, LLMTransportError
from ops.simulation.budget import CostLimitExceeded
from ops.simulation.catalogue import Catalogue
from ops.simulation.kinds import DEFAULT_BRAIN, brain_kind
from ops.simulation.runner import SimulationFailed
from ops.studies.alignment.protocols import NotMeasurable, Opening, ProtocolSettings, open_protocol
from ops.studies.alignment.questioning import ProtocolFailed
from ops.studies.alignment.sizing import DEFAULT_HALF_WIDTH, protocol_agents
from resources.llm import LLMResource
from resources.mlflow_tracking import MlflowTracking


class AlignmentConfig(Config):
    brain: str = Field(
        default=DEFAULT_BRAIN,
        description="who answers, a brain of the registry: embedded (offline default), llm (the `llm` resource's "
        "endpoint), … ($SIMAB_BRAIN)",
    )
    vision: bool = Field(
        default=True, description="False: the brain without posters, as the simulation's vision ablation"
    )
    n_agents: int | None = Field(
        default=None,
        ge=0,
        description="agents sampled among those with held-out (test-window) ratings; null: as many as half_width "
        "needs; 0 = all ($SIMAB_ALIGNMENT_AGENTS)",
    )
    half_width: float = Field(
        default=DEFAULT_HALF_WIDTH,
        gt=0,
        le=0.5,
        description="without n_agents: the 95 % intervals' half-width the sample is sized for ($SIMAB_TRUST_HALF_WIDTH)",
    )
    enabled: bool = Field(
        default=config_default("trust_protocols"),
        description="false: not run, stored as not measured (the protocols that ask the brain; $SIMAB_TRUST_PROTOCOLS)",
    )
    seed: int = Field(default=0, description="seed of the sample, the lists and every decision")
    n_bootstrap: int = Field(default=1000, description="bootstrap replicates of the 95 % intervals")


def degrades(protocol):
    """A protocol asset that stores a not-measured record (`not_measured`) instead of
    failing — it cannot be measured, the LLM or its cost limit stops it, or it breaks — so
    that the report, which depends on it, still gives the A/B verdict.  An error that is not
    the LLM's is logged with its traceback: the step shows a warning, not a success."""

    @functools.wraps(protocol)
    def measured(*args, **kwargs):
        context = kwargs.get("context", args[0] if args else None)
        try:
            return protocol(*args, **kwargs)
        except NotMeasurable as exc:
            return not_measured(context, exc)
        except Exception as exc:  # noqa: BLE001 - a trust check that breaks must not take the verdict with it
            if not isinstance(exc, _LLM_FAILURES):
                context.log.error(f"{context.asset_key.to_user_string()} broke:\n{traceback.format_exc()}")
            llm, name = kwargs.get("llm"), context.asset_key.to_user_string()
            known = llm.bill_of(context).bill()["estimates"].get(name) if llm is not None else None
            estimate = f"estimated ${known:,.2f} by its dry run" if known is not None else ""
            stopped = "stopped at the cost limit" if isinstance(exc, CostLimitExceeded) else "failed"
            said = str(exc) if isinstance(exc, _LLM_FAILURES) else f"{type(exc).__name__}: {exc}"
            return not_measured(context, NotMeasurable(f"{name}: {stopped}: {said}", stopped, estimate))

    return measured


# What stops a protocol that asks the LLM without being a fault of the code: the run's cost
# limit (a call refused before it is sent), the endpoint, most answers unusable.
_LLM_FAILURES = (CostLimitExceeded, LLMEndpointError, LLMTransportError, ProtocolFailed, SimulationFailed)


def not_measured(context: AssetExecutionContext, exc: NotMeasurable) -> Output:
    """{"not_measured": the reason, "why": in a few words, "estimate": what it would have
    cost} stored for the protocol, so the read-out and the report go on; the report and the
    console say "not measured" with the reason, and the asset's metadata and log too."""
    context.log.warning(f"{exc}: not measured")
    record = {"not_measured": str(exc), "why": exc.why, "estimate": exc.estimate}
    return Output(record, metadata={"not measured": str(exc), **({"estimate": exc.estimate} if exc.estimate else {})})


def protocol_opening(
    context,
    config: AlignmentConfig,
    protocol: str,
    answers: str,
    agents,
    embedded_brain,
    catalogue: pl.DataFrame,
    llm: LLMResource,
    train: pl.DataFrame,
    valid: pl.DataFrame,
    test: pl.DataFrame,
    held: pl.DataFrame | None = None,
    min_items: int = 1,
) -> Opening:
    """The protocol's opening (`ops.studies.alignment.protocols.open_protocol`) with the brain
    `config` names, made from this run's sources, its calls charged to the run's bill."""
    kind = brain_kind(config.brain, vision=config.vision)
    settings = ProtocolSettings(config.enabled, config.n_agents, config.half_width, config.seed, config.n_bootstrap)
    return open_protocol(
        protocol,
        answers,
        kind,
        llm.sources(context, Catalogue.from_frame(catalogue), embedded_brain),
        agents,
        train,
        valid,
        test,
        settings,
        held=held,
        min_items=min_items,
        off_estimate=functools.partial(_settings_estimate, context, config, llm),
        log=context.log.info,
    )


def _settings_estimate(context, config: AlignmentConfig, llm: LLMResource) -> str:
    """What the protocol would cost by the settings alone (`ops.preflight.bill`), in words;
    "" for a brain with nothing to pay."""
    if brain_kind(config.brain).decides_offline:
        return ""
    agents = protocol_agents(config.n_agents, config.half_width)
    bill = protocol_bill(context.asset_key.to_user_string(), agents, llm.brain_config())
    return f"about ${bill.usd:,.2f} for {agents} agents (at most ${bill.usd_at_most:,.2f}), from the settings"


def log_protocol(mlflow_tracking: MlflowTracking, result, brain, figure, path: str) -> None:
    """A protocol's figures, tables and plot into the open run, and what its brain spent."""
    mlflow_tracking.log_metrics(result.metrics())
    for name, table in result.tables().items():
        mlflow_tracking.log_table(table, name)
    mlflow_tracking.log_figure(figure, path)
    _log_usage(mlflow_tracking, brain)


def _log_usage(mlflow_tracking: MlflowTracking, brain) -> None:
    usage = getattr(brain, "usage", None)
    if usage is not None:  # the LLM brain's real spend (cache hits cost nothing)
        mlflow_tracking.log_metrics({f"llm_{k}": v for k, v in usage.as_dict().items()})
        mlflow_tracking.set_tags({f"llm_{k}": v for k, v in usage.facts().items()})

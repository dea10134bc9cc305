"""The LLM brain as a brain kind: any OpenAI-compatible chat endpoint
(`ops.simulation.brains.llm`), many agents in flight, every call charged to the run's bill;
its cost estimates are dry runs in which it writes and counts every prompt while the
embedded brain decides, sending nothing (`ops.simulation.cost`)."""

from __future__ import annotations

import os
from typing import ClassVar

from ops.simulation.brains.llm import LLMBrain, LLMBrainConfig
from ops.simulation.brains.llm.endpoint import key_required, resolve_endpoint
from ops.simulation.cost import estimate_llm_cost, estimate_protocol_cost
from ops.simulation.kinds.base import BrainKind, BrainSources
from ops.simulation.kinds.embedded import Embedded
from ops.web import endpoint_host, safe_endpoint


class LLM(BrainKind):
    name = "llm"
    summary = "any OpenAI-compatible chat endpoint (the `llm` resource), charged to the run's bill"
    brain_class = LLMBrain
    family = "llm"
    reads_personas = True
    posters = True
    # Whose decisions a dry run follows while this brain writes and counts its prompts: the
    # embedded brain, with or without posters as this brain sees them.
    behaviour: ClassVar[type[BrainKind]] = Embedded

    def brain(self, sources: BrainSources) -> LLMBrain:
        bill = sources.bill
        charged = (
            {}
            if bill is None
            else {"budget_path": bill.path, "budget_cap_usd": bill.cap_usd, "budget_label": bill.label}
        )
        return LLMBrain(self.config(sources, **charged), catalogue=sources.catalogue)

    def config(self, sources: BrainSources, **overrides) -> LLMBrainConfig:
        """The endpoint's configuration as this kind asks it: the fatigue costs the agent is
        told, palette captions instead of images without posters, and `overrides`."""
        base = sources.get("llm") or LLMBrainConfig()
        own = {"fatigue": sources.fatigue} if sources.fatigue is not None else {}
        if not self.sees_posters:
            own["vision"] = False
        return LLMBrainConfig(**{**dict(base), **own, **overrides})

    def concurrency(self, sources: BrainSources) -> int:
        return self.config(sources).concurrency

    def describe(self, sources: BrainSources) -> dict[str, str | float | int | bool]:
        cap = sources.bill.cap_usd if sources.bill is not None else None
        return {**describe_endpoint(self.config(sources), cap or None), "brain": self.name}

    def simulation_estimate(self, sources: BrainSources, arm, top_k, sessions, config, users, estimate_config):
        writer = self.brain(_uncharged(sources))
        try:
            return estimate_llm_cost(
                arm,
                top_k,
                sessions,
                sources.catalogue,
                writer,
                self._behaviour(sources),
                config,
                users,
                estimate_config,
            )
        finally:
            writer.close()

    def protocol_estimate(self, sources: BrainSources, label: str, run, agents: int):
        writer = self.brain(_uncharged(sources))
        try:
            return estimate_protocol_cost(label, writer, self._behaviour(sources), run, agents)
        finally:
            writer.close()

    def answer_taste(self, brain: LLMBrain, question):
        """One structured question per list: the ids it would watch."""
        return question.ask(brain)

    def _behaviour(self, sources: BrainSources):
        return self.behaviour(vision=self.sees_posters).brain(sources)


def describe_endpoint(config: LLMBrainConfig, max_cost_usd: float | None = None) -> dict[str, str | float | int | bool]:
    """The endpoint's parameters safe to log (MLflow, Dagster metadata): no key, only whether
    one is set; the endpoint without credentials, and where it came from."""
    url, origin = resolve_endpoint(config.base_url)
    endpoint = safe_endpoint(url)
    return {
        "brain": "llm",
        "llm_endpoint": endpoint,
        "llm_endpoint_host": endpoint_host(endpoint),
        "llm_endpoint_from": origin,
        "llm_model": config.model,
        "llm_vision": str(config.vision).lower(),
        "llm_temperature": config.temperature,
        "llm_max_tokens": config.max_tokens,
        "llm_structured_output": config.structured_output,
        "llm_price_prompt_per_1m": config.price_prompt_per_1m,
        "llm_price_completion_per_1m": config.price_completion_per_1m,
        "llm_cache": config.cache,
        "llm_concurrency": config.concurrency,
        "llm_max_cost_usd": max_cost_usd if max_cost_usd is not None else "none",
        "llm_decision_deadline_s": config.decision_deadline_s,
        "llm_api_key_env": config.api_key_env,
        "llm_api_key_set": bool(os.environ.get(config.api_key_env)),
        "llm_api_key_required": key_required(config.api_key_required, config.base_url),
    }


def _uncharged(sources: BrainSources) -> BrainSources:
    """The sources of a brain that only writes and prices prompts: no bill, no cache."""
    llm = sources.get("llm") or LLMBrainConfig()
    return sources.replace(llm=llm.model_copy(update={"cache": "off"}), bill=None)

"""Brains: how an agent decides (docs/definitions.md#brains).

Every brain implements `ops.simulation.brains.protocol.Brain`: `prepare` (optional batch work),
`decide` (one `Decision` per observed page) and `exit_interview`.  The sandbox and the
simulation loop know nothing else about them.

- `random_policy.UniformRandomBrain` — uniform over the legal actions; the benchmark
  baseline and a test double.
- `embedded` — the offline default (no network, no weights beyond what packages ship).
- `llm` — any OpenAI-compatible endpoint (config, client and cache, prompts, answers, brain).

Brains are imported from their modules, not from here, so that importing one brain never
pulls in another brain's heavy dependencies.
"""

"""How far to trust the agents: the papers' alignment protocols as assets, one module per
protocol (`taste`, `rating`, `list_quality`, `sensitivity`, `social`), what the protocols that
ask the brain share (`protocol`), and the fidelity warning as a (non-blocking) asset check on
the read-out (`fidelity`).

Every protocol holds out the test window and asks the brain the run config names
(`brain:` a name of the brain registry, as the simulation asset; `$SIMAB_BRAIN`) through its sandbox
decision path, on a seeded sample of agents: as many as the 95 % intervals of its figures
need to be ±`half_width` at most (`ops.studies.alignment.sizing`: 97 agents for ±0.10), or
`n_agents` (0 = every agent with held-out ratings).  `ops.studies.alignment` says how.

The package imports none of its modules: the code location lists them
(`pipelines.jobs.ASSET_MODULES`), so each protocol's code version covers its own module only.
"""

GROUP = "alignment"

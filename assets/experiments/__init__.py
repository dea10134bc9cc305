"""The papers' experiments: each one asset that writes its table — Markdown and
CSV under `$SIMAB_HOME/experiments/<name>/`, logged to MLflow — beside the paper's numbers
with the protocol differences named (built by `ops.studies.experiments`).

- `ab_agent_table2`, `ab_agent_table3`, `ab_agent_table4`: assembled from the lifecycle's
  arm partitions (`offline_metrics`, `top20_lists`, `simulation_events`) of the table's arms;
- `experiment_simulation_events`: the experiments' own simulations, partitioned by arm ×
  condition (brain, with or without vision), so the vision and no-vision runs of Table 5 and
  the embedded and LLM runs of the brain comparison coexist and never touch the lifecycle's
  `simulation_events`;
- `ab_agent_table5`: models refit on the clicks / views of the vision and no-vision runs;
- `simuser_thumbnail_quality`: SimUSER App. C.7, click rate per poster version;
- `brain_comparison`: the same arms under the embedded and the LLM brain.

One module per experiment's assets (`arm_tables`: Tables 2–4, `augmentation_table`: Table 5,
`thumbnails`, `brain_comparison`), the experiments' own simulations (`simulation_events`) and
how every table is published (`publish`).  The package imports none of its modules: the code
location lists them (`pipelines.jobs.ASSET_MODULES`).

`python -m pipelines.experiments <name>` runs an experiment with everything it needs.
"""

GROUP = "experiments"

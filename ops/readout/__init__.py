"""Lifecycle steps 9–11: reading the simulation out.  The A/B read-out (`ab_readout`, made of
`agent_metrics`, `arm_summaries`, `comparisons`, `fallbacks`, `slots`, set by
`readout_config`), its statistics (`statistics`) and power, fidelity to offline metrics
(`fidelity`), the summary of the augmentation study (`augmentation_summary`), the verdict
(`verdict`: the value and its sentences; `ops.studies.verdict` builds it), the report (`report_markdown`, `report_html`) and the read-outs' figures
(`readout_figures`).  Nothing here trains an arm or runs an agent: that is `ops.studies`."""

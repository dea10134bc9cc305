"""Lifecycle steps 9–11: reading the simulation out.  The A/B read-out (`ab_readout`), its
statistics (`statistics`) and power, fidelity to offline metrics (`fidelity`), the summary
of the augmentation study (`augmentation_summary`), the report (`report`) and its figures
(`plots`).  Nothing here trains an arm or runs an agent: that is `ops.studies`."""

"""Lifecycle steps 9–11: reading the simulation out.  The A/B read-out (`ab_readout`),
its statistics (`statistics`), fidelity to offline metrics (`fidelity`), models refit on
the simulated data (`augmentation`), the report (`report`) and its figures (`plots`)."""

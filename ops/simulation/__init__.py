"""Lifecycle step 8: the simulation.  The sandbox (`sandbox`, `catalogue`, `observation`),
fatigue (`fatigue`), the one runner (`runner`) and the brains that decide (`brains`)."""

"""Lifecycle step 8: the simulation.  The sandbox (`sandbox`, `catalogue`, `observation`),
fatigue (`fatigue`), the one runner (`runner`: what it is asked in `request`, the session
loop in `session`, the event loop in `driver`, resuming in `checkpointing`, who is simulated
where in `assignment`) and the brains that decide (`brains`, their registry `kinds`)."""

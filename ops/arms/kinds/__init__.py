"""The arm kinds, one file each: the kind `<name>` is the one `ops.arms.base.ArmBase`
subclass defined in `<name>.py`, found by name (`ops.arms.registry`).  Adding a kind is adding
its file, and everything particular to the kind is in it: its capabilities (class attributes,
`ArmBase`), the parameters it takes with their defaults, the names it answers to (`aliases`,
`shorthand`) and, for a DeepCTR model, its Appendix B adjustments (`appendix_b`) and how it
is scored from parts (`parts_head`).

Random, Pop and trending (`random.py`, `pop.py`, `trending.py`) and the DeepCTR family
(`fm.py` … `pnn.py`, on `ops.arms.deepctr.DeepCTRArm`) are configured by an
`ops.arms.trained.ArmConfig`, or by the subclass of it a kind declares for settings of
its own (`config_class`: Pop's `popularity_of`; the DeepCTR family's `ops.arms.deepctr.
DeepCTRConfig`, AFN's log floor on it); a lists file (`lists.py`),
an MLflow model (`mlflow.py`), the brain's own ranking (`mirror.py`) and an arm's degraded
lists (`degraded.py`) take their constructor's parameters.  Nothing here is imported until a
kind is asked for by name.
"""

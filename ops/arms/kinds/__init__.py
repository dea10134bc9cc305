"""The arm kinds, one file each: the kind `<name>` is the one `ops.arms.base.ArmBase`
subclass defined in `<name>.py`, found by name (`ops.arms.registry`).  Adding a kind is adding
its file; its capabilities are its class attributes (`ArmBase`) and its defaults sit beside
it (the DeepCTR models' Appendix B adjustments: `appendix_b`).

Random and Pop (`random.py`, `pop.py`) and the DeepCTR family (`fm.py` … `pnn.py`, on
`ops.arms.deepctr.DeepCTRArm`) are configured by an `ops.arms.recommenders.ArmConfig`; a
lists file (`lists.py`), an MLflow model (`mlflow.py`), the brain's own ranking
(`mirror.py`) and an arm's degraded lists (`degraded.py`) take the parameters of their spec
(`ops.arms.registry`).  Nothing here is imported until a kind is asked for by name.
"""

"""DeepCTR arms of the paper train to a sane model on real MovieLens, on a slice small enough
for `make test`: DeepFM and two arms chosen to fail first.  `python -m bench.arms slice`
runs every DeepCTR arm on the same slice, `python -m bench.arms table` the full protocol.

Skipped when the reference copy of ML-1M (users 1-1999) is absent."""

from __future__ import annotations

import pytest

from tests.conftest import shared_path

pytestmark = pytest.mark.slow

# 2 % of the chronological train split (4,750 rows, as many sampled negatives), one epoch
# at Appendix B's settings, validation AUC on 5,000 validation rows (two in three from
# users first seen there, what broke AFN).  Measured on 10,000 rows: DeepFM 0.616, the others
# 0.609-0.626, AFN as deepctr-torch builds it 0.523 (0.528 at 5 % of train, where DeepFM has
# 0.634).
TRAIN_FRACTION = 0.02
# AFN: the arm that users first seen in validation broke; PNN: the lowest AUC of the nine on
# this slice (`bench.arms slice`: 0.0049 below DeepFM), the first to cross the bound.
# xDeepFM, 10x DeepFM's time on this slice, is left to the bench.
ARMS = ("deepfm", "afn", "pnn")
VALID_ROWS = 5_000
WITHIN = 0.03  # every DeepCTR arm within 0.03 of DeepFM
LEARNS = 0.60  # DeepFM on the slice, well above a coin (0.5) though not yet above Pop (0.622)
# The lazy embedding step (the default, ops.arms.lazy_updates) moves a row's Adam moments only
# when a batch uses it, so after one epoch on this slice it is behind deepctr's dense step
# (measured 0.5904 against 0.6018); trained to its best epoch on ML-1M it is within 0.001
# (docs/findings/scale.md).  LEARNS is read under deepctr's own step, the lazy one within:
LAZY_WITHIN = 0.015


def test_deepctr_arms_are_within_003_of_deepfm_on_ml1m_validation():
    import torch

    from ops.arms.deepctr import DeepCTRArm
    from ops.arms.recommenders import arm_config, train_arm
    from ops.arms.registry import kind_class
    from ops.data.catalogue import build_catalogue
    from ops.data.movielens import load_local
    from ops.data.split import chronological_split

    tables = load_local(shared_path("ml-1m"))
    split = chronological_split(tables.ratings)
    catalogue = build_catalogue(tables.movies)
    valid = split.valid.sample(VALID_ROWS, seed=0)
    # One thread, as the other training tests: on a loaded 2-core machine two OpenMP
    # threads spin-wait for each other and run several times slower.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        val_auc = {}
        assert all(issubclass(kind_class(name), DeepCTRArm) for name in ARMS)
        for name in ARMS:
            config = arm_config(name, train_fraction=TRAIN_FRACTION, max_epochs=1)
            val_auc[name] = train_arm(config, split.train, valid, tables.users, catalogue).history[0]["val_auc"]
        config = arm_config("deepfm", train_fraction=TRAIN_FRACTION, max_epochs=1, embedding_updates="dense")
        dense = train_arm(config, split.train, valid, tables.users, catalogue).history[0]["val_auc"]
    finally:
        torch.set_num_threads(threads)
    assert dense >= LEARNS, dense
    assert val_auc["deepfm"] >= dense - LAZY_WITHIN, (val_auc, dense)
    behind = {name: round(value, 4) for name, value in val_auc.items() if value < val_auc["deepfm"] - WITHIN}
    assert not behind, f"validation AUC more than {WITHIN} below DeepFM's {val_auc['deepfm']:.4f}: {behind}"

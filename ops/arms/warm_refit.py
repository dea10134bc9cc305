"""A DeepCTR arm refit on rows added to its train window, from where its training ended: the
lifecycle's refit on simulated data (`ops.studies.augmentation`, `refit="warm"`), whose cost
follows the simulated events, not the log.

The trained arm's encoder and weights are the start; the rows the fine-tuning passes over
are the added ones beside as many of the original train rows, drawn seeded (`replay`: a
share of the added rows; without them the model would drift towards the few users who
were simulated), each with the arm's sampled negatives, `epochs` passes.  No validation
pass (the refit is read on the test window afterwards): the epochs are a budget, not an
early stop.  The papers' Table 5 retrains from scratch (`refit="scratch"`), as the papers do.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import polars as pl

from ops.arms.base import FitData
from ops.arms.deepctr import (
    DeepCTRArm,
    _optimiser,
    _rated_keys,
    _sampled_negatives,
    build_model,
    resolve_device,
    train_epoch,
)


def warm_refit(
    trained: DeepCTRArm,
    added: pl.DataFrame,
    data: FitData,
    epochs: int = 2,
    replay: float = 1.0,
    train_keys: np.ndarray | None = None,
):
    """A copy of `trained` fine-tuned on `added` (RATINGS rows with `item_id`, new to the
    train window `data.train`) and a seeded replay sample of `data.train` (module docstring);
    `trained` itself is left as it was.  `train_keys`: `train_pair_keys(data.train)`, when
    several refits share a train window."""
    import torch

    if trained.model is None or trained.encoder is None:
        raise ValueError(f"arm {trained.name!r}: a warm refit starts from a trained arm (fit it first)")
    if epochs < 1:
        raise ValueError(f"a warm refit needs epochs >= 1, got {epochs}")
    config, train = trained.config, data.train
    device = resolve_device(config)
    torch.manual_seed(config.seed)
    added = added
    kept = min(train.height, int(round(replay * added.height)))
    rows = pl.concat([added.select(train.columns), train.sample(kept, seed=config.seed)]) if kept else added
    encoder = trained.encoder
    model = build_model(type(trained), config, encoder, device)
    model.load_state_dict(trained.model.state_dict())
    optimiser = _optimiser(model, config)
    x_rows = torch.from_numpy(encoder.transform(rows["user_id"].to_numpy(), rows["item_id"].to_numpy()))
    y_rows = torch.from_numpy((rows["rating"].to_numpy() >= config.positive_threshold).astype(np.float32))
    shuffle = np.random.default_rng(config.seed)
    # Negatives are drawn outside the train pairs and the added ones (a sorted insert).
    train_keys = train_pair_keys(train) if train_keys is None else train_keys
    extra = np.setdiff1d(_rated_keys(added), train_keys)
    rated = np.insert(train_keys, np.searchsorted(train_keys, extra), extra)
    history = []
    try:
        for epoch in range(1, epochs + 1):
            started = time.perf_counter()
            model.train()
            x_epoch, y_epoch = x_rows, y_rows
            if config.sampled_negatives > 0:
                x_neg = torch.from_numpy(
                    _sampled_negatives(rows, data.catalogue, encoder, config.sampled_negatives, shuffle, rated)
                )
                x_epoch, y_epoch = torch.cat([x_rows, x_neg]), torch.cat([y_rows, torch.zeros(x_neg.shape[0])])
            total = train_epoch(model, optimiser, x_epoch, y_epoch, config, shuffle, epoch, device)
            history.append(
                {
                    "epoch": epoch,
                    "train_loss": total / max(x_epoch.shape[0], 1),
                    "epoch_seconds": time.perf_counter() - started,
                }
            )
    finally:
        optimiser.close()
    model.eval()
    refit = copy.copy(trained)
    refit.model, refit.history, refit.best_epoch = model, history, epochs
    refit.train_rows = trained.train_rows + added.height
    return refit


def train_pair_keys(train: pl.DataFrame) -> np.ndarray:
    """The (user, item) pairs of a train window (`item_id` or simab's `item_id`) as sorted keys."""
    return _rated_keys(train)

"""Adaptive Factorization Network (Cheng et al. 2020), A/B Agent Tables 2 and 5: logarithmic
neurons learn which cross features to multiply, exp(sum over fields of w log|e|), and a DNN
reads them.  What only AFN needs lives here: its embedding start and log floor (its own
settings, `AFNConfig`), the L2 that deepctr-torch forgets to register, the memory its
logarithmic layer takes per scored pair and how that layer is scored from per-user and
per-item factors (`parts_head`).
On a CPU it trains about 14 times slower than DeepFM (../shared/docs/dependencies.md), so a
run leaves it out unless asked (`slow_to_train`)."""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from pydantic import Field

from ops.arms.deepctr import DeepCTRArm, DeepCTRConfig
from ops.arms.trained import ArmConfig


class AFNConfig(DeepCTRConfig):
    """The common configuration and what only AFN's logarithmic neurons need (`AFN` says why
    these defaults).  None keeps deepctr's own: embeddings drawn at 1e-4, |e| floored at 1e-7."""

    # Standard deviation the embeddings start from.
    embedding_init_std: float | None = Field(0.01, gt=0)
    # The logarithmic neurons take log(max(|e|, floor)) of each embedding component.
    log_input_floor: float | None = Field(1e-4, gt=0)


class AFN(DeepCTRArm):
    """deepctr-torch's AFN with the AFN authors' embedding start and log floor."""

    deepctr_class: ClassVar[str] = "AFN"
    dnn_argument: ClassVar[str] = "afn_dnn_hidden_units"
    slow_to_train: ClassVar[bool] = True
    # Appendix B, "Specific adjustments": no dropout, 256 logarithmic neurons.
    appendix_b: ClassVar[dict[str, Any]] = {"dnn_dropout": 0.0, "model_kwargs": {"ltl_hidden_size": 256}}
    # Not in Appendix B, the fix of a divergence (validation AUC 0.56-0.60 and log loss 3-14
    # on ML-1M, against DeepFM's 0.67-0.70): AFN's logarithmic neurons compute
    # exp(sum_f w_f log|e_f|), so every embedding must stay well away from 0.  deepctr-torch
    # starts embeddings at 1e-4, below one Adam step (1e-3), so their components cross 0 in
    # the first batches and log|e| is noise down to its floor log(1e-7) = -16; and the
    # embedding of an id unseen in train (2 of 3 validation rows come from users first seen
    # there) is pulled to ~0 by the L2 term and, at prediction time, sends exp() to 1e4 and
    # beyond, which batch norm's running statistics cannot tame (batch statistics hide it
    # in training).  The AFN authors' code (WeiyuCheng/AFN-AAAI-20, src/AFN.py) starts the
    # embeddings at Glorot scale (~1e-2) and clips |e| at 1e-4; we do the same (AFNConfig's
    # defaults).  Measured on ML-1M users 1-1999, 10 % of train, one epoch: validation AUC
    # 0.563 (deepctr as is), 0.603 (floor 1e-4 only), 0.670 (init 0.01 only), 0.676 (both);
    # DeepFM 0.672.
    config_class: ClassVar[type[ArmConfig]] = AFNConfig

    @classmethod
    def adjust_model(cls, model, config: AFNConfig) -> None:
        if config.embedding_init_std is not None:
            _reinitialise_embeddings(model, config.embedding_init_std, config.seed)
        # deepctr's AFN accepts l2_reg_dnn but never registers it (every other model
        # does): Appendix B's L2 on the DNN kernels, as DeepFM registers it.
        model.add_regularization_weight(
            [w for n, w in model.afn_dnn.named_parameters() if "weight" in n and "bn" not in n], l2=config.l2_reg_dnn
        )
        model.add_regularization_weight(model.afn_dnn_linear.weight, l2=config.l2_reg_dnn)
        if config.log_input_floor is not None:
            model.ltl.register_forward_pre_hook(functools.partial(_floor_log_input, config.log_input_floor))

    @classmethod
    def parts_head(cls):
        """The logarithmic layer exp(sum over fields of w log|e|) is the product of a user
        factor and an item factor, and its batch norms are affine in eval mode, so the first
        layer of its DNN over a user and the whole catalogue is one matrix product."""
        from ops.arms.deepctr_parts import Head  # torch: imported when an arm first scores

        return Head(_logit, prepare=_prepare, user_per_pass=True)

    @classmethod
    def activation_floats_per_row(cls, model, config: ArmConfig) -> int:
        """The logarithmic layer holds embedding x ltl_hidden_size per row through log, batch
        norm, the product and exp (64 x 256 = 16,384 floats, 64 kB): with 262,144 pairs a
        pass, AFN's offline metrics on ML-1M were killed for memory at 21.6 GB."""
        return config.embedding_dim * int(config.model_kwargs.get("ltl_hidden_size", 256)) * 4


def _floor_log_input(floor: float, module, args):
    """Forward pre-hook of AFN's log layer: |e| clipped below at `floor` before the layer
    takes its log (the layer's own abs and 1e-7 clip then change nothing).  A module-level
    function, so that a trained arm still pickles."""
    import torch

    return (torch.clamp(torch.abs(args[0]), min=floor),)


def _reinitialise_embeddings(model, std: float, seed: int) -> None:
    """Embeddings drawn afresh from N(0, std²), from their own seeded generator so that
    torch's global random stream (dropout) is left as deepctr's seeding set it."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for table in model.embedding_dict.values():
            table.weight.copy_(torch.randn(table.weight.shape, generator=generator) * std)


# -- scoring from per-user and per-item parts (`parts_head`) ------------------------------


def _prepare(scorer, side, is_user) -> None:
    """exp of the side's share of the logarithmic layer (bias on the user side), as (n, E*H)."""
    import torch

    ltl = scorer.model.ltl
    x = side.fields
    for hook in ltl._forward_pre_hooks.values():  # simab's floor on |e| (an elementwise clamp)
        changed = hook(ltl, (x,))
        if changed is not None:
            x = changed[0]
    logs = torch.log(torch.clamp(torch.abs(x), min=1e-7)).transpose(1, 2)  # (n, E, F_side)
    logs = ltl.bn[0](logs)  # eval mode: an affine map per embedding component
    fields = torch.tensor(scorer.field_positions(is_user), dtype=torch.long, device=ltl.ltl_weights.device)
    share = logs @ ltl.ltl_weights[fields]  # (F_side, H) weights of the side's fields
    if is_user:
        share = share + ltl.ltl_biases
    side.extra["ltl"] = share  # (n, E, H)


def _afn_factors_of(side):
    """exp of the side's share, (n, E*H), in place of the share; None where a factor would
    overflow or vanish in float32 (|share| > 80), which the product of the two might not:
    the exact path then."""
    if "exp" not in side.extra:
        share = side.extra["ltl"]
        fits = share.numel() == 0 or float(share.abs().max()) < 80.0
        side.extra["exp"] = share.exp_().flatten(1) if fits else None
        if fits:
            del side.extra["ltl"]
    return side.extra["exp"]


def _afn_share(side, hidden: int):
    """The side's share of the logarithmic layer, (n, E, H), back from its exp if need be."""
    import torch

    if "ltl" in side.extra:
        return side.extra["ltl"]
    values = side.extra["exp"]
    return torch.log(values).reshape(values.shape[0], -1, hidden)


def _afn_first_layer(model, items):
    """The first layer of AFN's DNN with bn[1] folded in: bn[1] (eval) is y = a x + t per
    embedding component, so W (a x + t) + b = (W a) x + (W t + b).  Kept with the item side."""
    import torch

    if "afn_weight" not in items.extra:
        ltl, first = model.ltl, model.afn_dnn.linears[0]
        bn = ltl.bn[1]
        a = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        t = bn.bias - bn.running_mean * a
        hidden = ltl.ltl_weights.shape[1]
        items.extra["afn_weight"] = first.weight * a.repeat_interleave(hidden)  # (H1, E*H)
        items.extra["afn_bias"] = first.bias + first.weight @ t.repeat_interleave(hidden)
    return items.extra["afn_weight"], items.extra["afn_bias"]


def _logit(scorer, users, items, pairs):
    import torch

    model = scorer.model
    ltl, dnn = model.ltl, model.afn_dnn
    pu, pi = _afn_factors_of(users), _afn_factors_of(items)
    logit = pairs.add(users.linear, items.linear)
    if pu is None or pi is None:
        hidden = ltl.ltl_weights.shape[1]
        ltl_out = ltl.bn[1](torch.exp(pairs.add(_afn_share(users, hidden), _afn_share(items, hidden)))).flatten(1)
        return logit + model.afn_dnn_linear(dnn(ltl_out)).reshape(-1)
    weight, bias = _afn_first_layer(model, items)
    if pairs.block:
        # Per user: (items, E*H) @ (E*H, H1), the user's factor folded into the weights.
        folded = weight.unsqueeze(0) * pu[pairs.users].unsqueeze(1)  # (users, H1, E*H)
        fc = torch.matmul(pi[pairs.items], folded.transpose(1, 2)).reshape(pairs.size, -1) + bias
    else:
        fc = torch.addmm(bias, pairs.multiply(pu, pi), weight.T)
    return logit + model.afn_dnn_linear(scorer.after_first_layer(dnn, fc)).reshape(-1)

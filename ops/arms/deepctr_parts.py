"""Scoring the DeepCTR arms from per-user and per-item parts: the machinery every model's
head shares.

A deepctr-torch model takes one encoded feature row per (user, item) pair and looks up every
embedding of that row: ranking a catalogue that way looks each user's embeddings up once per
item, pools each item's genres once per user, and multiplies the whole concatenated input
by the first layer of the DNN once per pair.  Here whatever depends on one side only is
computed once per user and once per item, from the model's own tables and layers, and only
what couples a user with an item is computed per pair:

- per side (`PartsScorer.side`): the embedding of every sparse field (multi-hot genres
  pooled as deepctr pools them), the dense values and the side's share of the linear (wide)
  logit;
- the first layer of a DNN that reads the concatenated embeddings splits by columns,
  W x + b = W_user x_user + (W_item x_item + b): one product per side, a sum per pair
  (`PartsScorer.deep`);
- per pair (`Pairs`): the two sides added, multiplied or gathered into the stack of every
  field's embedding, for a block of users x items or for aligned pairs.

What a model computes from these parts is its `Head`, which each DeepCTR kind gives in its
own file (`DeepCTRArm.parts_head`, `ops/arms/kinds/`): FM's second-order term as one matrix
product, AFN's logarithmic layer as a product of a user and an item factor, NFM's
bi-interaction, xDeepFM's CIN and the rest on the gathered stack.  Scores equal the model's
forward up to float rounding (tests/test_deepctr_parts.py); a kind without a head is scored
by its model's own forward on encoded pairs (`forward_scores`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from deepctr_torch.inputs import (
    DenseFeat,
    SparseFeat,
    VarLenSparseFeat,
    get_varlen_pooling_list,
    varlen_embedding_lookup,
)

from ops.arms.features import FeatureEncoder


def forward_scores(
    model, encoder: FeatureEncoder, user_ids: np.ndarray, item_ids: np.ndarray, batch: int
) -> np.ndarray:
    """The model's own forward on the encoded pairs, `batch` pairs a pass: the reference the
    parts are checked against, and the path of a model class with no head here."""
    model.eval()
    out = np.empty(len(user_ids), dtype=np.float64)
    with torch.inference_mode():
        for start in range(0, len(user_ids), batch):
            x = torch.from_numpy(encoder.transform(user_ids[start : start + batch], item_ids[start : start + batch]))
            out[start : start + batch] = model(x.to(model.device)).squeeze(-1).double().cpu().numpy()
    return out


@dataclass
class Side:
    """The parts of one side, one row per user (or item) asked for."""

    is_user: bool
    rows: torch.Tensor  # (n, columns) the encoder's rows of the side
    fields: torch.Tensor  # (n, F_side, E) embeddings of the side's sparse fields, in the model's order
    dense: torch.Tensor  # (n, D_side) the side's dense values
    linear: torch.Tensor  # (n,) the side's share of the linear logit
    extra: dict[str, torch.Tensor] = field(default_factory=dict)  # what a head precomputes


class Pairs:
    """Which pairs a pass scores: aligned rows (`users[k]`, `items[k]`, index tensors), or
    every user of the slice `users` with every item of the slice `items` (`block`,
    user-major, as a users x items matrix; slices read the side tables without a copy)."""

    def __init__(self, users: torch.Tensor | slice, items: torch.Tensor | slice, block: bool):
        self.users, self.items, self.block = users, items, block
        if block:
            self.n_users, self.n_items = users.stop - users.start, items.stop - items.start
            self.size = self.n_users * self.n_items
        else:
            self.size = users.numel()

    def user(self, table: torch.Tensor) -> torch.Tensor:
        part = table[self.users]
        if not self.block:
            return part
        rest = part.shape[1:]
        return part.unsqueeze(1).expand(-1, self.n_items, *rest).reshape(self.size, *rest)

    def item(self, table: torch.Tensor) -> torch.Tensor:
        part = table[self.items]
        if not self.block:
            return part
        rest = part.shape[1:]
        return part.unsqueeze(0).expand(self.n_users, -1, *rest).reshape(self.size, *rest)

    def add(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        if not self.block:
            return user[self.users] + item[self.items]
        total = user[self.users].unsqueeze(1) + item[self.items].unsqueeze(0)
        return total.reshape(self.size, *total.shape[2:])

    def multiply(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        if not self.block:
            return user[self.users] * item[self.items]
        product = user[self.users].unsqueeze(1) * item[self.items].unsqueeze(0)
        return product.reshape(self.size, *product.shape[2:])

    def dot(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        if not self.block:
            return (user[self.users] * item[self.items]).sum(-1)
        return (user[self.users] @ item[self.items].T).reshape(self.size)


class PartsScorer:
    """Scores of a fitted deepctr-torch `model` from per-side parts by its kind's `head`
    (module docstring); None: the model's own forward.  `max_pairs`: pairs per pass, the
    memory bound of `rows_per_forward`."""

    def __init__(self, model, encoder: FeatureEncoder, max_pairs: int, head: Head | None = None):
        self.model, self.encoder, self.max_pairs = model, encoder, max(1, int(max_pairs))
        self.head = head
        columns = list(model.dnn_feature_columns)
        user_names = set(encoder.user_columns)
        # deepctr's order: the SparseFeat embeddings, then the pooled VarLenSparseFeat ones.
        sparse = [c for c in columns if isinstance(c, SparseFeat)] + [
            c for c in columns if isinstance(c, VarLenSparseFeat)
        ]
        dense = [c for c in columns if isinstance(c, DenseFeat)]
        self.sparse = {
            True: [c for c in sparse if c.name in user_names],
            False: [c for c in sparse if c.name not in user_names],
        }
        self.dense = {
            True: [c for c in dense if c.name in user_names],
            False: [c for c in dense if c.name not in user_names],
        }
        # Positions in the model's order of the user fields followed by the item fields.
        self.field_order = _order([c.name for c in sparse], [c.name for c in self.sparse[True] + self.sparse[False]])
        self.dense_order = _order([c.name for c in dense], [c.name for c in self.dense[True] + self.dense[False]])
        self.embedding_dim = sparse[0].embedding_dim if sparse else 0
        self._item_cache: tuple[np.ndarray, Side] | None = None

    # -- the two sides ------------------------------------------------------------------

    def side(self, ids: np.ndarray, is_user: bool) -> Side:
        """The parts of users (`is_user`) or items `ids` (raw ids; unknown ones get the
        encoder's all-unseen row, as `FeatureEncoder.transform` gives them)."""
        enc = self.encoder
        encoded = enc.encoded_users(ids) if is_user else enc.encoded_movies(ids)
        rows = torch.from_numpy(encoded).to(self.model.device)
        # A full-width input with this side's columns filled: deepctr's own lookups read it.
        width = enc.user_rows.shape[1]
        x = rows.new_zeros((rows.shape[0], enc.width))
        if is_user:
            x[:, :width] = rows
        else:
            x[:, width:] = rows
        model = self.model
        embedded = [model.input_from_feature_columns(x, [c], model.embedding_dict)[0][0] for c in self.sparse[is_user]]
        fields = torch.cat(embedded, dim=1) if embedded else x.new_zeros((x.shape[0], 0, self.embedding_dim))
        dense = [x[:, slice(*model.feature_index[c.name])] for c in self.dense[is_user]]
        part = Side(
            is_user=is_user,
            rows=rows,
            fields=fields,
            dense=torch.cat(dense, dim=1) if dense else x.new_zeros((x.shape[0], 0)),
            linear=_linear_share(model.linear_model, x, set(enc.user_columns), is_user),
        )
        if self.head is not None and self.head.prepare is not None:
            self.head.prepare(self, part, is_user)
        return part

    def items(self, item_ids: np.ndarray) -> Side:
        """The item side of `item_ids`, computed once for the catalogue a ranking reads."""
        if self._item_cache is None or not np.array_equal(self._item_cache[0], item_ids):
            self._item_cache = (np.array(item_ids, copy=True), self.side(item_ids, is_user=False))
        return self._item_cache[1]

    # -- what couples them -------------------------------------------------------------

    def pair_fields(self, users: Side, items: Side, pairs: Pairs) -> torch.Tensor:
        """(pairs, F, E): every field's embedding per pair, in the model's order."""
        stack = torch.cat([pairs.user(users.fields), pairs.item(items.fields)], dim=1)
        return stack if self.field_order is None else stack[:, self.field_order.to(stack.device)]

    def pair_dense(self, users: Side, items: Side, pairs: Pairs) -> torch.Tensor:
        values = torch.cat([pairs.user(users.dense), pairs.item(items.dense)], dim=1)
        return values if self.dense_order is None else values[:, self.dense_order.to(values.device)]

    def dnn_input(self, users: Side, items: Side, pairs: Pairs) -> torch.Tensor:
        """deepctr's `combined_dnn_input`: the flattened embeddings, then the dense values."""
        return torch.cat(
            [self.pair_fields(users, items, pairs).flatten(1), self.pair_dense(users, items, pairs)], dim=1
        )

    def first_layer_share(self, dnn, side: Side, is_user: bool) -> torch.Tensor:
        """The side's product with the first linear layer of `dnn` (whose input is
        `dnn_input`), the bias on the item side: the two shares sum to the layer's output."""
        first = dnn.linears[0]
        e = self.embedding_dim
        n_user_fields, n_user_dense = len(self.sparse[True]), len(self.dense[True])
        field_at = _positions(self.field_order, n_user_fields + len(self.sparse[False]))
        dense_at = _positions(self.dense_order, n_user_dense + len(self.dense[False]))
        fields = field_at[:n_user_fields] if is_user else field_at[n_user_fields:]
        dense = dense_at[:n_user_dense] if is_user else dense_at[n_user_dense:]
        n_fields = len(field_at)
        columns = [k for f in fields for k in range(f * e, f * e + e)] + [n_fields * e + d for d in dense]
        inputs = torch.cat([side.fields.flatten(1), side.dense], dim=1)
        share = inputs @ first.weight[:, torch.tensor(columns, dtype=torch.long, device=first.weight.device)].T
        return share if is_user else share + first.bias

    def field_positions(self, is_user: bool) -> list[int]:
        """Model positions of the side's sparse fields (rows of a per-field weight, AFN's)."""
        n_user = len(self.sparse[True])
        positions = _positions(self.field_order, n_user + len(self.sparse[False]))
        return positions[:n_user] if is_user else positions[n_user:]

    def deep(self, users: Side, items: Side, pairs: Pairs, dnn) -> torch.Tensor:
        """`dnn(dnn_input)` with its first layer summed from the two sides' shares."""
        for side, is_user in ((users, True), (items, False)):
            if "first" not in side.extra:
                side.extra["first"] = self.first_layer_share(dnn, side, is_user)
        return self.after_first_layer(dnn, pairs.add(users.extra["first"], items.extra["first"]))

    @staticmethod
    def after_first_layer(dnn, fc: torch.Tensor) -> torch.Tensor:
        """deepctr's `DNN.forward` from the first layer's output on (eval mode: no dropout)."""
        for k in range(len(dnn.linears)):
            if k:
                fc = dnn.linears[k](fc)
            if dnn.use_bn:
                fc = dnn.bn[k](fc)
            fc = dnn.activation_layers[k](fc)
        return fc

    @staticmethod
    def embedding_sums(side: Side) -> None:
        """The side's sum of field embeddings (`sum`) and its own FM second-order term (`fm`),
        in `side.extra`: FM's interaction of a pair is <sum_u, sum_i> plus both terms."""
        total = side.fields.sum(dim=1)
        side.extra["sum"] = total
        side.extra["fm"] = 0.5 * (total.pow(2).sum(-1) - side.fields.pow(2).sum(dim=(1, 2)))

    def probabilities(self, users: Side, items: Side, pairs: Pairs) -> torch.Tensor:
        """The model's output per pair: its prediction layer (bias, sigmoid) on the head's logit."""
        if self.head is None:  # the model's own forward on the encoded pairs
            return self.model(torch.cat([pairs.user(users.rows), pairs.item(items.rows)], dim=1)).reshape(-1)
        return self.model.out(self.head.logit(self, users, items, pairs).reshape(-1, 1)).reshape(-1)

    # -- scores ---------------------------------------------------------------------------

    def score_pairs(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        """One probability per aligned (user, movie) pair, as float64 (the model's float32 output)."""
        user_ids = np.asarray(user_ids, dtype=np.int64)
        item_ids = np.asarray(item_ids, dtype=np.int64)
        out = np.empty(user_ids.size, dtype=np.float64)
        if user_ids.size == 0:
            return out
        self.model.eval()
        with torch.inference_mode():
            unique_users, user_at = np.unique(user_ids, return_inverse=True)
            unique_items, item_at = np.unique(item_ids, return_inverse=True)
            users = self.side(unique_users, is_user=True)
            items = self.side(unique_items, is_user=False)
            device = self.model.device
            user_at, item_at = (
                torch.from_numpy(user_at.ravel()).to(device),
                torch.from_numpy(item_at.ravel()).to(device),
            )
            for start in range(0, user_ids.size, self.max_pairs):
                stop = start + self.max_pairs
                pairs = Pairs(user_at[start:stop], item_at[start:stop], block=False)
                out[start:stop] = self.probabilities(users, items, pairs).double().cpu().numpy()
        return out

    def score_matrix(self, user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
        """Probabilities of every user x movie, (users, movies) float32 (the model's dtype)."""
        user_ids = np.asarray(user_ids, dtype=np.int64)
        item_ids = np.asarray(item_ids, dtype=np.int64)
        out = np.empty((user_ids.size, item_ids.size), dtype=np.float32)
        if out.size == 0:
            return out
        self.model.eval()
        with torch.inference_mode():
            items = self.items(item_ids)
            users = self.side(user_ids, is_user=True)
            n_users, n_items = user_ids.size, item_ids.size
            if self.head is not None and self.head.user_per_pass:
                user_step, item_step = 1, n_items
            else:
                user_step, item_step = max(1, self.max_pairs // n_items), min(n_items, self.max_pairs)
            for u in range(0, n_users, user_step):
                for i in range(0, n_items, item_step):
                    pairs = Pairs(slice(u, min(u + user_step, n_users)), slice(i, min(i + item_step, n_items)), True)
                    scores = self.probabilities(users, items, pairs).reshape(pairs.n_users, pairs.n_items)
                    out[pairs.users, pairs.items] = scores.float().cpu().numpy()
        return out

    def factors(self, user_ids: np.ndarray, item_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(user factors, item factors), float32, whose products are the logits the
        prediction layer's sigmoid turns into the scores (its bias included), where the
        model's logit decomposes so (FM, a linear model); None otherwise."""
        head = self.head
        if head is None or head.factors is None or not head.decomposes(self.model) or self.model.out.task != "binary":
            return None
        self.model.eval()
        with torch.inference_mode():
            users = self.side(np.asarray(user_ids, dtype=np.int64), is_user=True)
            items = self.side(np.asarray(item_ids, dtype=np.int64), is_user=False)
            left, right = head.factors(self, users, items)
            if self.model.out.use_bias:  # a column of ones meets the bias on the item side
                left = torch.cat([left, torch.ones_like(left[:, :1])], dim=1)
                right = torch.cat([right, self.model.out.bias.expand(right.shape[0], 1)], dim=1)
            return left.float().cpu().numpy(), right.float().cpu().numpy()


@dataclass(frozen=True)
class Head:
    """How one deepctr-torch model is scored from parts, given by its kind
    (`DeepCTRArm.parts_head`): `logit(scorer, users, items, pairs)` gives the logit per pair;
    `prepare(scorer, side, is_user)`, where given, adds the side's precomputed parts to
    `side.extra`; `factors(scorer, users, items)` gives user and item factors whose product
    is the logit, for a model where `decomposes(model)`; `user_per_pass`: in a users x items
    block, a pass scores one user against every item."""

    logit: Callable
    prepare: Callable | None = None
    factors: Callable | None = None
    decomposes: Callable = lambda model: True  # whether this model's logit is `factors`' product
    # A block pass scores one user against the whole catalogue (AFN: what a pass holds is
    # per user, the folded first layer, plus one row of the first layer's width per item).
    user_per_pass: bool = False


def _order(model_names: list[str], gathered: list[str]) -> torch.Tensor | None:
    """The permutation taking the gathered order (user fields, then item fields) to the
    model's; None when they agree (every encoder of simab puts the user side first)."""
    at = {name: k for k, name in enumerate(gathered)}
    order = [at[name] for name in model_names]
    return None if order == list(range(len(order))) else torch.tensor(order)


def _positions(order: torch.Tensor | None, n: int) -> list[int]:
    """Model position of each gathered field (inverse of `_order`)."""
    if order is None:
        return list(range(n))
    positions = [0] * n
    for model_position, gathered in enumerate(order.tolist()):
        positions[gathered] = model_position
    return positions


def _linear_share(linear, x: torch.Tensor, user_names: set[str], is_user: bool) -> torch.Tensor:
    """The part of deepctr's `Linear` logit that the side's features give (`Linear.forward`
    restricted to them): summed over both sides it is the model's linear logit."""
    total = x.new_zeros(x.shape[0])
    mine = lambda c: (c.name in user_names) == is_user  # noqa: E731
    index = linear.feature_index
    for c in filter(mine, linear.sparse_feature_columns):
        total += linear.embedding_dict[c.embedding_name](x[:, slice(*index[c.name])].long()).reshape(-1)
    varlen = [c for c in linear.varlen_sparse_feature_columns if mine(c)]
    if varlen:
        looked_up = varlen_embedding_lookup(x, linear.embedding_dict, index, varlen)
        for pooled in get_varlen_pooling_list(looked_up, x, index, varlen, linear.device):
            total += pooled.reshape(-1)
    offset = 0
    for c in linear.dense_feature_columns:
        if mine(c):
            total += (x[:, slice(*index[c.name])] @ linear.weight[offset : offset + c.dimension]).reshape(-1)
        offset += c.dimension
    return total

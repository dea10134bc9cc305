"""Agent4Rec's three recommenders (Zhang et al. 2024, §4: MF, MultVAE, LightGCN) as simab arms.

- `MF`: matrix factorisation trained with BPR (Rendle et al. 2009), Cornac's `BPR`.
- `MultVAE`: the variational autoencoder with a multinomial likelihood (Liang et al. 2018),
  Cornac's `VAECF(likelihood="mult")`.
- `LightGCN` (He et al. 2020): PyTorch Geometric's `LightGCN` module, trained here with its
  BPR `recommendation_loss` (Cornac's LightGCN needs DGL, whose wheels do not load with the
  torch simab pins).

All three learn from implicit feedback: every train interaction whose rating is at least
`min_rating` (0: all of them) is a positive.  After fitting, each is kept as what scores a
(user, item) pair, user vectors and item vectors, so that storing it needs no pickle (`.npz`
and JSON) and ranking is one matrix product per block of users:

    score(u, i) = f(user[u] . item[i] + bias[i] - offset[u])

with f the identity for MF and LightGCN, and for MultVAE `exp` with `offset[u]` the log of
the softmax's normaliser: MultVAE's last decoder layer is linear, so its softmax output is
that expression exactly.  A user the model never saw (first seen in the test window) gets
the items' train popularity; an item it never saw the lowest score.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ops.arms.base import ArmBase, FitData


class _FactorArm(ArmBase):
    """A fitted arm stored as user vectors, item vectors and biases (module docstring)."""

    softmax = False

    def __init__(self, name: str, seed: int = 1024, min_rating: int = 0, **params: Any):
        super().__init__(name, seed=int(seed), min_rating=int(min_rating), **params)
        self.user_ids = np.zeros(0, np.int64)
        self.item_ids = np.zeros(0, np.int64)
        self.users = np.zeros((0, 0), np.float32)
        self.items = np.zeros((0, 0), np.float32)
        self.bias = np.zeros(0, np.float32)
        self.offset = np.zeros(0, np.float32)
        self.popularity = np.zeros(0, np.float64)  # per item of `item_ids`, for unseen users

    # -- fitting ---------------------------------------------------------------------

    def fit(self, data: FitData) -> None:
        # In a fixed order: the libraries number users and items by first appearance and batch
        # in that order, so a shuffled frame gave another model for the same seed.
        rows = (
            data.train.filter(pl.col("rating") >= self.params["min_rating"])
            .select("user_id", "item_id")
            .unique()
            .sort("user_id", "item_id")
        )
        if rows.height == 0:
            raise ValueError(f"arm {self.name!r}: no train interactions with rating >= {self.params['min_rating']}")
        self.user_ids = np.unique(rows.get_column("user_id").to_numpy()).astype(np.int64)
        self.item_ids = np.unique(rows.get_column("item_id").to_numpy()).astype(np.int64)
        u = np.searchsorted(self.user_ids, rows.get_column("user_id").to_numpy())
        i = np.searchsorted(self.item_ids, rows.get_column("item_id").to_numpy())
        counts = np.bincount(i, minlength=self.item_ids.size).astype(np.float64)
        self.popularity = counts / counts.max()
        self._train(u, i, data)

    def _train(self, u: np.ndarray, i: np.ndarray, data: FitData) -> None:
        raise NotImplementedError

    def _cornac_dataset(self, u: np.ndarray, i: np.ndarray):
        """A Cornac dataset whose internal indices are our own (users, items in sorted-id order)."""
        from cornac.data import Dataset

        triples = [(int(a), int(b), 1.0) for a, b in zip(u, i, strict=True)]
        dataset = Dataset.from_uir(triples, seed=self.params["seed"])
        # Cornac numbers users and items by first appearance: map back to ours.
        user_order = np.asarray(list(dataset.uid_map.keys()), dtype=np.int64)
        item_order = np.asarray(list(dataset.iid_map.keys()), dtype=np.int64)
        return dataset, user_order, item_order

    # -- scoring ---------------------------------------------------------------------

    def _logits(
        self, user_rows: np.ndarray, item_cols: np.ndarray, known_items: np.ndarray, pairwise: bool
    ) -> np.ndarray:
        users = self.users[user_rows].astype(np.float64)
        items = self.items[item_cols].astype(np.float64)
        if pairwise:
            logits = np.einsum("ij,ij->i", users, items) + self.bias[item_cols] - self.offset[user_rows]
        else:
            logits = users @ items.T + self.bias[item_cols][None, :] - self.offset[user_rows][:, None]
        logits = np.exp(logits) if self.softmax else logits
        floor = 0.0 if self.softmax else -np.inf
        return np.where(known_items if pairwise else known_items[None, :], logits, floor)

    def _locate(self, ids: np.ndarray, known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.clip(np.searchsorted(known, ids), 0, max(known.size - 1, 0))
        return at, (known[at] == ids) if known.size else np.zeros(ids.size, bool)

    def score(self, user_ids, item_ids) -> np.ndarray:
        user_ids = np.asarray(user_ids, dtype=np.int64)
        item_ids = np.asarray(item_ids, dtype=np.int64)
        rows, seen = self._locate(user_ids, self.user_ids)
        cols, known = self._locate(item_ids, self.item_ids)
        out = np.where(known, self.popularity[cols], 0.0 if self.softmax else -np.inf)
        if seen.any():
            out[seen] = self._logits(rows[seen], cols[seen], known[seen], pairwise=True)
        return out

    def score_matrix(self, user_ids, item_ids) -> np.ndarray:
        rows, seen = self._locate(np.asarray(user_ids, dtype=np.int64), self.user_ids)
        cols, known = self._locate(np.asarray(item_ids, dtype=np.int64), self.item_ids)
        out = np.empty((rows.size, cols.size), dtype=np.float64)
        out[~seen] = np.where(known, self.popularity[cols], 0.0 if self.softmax else -np.inf)[None, :]
        if seen.any():
            out[seen] = self._logits(rows[seen], cols, known, pairwise=False)
        return out

    # -- storing ---------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return {
            "library": self.library,
            **self.params,
            "users_fitted": int(self.user_ids.size),
            "items_fitted": int(self.item_ids.size),
        }

    def save(self, folder: Path) -> None:
        np.savez(
            folder / "factors.npz",
            allow_pickle=False,
            user_ids=self.user_ids,
            item_ids=self.item_ids,
            users=self.users,
            items=self.items,
            bias=self.bias,
            offset=self.offset,
            popularity=self.popularity,
        )
        (folder / "params.json").write_text(json.dumps(self.params))

    @classmethod
    def load(cls, name: str, params: dict[str, Any], folder: Path):
        arm = cls(name, **params)
        with np.load(folder / "factors.npz", allow_pickle=False) as saved:
            for key in ("user_ids", "item_ids", "users", "items", "bias", "offset", "popularity"):
                setattr(arm, key, saved[key])
        return arm


class MF(_FactorArm):
    """Matrix factorisation with the BPR loss (Cornac `BPR`; Agent4Rec's MF)."""

    library = "cornac.models.BPR"

    def __init__(
        self,
        name: str,
        seed: int = 1024,
        min_rating: int = 0,
        k: int = 64,
        max_iter: int = 100,
        learning_rate: float = 0.01,
        lambda_reg: float = 0.01,
        max_epochs: int | None = None,
    ):
        # max_epochs: simab's epoch setting ($SIMAB_MAX_EPOCHS), BPR's iterations when given.
        super().__init__(
            name,
            seed=seed,
            min_rating=min_rating,
            k=int(k),
            max_iter=int(max_epochs or max_iter),
            learning_rate=float(learning_rate),
            lambda_reg=float(lambda_reg),
        )

    def _train(self, u, i, data) -> None:
        from cornac.models import BPR

        dataset, user_order, item_order = self._cornac_dataset(u, i)
        model = BPR(
            k=self.params["k"],
            max_iter=self.params["max_iter"],
            learning_rate=self.params["learning_rate"],
            lambda_reg=self.params["lambda_reg"],
            seed=self.params["seed"],
            num_threads=1,
            verbose=False,
        ).fit(dataset)
        self.users = _reorder(model.u_factors, user_order, self.user_ids.size)
        self.items = _reorder(model.i_factors, item_order, self.item_ids.size)
        self.bias = _reorder(model.i_biases[:, None], item_order, self.item_ids.size)[:, 0]
        self.offset = np.zeros(self.user_ids.size, np.float32)


class MultVAE(_FactorArm):
    """The multinomial variational autoencoder (Cornac `VAECF`, likelihood "mult")."""

    library = "cornac.models.VAECF"
    softmax = True

    def __init__(
        self,
        name: str,
        seed: int = 1024,
        min_rating: int = 0,
        k: int = 64,
        hidden: int = 256,
        n_epochs: int = 100,
        batch_size: int = 100,
        learning_rate: float = 0.001,
        beta: float = 1.0,
        max_epochs: int | None = None,
    ):
        super().__init__(
            name,
            seed=seed,
            min_rating=min_rating,
            k=int(k),
            hidden=int(hidden),
            n_epochs=int(max_epochs or n_epochs),
            batch_size=int(batch_size),
            learning_rate=float(learning_rate),
            beta=float(beta),
        )

    def _train(self, u, i, data) -> None:
        import torch
        from cornac.models import VAECF

        torch.manual_seed(self.params["seed"])
        dataset, user_order, item_order = self._cornac_dataset(u, i)
        model = VAECF(
            k=self.params["k"],
            autoencoder_structure=[self.params["hidden"]],
            act_fn="tanh",
            likelihood="mult",
            n_epochs=self.params["n_epochs"],
            batch_size=self.params["batch_size"],
            learning_rate=self.params["learning_rate"],
            beta=self.params["beta"],
            seed=self.params["seed"],
            verbose=False,
        ).fit(dataset)
        vae = model.vae.cpu().eval()
        decoder = list(vae.decoder.children())
        last = decoder[-1]  # the linear layer whose softmax is the output
        with torch.no_grad():
            x = torch.tensor((dataset.matrix > 0).toarray(), dtype=torch.float32)
            mu, _ = vae.encode(x)  # the posterior mean: MultVAE's prediction uses no sampling
            hidden = torch.nn.Sequential(*decoder[:-1])(mu)
            logits = last(hidden)
            offset = torch.logsumexp(logits, dim=1)
        self.users = _reorder(hidden.numpy(), user_order, self.user_ids.size)
        self.items = _reorder(last.weight.detach().numpy(), item_order, self.item_ids.size)
        self.bias = _reorder(last.bias.detach().numpy()[:, None], item_order, self.item_ids.size)[:, 0]
        self.offset = _reorder(offset.numpy()[:, None], user_order, self.user_ids.size)[:, 0]


class LightGCN(_FactorArm):
    """LightGCN (PyTorch Geometric `torch_geometric.nn.models.LightGCN`) trained with BPR."""

    library = "torch_geometric.nn.models.LightGCN"

    def __init__(
        self,
        name: str,
        seed: int = 1024,
        min_rating: int = 0,
        embedding_dim: int = 64,
        num_layers: int = 3,
        n_epochs: int = 20,
        batch_size: int = 2048,
        learning_rate: float = 0.001,
        lambda_reg: float = 1e-4,
        max_epochs: int | None = None,
    ):
        super().__init__(
            name,
            seed=seed,
            min_rating=min_rating,
            embedding_dim=int(embedding_dim),
            num_layers=int(num_layers),
            n_epochs=int(max_epochs or n_epochs),
            batch_size=int(batch_size),
            learning_rate=float(learning_rate),
            lambda_reg=float(lambda_reg),
        )

    def _train(self, u, i, data) -> None:
        import torch
        from torch_geometric.nn.models import LightGCN as Model

        p = self.params
        torch.manual_seed(p["seed"])
        rng = np.random.default_rng(p["seed"])
        n_users, n_items = self.user_ids.size, self.item_ids.size
        src = torch.from_numpy(u.astype(np.int64))
        dst = torch.from_numpy(i.astype(np.int64) + n_users)  # items after the users in one node index
        edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
        model = Model(num_nodes=n_users + n_items, embedding_dim=p["embedding_dim"], num_layers=p["num_layers"])
        optimiser = torch.optim.Adam(model.parameters(), lr=p["learning_rate"])
        positives = set(zip(u.tolist(), i.tolist(), strict=True))
        for epoch in range(1, p["n_epochs"] + 1):
            order = rng.permutation(u.size)
            negatives = rng.integers(0, n_items, u.size)
            # Resample the (rare) negatives that are positives of their user.
            clash = np.fromiter(((a, b) in positives for a, b in zip(u, negatives, strict=True)), bool, u.size)
            while clash.any():
                negatives[clash] = rng.integers(0, n_items, int(clash.sum()))
                clash[clash] = np.fromiter(
                    ((a, b) in positives for a, b in zip(u[clash], negatives[clash], strict=True)),
                    bool,
                    int(clash.sum()),
                )
            total = 0.0
            for start in range(0, u.size, p["batch_size"]):
                idx = order[start : start + p["batch_size"]]
                users = torch.from_numpy(u[idx].astype(np.int64))
                pos = torch.from_numpy(i[idx].astype(np.int64) + n_users)
                neg = torch.from_numpy(negatives[idx].astype(np.int64) + n_users)
                label_index = torch.stack([torch.cat([users, users]), torch.cat([pos, neg])])
                rank = model(edge_index, label_index)
                pos_rank, neg_rank = rank.chunk(2)
                loss = model.recommendation_loss(
                    pos_rank, neg_rank, node_id=label_index.unique(), lambda_reg=p["lambda_reg"]
                )
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                total += loss.item() * idx.size
            if data.on_epoch is not None:
                data.on_epoch(epoch, {"train_loss": total / u.size})
        with torch.no_grad():
            embedding = model.get_embedding(edge_index).numpy()
        self.users = embedding[:n_users].astype(np.float32)
        self.items = embedding[n_users:].astype(np.float32)
        self.bias = np.zeros(n_items, np.float32)
        self.offset = np.zeros(n_users, np.float32)


def _reorder(rows: np.ndarray, order: np.ndarray, size: int) -> np.ndarray:
    """Rows given in Cornac's order (`order[k]` = our index of Cornac's row k) in ours."""
    out = np.zeros((size, rows.shape[1]), dtype=np.float32)
    out[order] = rows[: order.size]
    return out

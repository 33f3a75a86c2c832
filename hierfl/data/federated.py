"""Federated data held once, as tensors: every client's rows are a contiguous slice."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class FederatedData:
    """Train and test rows of all clients, concatenated; client k owns rows offsets[k]:offsets[k+1].

    y is int64 class labels (classification) or float32 targets of shape (N,) or (N, m)."""

    x: torch.Tensor
    y: torch.Tensor
    offsets: np.ndarray
    x_test: torch.Tensor
    y_test: torch.Tensor
    test_offsets: np.ndarray
    n_classes: int          # 0 for regression

    @property
    def n_clients(self) -> int:
        return len(self.offsets) - 1

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def test_counts(self) -> np.ndarray:
        return np.diff(self.test_offsets)

    @property
    def dim(self) -> int:
        return int(self.x.shape[1])

    @property
    def out_dim(self) -> int:
        if self.n_classes:
            return self.n_classes
        return 1 if self.y.dim() == 1 else int(self.y.shape[1])

    @classmethod
    def from_arrays(cls, train: list[tuple[np.ndarray, np.ndarray]],
                    test: list[tuple[np.ndarray, np.ndarray]], n_classes: int) -> "FederatedData":
        """Build from per-client (x, y) pairs (test lists may hold empty arrays)."""
        def cat(parts: list[tuple[np.ndarray, np.ndarray]], dim: int):
            xs = [np.asarray(p[0], np.float32).reshape(len(p[0]), dim) for p in parts]
            ys = [np.asarray(p[1]) for p in parts]
            off = np.concatenate([[0], np.cumsum([len(x) for x in xs])]).astype(np.int64)
            x = torch.from_numpy(np.concatenate(xs) if xs else np.zeros((0, dim), np.float32))
            ydt = np.int64 if n_classes else np.float32
            y = torch.from_numpy(np.concatenate(ys).astype(ydt))
            return x.contiguous(), y.contiguous(), off
        dim = int(np.asarray(train[0][0]).reshape(len(train[0][0]), -1).shape[1])
        x, y, off = cat(train, dim)
        xt, yt, toff = cat(test, dim)
        return cls(x, y, off, xt, yt, toff, n_classes)


def split_train_test(x: np.ndarray, y: np.ndarray, fraction: float,
                     rng: np.random.Generator) -> tuple[tuple, tuple]:
    """Shuffle one client's rows and hold out `fraction` of them (at least one row stays in train)."""
    n = len(x)
    perm = rng.permutation(n)
    n_test = min(int(round(fraction * n)), n - 1) if n > 1 else 0
    te, tr = perm[:n_test], perm[n_test:]
    return (x[tr], y[tr]), (x[te], y[te])

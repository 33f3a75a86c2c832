"""Federated data held once, as arrays: every client's rows are a contiguous slice.

The loaders build it from numpy arrays and import no torch (`hierfl validate` checks data without
it); `as_tensors()` wraps the same memory as torch tensors for training (`load_data` does)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class FederatedData:
    """Train and test rows of all clients, concatenated; client k owns rows offsets[k]:offsets[k+1].

    x is (N, dim): float32 features, uint8 pixels (image sets: scaled to [0, 1] float32 only
    where batches are gathered, `learn.batches.model_input`), or int64 character indices
    (text sets, fed to a model that embeds them). y is int64 class labels (classification) or
    float32 targets of shape (N,) or (N, m).

    input_shape is the shape of one row before it was flattened, e.g. (1, 28, 28) for MNIST,
    (3, 32, 32) for CIFAR (channels, height, width; row-major), (80,) for an 80-character
    sequence; (dim,) for plain feature vectors (the default). A CNN reshapes rows with it.
    vocab is the vocabulary size of a text set (its inputs are indices in 0..vocab-1), 0 else.

    x, y, x_test, y_test are numpy arrays as loaded, torch tensors after `as_tensors()`."""

    x: "torch.Tensor | Any"
    y: "torch.Tensor | Any"
    offsets: np.ndarray
    x_test: "torch.Tensor | Any"
    y_test: "torch.Tensor | Any"
    test_offsets: np.ndarray
    n_classes: int          # 0 for regression
    input_shape: tuple[int, ...] = ()       # () is filled in as (dim,)
    vocab: int = 0

    def __post_init__(self) -> None:
        if not self.input_shape:
            object.__setattr__(self, "input_shape", (self.dim,))
        if math.prod(self.input_shape) != self.dim:
            raise ValueError(f"input_shape {self.input_shape} does not hold {self.dim} features")

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
        return 1 if self.y.ndim == 1 else int(self.y.shape[1])

    def as_tensors(self) -> "FederatedData":
        """The same rows as torch tensors sharing the arrays' memory (no copy); self when they
        are tensors already."""
        import torch

        if isinstance(self.x, torch.Tensor):
            return self
        t = {k: torch.from_numpy(getattr(self, k)) for k in ("x", "y", "x_test", "y_test")}
        return replace(self, **t)

    @classmethod
    def from_arrays(cls, train: list[tuple[np.ndarray, np.ndarray]],
                    test: list[tuple[np.ndarray, np.ndarray]], n_classes: int,
                    input_shape: tuple[int, ...] = ()) -> "FederatedData":
        """Build from per-client (x, y) pairs (test lists may hold empty arrays)."""
        def cat(parts: list[tuple[np.ndarray, np.ndarray]], dim: int):
            xs = [np.asarray(p[0], np.float32).reshape(len(p[0]), dim) for p in parts]
            ys = [np.asarray(p[1]) for p in parts]
            off = np.concatenate([[0], np.cumsum([len(x) for x in xs])]).astype(np.int64)
            x = np.concatenate(xs) if xs else np.zeros((0, dim), np.float32)
            ydt = np.int64 if n_classes else np.float32
            y = np.concatenate(ys).astype(ydt)
            return np.ascontiguousarray(x), np.ascontiguousarray(y), off
        dim = int(np.asarray(train[0][0]).reshape(len(train[0][0]), -1).shape[1])
        x, y, off = cat(train, dim)
        xt, yt, toff = cat(test, dim)
        return cls(x, y, off, xt, yt, toff, n_classes, input_shape)


def offsets_of(parts: list[np.ndarray]) -> np.ndarray:
    """Row offsets of clients laid one after another: [0, n_0, n_0 + n_1, ...]."""
    return np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)


def split_train_test(x: np.ndarray, y: np.ndarray, fraction: float,
                     rng: np.random.Generator) -> tuple[tuple, tuple]:
    """Shuffle one client's rows and hold out `fraction` of them (at least one row stays in train)."""
    n = len(x)
    perm = rng.permutation(n)
    n_test = min(int(round(fraction * n)), n - 1) if n > 1 else 0
    te, tr = perm[:n_test], perm[n_test:]
    return (x[tr], y[tr]), (x[te], y[te])

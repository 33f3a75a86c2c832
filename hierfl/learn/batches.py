"""Minibatch plans: which rows each client uses at each local step, drawn from per-client
generators keyed by (seed, client, round, edge round) so every executor and every algorithm of
a scenario sees the same batches."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import seeding


@dataclass(frozen=True)
class Batch:
    """One step's minibatch for C clients: x (C, B, d), y (C, B[, m]), weights m (C, B)."""

    x: torch.Tensor
    y: torch.Tensor
    m: torch.Tensor

    def rows(self, sel: slice | torch.Tensor) -> "Batch":
        return Batch(self.x[sel], self.y[sel], self.m[sel])


@dataclass(frozen=True)
class BatchPlan:
    """rows (C, S, B) global row indices and weights (C, S, B); S may be 1 (full batch: reused)."""

    rows: torch.Tensor
    weights: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor

    def at(self, step: int) -> Batch:
        s = step % self.rows.shape[1]
        r = self.rows[:, s]
        return Batch(self.x[r], self.y[r], self.weights[:, s])

    def select(self, sel: slice | torch.Tensor) -> "BatchPlan":
        return BatchPlan(self.rows[sel], self.weights[sel], self.x, self.y)


def steps_for(counts: np.ndarray, batch_size: int | str, steps: int | None,
              epochs: int | None) -> np.ndarray:
    """Local steps per client: K, or E * ceil(n_k / B) (one step per epoch for full batch)."""
    if steps is not None:
        return np.full(len(counts), steps, dtype=np.int64)
    e = epochs if epochs is not None else 1
    if batch_size == "full":
        return np.full(len(counts), e, dtype=np.int64)
    return e * -(-counts // int(batch_size))


def full_plan(offsets: np.ndarray, clients: np.ndarray, x: torch.Tensor,
              y: torch.Tensor) -> BatchPlan:
    """All local rows of each client, padded to the largest (S = 1)."""
    counts = offsets[clients + 1] - offsets[clients]
    width = int(counts.max())
    pos = np.arange(width)
    valid = pos[None, :] < counts[:, None]
    rows = np.where(valid, offsets[clients][:, None] + pos[None, :], 0)
    w = valid / counts[:, None]
    return BatchPlan(torch.from_numpy(rows[:, None, :]),
                     torch.from_numpy(w[:, None, :].astype(np.float32)).to(x.dtype), x, y)


def minibatch_plan(offsets: np.ndarray, clients: np.ndarray, batch_size: int | str,
                   n_steps: np.ndarray, seed: int, round_: int, edge_round: int,
                   x: torch.Tensor, y: torch.Tensor) -> BatchPlan:
    """Epoch-wise shuffled minibatches: step j of client k uses rows perm[jB:(j+1)B] of the
    current epoch's permutation; the last batch of an epoch may be short (weights say so)."""
    if batch_size == "full":
        return full_plan(offsets, clients, x, y)
    b = int(batch_size)
    s_max = int(n_steps.max()) if len(n_steps) else 0
    s_max = max(s_max, 1)
    rows = np.zeros((len(clients), s_max, b), np.int64)
    wts = np.zeros((len(clients), s_max, b), np.float32)
    for i, k in enumerate(clients):
        lo, n = int(offsets[k]), int(offsets[k + 1] - offsets[k])
        steps = int(n_steps[i])
        if steps == 0:
            continue
        per_epoch = -(-n // b)
        g = seeding.rng(seed, "batches", int(k), round_, edge_round)
        n_epochs = -(-steps // per_epoch)
        padded = np.zeros((n_epochs, per_epoch * b), np.int64)
        valid = np.zeros((n_epochs, per_epoch * b), bool)
        for e in range(n_epochs):
            padded[e, :n] = g.permutation(n)
            valid[e, :n] = True
        pr = padded.reshape(n_epochs * per_epoch, b)[:steps]
        pv = valid.reshape(n_epochs * per_epoch, b)[:steps]
        rows[i, :steps] = np.where(pv, pr + lo, lo)
        wts[i, :steps] = pv / pv.sum(1, keepdims=True)
    return BatchPlan(torch.from_numpy(rows), torch.from_numpy(wts).to(x.dtype), x, y)

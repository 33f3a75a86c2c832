"""The learning side of asynchronous rounds (sim/asynchronous.py decides when): FedAsync's
mixing and FedBuff's buffered mean of deltas, on algorithms whose upload (a client's, or a top
aggregator's in a hierarchical run) is a model and whose server step is a weighted mean of the
uploads (Capabilities.asynchronous). An update is (x_k, n_k): the model and its weight (the
client's samples, or the samples of the clients an aggregator's model aggregates)."""
from __future__ import annotations

from typing import Any

import torch

from ..algorithms.base import Algorithm

Update = tuple[torch.Tensor, float]


def fedasync_mix(algo: Algorithm, update: Update, alpha: float) -> None:
    """x <- (1 - alpha) x + alpha x_k (Xie et al. 2019, Algorithm 1)."""
    w = algo.global_model()
    xk = update[0].to(w.dtype)
    algo.set_global(w if alpha == 0 else xk.clone() if alpha == 1 else
                    (1 - alpha) * w + alpha * xk)


def fedbuff_apply(algo: Algorithm, buffer: list[tuple[Update, Any, float]],
                  server_lr: float) -> None:
    """x <- x + eta sum_k n_k s_k (x_k - x_start_k) / sum_k n_k (Nguyen et al. 2022, with the
    staleness weights s_k and the updates' weights n_k)."""
    w = algo.global_model()
    total = torch.zeros_like(w, dtype=torch.float64)
    norm = 0.0
    for (xk, n_k), start, s in buffer:
        total += (n_k * s) * (xk.double() - start.double())
        norm += n_k
    algo.set_global((w.double() + server_lr * total / norm).to(w.dtype))

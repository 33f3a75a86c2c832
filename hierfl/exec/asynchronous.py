"""The learning side of asynchronous rounds (sim/asynchronous.py and sim/async_edge.py decide
when): FedAsync's mixing and FedBuff's buffered mean of deltas, on algorithms whose upload (a
client's, or a top aggregator's in a hierarchical run) is a model and whose server step is a
weighted mean of the uploads (Capabilities.asynchronous), and at a bottom-tier aggregator for
algorithms whose edge rule is a (weighted) mean of client models (Capabilities.async_edges). An
update is (x_k, n_k): the model and its weight (the client's samples, or the samples of the
clients an aggregator's model aggregates)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..algorithms.base import Algorithm, Upload

Update = tuple[torch.Tensor, float]


def mixed(w: torch.Tensor, xk: torch.Tensor, alpha: float) -> torch.Tensor:
    """(1 - alpha) w + alpha x_k (exactly w for alpha 0, exactly x_k for alpha 1)."""
    xk = xk.to(w.dtype)
    return w if alpha == 0 else xk.clone() if alpha == 1 else (1 - alpha) * w + alpha * xk


def buffered(w: torch.Tensor, buffer: list[tuple[Update, Any, float]],
             server_lr: float) -> torch.Tensor:
    """w + eta sum_k n_k s_k (x_k - x_start_k) / sum_k n_k, accumulated in float64."""
    total = torch.zeros_like(w, dtype=torch.float64)
    norm = 0.0
    for (xk, n_k), start, s in buffer:
        total += (n_k * s) * (xk.double() - start.double())
        norm += n_k
    return (w.double() + server_lr * total / norm).to(w.dtype)


def fedasync_mix(algo: Algorithm, update: Update, alpha: float) -> None:
    """x <- (1 - alpha) x + alpha x_k (Xie et al. 2019, Algorithm 1)."""
    algo.set_global(mixed(algo.global_model(), update[0], alpha))


def fedbuff_apply(algo: Algorithm, buffer: list[tuple[Update, Any, float]],
                  server_lr: float) -> None:
    """x <- x + eta sum_k n_k s_k (x_k - x_start_k) / sum_k n_k (Nguyen et al. 2022, with the
    staleness weights s_k and the updates' weights n_k)."""
    algo.set_global(buffered(algo.global_model(), buffer, server_lr))


class AsyncEdgeSteps:
    """RoundRunner's steps of an asynchronous bottom-tier aggregator. The edge's model is
    `edge_model(es)`; a new one is set through the algorithm's own edge rule applied to that
    one model (weight 1), so an edge rule that is a mean followed by its own step (pFedMac-SH:
    y = mean, x <- x - eta2 lambda2 (x - y)) keeps its step."""

    def edge_async_update(self, t: int, es0: Any, work) -> Update:
        """One client's update as its edge reads it: the edge's model after aggregating that
        client alone from the state `es0` the client started from (HierFAVG: the client's
        model; pFedMac-SH: y_ij rebuilt from what it sent and the y it was sent), and its
        weight n_k."""
        k = int(work.sel[0])
        es = self.edge_close(t, es0, work, np.array([k], dtype=np.int64), [0])
        return self.algo.edge_model(self._es(es)), float(self.counts[k])

    def _edge_set(self, t: int, es: Any, model: torch.Tensor) -> Any:
        up = Upload((model.unsqueeze(0),))
        one = torch.ones(1, dtype=torch.float64)
        return self._wrap(es, self.algo.edge_aggregate(self._es(es), None, up, one,
                                                       self._ctx(t)))

    def edge_async_mix(self, t: int, es: Any, update: Update, alpha: float) -> Any:
        """FedAsync at an edge: y <- (1 - alpha) y + alpha y_k."""
        return self._edge_set(t, es, mixed(self.algo.edge_model(self._es(es)), update[0],
                                           alpha))

    def edge_async_buffer(self, t: int, es: Any, buffer: list, server_lr: float) -> Any:
        """FedBuff at an edge: y <- y + eta sum n_k s_k (y_k - y_start_k) / sum n_k."""
        return self._edge_set(t, es, buffered(self.algo.edge_model(self._es(es)), buffer,
                                              server_lr))

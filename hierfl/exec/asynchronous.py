"""The learning side of asynchronous rounds (sim/asynchronous.py decides when): FedAsync's
mixing and FedBuff's buffered mean of deltas, on algorithms whose upload is the client's model
and whose server step is the weighted mean of the uploads (Capabilities.asynchronous)."""
from __future__ import annotations

from typing import Any

import torch

from ..algorithms.base import Algorithm
from ..sim.work import Work


def fedasync_mix(algo: Algorithm, work: Work, alpha: float) -> None:
    """x <- (1 - alpha) x + alpha x_k (Xie et al. 2019, Algorithm 1), x_k the one upload."""
    w = algo.global_model()
    xk = work.uploads.tensors[0][0].to(w.dtype)
    algo.set_global(w if alpha == 0 else xk.clone() if alpha == 1 else
                    (1 - alpha) * w + alpha * xk)


def fedbuff_apply(algo: Algorithm, buffer: list[tuple[Work, Any, float]], counts,
                  server_lr: float) -> None:
    """x <- x + eta sum_k n_k s_k (x_k - x_start_k) / sum_k n_k (Nguyen et al. 2022, with the
    staleness weights s_k and the clients' sample counts n_k)."""
    w = algo.global_model()
    total = torch.zeros_like(w, dtype=torch.float64)
    norm = 0.0
    for work, start, s in buffer:
        n_k = float(counts[int(work.sel[0])])
        total += (n_k * s) * (work.uploads.tensors[0][0].double() - start.double())
        norm += n_k
    algo.set_global((w.double() + server_lr * total / norm).to(w.dtype))

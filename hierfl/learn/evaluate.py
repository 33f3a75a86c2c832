"""Evaluation of a global model (on all rows) and of personal models (each on its own client)."""
from __future__ import annotations

import numpy as np
import torch

from ..data.federated import FederatedData
from ..models.functional import Model
from ..models.threads import one_thread
from .batches import full_plan, gather, model_input, weight_dtype

CHUNK = 65536
SAMPLE_ROWS = 512        # the rows of sample_loss: a round's check costs a forward pass of these


def _forward(model: Model, w: torch.Tensor, x: torch.Tensor,
             buffers: torch.Tensor | None) -> torch.Tensor:
    """Outputs of an evaluation: a stateful model's with its running statistics (eval mode)."""
    if getattr(model, "stateful", False):
        return model.forward(w, x, buffers)
    return model.forward(w, x)


def _correct(model: Model, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
             buffers: torch.Tensor | None) -> torch.Tensor:
    if getattr(model, "stateful", False):
        return (model.forward(w, x, buffers).argmax(-1) == y).to(torch.float32)
    return model.correct(w, x, y)


@one_thread()
@torch.no_grad()
def sample_loss(model: Model, w: torch.Tensor, data: FederatedData,
                buffers: torch.Tensor | None = None, rows: int = SAMPLE_ROWS) -> float:
    """The training loss of global model `w` on a fixed sample of the training rows: `rows`
    rows evenly spaced over all of them (every row when there are fewer), so every round's
    value is on the same rows; no random draw. The instability check of a round that is not
    evaluated (outputs/stability.py)."""
    n = len(data.x)
    if n == 0:
        return float("nan")
    idx = np.unique(np.linspace(0, n - 1, min(n, rows)).round().astype(np.int64))
    x, y = model_input(data.x[idx]).unsqueeze(0), data.y[idx].unsqueeze(0)
    out = _forward(model, w.unsqueeze(0), x, buffers)
    return float(model.sample_loss(out, y).double().mean())


@one_thread()            # full-data passes: the numbers of --threads 1 (models/threads.py)
@torch.no_grad()
def global_metrics(model: Model, w: torch.Tensor, data: FederatedData,
                   buffers: torch.Tensor | None = None, per_client: bool = False):
    """(sample-weighted training loss over all clients, test accuracy on the union of tests).
    For regression the second number is the test MSE (the recorder writes it to test_mse).
    `buffers`: a stateful model's running statistics (exec/carry.py: the server's).
    per_client=True (classification): a third item, each client's count of correctly
    classified test rows ((N,) float64, by the test offsets), from the same predictions (no
    second forward pass); None for regression or without test rows."""
    w1 = w.unsqueeze(0)
    total = 0.0
    for i in range(0, len(data.x), CHUNK):
        x, y = model_input(data.x[i:i + CHUNK]).unsqueeze(0), data.y[i:i + CHUNK].unsqueeze(0)
        total += float(model.sample_loss(_forward(model, w1, x, buffers), y).double().sum())
    loss = total / max(len(data.x), 1)
    n_test = len(data.x_test)
    if n_test == 0:
        return (loss, float("nan"), None) if per_client else (loss, float("nan"))
    score = 0.0
    keep = per_client and model.task == "classification"
    hits = np.zeros(data.n_clients) if keep else None
    for i in range(0, n_test, CHUNK):
        x, y = model_input(data.x_test[i:i + CHUNK]).unsqueeze(0), \
            data.y_test[i:i + CHUNK].unsqueeze(0)
        if model.task == "classification":
            c = _correct(model, w1, x, y, buffers)
            score += float(c.sum())
            if keep:
                add_client_sums(hits, c.reshape(-1).double().numpy(), data.test_offsets, i)
        else:
            score += float(model.sample_loss(_forward(model, w1, x, buffers), y).double().sum())
    if not per_client:
        return loss, score / n_test
    return loss, score / n_test, hits


def add_client_sums(out: np.ndarray, values: np.ndarray, offsets: np.ndarray, at: int) -> None:
    """Add to out[k] the sum of `values` (rows at..at+len-1) over client k's rows
    offsets[k]:offsets[k+1], for the clients these rows touch: one chunk's prefix sums, so
    memory stays a chunk's (np.add.reduceat would give a client with no rows its neighbour's
    row). Sums of 0/1 are exact in float64."""
    n = len(values)
    if n == 0:
        return
    k0 = int(np.searchsorted(offsets, at, "right")) - 1
    k1 = int(np.searchsorted(offsets, at + n, "left"))
    cs = np.concatenate([[0.0], np.cumsum(values, dtype=np.float64)])
    edges = np.clip(offsets[max(k0, 0):k1 + 1] - at, 0, n)
    out[max(k0, 0):max(k0, 0) + len(edges) - 1] += cs[edges[1:]] - cs[edges[:-1]]


@one_thread()
@torch.no_grad()
def personal_accuracy(model: Model, personal: torch.Tensor, data: FederatedData,
                      chunk_clients: int = 256, buffers: torch.Tensor | None = None,
                      per_client: bool = False):
    """Each client's personal model on its own test split, sample-weighted over all clients
    (accuracy; for regression the MSE, written to personal_test_mse). `buffers`: a stateful
    model's running statistics, (Q,) shared or (N, Q) each client's. per_client=True: also
    each client's count of correct test rows ((N,) float64; None for regression)."""
    off, counts = data.test_offsets, data.test_counts
    total, n = 0.0, int(counts.sum())
    keep = per_client and model.task == "classification"
    hits = np.zeros(data.n_clients) if keep else None
    if n == 0:
        return (float("nan"), None) if per_client else float("nan")
    for lo in range(0, data.n_clients, chunk_clients):
        ks = np.arange(lo, min(lo + chunk_clients, data.n_clients))
        width = int(counts[ks].max())
        if width == 0:
            continue
        pos = np.arange(width)
        valid = pos[None, :] < counts[ks][:, None]
        rows = torch.from_numpy(np.where(valid, off[ks][:, None] + pos[None, :], 0))
        x, y = model_input(gather(data.x_test, rows)), gather(data.y_test, rows)
        vm = torch.from_numpy(valid).to(weight_dtype(x))
        b = buffers[torch.from_numpy(ks)] if buffers is not None and buffers.dim() == 2 \
            else buffers
        if model.task == "classification":
            c = _correct(model, personal[ks], x, y, b) * vm
            total += float(c.sum())
            if keep:
                hits[ks] = c.double().sum(1).numpy()
        else:
            total += float((model.sample_loss(_forward(model, personal[ks], x, b), y) * vm).sum())
    return (total / n, hits) if per_client else total / n


@torch.no_grad()
def client_gradients(model: Model, w: torch.Tensor, data: FederatedData,
                     chunk_clients: int = 64) -> torch.Tensor:
    """(N, P) full-data gradients grad F_k(w) of every client at the global model w."""
    out = []
    for lo in range(0, data.n_clients, chunk_clients):
        ks = np.arange(lo, min(lo + chunk_clients, data.n_clients))
        b = full_plan(data.offsets, ks, data.x, data.y).at(0)
        _, g = model.loss_grad(w.expand(len(ks), -1).contiguous(), b.x, b.y, b.m)
        out.append(g.double())
    return torch.cat(out)


@one_thread()
def dissimilarity(model: Model, w: torch.Tensor, data: FederatedData) -> tuple[float, float]:
    """FedProx's B(w) = sqrt(E_k ||grad F_k(w)||^2) / ||grad f(w)|| with E_k and f weighted by
    p_k = n_k / n, and E_k ||grad F_k(w) - grad f(w)||^2."""
    g = client_gradients(model, w, data)
    p = torch.from_numpy(data.counts / data.counts.sum()).double()
    gf = p @ g
    e_sq = float(p @ (g * g).sum(1))
    var = float(p @ ((g - gf) ** 2).sum(1))
    return (e_sq ** 0.5) / max(float(gf.norm()), 1e-300), var

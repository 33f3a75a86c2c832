"""The floor: a minimal hand-written batched torch loop doing a workload's arithmetic with no
simulator, no executor, no programs and no bookkeeping.

Per round: the same client sample as hierfl (seeding "sample"), every selected client's
parameters stacked in one (C, P) tensor, epoch-wise shuffled minibatches (argsort of torch.rand
keys from one generator, clients of one size at once), gathered a chunk of steps at a time,
clients sorted by step budget so that the clients still training are a prefix (the working
tensor shrinks as the others finish), the closed-form gradient of a one-layer softmax model or
autograd through stacked bmm for an MLP, FedProx's prox gradient or SCAFFOLD's correction when
asked, and the n_k-weighted mean (FedAvg, FedProx) or SCAFFOLD's server update.
The global model is evaluated at the same rounds as hierfl evaluates it (training loss over all
training rows, accuracy on the union of the test rows).

`batches=` may instead take a callable giving hierfl's own minibatch plan: with the same
batches the floor reproduces hierfl's final parameters (an arithmetic check of the benchmark,
not timed)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from hierfl import seeding

CHUNK_ELEMS = 1 << 20       # minibatch input elements gathered at once


@dataclass
class FloorResult:
    w: torch.Tensor
    train_s: float = 0.0              # wall seconds inside the local-training loops
    eval_s: float = 0.0
    wall_s: float = 0.0
    steps: int = 0                    # client local steps
    updates: int = 0                  # client updates (one per client per round)
    evals: list[tuple[int, float, float]] = field(default_factory=list)


class Net:
    """Views of a flat (C, P) parameter matrix as layers (weight (out, in) row-major, bias)."""

    def __init__(self, widths: list[int]):
        self.widths = widths
        self.shapes = list(zip(widths[:-1], widths[1:]))
        self.n_params = sum(o * i + o for i, o in self.shapes)

    def layers(self, w: torch.Tensor):
        c, pos, out = w.shape[0], 0, []
        for i, o in self.shapes:
            wt = w[:, pos:pos + o * i].view(c, o, i)
            b = w[:, pos + o * i:pos + o * i + o]
            pos += o * i + o
            out.append((wt, b))
        return out

    def forward(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        h = x
        ls = self.layers(w)
        for j, (wt, b) in enumerate(ls):
            h = torch.baddbmm(b.unsqueeze(1), h, wt.transpose(1, 2))
            if j < len(ls) - 1:
                h = torch.relu(h)
        return h

    def grad(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
             m: torch.Tensor) -> torch.Tensor:
        """Gradient of sum_b m_b CE(f(x_b), y_b), per client."""
        if len(self.shapes) == 1:                     # closed form: dz = m (softmax - onehot)
            ((wt, b),) = self.layers(w)
            z = torch.baddbmm(b.unsqueeze(1), x, wt.transpose(1, 2))
            m3 = m.unsqueeze(-1)
            dz = torch.softmax(z, -1) * m3
            dz.scatter_add_(-1, y.unsqueeze(-1), -m3)
            gw = torch.bmm(dz.transpose(1, 2), x)
            return torch.cat([gw.reshape(w.shape[0], -1), dz.sum(1)], 1)
        with torch.enable_grad():                     # autograd through stacked bmm
            wg = w.detach().requires_grad_(True)
            z = self.forward(wg, x)
            nll = torch.logsumexp(z, -1) - z.gather(-1, y.unsqueeze(-1)).squeeze(-1)
            (g,) = torch.autograd.grad((nll * m).sum(), wg)
        return g


def draw_batches(gen: torch.Generator, lo: np.ndarray, n: np.ndarray, steps: np.ndarray,
                 b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """rows (C, S, B) and weights (C, S, B): epoch-wise permutations cut into batches of b
    (the last batch of an epoch may be short). Clients of one size are shuffled together:
    argsort of uniform keys, one per (client, epoch, row)."""
    c, s_max = len(n), int(steps.max())
    rows = torch.zeros(c, s_max, b, dtype=torch.long)
    wts = torch.zeros(c, s_max, b)
    for size in np.unique(n):
        idx = np.flatnonzero(n == size)
        size = int(size)
        pe = -(-size // b)
        epochs = int(-(-steps[idx].max() // pe))
        perm = torch.rand(len(idx), epochs, size, generator=gen).argsort(-1)
        pad = torch.full((len(idx), epochs, pe * b), -1, dtype=torch.long)
        pad[:, :, :size] = perm
        width = min(epochs * pe, s_max)
        pad = pad.view(len(idx), epochs * pe, b)[:, :width]
        live = torch.arange(width).view(1, -1, 1) < torch.from_numpy(steps[idx]).view(-1, 1, 1)
        valid = (pad >= 0) & live
        first = torch.from_numpy(lo[idx]).view(-1, 1, 1)
        ti = torch.from_numpy(idx)
        rows[ti, :width] = torch.where(valid, pad + first, torch.where(live, first, 0))
        wts[ti, :width] = valid / valid.sum(-1, keepdim=True).clamp_min(1)
    return rows, wts


@torch.no_grad()
def evaluate(net: Net, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, xt: torch.Tensor,
             yt: torch.Tensor, chunk: int = 65536) -> tuple[float, float]:
    w1, loss, correct = w.unsqueeze(0), 0.0, 0.0
    for i in range(0, len(x), chunk):
        z = net.forward(w1, x[i:i + chunk].unsqueeze(0))[0]
        yy = y[i:i + chunk]
        loss += float((torch.logsumexp(z, -1) - z.gather(-1, yy.unsqueeze(-1)).squeeze(-1))
                      .double().sum())
    for i in range(0, len(xt), chunk):
        z = net.forward(w1, xt[i:i + chunk].unsqueeze(0))[0]
        correct += float((z.argmax(-1) == yt[i:i + chunk]).sum())
    return loss / max(len(x), 1), correct / max(len(xt), 1)


def run_floor(net: Net, w0: torch.Tensor, x: torch.Tensor, y: torch.Tensor, offsets: np.ndarray,
              xt: torch.Tensor, yt: torch.Tensor, *, seed: int, rounds: int, per_round: int,
              batch: int, lr: float, epochs: int | None = None, steps: int | None = None,
              algorithm: str = "fedavg", mu: float = 0.0, eval_every: int = 1,
              batches: Callable[[int, np.ndarray, np.ndarray], tuple] | None = None
              ) -> FloorResult:
    """Train `rounds` rounds; algorithm: fedavg | fedprox (mu) | scaffold (option II)."""
    t_start = time.perf_counter()
    n_clients = len(offsets) - 1
    counts = np.diff(offsets)
    gen = torch.Generator().manual_seed(seed)
    w = w0.clone()
    res = FloorResult(w)
    c_srv = torch.zeros_like(w) if algorithm == "scaffold" else None
    c_cli = torch.zeros(n_clients, w.numel()) if algorithm == "scaffold" else None

    def ev(t: int) -> None:
        if t % eval_every == 0 or t == rounds:
            t0 = time.perf_counter()
            res.evals.append((t, *evaluate(net, w, x, y, xt, yt)))
            res.eval_s += time.perf_counter() - t0

    ev(0)
    for t in range(1, rounds + 1):
        t0 = time.perf_counter()
        m = min(per_round, n_clients)
        sel = np.sort(seeding.rng(seed, "sample", t).choice(n_clients, m, replace=False)) \
            if m < n_clients else np.arange(n_clients)
        n = counts[sel]
        k = steps_of(n, batch, epochs, steps)
        if batches is not None:
            rows, wts = batches(t, sel, k)
        else:
            rows, wts = draw_batches(gen, offsets[sel], n, k, batch)
        order = np.argsort(-k, kind="stable")           # longest budgets first
        rows, wts, ks = rows[order], wts[order], k[order]
        corr = (c_srv - c_cli[sel[order]]) if c_cli is not None else None
        wk = w.expand(m, -1).clone()
        wk = train_round(net, wk, w, x, y, rows, wts, ks, lr, mu, corr)
        res.steps += int(k.sum())
        res.updates += m
        if algorithm == "scaffold":
            kk = torch.from_numpy(ks).float().unsqueeze(1)
            c_old = c_cli[sel[order]]
            c_new = c_old - c_srv + (w - wk) / (kk * lr)
            c_cli[sel[order]] = c_new
            w = w + (wk - w).double().mean(0).float()
            c_srv = c_srv + ((c_new - c_old).double().sum(0) / n_clients).float()
        else:
            p = torch.from_numpy(n[order] / n.sum())
            w = (p @ wk.double()).float()
        res.train_s += time.perf_counter() - t0
        ev(t)
    res.w = w
    res.wall_s = time.perf_counter() - t_start
    return res


def train_round(net: Net, wk: torch.Tensor, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                rows: torch.Tensor, wts: torch.Tensor, ks: np.ndarray, lr: float, mu: float,
                corr: torch.Tensor | None) -> torch.Tensor:
    """Local SGD of C clients sorted by budget ks (descending): the clients that still have
    steps are a prefix; when the last of them finish, their rows are stored and the working
    tensor shrinks to the rest. Minibatches are gathered a chunk of steps at a time."""
    final = torch.empty_like(wk)
    a, i = len(ks), 0
    chunk = max(1, CHUNK_ELEMS // max(a * rows.shape[2] * x.shape[1], 1))
    while a > 0:
        end = int(ks[a - 1])
        c = corr[:a] if corr is not None else None
        for i0 in range(i, end, chunk):
            r = rows[:a, i0:min(i0 + chunk, end)]
            for xb, yb, mb in zip(x[r].unbind(1), y[r].unbind(1),
                                  wts[:a, i0:min(i0 + chunk, end)].unbind(1)):
                g = net.grad(wk, xb, yb, mb)
                if mu:
                    g += mu * (wk - w)
                if c is not None:
                    g += c
                wk = wk - lr * g
        i = end
        left = int((ks > end).sum())
        final[left:a] = wk[left:]
        wk, a = wk[:left], left
    return final


def steps_of(n: np.ndarray, batch: int, epochs: int | None, steps: int | None) -> np.ndarray:
    if steps is not None:
        return np.full(len(n), steps, dtype=np.int64)
    return (epochs or 1) * -(-n // batch)

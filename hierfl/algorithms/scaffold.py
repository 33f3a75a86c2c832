"""SCAFFOLD (Karimireddy et al., ICML 2020, arXiv 1910.06378).

Client k in round t starts from y = x (the global model) and takes K steps of

    y <- y - eta_l (g_k(y) - c_k + c),

i.e. SGD on the local objective F_k(y) + <c - c_k, y> (a `Linear` term). Its new control variate:
    option I : c_k+ = grad F_k(x)                          (one extra full-data gradient, charged)
    option II: c_k+ = c_k - c + (x - y) / (K eta_l)         (K = the steps this client actually did)
It sends dy = y - x and dc = c_k+ - c_k. Server (S: the clients whose uploads arrived, N: all):
    x <- x + eta_g (1/|S|) sum_S dy,      c <- c + (|S|/N) (1/|S|) sum_S dc.
The means are unweighted, as in the paper: with all clients taking part every round and exact
arithmetic, the fixed point minimises (1/N) sum_k F_k (the paper's objective), which is
sum_k p_k F_k when the n_k are equal.

State: server c (P,); client c_k (N, P); both start at 0.
Messages: (x, c) down, (dy, dc) up: two model-sized tensors each way."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from ..learn.batches import Batch
from ..learn.solver import SolveResult, State, TermsProgram
from ..learn.terms import Linear
from ..config.fields import positive, spec
from .base import Algorithm, RoundCtx, Upload, stack_start


@dataclass(frozen=True)
class ScaffoldParams:
    option: Literal[1, 2] = spec(2, "control variate update: 1 = grad F_k(x) (an extra full "
                                 "gradient), 2 = c_k - c + (x - y)/(K eta_l) (the paper's choice)")
    server_lr: float = spec(1.0, "global step size eta_g", check=positive)


@dataclass
class ServerState:
    c: torch.Tensor             # (P,) server control variate


@dataclass
class ClientState:
    c: torch.Tensor             # (N, P) client control variates c_k


@dataclass(frozen=True)
class FullGradProgram(TermsProgram):
    """A TermsProgram that also records grad F_k at the start point (option I): state (y, g)."""

    def init(self) -> State:
        return (self.start.clone(), torch.zeros_like(self.start))

    def prepare(self, s: State, full: Batch) -> State:
        fn = self.grad_fn or self.model.loss_grad
        _, g = fn(s[0], full.x, full.y, full.m)
        return (s[0], g)

    def step(self, s: State, batch: Batch, lr: float) -> State:
        (y,) = super().step((s[0],), batch, lr)
        return (y, s[1])

    def grad_h(self, s: State, full: Batch) -> torch.Tensor:
        return super().grad_h((s[0],), full)


class Scaffold(Algorithm):
    name = "scaffold"
    Params = ScaffoldParams
    upload_tensors = 2

    def init(self, w0: torch.Tensor) -> None:
        super().init(w0)
        self.server = ServerState(torch.zeros_like(w0))
        self.clients = ClientState(torch.zeros(self.setup.n_clients, w0.numel(), dtype=w0.dtype))

    def downlink(self) -> tuple[torch.Tensor, ...]:
        return (self.w, self.server.c)

    def program(self, clients: torch.Tensor, start: torch.Tensor, ctx: RoundCtx) -> TermsProgram:
        correction = Linear(self.server.c - self.clients.c.index_select(0, clients))
        cls = FullGradProgram if self.p.option == 1 else TermsProgram
        return cls(self.setup.model, stack_start(start, len(clients)), (correction,))

    def finish(self, clients: torch.Tensor, start: torch.Tensor, res: SolveResult,
               ctx: RoundCtx) -> Upload:
        y = res.state[0]
        c_old = self.clients.c.index_select(0, clients)  # a third of the time of c[clients]
        if self.p.option == 1:
            c_new = res.state[1]
        else:
            k = res.steps.to(y.dtype).unsqueeze(1)
            c_new = c_old - self.server.c + (start - y) / (k.clamp_min(1) * ctx.lr)
            c_new = torch.where(k > 0, c_new, c_old)     # no step done: nothing learnt
        self.clients.c.index_copy_(0, clients, c_new)
        return Upload((y - start, c_new - c_old))

    def aggregate(self, clients: torch.Tensor, up: Upload, ctx: RoundCtx) -> None:
        if len(clients) == 0:
            return
        dy, dc = up.tensors
        self.w = self.w + self.p.server_lr * dy.double().mean(0).to(self.w.dtype)
        self.server.c = self.server.c + (dc.double().sum(0) / self.setup.n_clients).to(self.w.dtype)

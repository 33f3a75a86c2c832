"""ProxSkip / Scaffnew (K. Mishchenko, G. Malinovsky, S. Stich, P. Richtarik, ICML 2022,
arXiv 2202.09357), Algorithm 1 with psi the consensus indicator (Scaffnew).

Problem: min_x (1/n) sum_k f_k(x). Every client k keeps a control variate h_k (sum_k h_k = 0
from h_k = 0) and, at every step,

    xhat_k <- x_k - gamma (grad f_k(x_k) - h_k)             (gamma = train.local.lr)

then one coin theta ~ Bernoulli(p), drawn once per step for all clients, says whether to
communicate. On heads:
    xbar   = (1/n) sum_k (xhat_k - (gamma/p) h_k)           (the prox of psi: the average)
    h_k   <- h_k + (p/gamma) (xbar - xhat_k)                 (xhat_k: the iterate before the shift)
    x_k   <- xbar;
on tails x_k <- xhat_k. Only the heads cost a message, so here one round is one communication:
its local steps are the draws until the first head (geometric, mean 1/p, seeded from the
scenario seed and the round, the same for every client of the round; `round_steps`), and the
engine charges exactly those steps. train.local.steps / epochs are not used.

Messages: xbar down (one model); u_k = xhat_k - (gamma/p) h_k up (one model). The new h_k needs
only u_k and xbar: h_k + (p/gamma)(xbar - xhat_k) = (p/gamma)(xbar - u_k), so the client
computes it when xbar arrives; the simulation writes it when the server averages (the same
numbers, no extra bytes).

Partial participation (not in the paper, which has every client every step): the mean is over
the clients whose upload arrived, and only they update h_k; the others keep theirs. The mean is
unweighted, as in the paper (the minimiser of the unweighted sum of the f_k).

State: the global xbar (w); per client h_k (N, P), from 0.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from .. import seeding
from ..learn.solver import SolveResult, TermsProgram
from ..learn.terms import Linear
from .base import Algorithm, Capabilities, RoundCtx, State, Upload, stack_start
from .params import ProxSkipParams

MAX_STEPS = 1_000_000        # a guard on the geometric draw (p is at least 1e-6)




@dataclass(frozen=True)
class ClientState:
    h: torch.Tensor             # (N, P) control variates h_k


def communication_steps(seed: int, t: int, p: float) -> int:
    """The local steps of round t: coins drawn one per step until the first head."""
    g = seeding.rng(seed, "proxskip-coin", t)
    n = 1
    while g.random() >= p and n < MAX_STEPS:
        n += 1
    return n


class ProxSkip(Algorithm):
    name = "proxskip"
    Params = ProxSkipParams
    caps = Capabilities(supports_gamma=False)
    p: ProxSkipParams

    def init_state(self, w0: torch.Tensor) -> State:
        h = torch.zeros(self.setup.n_clients, w0.numel(), dtype=w0.dtype)
        return State(w0.clone(), clients=ClientState(h))

    def round_steps(self, t: int, r: int, planned: np.ndarray) -> np.ndarray:
        return np.full_like(planned, communication_steps(self.setup.seed, t, self.p.p))

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        # grad f_k(x) - h_k: the gradient of f_k(x) + <-h_k, x>
        shift = Linear(-state.clients.h.index_select(0, clients))
        return TermsProgram(self.setup.model, stack_start(start, len(clients)), (shift,))

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        h = state.clients.h.index_select(0, clients)
        xhat = res.state[0]
        u = (xhat.double() - (ctx.lr / self.p.p) * h.double()).to(xhat.dtype)
        return state, Upload((u,))

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0:
            return state
        u = up.tensors[0].double()
        xbar = u.mean(0)
        h_new = (self.p.p / ctx.lr) * (xbar - u)
        table = state.clients.h
        table.index_copy_(0, clients, h_new.to(table.dtype))    # the donated table
        return replace(state, w=xbar.to(state.w.dtype), clients=ClientState(table))

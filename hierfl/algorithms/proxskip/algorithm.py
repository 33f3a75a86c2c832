"""ProxSkip / Scaffnew: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ... import seeding
from ...learn.solver import SolveResult, TermsProgram
from ...learn.terms import Linear
from ..base import Algorithm, RoundCtx, State, Upload, stack_start
from . import ProxSkipParams

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

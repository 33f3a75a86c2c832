"""SCAFFOLD: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...learn.batches import Batch
from ...learn.solver import SolveResult, TermsProgram
from ...learn.solver import State as Steps
from ...learn.terms import Linear
from ..base import Algorithm, RoundCtx, State, Upload, stack_start


@dataclass(frozen=True)
class ServerState:
    c: torch.Tensor             # (P,) server control variate


@dataclass(frozen=True)
class ClientState:
    c: torch.Tensor             # (N, P) client control variates c_k


@dataclass(frozen=True)
class FullGradProgram(TermsProgram):
    """A TermsProgram that also records grad F_k at the start point (option I): state (y, g)."""

    def init(self) -> Steps:
        return (self.start.clone(), torch.zeros_like(self.start))

    def prepare(self, s: Steps, full: Batch) -> Steps:  # type: ignore[override]
        _, g = self.model.loss_grad(s[0], full.x, full.y, full.m)
        return (s[0], g)

    def step(self, s: Steps, batch: Batch, lr: float) -> Steps:
        (y,) = super().step((s[0],), batch, lr)
        return (y, s[1])

    def run_steps(self, s: Steps, span: Batch, lr: float) -> Steps | None:
        return None                     # one step at a time (its step carries g along)

    def grad_h(self, s: Steps, full: Batch) -> torch.Tensor:
        return super().grad_h((s[0],), full)


class Scaffold(Algorithm):
    name = "scaffold"
    upload_as_is = (0, 1)       # compress: both uploads are differences already

    def init_state(self, w0: torch.Tensor) -> State:
        return State(w0.clone(), ServerState(torch.zeros_like(w0)),
                     ClientState(torch.zeros(self.setup.n_clients, w0.numel(), dtype=w0.dtype)))

    def broadcast(self, state: State) -> tuple[torch.Tensor, ...]:
        return (state.w, state.server.c)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        correction = Linear(state.server.c - state.clients.c.index_select(0, clients))
        cls = FullGradProgram if self.p.option == 1 else TermsProgram
        return cls(self.setup.model, stack_start(start, len(clients)), (correction,))

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        y = res.state[0]
        table = state.clients.c
        c_old = table.index_select(0, clients)  # a third of the time of c[clients]
        if self.p.option == 1:
            c_new = res.state[1]
        else:
            k = res.steps.to(y.dtype).unsqueeze(1)
            c_new = c_old - state.server.c + (start - y) / (k.clamp_min(1) * ctx.lr)
            c_new = torch.where(k > 0, c_new, c_old)     # no step done: nothing learnt
        table.index_copy_(0, clients, c_new)             # the donated table (base docstring)
        return replace(state, clients=ClientState(table)), Upload((y - start, c_new - c_old))

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0:
            return state
        dy, dc = up.tensors
        w = state.w + self.p.server_lr * dy.double().mean(0).to(state.w.dtype)
        c = state.server.c + (dc.double().sum(0) / self.setup.n_clients).to(state.w.dtype)
        return replace(state, w=w, server=ServerState(c))

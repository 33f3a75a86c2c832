"""APFL: adaptive personalised federated learning: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...learn.batches import Batch
from ...learn.solver import ProgramBase, SolveResult
from ...learn.solver import State as Steps
from ...models.functional import Model
from ..base import Algorithm, RoundCtx, State, Upload, set_rows, stack_start
from . import APFLParams


@dataclass(frozen=True)
class APFLProgram(ProgramBase):
    """State (w, v, alpha): alpha is (C, 1)."""

    model: Model
    start: torch.Tensor          # (C, P) w at the round start
    v0: torch.Tensor             # (C, P)
    alpha0: torch.Tensor         # (C, 1)
    adaptive: bool
    alpha_lr: float | None
    grad_evals_per_step: int = 2

    def _grad(self, w: torch.Tensor, b: Batch) -> torch.Tensor:
        return self.model.loss_grad(w, b.x, b.y, b.m)[1]

    def init(self) -> Steps:
        return (self.start.clone(), self.v0.clone(), self.alpha0.clone())

    def step(self, s: Steps, batch: Batch, lr: float) -> Steps:
        w, v, a = s
        vbar = a * v + (1.0 - a) * w
        g_w = self._grad(w, batch)
        g_bar = self._grad(vbar, batch)
        w_new = w - lr * g_w
        v_new = v - lr * a * g_bar
        if self.adaptive:
            step = self.alpha_lr if self.alpha_lr is not None else lr
            a = (a - step * ((v - w) * g_bar).sum(1, keepdim=True)).clamp(0.0, 1.0)
        return (w_new, v_new, a)


@dataclass(frozen=True)
class APFLClients:
    v: torch.Tensor              # (N, P) personal models
    w_local: torch.Tensor        # (N, P) local models at the end of the last local step
    alpha: torch.Tensor          # (N,) mixing weights


class APFL(Algorithm):
    name = "apfl"
    p: APFLParams

    def init_state(self, w0: torch.Tensor) -> State:
        n = self.setup.n_clients
        return State(w0.clone(), clients=APFLClients(
            w0.expand(n, -1).clone(), w0.expand(n, -1).clone(),
            torch.full((n,), self.p.alpha, dtype=w0.dtype)))

    def personal(self, state: State) -> torch.Tensor:
        cs = state.clients
        a = cs.alpha.unsqueeze(1)
        return a * cs.v + (1.0 - a) * cs.w_local

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> APFLProgram:
        return APFLProgram(self.setup.model, stack_start(start, len(clients)),
                           state.clients.v[clients].clone(),
                           state.clients.alpha[clients].unsqueeze(1).clone(),
                           self.p.adaptive, self.p.alpha_lr)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        w, v, a = res.state
        cs, on = state.clients, res.steps > 0     # a client that took no step keeps its own
        k = clients[on]                           # (its w_local was set to the start model)
        cs = APFLClients(set_rows(cs.v, k, v[on]), set_rows(cs.w_local, k, w[on]),
                         set_rows(cs.alpha, k, a.squeeze(1)[on]))
        return replace(state, clients=cs), Upload((w,))

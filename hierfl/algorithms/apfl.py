"""APFL: adaptive personalised federated learning (Y. Deng, M. M. Kamani, M. Mahdavi 2020,
arXiv 2003.13461).

Objectives: the global model w minimises sum_k p_k f_k(w); client k's personal model is the
mixture v_bar_k = alpha_k v_k + (1 - alpha_k) w with v_k = argmin_v f_k(alpha_k v + (1 - alpha_k) w).

Local step of client k on a minibatch D (both gradients on the same D, grad_evals_per_step = 2),
from (w_k, v_k, alpha_k) simultaneously:
    v_bar <- alpha v + (1 - alpha) w_k
    w_k   <- w_k - eta grad f_k(w_k; D)
    v_k   <- v_k - eta alpha grad f_k(v_bar; D)               (chain rule through the mixture)
    alpha <- clip(alpha - eta_alpha <v_k - w_k, grad f_k(v_bar; D)>, 0, 1)    (`adaptive` only)
w_k starts each round from the server's w^t; tau = train.local.steps steps per round.
Server: w^{t+1} = sum_{k in S} n_k w_k / sum_S n_k (FedAvg). With alpha = 0 (not adaptive) the
global model is exactly FedAvg's.

State: the global w; per client v_k and the local model w_k (N, P), created at init as copies of
w^0, and alpha_k (N,) (the `alpha` hyperparameter at init; it changes only when `adaptive`). They
change only in rounds where client k trains.
Personal model (`personal_models`): v_bar_k = alpha_k v_k + (1 - alpha_k) w_k with the client's
local w_k at the end of its last local step -- Algorithm 1's output v_bar_i^(T), which is updated
only at local steps (a synchronisation replaces w_k by the global model but does not recompute
v_bar). Never-trained clients keep v_bar = w^0. With alpha = 0, v_bar_k is the client's last
local FedAvg model.
Messages: w down (one model), w_k up (one model); v_k and alpha_k stay on the client.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..learn.batches import Batch
from ..learn.solver import ProgramBase, SolveResult
from ..learn.solver import State as Steps
from ..models.functional import Model
from .base import Algorithm, Capabilities, RoundCtx, State, Upload, set_rows, stack_start
from .params import APFLParams


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
    Params = APFLParams
    caps = Capabilities(personalised=True, supports_gamma=False)
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

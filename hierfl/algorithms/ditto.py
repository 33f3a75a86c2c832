"""Ditto: fair and robust federated learning through personalisation (T. Li, S. Hu, A. Beirami,
V. Smith, ICML 2021, arXiv 2012.04221).

Objectives: global  min_w sum_k p_k F_k(w);  personal  v_k = argmin_v F_k(v) + (lam/2) ||v - w*||^2.

Local step of client k on a minibatch D (both gradients on the same D, grad_evals_per_step = 2),
with w^t the model of this round's downlink (the anchor, fixed during the round):
    v_k <- v_k - eta_p (grad F_k(v_k; D) + lam (v_k - w^t))        (eta_p = `personal_lr`)
    w_k <- w_k - eta grad F_k(w_k; D)                               (eta = train.local.lr)
w_k starts each round from w^t; v_k persists across rounds. Server: w^{t+1} = n_k-weighted mean
of the w_k over the clients that reported (FedAvg), so Ditto's global model is FedAvg's.
The personal step is a contraction towards w^t only if eta_p * lam < 2; with eta_p * lam = 1 one
step gives v = w^t - grad F_k(v; D) / lam, i.e. v -> w^t as lam -> infinity.

State: the global w; per client v_k (N, P), created at init as copies of w^0 and changed only in
rounds where the client trains (never-trained clients keep w^0).
Messages: w down (one model), w_k up (one model); v_k never leaves the client.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..learn.batches import Batch
from ..learn.solver import ProgramBase, SolveResult, TermsProgram
from ..learn.solver import State as Steps
from ..learn.terms import Prox
from ..models.functional import Model
from ._personal import PersonalAlgorithm, PersonalState
from .base import RoundCtx, State, Upload, set_rows, stack_start
from .params import DittoParams


@dataclass(frozen=True)
class DittoProgram(ProgramBase):
    """State (w, v): the global copy and the personal model of C clients."""

    model: Model
    start: torch.Tensor          # (C, P) w^t, also the anchor of the personal prox term
    v0: torch.Tensor             # (C, P)
    lam: float
    personal_lr: float | None
    grad_evals_per_step: int = 2

    def init(self) -> Steps:
        return (self.start.clone(), self.v0.clone())

    def step(self, s: Steps, batch: Batch, lr: float) -> Steps:
        w, v = s
        plr = self.personal_lr if self.personal_lr is not None else lr
        personal = TermsProgram(self.model, v, (Prox(self.lam, self.start),))
        (v,) = personal.step((v,), batch, plr)
        (w,) = TermsProgram(self.model, w, ()).step((w,), batch, lr)
        return (w, v)


class Ditto(PersonalAlgorithm):
    name = "ditto"
    Params = DittoParams
    p: DittoParams

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> DittoProgram:
        return DittoProgram(self.setup.model, stack_start(start, len(clients)),
                            state.clients.personal[clients].clone(), self.p.lam,
                            self.p.personal_lr)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        w, v = res.state
        personal = PersonalState(set_rows(state.clients.personal, clients, v))
        return State(state.w, state.server, personal), Upload((w,))

"""pFedMe: personalised FL with Moreau envelopes (T. Dinh, N. Tran, T. Nguyen, NeurIPS 2020,
arXiv 2006.08848).

Objective: min_w sum_k p_k F_k(w),  F_k(w) = min_theta { f_k(theta) + (lam/2) ||theta - w||^2 }.

Local work of client k from the round's w^t (R = train.local.steps local rounds, each on one
minibatch D): theta_k <- K = `personal_steps` gradient steps (step `personal_lr`, warm-started from
the previous theta) on  f_k(theta; D) + (lam/2) ||theta - w_k||^2 [+ (mu/2) ||theta||^2];
then w_k <- w_k - eta lam (w_k - theta_k) (eta = train.local.lr). Shared with pFedMac through
`learn.envelope.EnvelopeProgram` (coupling "prox").
Server: w^{t+1} = (1 - beta) w^t + beta * sum_{k in S} p_k w_k, p_k = n_k / sum_S n (weighting
"samples", the published code; the paper's Algorithm 1 writes the uniform mean 1/S: "uniform").

State: the global w; per client the personal model theta_k (N, P), created at init as copies of
w^0 and replaced by the last theta of each round the client trains in (clients that never train
keep w^0). theta starts every round from w^t, as in the published code (`set_parameters`).
Messages: w down (one model), w_k up (one model). The personal model never leaves the client.

Paper vs published code (options, paper's choice by default):
- `train_all_clients`: the published code trains every client every round (their personal
  models are refreshed and evaluated) but aggregates only the S selected ones. Unselected
  clients then receive the model and compute but upload nothing. Default false.
- `hidden_l2`: the published pFedMeOptimizer adds mu * theta to the inner gradient with
  mu = 0.001, i.e. an extra (mu/2) ||theta||^2 in the inner problem. Default 0.
"""
from __future__ import annotations

import numpy as np
import torch

from ..learn.envelope import EnvelopeProgram
from ..learn.terms import Prox
from ._personal import EnvelopeAlgorithm
from .base import RoundCtx, State, stack_start
from .params import PFedMeParams


class PFedMe(EnvelopeAlgorithm):
    name = "pfedme"
    Params = PFedMeParams
    p: PFedMeParams

    def trainees(self, selected: np.ndarray) -> np.ndarray:
        if self.p.train_all_clients:
            return np.arange(self.setup.n_clients)
        return selected

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> EnvelopeProgram:
        x0 = stack_start(start, len(clients))
        extra = (Prox(self.p.hidden_l2, torch.zeros_like(state.w)),) if self.p.hidden_l2 else ()
        return EnvelopeProgram(self.setup.model, x0, x0.clone(), self.p.lam, "prox",
                               self.p.personal_steps, self.p.personal_lr, extra)


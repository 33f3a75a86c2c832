"""FedProx (Li et al., MLSys 2020, arXiv 1812.06127).

Local objective of client k in round t (w^t: the round's global model):

    h_k(w; w^t) = F_k(w) + (mu/2) ||w - w^t||^2,
    local step  w <- w - eta (grad F_k(w) + mu (w - w^t)),

solved approximately: K steps, or fewer when `local.gamma` asks for a gamma-inexact solution
||grad h_k(w)|| <= gamma ||grad h_k(w^t; w^t)||. Server: the n_k-weighted mean of the local models
(FedAvg's rule). With mu = 0 it is FedAvg exactly.

State: the global model only. Messages: w^t down, w_k up (one model-sized tensor each way).
Stragglers (the paper's experiment) keep their partial work: `stragglers.drop: auto` drops them
for FedAvg only; the paper draws a straggler's epochs in [1, E], the published code in [1, E-1]
(`stragglers.epochs_range: paper | code`)."""
from __future__ import annotations

import torch

from ..learn.solver import TermsProgram
from ..learn.terms import Prox
from .base import Algorithm, Capabilities, RoundCtx, State, stack_start
from .params import FedProxParams


class FedProx(Algorithm):
    name = "fedprox"
    Params = FedProxParams
    # the server rule is FedAvg's weighted mean (edges may pre-sum)
    caps = Capabilities(linear_aggregate=True, asynchronous=True)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        w0 = stack_start(start, len(clients))
        return TermsProgram(self.setup.model, w0, (Prox(self.p.mu, start.clone()),))

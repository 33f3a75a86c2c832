"""FedAvg (McMahan et al., AISTATS 2017).

Client k: K SGD steps from w^t on F_k. Server: w^{t+1} = sum_{k in S_t} n_k w_k / sum n_k.
State: the global model only. Messages: w down, w_k up (one model each way)."""
from __future__ import annotations

import torch

from ..learn.solver import TermsProgram
from .base import Algorithm, Capabilities, RoundCtx, State, stack_start
from .params import FedAvgParams


class FedAvg(Algorithm):
    name = "fedavg"
    Params = FedAvgParams
    # FedProx's experiment: FedAvg drops stragglers (HierFAVG too)
    caps = Capabilities(linear_aggregate=True, drops_stragglers=True, asynchronous=True)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        return TermsProgram(self.setup.model, stack_start(start, len(clients)))

"""FedAvg: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

import torch

from ...learn.solver import TermsProgram
from ..base import Algorithm, RoundCtx, State, stack_start


class FedAvg(Algorithm):
    name = "fedavg"
    # FedProx's experiment: FedAvg drops stragglers (HierFAVG too)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        return TermsProgram(self.setup.model, stack_start(start, len(clients)))

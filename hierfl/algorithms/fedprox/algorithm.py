"""FedProx: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

import torch

from ...learn.solver import TermsProgram
from ...learn.terms import Prox
from ..base import Algorithm, RoundCtx, State, stack_start


class FedProx(Algorithm):
    name = "fedprox"
    # the server rule is FedAvg's weighted mean (edges may pre-sum)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        w0 = stack_start(start, len(clients))
        return TermsProgram(self.setup.model, w0, (Prox(self.p.mu, start.clone()),))

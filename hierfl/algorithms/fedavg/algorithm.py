"""FedAvg: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

import torch

from ...learn.solver import TermsProgram
from ..base import Algorithm, RoundCtx, State, Upload, stack_start


class FedAvg(Algorithm):
    name = "fedavg"
    # FedProx's experiment: FedAvg drops stragglers (HierFAVG too)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        return TermsProgram(self.setup.model, stack_start(start, len(clients)))


class ServerStepped(FedAvg):
    """FedAvg's clients with a server that applies its own `step(state, mean)` to the weighted
    mean of the uploads, flat or at the cloud of a hierarchy (FedOpt, FedAvgM)."""

    name = ""                   # not itself an algorithm
    batch_edges = True          # FedAvg's local round from the start row: edges batch (exec/edges)

    def step(self, state: State, mean: torch.Tensor) -> State:
        raise NotImplementedError

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0:
            return state
        return self.step(state, self.combine("cloud", up.tensors[0], self.weights(clients),
                                             state.w))

    def cloud_update(self, state: State, uploads: list[tuple[torch.Tensor, ...]],
                     weights: torch.Tensor, ctx: RoundCtx) -> State:
        if not uploads:
            return state
        stacked = torch.stack([u[0] for u in uploads])
        return self.step(state, self.combine("cloud", stacked, weights / weights.sum(),
                                             state.w, clients=False))

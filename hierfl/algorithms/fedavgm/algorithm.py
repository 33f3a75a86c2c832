"""FedAvgM: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base import RoundCtx, State, Upload, weighted_mean
from ..fedavg.algorithm import FedAvg


@dataclass(frozen=True)
class ServerState:
    v: torch.Tensor             # (P,) momentum of the server's pseudo-gradient


class FedAvgM(FedAvg):
    name = "fedavgm"
    batch_edges = True          # FedAvg's local round from the start row: edges batch (exec/edges)

    def init_state(self, w0: torch.Tensor) -> State:
        return State(w0.clone(), ServerState(torch.zeros_like(w0)))

    def step(self, state: State, mean: torch.Tensor) -> State:
        """v = beta v + (w - mean); w = w - eta v (float64 arithmetic)."""
        w = state.w.double()
        v = self.p.server_momentum * state.server.v.double() + (w - mean.double())
        w = w - self.p.server_lr * v
        dt = state.w.dtype
        return State(w.to(dt), ServerState(v.to(dt)), state.clients)

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0:
            return state
        return self.step(state, weighted_mean(up.tensors[0], self.weights(clients)))

    def cloud_update(self, state: State, uploads: list[tuple[torch.Tensor, ...]],
                     weights: torch.Tensor, ctx: RoundCtx) -> State:
        if not uploads:
            return state
        stacked = torch.stack([u[0] for u in uploads])
        return self.step(state, weighted_mean(stacked, weights / weights.sum()))

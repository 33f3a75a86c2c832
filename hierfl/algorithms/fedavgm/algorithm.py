"""FedAvgM: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base import State
from ..fedavg.algorithm import ServerStepped


@dataclass(frozen=True)
class ServerState:
    v: torch.Tensor             # (P,) momentum of the server's pseudo-gradient


class FedAvgM(ServerStepped):
    name = "fedavgm"

    def init_state(self, w0: torch.Tensor) -> State:
        return State(w0.clone(), ServerState(torch.zeros_like(w0)))

    def step(self, state: State, mean: torch.Tensor) -> State:
        """v = beta v + (w - mean); w = w - eta v (float64 arithmetic)."""
        w = state.w.double()
        v = self.p.server_momentum * state.server.v.double() + (w - mean.double())
        w = w - self.p.server_lr * v
        dt = state.w.dtype
        return State(w.to(dt), ServerState(v.to(dt)), state.clients)

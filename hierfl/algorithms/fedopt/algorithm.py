"""FedOpt: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base import Capabilities, State
from ..fedavg.algorithm import ServerStepped
from . import FedAdamParams


@dataclass(frozen=True)
class ServerState:
    m: torch.Tensor             # (P,) first moment of the pseudo-gradient
    v: torch.Tensor             # (P,) second moment


class FedOpt(ServerStepped):
    """The shared rule; subclasses give the second-moment update (`second`)."""

    name = ""                   # not itself an algorithm: fedadam, fedyogi, fedadagrad are
    Params = FedAdamParams
    caps = Capabilities(hierarchical=True)

    def init_state(self, w0: torch.Tensor) -> State:
        v0 = self.p.tau ** 2 if self.p.v0 is None else self.p.v0
        return State(w0.clone(), ServerState(torch.zeros_like(w0), torch.full_like(w0, v0)))

    def second(self, v: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def step(self, state: State, mean: torch.Tensor) -> State:
        """The server optimiser on Delta = mean - x (float64 arithmetic)."""
        x = state.w.double()
        delta = mean.double() - x
        m = self.p.beta1 * state.server.m.double() + (1 - self.p.beta1) * delta
        v = self.second(state.server.v.double(), delta * delta)
        x = x + self.p.server_lr * m / (v.sqrt() + self.p.tau)
        dt = state.w.dtype
        return State(x.to(dt), ServerState(m.to(dt), v.to(dt)), state.clients)


class FedAdam(FedOpt):
    name = "fedadam"

    def second(self, v: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
        return self.p.beta2 * v + (1 - self.p.beta2) * d2


class FedYogi(FedOpt):
    name = "fedyogi"

    def second(self, v: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
        return v - (1 - self.p.beta2) * d2 * torch.sign(v - d2)


class FedAdagrad(FedOpt):
    name = "fedadagrad"

    def second(self, v: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
        return v + d2

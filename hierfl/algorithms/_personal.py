"""Pieces shared by the personalised algorithms (not an algorithm module: the registry skips it)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..learn.solver import SolveResult
from .base import Algorithm, RoundCtx, Upload, weighted_mean


@dataclass
class PersonalState:
    """Per-client personal models, stacked (N, P): one row per client of the system."""

    personal: torch.Tensor


class PersonalAlgorithm(Algorithm):
    """Base of the algorithms that keep one personal model per client (stacked (N, P), every
    client starting from the initial global model). Personalised algorithms have no single local
    objective, so gamma stops are not defined for them."""

    personalised = True
    supports_gamma = False

    def init(self, w0: torch.Tensor) -> None:
        super().init(w0)
        self.clients = PersonalState(w0.expand(self.setup.n_clients, -1).clone())

    def personal_models(self) -> torch.Tensor:
        return self.clients.personal


def mix(w: torch.Tensor, mean: torch.Tensor, beta: float) -> torch.Tensor:
    """(1 - beta) w + beta mean, accumulated in float64 (pFedMe's and pFedMac's server step)."""
    return ((1.0 - beta) * w.double() + beta * mean.double()).to(w.dtype)


def uniform_weights(n: int) -> torch.Tensor:
    return torch.full((n,), 1.0 / n, dtype=torch.float64)


class EnvelopeAlgorithm(PersonalAlgorithm):
    """pFedMe and pFedMac: clients run the envelope program (state (x, theta)), upload x, keep
    theta as their personal model; the server mixes: w <- (1 - beta) w + beta mean_S(x_k)."""

    def finish(self, clients: torch.Tensor, start: torch.Tensor, res: SolveResult,
               ctx: RoundCtx) -> Upload:
        x, theta = res.state
        trained = res.steps > 0
        self.clients.personal[clients[trained]] = theta[trained]
        return Upload((x,), encoding=getattr(self.p, "encoding", "dense"))

    def weights(self, clients: torch.Tensor) -> torch.Tensor:
        if self.p.weighting == "uniform":
            return uniform_weights(len(clients))
        return super().weights(clients)

    def aggregate(self, clients: torch.Tensor, up: Upload, ctx: RoundCtx) -> None:
        if len(clients) == 0:
            return
        self.w = mix(self.w, weighted_mean(up.tensors[0], self.weights(clients)), self.p.beta)

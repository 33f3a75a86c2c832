"""Pieces shared by the personalised algorithms (not an algorithm module: the registry skips it)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..learn.solver import SolveResult
from .base import Algorithm, Capabilities, RoundCtx, State, Upload, set_rows, weighted_mean


@dataclass(frozen=True)
class PersonalState:
    """Per-client personal models, stacked (N, P): one row per client of the system."""

    personal: torch.Tensor


class PersonalAlgorithm(Algorithm):
    """Base of the algorithms that keep one personal model per client (stacked (N, P), every
    client starting from the initial global model). Personalised algorithms have no single local
    objective, so gamma stops are not defined for them."""

    caps = Capabilities(personalised=True, supports_gamma=False)

    def init_state(self, w0: torch.Tensor) -> State:
        return State(w0.clone(), clients=PersonalState(w0.expand(self.setup.n_clients, -1).clone()))

    def personal(self, state: State) -> torch.Tensor:
        return state.clients.personal


def keep_personal(state: State, clients: torch.Tensor, theta: torch.Tensor,
                  trained: torch.Tensor) -> State:
    """The State whose clients that did local steps (`trained`) keep `theta` as personal model."""
    table = set_rows(state.clients.personal, clients[trained], theta[trained])
    return replace(state, clients=PersonalState(table))


def mix(w: torch.Tensor, mean: torch.Tensor, beta: float) -> torch.Tensor:
    """(1 - beta) w + beta mean, accumulated in float64 (pFedMe's and pFedMac's server step)."""
    return ((1.0 - beta) * w.double() + beta * mean.double()).to(w.dtype)


def uniform_weights(n: int) -> torch.Tensor:
    return torch.full((n,), 1.0 / n, dtype=torch.float64)


class EnvelopeAlgorithm(PersonalAlgorithm):
    """pFedMe and pFedMac: clients run the envelope program (state (x, theta)), upload x, keep
    theta as their personal model; the server mixes: w <- (1 - beta) w + beta mean_S(x_k)."""

    encoding = "dense"          # how the ledger counts the uploads (pFedMac: a hyperparameter)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        x, theta = res.state
        return (keep_personal(state, clients, theta, res.steps > 0),
                Upload((x,), encoding=self.encoding))

    def weights(self, clients: torch.Tensor) -> torch.Tensor:
        if self.p.weighting == "uniform":
            return uniform_weights(len(clients))
        return super().weights(clients)

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0:
            return state
        mean = weighted_mean(up.tensors[0], self.weights(clients))
        return replace(state, w=mix(state.w, mean, self.p.beta))

"""FedDyn: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...learn.solver import SolveResult, TermsProgram
from ...learn.terms import Linear, Prox
from ..base import Algorithm, RoundCtx, State, Upload, set_rows, stack_start


def client_alpha(alpha: float, counts: torch.Tensor, clients: torch.Tensor, scaling: str,
                 dtype: torch.dtype) -> float | torch.Tensor:
    """alpha (paper), or the published codes' per-client alpha / (n_k / mean n) as (C, 1)."""
    if scaling == "paper":
        return alpha
    rel = counts[clients].double() / counts.double().mean()
    return (alpha / rel).to(dtype).unsqueeze(1)


@dataclass(frozen=True)
class ServerState:
    h: torch.Tensor             # (P,)


@dataclass(frozen=True)
class ClientState:
    g: torch.Tensor             # (N, P) the g_k of the linear term


class FedDyn(Algorithm):
    name = "feddyn"

    def init_state(self, w0: torch.Tensor) -> State:
        return State(w0.clone(), ServerState(torch.zeros_like(w0)),
                     ClientState(torch.zeros(self.setup.n_clients, w0.numel(), dtype=w0.dtype)))

    def alpha_of(self, clients: torch.Tensor, dtype: torch.dtype) -> float | torch.Tensor:
        return client_alpha(self.p.alpha, self.setup.counts, clients, self.p.alpha_scaling, dtype)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        terms = (Linear(-state.clients.g[clients]),
                 Prox(self.alpha_of(clients, state.w.dtype), start.clone()))
        return TermsProgram(self.setup.model, stack_start(start, len(clients)), terms)

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        theta = res.state[0]
        g = state.clients.g
        alpha = self.alpha_of(clients, state.w.dtype)
        g = set_rows(g, clients, g[clients] - alpha * (theta - start))
        return replace(state, clients=ClientState(g)), Upload((theta,))

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0:
            return state
        theta = up.tensors[0].double()
        w = state.w.double()
        h = state.server.h.double() - self.p.alpha / self.setup.n_clients * (theta - w).sum(0)
        return State((theta.mean(0) - h / self.p.alpha).to(state.w.dtype),
                     ServerState(h.to(state.w.dtype)), state.clients)

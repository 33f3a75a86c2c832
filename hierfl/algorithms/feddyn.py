"""FedDyn (Acar et al., ICLR 2021, arXiv 2111.04263): federated learning with dynamic
regularisation.

Client k in round t (w^t: the global model) solves, approximately by K (S)GD steps from w^t,

    theta_k = argmin_theta  F_k(theta) - <g_k, theta> + (alpha/2) ||theta - w^t||^2

(terms `Linear(-g_k)` and `Prox(alpha, w^t)`), then updates its state
    g_k <- g_k - alpha (theta_k - w^t)          (g_k tracks grad F_k at its last local model).
Server (S: the clients whose uploads arrived, m: all clients):
    h <- h - (alpha/m) sum_{k in S} (theta_k - w^t),     w^{t+1} = mean_S(theta_k) - h / alpha.
At a fixed point theta_k = w and sum_k g_k = sum_k grad F_k(w) = 0: FedDyn converges to the
minimiser of the paper's objective (1/m) sum_k F_k (unweighted).

`alpha_scaling: code` (the published code): client k uses alpha_k = alpha / (n_k / mean_j n_j)
in its prox term and in its g_k update; the server keeps alpha (its h / alpha is the mean drift,
alpha-free). Its fixed point then has sum_k n_k grad F_k(w) = 0: the sample-weighted objective.

State: server h (P,); client g_k (N, P); both start at 0.
Messages: w^t down, theta_k up (one model-sized tensor each way)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..learn.solver import SolveResult, TermsProgram
from ..learn.terms import Linear, Prox
from .base import Algorithm, RoundCtx, State, Upload, set_rows, stack_start
from .params import FedDynParams


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
    Params = FedDynParams

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

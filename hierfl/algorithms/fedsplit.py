"""FedSplit (Pathak & Wainwright, *FedSplit: an algorithmic framework for fast federated
optimization*, NeurIPS 2020, arXiv 2005.05238), Algorithm 1: Peaceman-Rachford splitting of
min_x sum_k f_k(x) (unweighted; f_k = F_k, the client's mean loss).

Client k holds z_k; in round t, from the broadcast x_t:

    z_k^{t+1/2} = prox_{s f_k}(2 x_t - z_k^t)         (local prox step)
    z_k^{t+1}   = z_k^t + 2 (z_k^{t+1/2} - x_t)        (local centring)
    x_{t+1}     = (1/N) sum_k z_k^{t+1}                 (global average)

prox_{s f_k}(v) = argmin_w f_k(w) + ||w - v||^2 / (2 s) is solved inexactly by the local steps
from w = v (`TermsProgram(terms=[Prox(1/s, v)])`, the paper's inexact variant). The client sends
dz_k = z_k^{t+1} - z_k^t; the server keeps x = (1/N) sum_k z_k exactly by x += (1/N) sum_S dz_k
(z_k^0 = x_0 for all k), so with every client in every round it is the paper's rule, and under
partial participation the clients not sampled keep their z_k. A fixed point has
z_k = x - s grad f_k(x) and mean z_k = x: sum_k grad f_k(x) = 0, the exact minimiser.

Flat only: edges relay (no edge rule). State: client z_k (N, P). Messages: x_t down, dz_k up
(one model-sized tensor each way)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..learn.solver import SolveResult, TermsProgram
from ..learn.terms import Prox
from .base import Algorithm, RoundCtx, State, Upload, set_rows
from .params import FedSplitParams


@dataclass(frozen=True)
class ClientState:
    z: torch.Tensor             # (N, P) the clients' z_k


class FedSplit(Algorithm):
    name = "fedsplit"
    Params = FedSplitParams
    upload_as_is = (0,)         # compress: z_new - z_old is a difference already

    def init_state(self, w0: torch.Tensor) -> State:
        return State(w0.clone(), clients=ClientState(w0.expand(self.setup.n_clients, -1).clone()))

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        v = 2 * start - state.clients.z.index_select(0, clients)
        return TermsProgram(self.setup.model, v.clone(), (Prox(1.0 / self.p.step_size, v),))

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        z_old = state.clients.z.index_select(0, clients)
        z_new = z_old + 2 * (res.state[0] - start)
        z = set_rows(state.clients.z, clients, z_new)
        return replace(state, clients=ClientState(z)), Upload((z_new - z_old,))

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0:
            return state
        dz = up.tensors[0].double().sum(0) / self.setup.n_clients
        return replace(state, w=(state.w.double() + dz).to(state.w.dtype))

"""FedSplit: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...learn.solver import SolveResult, TermsProgram
from ...learn.terms import Prox
from ..base import Algorithm, RoundCtx, State, Upload, set_rows


@dataclass(frozen=True)
class ClientState:
    z: torch.Tensor             # (N, P) the clients' z_k


class FedSplit(Algorithm):
    name = "fedsplit"
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

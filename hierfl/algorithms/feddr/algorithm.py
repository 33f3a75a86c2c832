"""FedDR: the transitions (torch). The objective, its keys and its declaration: the package's
__init__.py."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...learn.solver import SolveResult, TermsProgram
from ...learn.terms import Prox
from ..base import Algorithm, RoundCtx, State, Upload, set_rows




@dataclass(frozen=True)
class ClientState:
    y: torch.Tensor             # (N, P)
    x: torch.Tensor             # (N, P) x_i = prox_{eta f_i}(y_i) (inexact)


class FedDR(Algorithm):
    name = "feddr"
    upload_as_is = (0,)         # compress: hat_new - hat_old is a difference already

    def init_state(self, w0: torch.Tensor) -> State:
        rows = w0.expand(self.setup.n_clients, -1)
        return State(w0.clone(), clients=ClientState(rows.clone(), rows.clone()))

    def new_y(self, state: State, clients: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        x = state.clients.x.index_select(0, clients)
        return state.clients.y.index_select(0, clients) + self.p.alpha * (start - x)

    def local(self, state: State, clients: torch.Tensor, start: torch.Tensor,
              ctx: RoundCtx) -> TermsProgram:
        y = self.new_y(state, clients, start)
        return TermsProgram(self.setup.model, y.clone(), (Prox(1.0 / self.p.eta, y),))

    def client_update(self, state: State, clients: torch.Tensor, start: torch.Tensor,
                      res: SolveResult, ctx: RoundCtx) -> tuple[State, Upload]:
        y_new, x_new = self.new_y(state, clients, start), res.state[0]
        hat_old = 2 * state.clients.x.index_select(0, clients) \
            - state.clients.y.index_select(0, clients)
        y = set_rows(state.clients.y, clients, y_new)
        x = set_rows(state.clients.x, clients, x_new)
        return replace(state, clients=ClientState(y, x)), Upload((2 * x_new - y_new - hat_old,))

    def server_update(self, state: State, clients: torch.Tensor, up: Upload,
                      ctx: RoundCtx) -> State:
        if len(clients) == 0:
            return state
        d = up.tensors[0].double().sum(0) / self.setup.n_clients
        return replace(state, w=(state.w.double() + d).to(state.w.dtype))

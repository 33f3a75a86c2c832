"""FedDR (Tran-Dinh, Pham, Phan, Nguyen, *FedDR -- Randomized Douglas-Rachford Splitting
Algorithms for Nonconvex Federated Composite Optimization*, NeurIPS 2021, arXiv 2103.03452),
Algorithm 1 with g = 0: min_x (1/n) sum_i f_i(x) (unweighted; f_i = F_i, the client's mean loss).

Client i holds y_i, x_i and x^_i = 2 x_i - y_i. In round k the sampled clients S_k receive x-bar
and update

    y_i <- y_i + alpha (x-bar - x_i)
    x_i <- prox_{eta f_i}(y_i)
    x^_i <- 2 x_i - y_i,          and send  dx^_i = x^_i(new) - x^_i(old);

the others keep theirs (the paper's partial participation). Server (g = 0, so x-bar = x~):
x-bar <- x-bar + (1/n) sum_{i in S_k} dx^_i, which keeps x-bar = (1/n) sum_i x^_i.

prox_{eta f_i}(y) = argmin_w f_i(w) + ||w - y||^2 / (2 eta) is solved inexactly by the local steps
from w = y (`TermsProgram(terms=[Prox(1/eta, y)])`), as the paper's inexact variant allows.
The paper initialises x_i^0 = prox_{eta f_i}(x^0), a local computation before the first round;
here x_i = y_i = x^_i = x^0 at the start, so a client's first round is that computation
(y_i stays x^0 when x-bar = x^0). A fixed point has x_i = x-bar, y_i = x-bar + eta grad f_i(x-bar)
and mean x^_i = x-bar: sum_i grad f_i(x-bar) = 0, the exact minimiser.

Flat only: edges relay (no edge rule). State: client y_i, x_i (N, P). Messages: x-bar down,
dx^_i up (one model-sized tensor each way)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..learn.solver import SolveResult, TermsProgram
from ..learn.terms import Prox
from .base import Algorithm, RoundCtx, State, Upload, set_rows
from .params import FedDRParams




@dataclass(frozen=True)
class ClientState:
    y: torch.Tensor             # (N, P)
    x: torch.Tensor             # (N, P) x_i = prox_{eta f_i}(y_i) (inexact)


class FedDR(Algorithm):
    name = "feddr"
    Params = FedDRParams
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
